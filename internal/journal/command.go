package journal

// KindCommandIntent is the entry written before a command whose change
// rollback does not undo (gpuprep vgpu install's installer, sriov-manage,
// systemctl): After says what it does. A kill while it runs still leaves a
// record that it may have run: rollback says what it leaves in place (the
// vGPU manager stays installed) instead of finding nothing to say.
const KindCommandIntent = "command-intent"
