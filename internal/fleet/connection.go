package fleet

import "fmt"

// connectionProblem says why a host whose ansible_connection is neither SSH
// nor local is not contacted: "" for ssh (and paramiko and smart, which are
// SSH too) and for local, which isLocalConnection tells.
func connectionProblem(file, name string, v aVar) string {
	switch {
	case v.val == "", isSSHConnection(v.val), isLocalConnection(v.val):
		return ""
	}
	return (&Error{File: file, Line: v.line, Field: "ansible_connection", Msg: fmt.Sprintf("host %q: %q: gpuprep fleet reaches hosts over SSH, or runs here for local, only", name, v.val)}).Error()
}

func isSSHConnection(c string) bool {
	switch c {
	case "ssh", "smart", "paramiko", "ansible.builtin.ssh", "ansible.builtin.paramiko_ssh":
		return true
	}
	return false
}

// isLocalConnection: ansible_connection local means "run on the controller
// itself, without SSH" (Ansible's local connection plugin): gpuprep fleet
// runs such a host on this machine (see Local), never as SSH to
// localhost:22, which would check whatever answers there instead.
func isLocalConnection(c string) bool {
	return c == "local" || c == "ansible.builtin.local"
}
