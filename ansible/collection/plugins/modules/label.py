# -*- coding: utf-8 -*-
# Documentation only: gpuprep.node.label runs as an action plugin (plugins/action/label.py) that runs gpuprep's
# binary module for the host's architecture. Format: ansible-core v2.14.18's module documentation.
from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: label
short_description: Set the GPU Operator's workload labels for a node (gpuprep label)
version_added: 0.1.0
description:
  - Runs C(gpuprep label) on the host; through the Kubernetes API, or with I(before_join) in the kubelet's
    C(--node-labels), journalled so C(gpuprep.node.rollback) puts them back.
  - Check mode is C(gpuprep label --dry-run) (for the API, a server-side dry run); with C(--diff) and
    I(before_join) the files' diffs are the task's diff.
  - Through the API (no I(before_join)) the host needs a kubeconfig (I(kubeconfig)) with RBAC verbs get and patch on
    nodes; the change is journalled on the host itself, in C(/var/lib/gpuprep/journal.jsonl) of C(/) (the labels the
    Node had, and the kubeconfig file, absolute), never under I(root), so C(gpuprep.node.rollback) on that host
    (without I(root)) puts the labels back. A missing
    Node, or a kubeconfig that is missing or does not load, fails the task with gpuprep's message.
options:
  mode:
    description: The workload type, C(nvidia.com/gpu.workload.config).
    type: str
    required: true
    choices: [container, vm-passthrough, vm-vgpu]
  vgpu_config:
    description: vm-vgpu, the C(nvidia.com/vgpu.config) label.
    type: str
  node:
    description: The Node's name (default the host's name, lower-cased, as the kubelet registers it; with I(root),
      the root's C(/proc/sys/kernel/hostname)).
    type: str
  kubeconfig:
    description: Through the API, the kubeconfig file on the host (default C($KUBECONFIG), then C(~/.kube/config));
      journalled as its absolute path, which C(gpuprep.node.rollback) loads again.
    type: path
  before_join:
    description: Write the labels into the kubelet's C(--node-labels) (the node has not joined yet).
    type: bool
    default: false
  kubeadm_config:
    description: With I(before_join), the kubeadm JoinConfiguration file to edit instead.
    type: path
  root:
    description: With I(before_join), edit the kubelet configuration under this root instead of C(/); through the
      API, only the root whose host name is the default I(node); the change is journalled on C(/) (docs/root.md).
    type: path
  system_disk:
    description: I(root) is a system disk (an offline image, C(--system-disk)); gpuprep writes file changes only into
      such a root, never into another one (docs/root.md).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author:
  - gpuprep
'''

EXAMPLES = r'''
- name: Label the node before it joins
  gpuprep.node.label:
    mode: vm-passthrough
    before_join: true

- name: Label the joined node through the Kubernetes API
  gpuprep.node.label:
    mode: vm-vgpu
    vgpu_config: H200-35C
    kubeconfig: /etc/kubernetes/admin.conf
'''

RETURN = r'''
stdout:
  description: What C(gpuprep label) printed (the diffs, or that nothing was to do).
  returned: success
  type: str
msg:
  description: Its last line (through the API, C(labelled node NAME ...), C(would label (server-side dry run) ...) or
    that the node already has the labels); on failure, gpuprep's error.
  returned: always
  type: str
'''
