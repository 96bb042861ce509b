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
    description: The Node's name (default the host's name, lower-cased).
    type: str
  kubeconfig:
    description: The kubeconfig on the host (default C($KUBECONFIG), then C(~/.kube/config)).
    type: path
  before_join:
    description: Write the labels into the kubelet's C(--node-labels) (the node has not joined yet).
    type: bool
    default: false
  kubeadm_config:
    description: With I(before_join), the kubeadm JoinConfiguration file to edit instead.
    type: path
  root:
    description: With I(before_join), edit the kubelet configuration under this root instead of C(/).
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
'''

RETURN = r'''
stdout:
  description: What C(gpuprep label) printed (the diffs, or that nothing was to do).
  returned: success
  type: str
'''
