package fleet

import "github.com/gpuprep/gpuprep/internal/host"

func hostExecRunner() host.ExecRunner { return host.ExecRunner{} }

// dirsRunner is the real runner finding programs (sudo) in dir first.
func dirsRunner(dir string) host.ExecRunner {
	return host.ExecRunner{Dirs: []string{dir, "/usr/bin", "/bin"}}
}
