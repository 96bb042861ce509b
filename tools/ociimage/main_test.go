package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// oracle is the path of an independent OCI reader (Debian's skopeo, umoci), or
// skips (fails with GPUPREP_REQUIRE_ORACLES=1) when it is missing.
func oracle(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("GPUPREP_REQUIRE_ORACLES") == "1" {
			t.Fatalf("%s missing (apt-get install %s)", name, name)
		}
		t.Skipf("%s missing: apt-get install %s", name, name)
	}
	return p
}

func fakeDist(t *testing.T) []string {
	t.Helper()
	d := t.TempDir()
	var out []string
	for a, content := range map[string]string{"amd64": "\x7fELF amd64 stand-in", "arm64": "\x7fELF arm64 stand-in, longer"} {
		p := filepath.Join(d, "gpuprep-linux-"+a)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o755))
		out = append(out, p)
	}
	return out
}

// tree is every file under dir with its bytes.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			rel, _ := filepath.Rel(dir, p)
			m[rel] = string(b)
		}
		return err
	}))
	return m
}

// The layout is one that skopeo and umoci read: per architecture an image
// whose config is linux/<arch>, entrypoint /gpuprep, user 0, and whose one
// layer unpacks (umoci verifies every digest on the way) to /gpuprep, the
// binary's bytes, mode 0755. Two builds give the same bytes.
func TestImageReadByOCITools(t *testing.T) {
	skopeo, umoci := oracle(t, "skopeo"), oracle(t, "umoci")
	bins := fakeDist(t)
	out := filepath.Join(t.TempDir(), "image")
	ms, err := build(out, bins)
	require.NoError(t, err)
	require.Len(t, ms, 2)
	again := filepath.Join(t.TempDir(), "image")
	_, err = build(again, []string{bins[1], bins[0]})
	require.NoError(t, err)
	first, second := tree(t, out), tree(t, again)
	delete(first, "index.json")
	delete(second, "index.json")
	require.Equal(t, first, second, "the same binaries give the same blobs")
	_, err = build(out, bins)
	require.ErrorContains(t, err, "exists")

	for _, bin := range bins {
		a, err := arch(bin)
		require.NoError(t, err)
		raw, err := exec.Command(skopeo, "inspect", "--config", "oci:"+out+":"+a).Output()
		require.NoError(t, err, "skopeo inspect oci:%s:%s", out, a)
		var cfg struct {
			Architecture, OS string
			Config           struct {
				Entrypoint []string
				User       string
			}
		}
		require.NoError(t, json.Unmarshal(raw, &cfg))
		require.Equal(t, a, cfg.Architecture)
		require.Equal(t, "linux", cfg.OS)
		require.Equal(t, []string{"/gpuprep"}, cfg.Config.Entrypoint)
		require.Equal(t, "0", cfg.Config.User)

		bundle := filepath.Join(t.TempDir(), "bundle")
		o, err := exec.Command(umoci, "unpack", "--image", out+":"+a, bundle).CombinedOutput()
		require.NoError(t, err, string(o))
		want, _ := os.ReadFile(bin)
		got, err := os.ReadFile(filepath.Join(bundle, "rootfs/gpuprep"))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		fi, err := os.Stat(filepath.Join(bundle, "rootfs/gpuprep"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
		names, _ := os.ReadDir(filepath.Join(bundle, "rootfs"))
		require.Len(t, names, 1, "the binary and nothing else")
	}
}

func TestImageRefusesOtherFiles(t *testing.T) {
	d := t.TempDir()
	p := filepath.Join(d, "gpuprep")
	require.NoError(t, os.WriteFile(p, []byte("x"), 0o755))
	_, err := build(filepath.Join(d, "out"), []string{p})
	require.ErrorContains(t, err, "not a make dist binary")
}

// deploy/Containerfile, for those who build with an engine, describes the
// image this tool makes: the binary at the same path, the same user and
// entrypoint, from scratch.
func TestContainerfileSaysTheSame(t *testing.T) {
	b, err := os.ReadFile("../../deploy/Containerfile")
	require.NoError(t, err)
	var instr []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			instr = append(instr, l)
		}
	}
	require.Equal(t, []string{"FROM scratch", "COPY bin/gpuprep /" + binPath, "USER " + user,
		`ENTRYPOINT ["/` + binPath + `"]`}, instr)
}
