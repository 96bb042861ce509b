# -*- coding: utf-8 -*-
# Documentation only: gpuprep.node.rollback runs as an action plugin (plugins/action/rollback.py) that runs
# gpuprep's binary module for the host's architecture. Format: ansible-core v2.14.18's module documentation.
from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
---
module: rollback
short_description: Undo what gpuprep changed on a node (gpuprep rollback)
version_added: 0.1.0
description:
  - Runs C(gpuprep rollback) on the host, which undoes its journal newest first.
  - C(gpuprep rollback) has no dry run, so in check mode the task is skipped and says so.
  - Fails when something could not be undone (C(gpuprep rollback) exits 1; the journal keeps it, run it again).
options:
  to:
    description: Keep the changes up to this completed apply step, undo those after it.
    type: str
  force:
    description: Unbind from VFIO or remove a vGPU even while a VM holds it; move back a device something else moved.
    type: bool
    default: false
  force_files:
    description: Restore files even when edited since gpuprep wrote them (their content saved first).
    type: bool
    default: false
  kubeconfig:
    description: The kubeconfig for labels set through the API.
    type: path
  root:
    description: The root to roll back, C(/) (the running system) or, with I(system_disk), a system disk.
    type: path
  system_disk:
    description: I(root) is a system disk (an offline image, C(--system-disk)); gpuprep writes file changes only into
      such a root, never into another one (docs/root.md).
    type: bool
    default: false
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
author:
  - gpuprep
'''

EXAMPLES = r'''
- name: Undo gpuprep's changes
  gpuprep.node.rollback:
  register: undone

- name: Reboot when the rollback asks
  ansible.builtin.reboot:
  when: undone.reboot_required
'''

RETURN = r'''
exit_code:
  description: The exit code of C(gpuprep rollback) (0 done, 1 something not undone, 4 done and a reboot needed).
  returned: when not in check mode
  type: int
reboot_required:
  description: The next boot differs from the running system in something rollback put back.
  returned: success
  type: bool
result:
  description: C(gpuprep rollback -o json)'s result (undone, left, notes, rebootReasons).
  returned: success
  type: dict
'''
