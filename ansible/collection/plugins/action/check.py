# -*- coding: utf-8 -*-
# gpuprep.node.check: runs gpuprep's binary module for the host's architecture (plugins/plugin_utils/gpuprep.py).
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpuprep.node.plugins.plugin_utils.gpuprep import GpuprepAction


class ActionModule(GpuprepAction):
    GPUPREP_MODULE = 'check'
