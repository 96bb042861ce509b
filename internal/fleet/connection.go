package fleet

import "fmt"

// connectionProblem says why a host whose ansible_connection is not SSH is
// not contacted: "" for ssh (and paramiko and smart, which are SSH too).
// local means "run on the controller itself, without SSH"; planning it as
// SSH to localhost:22 would check whatever answers there instead.
func connectionProblem(file, name string, v aVar) string {
	switch v.val {
	case "", "ssh", "smart", "paramiko", "ansible.builtin.ssh", "ansible.builtin.paramiko_ssh":
		return ""
	case "local", "ansible.builtin.local":
		return (&Error{File: file, Line: v.line, Field: "ansible_connection", Msg: fmt.Sprintf("host %q: local: run gpuprep on this machine itself (gpuprep check, gpuprep apply); gpuprep fleet reaches hosts over SSH only, and does not plan it as SSH to localhost", name)}).Error()
	}
	return (&Error{File: file, Line: v.line, Field: "ansible_connection", Msg: fmt.Sprintf("host %q: %q: gpuprep fleet reaches hosts over SSH only", name, v.val)}).Error()
}
