package main

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// gpuprep version: the version, the commit (make's -X main.commit), the Go
// release and the platform, as text and as a Version document; --version
// stays.
func TestVersionCommand(t *testing.T) {
	v, c := version, commit
	t.Cleanup(func() { version, commit = v, c })
	version, commit = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"

	out, errs, code := gpuprep(t, "version")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "gpuprep v1.2.3\ncommit:  0123456789abcdef0123456789abcdef01234567\ngo:      "+runtime.Version()+
		"\nos/arch: "+runtime.GOOS+"/"+runtime.GOARCH+"\n", out)

	out, errs, code = gpuprep(t, "version", "-o", "json")
	require.Equal(t, 0, code, errs)
	var doc versionDoc
	decodeStrict(t, out, &doc)
	require.Equal(t, versionDoc{APIVersion: "gpuprep/v1", Kind: "Version", Version: "v1.2.3", Commit: commit,
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}, doc)

	_, errs, code = gpuprep(t, "version", "-o", "yaml")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, `--output "yaml": want text or json`)

	out, _, code = gpuprep(t, "--version")
	require.Equal(t, 0, code)
	require.Equal(t, "gpuprep version v1.2.3\n", out)
}

// Without -X main.commit the commit is the build's VCS stamp, or none: the
// JSON leaves it out rather than print an empty one.
func TestVersionWithoutCommit(t *testing.T) {
	c := commit
	t.Cleanup(func() { commit = c })
	commit = ""
	out, _, code := gpuprep(t, "version", "-o", "json")
	require.Equal(t, 0, code)
	var doc versionDoc
	decodeStrict(t, out, &doc)
	require.Equal(t, buildCommit(), doc.Commit)
	if doc.Commit == "" {
		require.NotContains(t, out, `"commit"`)
		text, _, _ := gpuprep(t, "version")
		require.Contains(t, text, "commit:  unknown")
	}
}
