# -*- coding: utf-8 -*-
# Documentation only: gpuprep.node.apply runs as an action plugin (plugins/action/apply.py) that runs gpuprep's
# binary module for the host's architecture. Format: ansible-core v2.14.18's module documentation.
from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: apply
short_description: Make a GPU node ready for a workload type (gpuprep apply)
version_added: 0.1.0
description:
  - Runs C(gpuprep apply --yes) on the host; the steps of C(gpuprep plan), each journalled before it changes
    anything, so C(gpuprep.node.rollback) undoes them.
  - Stops at the reboot step with I(reboot_required=true); reboot the node (M(ansible.builtin.reboot)) and run it
    again to continue, as the role C(gpuprep.node.prepare) does.
  - In check mode it is C(gpuprep plan) and changes nothing; I(changed) says whether the plan has steps.
  - With C(--diff) the plan, as C(gpuprep plan) prints it (file diffs, sysfs writes, commands), is the task's diff.
  - Fails when a step failed, when the node is not ready after the steps, or when a reboot did not make the
    kernel arguments effective (C(gpuprep apply)'s diagnosis is the message).
options:
  mode:
    description: The workload type to prepare the node for.
    type: str
    required: true
    choices: [container, vm-passthrough, vm-vgpu]
  select:
    description: The GPUs (a PCI address, C(VVVV:DDDD) or C(VVVV)); default every NVIDIA GPU.
    type: list
    elements: str
  nvswitch:
    description: vm-passthrough, bind the NVSwitches to VFIO with the GPUs.
    type: bool
    default: false
  vgpu_config_file:
    description: vm-vgpu, the vgpu-device-manager config file on the host.
    type: path
  vgpu_config:
    description: vm-vgpu, the config in I(vgpu_config_file) to create, also the C(nvidia.com/vgpu.config) label.
    type: str
  driver:
    description: vm-vgpu, the vGPU manager C(.run) file on the host.
    type: path
  kubeconfig:
    description: Label the Node through the Kubernetes API with this kubeconfig on the host.
    type: path
  node:
    description: The Node's name with I(kubeconfig).
    type: str
  force:
    description: Unbind a driver even while its device nodes are held open.
    type: bool
    default: false
  root:
    description: Plan against this root instead of C(/) (check mode only; apply changes only the running system).
    type: path
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author:
  - gpuprep
'''

EXAMPLES = r'''
- name: Prepare the node for VM passthrough
  gpuprep.node.apply:
    mode: vm-passthrough
  register: applied

- name: Reboot when apply asks
  ansible.builtin.reboot:
  when: applied.reboot_required
'''

RETURN = r'''
exit_code:
  description: The exit code of C(gpuprep apply) (0 ready, 1 not ready or a step failed, 3 not evaluated, 4 reboot).
  returned: when not in check mode
  type: int
reboot_required:
  description: apply stopped at the reboot step (in check mode, the plan has one); reboot and apply again.
  returned: always
  type: bool
reboot_for:
  description: Why the reboot is needed (kernel-args, nouveau or vfio).
  returned: when reboot_required
  type: str
plan:
  description: The plan, as C(gpuprep plan -o json) prints it.
  returned: success
  type: dict
outcome:
  description: What each step did (C(gpuprep apply -o json)'s outcome).
  returned: when not in check mode
  type: dict
ready:
  description: The node is ready for I(mode) after the steps (the check apply ends with).
  returned: when apply did not stop at a reboot
  type: bool
report:
  description: The ReadinessReport of that check.
  returned: when apply did not stop at a reboot
  type: dict
'''
