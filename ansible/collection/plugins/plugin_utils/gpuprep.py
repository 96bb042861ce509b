# -*- coding: utf-8 -*-
# The shared action plugin of the gpuprep.node modules (check, apply, rollback, label).
#
# gpuprep's modules are one static Go binary per architecture (plugins/modules/gpuprep_linux_amd64 and
# gpuprep_linux_arm64, binary modules: ansible-core copies the file to the host as it is and runs it with the path
# of a JSON arguments file). Ansible sends a module's file without knowing the host's architecture, so each
# module name has this action plugin (it runs on the controller): it asks the host for its architecture
# (ansible_facts when gathered, else `uname -sm`), runs the binary of that architecture, and tells it which module
# to be in the argument _gpuprep_module. The modules of the same names (plugins/modules/*.py) are their
# documentation only, as ansible.builtin.template's is.
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.plugins.action import ActionBase

# uname -m (and ansible_facts.architecture, which is uname -m on Linux) to Go's GOARCH
ARCHES = {'x86_64': 'amd64', 'aarch64': 'arm64', 'arm64': 'arm64'}


class GpuprepAction(ActionBase):
    """Runs gpuprep's binary module for the host's architecture as module GPUPREP_MODULE."""

    GPUPREP_MODULE = None
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(GpuprepAction, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        arch, err = self._arch(task_vars)
        if err:
            result.update(failed=True, changed=False, msg=err)
            return result
        args = dict(self._task.args)
        args['_gpuprep_module'] = self.GPUPREP_MODULE
        result.update(self._execute_module(module_name='gpuprep.node.gpuprep_linux_' + arch,
                                           module_args=args, task_vars=task_vars))
        return result

    def _arch(self, task_vars):
        facts = task_vars.get('ansible_facts') or {}
        system, machine = facts.get('system'), facts.get('architecture')
        if not (system and machine):
            res = self._low_level_execute_command('uname -sm', sudoable=False)
            words = (res.get('stdout') or '').split()
            if res.get('rc') != 0 or len(words) != 2:
                return None, 'gpuprep: uname -sm on the host failed (rc %s): %s' % (res.get('rc'), (res.get('stderr') or '').strip())
            system, machine = words
        if system != 'Linux' or machine not in ARCHES:
            return None, 'gpuprep runs on Linux amd64 and arm64, not on %s %s' % (system, machine)
        return ARCHES[machine], None
