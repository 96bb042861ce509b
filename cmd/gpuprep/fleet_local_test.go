package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/fleet/sshdtest"
	"github.com/gpuprep/gpuprep/report"
)

// An Ansible inventory with a host whose ansible_connection is local and a
// host behind a real sshd: fleet check runs the local one on this machine
// (no SSH: its ansible_host and port, which lead nowhere, are not used) and
// the other over SSH, and reports both; the dry run shows the local one as
// local. fleet apply --reboot refuses to reboot the machine it runs on.
func TestFleetCheckLocalConnection(t *testing.T) {
	r := newCLIRig(t)
	a := r.env.Start(t, "127.0.1.5")
	sshdtest.Trust(t, r.kh, false, a)
	inv := writeFile(t, "hosts.ini", fmt.Sprintf(`[gpu]
here ansible_connection=local ansible_host=192.0.2.9 ansible_port=1 gpuprep_mode=container gpuprep_root=%s
far ansible_host=%s ansible_port=%d ansible_user=%s gpuprep_mode=vm-passthrough gpuprep_root=%s
`, r.hgx, a.Host, a.Port, r.env.User, r.amd))

	code, out, stderr := runCLI(append([]string{"fleet", "check", "-i", inv, "--dry-run"}, r.args()...)...)
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `here +local \(this machine, no SSH\) +- +gpu +'check' '--root=`, out)
	assert.Regexp(t, fmt.Sprintf(`far +%s@%s:%d`, r.env.User, a.Host, a.Port), out)
	assert.Contains(t, out, "2 hosts would be contacted")

	code, out, stderr = runCLI(append([]string{"fleet", "check", "-i", inv, "-o", "json"}, r.args()...)...)
	var fr report.FleetReport
	require.NoError(t, json.Unmarshal([]byte(out), &fr), out+stderr)
	require.Len(t, fr.Hosts, 2)
	for _, h := range fr.Hosts {
		require.Equal(t, "evaluated", h.Status, "%s: %s", h.Name, h.Error)
		require.NotNil(t, h.Report)
		assert.Equal(t, "ReadinessReport", h.Report.Kind)
	}
	assert.Equal(t, "local", fr.Hosts[0].Address)
	assert.Equal(t, "hgx-node-01", fr.Hosts[0].Report.Host.Name, "the local host's report is the check of its gpuprep_root")
	assert.NotEqual(t, fr.Hosts[0].Report.Host.Name, fr.Hosts[1].Report.Host.Name)
	require.Equal(t, 0, code, stderr)

	code, _, stderr = runCLI(append([]string{"fleet", "apply", "-i", inv, "--reboot", "--dry-run"}, r.args()...)...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "host here has connection local (this machine): --reboot would reboot the machine running fleet apply")
}
