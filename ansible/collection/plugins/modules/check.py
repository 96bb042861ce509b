# -*- coding: utf-8 -*-
# Documentation only: gpuprep.node.check runs as an action plugin (plugins/action/check.py) that runs gpuprep's
# binary module for the host's architecture. Format: ansible-core v2.14.18's module documentation
# (DOCUMENTATION, EXAMPLES, RETURN as YAML strings, read by ansible-doc through lib/ansible/utils/plugin_docs.py).
from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: check
short_description: Whether a GPU node is ready for KubeVirt and the NVIDIA GPU Operator (gpuprep check)
version_added: 0.1.0
description:
  - Runs C(gpuprep check) on the host, read-only, and returns its ReadinessReport.
  - Fails only when the node could not be evaluated at all (a bad argument, a host or root that could not be read).
    A node that is not ready, or whose readiness was not established (a check skipped, or one that could not be
    evaluated), is a result with I(ready=false); assert on it.
  - Runs the same in check mode (it changes nothing).
options:
  mode:
    description: The workload type to judge; without it every mode is reported and I(ready) is true only when all are.
    type: str
    choices: [container, vm-passthrough, vm-vgpu]
  select:
    description: Devices treated as GPUs (a PCI address, C(VVVV:DDDD) or C(VVVV)), as C(gpuprep check --select).
    type: list
    elements: str
  ignore:
    description: Check IDs whose failures become warnings (or C(all)), as C(gpuprep check --ignore).
    type: list
    elements: str
  skip:
    description: Check IDs not to run; the modes they belong to are then not evaluated (I(ready=false)).
    type: list
    elements: str
  root:
    description: A directory laid out like a Linux root (a snapshot, a mounted disk) to check instead of C(/).
    type: path
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - gpuprep
'''

EXAMPLES = r'''
- name: Check the node for VM passthrough
  gpuprep.node.check:
    mode: vm-passthrough
  register: readiness

- name: Stop here unless it is ready
  ansible.builtin.assert:
    that: readiness.ready
    fail_msg: "{{ readiness.msg }}"
'''

RETURN = r'''
ready:
  description: The node is ready for I(mode) (without I(mode), for every mode).
  returned: success
  type: bool
evaluated:
  description: No check was skipped or left unevaluable (C(gpuprep check) exits 3 otherwise).
  returned: success
  type: bool
report:
  description: The ReadinessReport, as C(gpuprep check -o json) prints it.
  returned: success
  type: dict
exit_code:
  description: The exit code C(gpuprep check) would have (0 ready, 1 not ready, 3 not evaluated).
  returned: always
  type: int
'''
