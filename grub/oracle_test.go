package grub

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/gpuprep/gpuprep/internal/change"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpuprep/gpuprep/internal/kargs"
)

// The oracle is real bash: it sources the files the way grub-mkconfig does
// (/etc/default/grub, then each grub.d/*.cfg in order) and prints both
// variables. It runs restricted (bash -r: no commands with a slash, no
// redirections, no cd) in an empty environment whose PATH is a scratch
// directory holding only the files, so a fuzzed file cannot run anything.
func bashSource(t testing.TB, files []File) (Cmdline, error) {
	return shellSource(t, "bash", files)
}

// dashSource is bashSource with dash, /bin/sh on Debian and Ubuntu, where
// grub-mkconfig (a /bin/sh script) sources the files with it. dash has no
// restricted mode: only for the tests' own files, never fuzzed ones.
func dashSource(t testing.TB, files []File) (Cmdline, error) {
	return shellSource(t, "dash", files)
}

func shellSource(t testing.TB, sh string, files []File) (Cmdline, error) {
	t.Helper()
	dir := t.TempDir()
	var script strings.Builder
	// Commands (GRUB_DISTRIBUTOR=`lsb_release ...`) are not found; this
	// handler makes them print nothing and succeed, as they would not
	// matter to the command line anyway (bash only).
	if sh == "bash" {
		script.WriteString("command_not_found_handle() { return 0; }\n")
	}
	script.WriteString("set -e\n")
	for i, f := range files {
		name := fmt.Sprintf("f%d", i)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), f.Data, 0o644))
		script.WriteString(". " + name + "\n")
	}
	// The files may print (a bare `export` lists the environment, a
	// background job prints later), and restricted bash allows no
	// redirection: so wait for background jobs, then print a random marker,
	// and read the values after its last occurrence.
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	marker := "GPUPREP-ORACLE-" + hex.EncodeToString(nonce[:]) + ":"
	script.WriteString("wait\nprintf '%s' '" + marker + "'\n")
	script.WriteString(`printf '%s\0%s' "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"` + "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	args := []string{"-r", "-c", script.String()}
	if sh != "bash" {
		args = args[1:]
	}
	cmd := exec.CommandContext(ctx, sh, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + dir, "LC_ALL=C"}
	// a subshell left behind must not keep the output pipe open
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Cmdline{}, fmt.Errorf("%s: %v: %s", sh, err, stderr.String())
	}
	o := string(out)
	i := strings.LastIndex(o, marker)
	require.GreaterOrEqual(t, i, 0, "no marker in %s's output: %q", sh, o)
	parts := strings.SplitN(o[i+len(marker):], "\x00", 2)
	require.Len(t, parts, 2)
	return Cmdline{Linux: parts[0], Default: parts[1]}, nil
}

// linuxLine is the normal entry's linux line as grub-mkconfig writes it
// from the values bash sourced: util/grub.d/10_linux.in calls linux_entry
// with "${GRUB_CMDLINE_LINUX} ${GRUB_CMDLINE_LINUX_DEFAULT}" as args and
// writes, in a here-document (which substitutes the value byte for byte),
// "linux ${rel_dirname}/${basename} root=${linux_root_device_thisversion}
// ro ${args}". A newline in it ends GRUB's linux command there
// (grub-core/script/yylex.l).
func linuxLine(c Cmdline) string {
	return "\tlinux\t/boot/vmlinuz root=/dev/sda1 ro " + c.Linux + " " + c.Default
}

func needBash(t testing.TB) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
}

// checkEdit asserts everything the issue asks of an edit, against bash.
func checkEdit(t testing.TB, files []File, req Request, ed *Edit) {
	t.Helper()
	before, err := bashSource(t, files)
	require.NoError(t, err, "bash cannot source the original files")
	// our reading of the files agrees with bash's
	require.Equal(t, before, ed.Before, "gpuprep's reading differs from bash's")

	newFiles := applyChanges(files, ed.Changes)
	after, err := bashSource(t, newFiles)
	require.NoError(t, err, "bash cannot source the edited files:\n%s", dump(newFiles))
	require.Equal(t, after, ed.After)
	require.NotContains(t, linuxLine(after), "\n", "grub.cfg's linux line would be cut at a newline")

	// after == before minus the removed keys plus the added arguments (as
	// GRUB splits words), on the variable the edit targets
	drop := map[string]bool{}
	for _, k := range req.Remove {
		drop[kargs.Norm(k)] = true
	}
	oldArgs := before.Args()
	// NotOff: the occurrences that leave a switch off go first, and
	// Ensure is judged on what is left
	gone := make([]bool, len(oldArgs))
	for _, k := range req.NotOff {
		for _, i := range kargs.OffIndexes(oldArgs, k) {
			gone[i] = true
		}
	}
	var left []kargs.Param
	for i, a := range oldArgs {
		if !gone[i] && !drop[kargs.Norm(a.Key)] {
			left = append(left, a)
		}
	}
	for _, w := range req.Ensure {
		if !kargs.Satisfied(left, w) {
			drop[kargs.Norm(w.Key)] = true
			if kargs.Norm(w.Key) == "iommu" && w.Value == "pt" {
				drop["iommu.passthrough"] = true
			}
		}
	}
	idx := 0 // position in oldArgs: GRUB_CMDLINE_LINUX's words, then GRUB_CMDLINE_LINUX_DEFAULT's
	filter := func(s string) []string {
		var out []string
		for _, w := range Words(s) {
			g := gone[idx]
			idx++
			if !g && !drop[kargs.Norm(kargs.ParseOne(unquoteWord(w)).Key)] {
				out = append(out, w)
			}
		}
		return out
	}
	wantL, wantD := filter(before.Linux), filter(before.Default)
	if ed.Var == cmdlineVars[0] {
		wantL = append(wantL, ed.Added...)
	} else if ed.Var == cmdlineVars[1] {
		wantD = append(wantD, ed.Added...)
	}
	require.Equal(t, strings.Join(wantL, " "), strings.Join(Words(after.Linux), " "), "GRUB_CMDLINE_LINUX")
	require.Equal(t, strings.Join(wantD, " "), strings.Join(Words(after.Default), " "), "GRUB_CMDLINE_LINUX_DEFAULT")

	// kargs semantics: each ensured argument in effect, exactly once when
	// it was added; removed keys gone
	newArgs := after.Args()
	for _, w := range req.Ensure {
		require.True(t, kargs.Satisfied(newArgs, w), "%s not in effect after the edit: %s", w, after)
		if !kargs.Satisfied(left, w) {
			n := 0
			for _, p := range newArgs {
				if kargs.Norm(p.Key) == kargs.Norm(w.Key) {
					n++
				}
			}
			require.Equal(t, 1, n, "%s must appear exactly once: %s", w.Key, after)
		}
	}
	for _, k := range req.Remove {
		_, ok := kargs.Last(newArgs, k)
		require.False(t, ok, "%s still there: %s", k, after)
	}
	for _, k := range req.NotOff {
		require.Empty(t, kargs.OffIndexes(newArgs, k), "%s still left off: %s", k, after)
	}

	// every line outside the GRUB_CMDLINE assignments is byte-identical
	for i := range files {
		require.Equal(t, otherLines(t, files, i), otherLines(t, newFiles, i), "lines outside the GRUB_CMDLINE assignments changed in %s", files[i].Path)
	}

	// a second run changes nothing
	ed2, err := EditFiles(newFiles, req)
	require.NoError(t, err, "second run:\n%s", dump(newFiles))
	require.Empty(t, ed2.Changes, "second run changed:\n%s", dump(newFiles))
}

// otherLines returns file i's lines that are not part of a GRUB_CMDLINE
// assignment, as the editor's reader delimits them.
func otherLines(t testing.TB, files []File, i int) []string {
	st, err := sourceFiles(files)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(files[i].Data), "\n")
	var out []string
	for n, l := range lines {
		in := false
		for _, sp := range st.spans[i] {
			if n+1 >= sp[0] && n+1 <= sp[1] {
				in = true
			}
		}
		if !in {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	// a line added at the end of the file changes the last line's newline
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

func applyChanges(files []File, ch []change.File) []File {
	out := make([]File, len(files))
	copy(out, files)
	for _, c := range ch {
		for i := range out {
			if out[i].Path == c.Path {
				out[i].Data = c.New
			}
		}
	}
	return out
}

func dump(files []File) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "== %s\n%s\n", f.Path, f.Data)
	}
	return b.String()
}
