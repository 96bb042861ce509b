package fleet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The stamp lets a warm fleet run start the cached binary in one session
// without hashing its megabytes again. Once the cached binary's SHA-256 was
// verified (at upload, or by hashing it on the host), the binary records its
// own identity — inode, size, modification and status-change times
// to the nanosecond, of the file the kernel is executing (/proc/self/exe) —
// in a file next to it. The warm run starts it with StampFlag: before doing
// anything else the binary compares its identity with the stamp and, when
// they differ, exits with NotStampedRC so that the fleet client takes the
// full path (hash, re-upload). Any write to the file, a replacement or a
// chmod changes its ctime, which no user can set.
//
// When the stamp matches, the binary writes StampedMarker to stderr before
// anything else: a warm run's answer without it (the binary could not be
// started, crashed on start-up, sudo refused) sends the host through the
// full path too, which explains what went wrong.
const (
	StampFlag      = "--fleet-stamp"       // gpuprep --fleet-stamp FILE SUBCOMMAND…
	StampWriteFlag = "--fleet-stamp-write" // gpuprep --fleet-stamp-write FILE
	StampedMarker  = "gpuprep-fleet: stamp verified\n"
	NotStampedRC   = 199
	notStampedMsg  = "gpuprep-fleet: no stamped cached binary"
	stampName      = "stamp"
	stampVersion   = "gpuprep-stamp/1"
)

// procSelfExe is the file the kernel runs for this process.
const procSelfExe = "/proc/self/exe"

// self is the running executable, as the stamp flags see it: exe is the
// file the kernel runs for this process (procSelfExe; tests give another).
type self struct{ exe string }

// identity describes the running executable's inode.
func (s self) identity() (string, error) {
	fi, err := os.Stat(s.exe)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", errors.New("no stat data for " + s.exe)
	}
	// No device number: an NFS mount's is assigned by each client, and a
	// stamp written by one host of a shared home must hold on the others.
	return fmt.Sprintf("%s ino=%d size=%d mtime=%d.%09d ctime=%d.%09d\n", stampVersion,
		st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), nil
}

// WriteStamp records the running executable's identity in file, through a
// temporary file and a rename (hosts sharing a home never read half a stamp).
func WriteStamp(file string) error { return self{exe: procSelfExe}.writeStamp(file) }

func (s self) writeStamp(file string) error {
	if err := s.besideSelf(file); err != nil {
		return err
	}
	id, err := s.identity()
	if err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp."+hex.EncodeToString(rnd[:]))
	if err := os.WriteFile(tmp, []byte(id), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, file); err != nil {
		return discardTemp(err, tmp)
	}
	return nil
}

// besideSelf refuses a stamp file that is not the stamp beside the running
// executable: the flag writes nowhere else. A user who may run this binary as
// root (the digest-pinned sudoers rule) could otherwise have it replace any
// file (/etc/shadow) with a stamp.
func (s self) besideSelf(file string) error {
	exe, err := filepath.EvalSymlinks(s.exe)
	if err != nil {
		return err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(file))
	if err != nil {
		return err
	}
	if filepath.Base(file) != stampName || dir != filepath.Dir(exe) {
		return fmt.Errorf("%s is not the stamp beside this binary (%s): refused", file, filepath.Join(filepath.Dir(exe), stampName))
	}
	return nil
}

// checkStamp reports whether file holds the running executable's identity.
func (s self) checkStamp(file string) bool {
	want, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	id, err := s.identity()
	return err == nil && string(want) == id
}

// checkCacheChain re-checks, before a warm run does anything, that the
// binary beside stampFile, the stamp and every directory above them are
// still safe (see judgePath; lstat only, no fork): owned by root, the user
// running this or, under sudo, the user who ran sudo. The fleet client
// verified them before it stamped the binary, and no other user can have
// made them unsafe since; this catches the login user or root having done
// so (a chmod g+w), so that the full path refuses the host and says why
// instead of warm runs going on from a directory others can write.
func checkCacheChain(stampFile string) error {
	uids := []uint32{0, uint32(os.Getuid())}
	if os.Geteuid() == 0 {
		if u, err := strconv.ParseUint(os.Getenv("SUDO_UID"), 10, 32); err == nil {
			uids = append(uids, uint32(u))
		}
	}
	owners := func(u uint32) bool { return slices.Contains(uids, u) }
	if err := checkLocalPath(filepath.Join(filepath.Dir(stampFile), "gpuprep"), owners); err != nil {
		return err
	}
	return checkLocalPath(stampFile, owners)
}

// AgentArgs handles the stamp flags a fleet client puts before a
// subcommand. It returns the arguments left to run, or done with the exit
// code when the process must end here.
func AgentArgs(args []string, stderr io.Writer) (rest []string, code int, done bool) {
	return self{exe: procSelfExe}.agentArgs(args, stderr)
}

func (s self) agentArgs(args []string, stderr io.Writer) (rest []string, code int, done bool) {
	if len(args) < 2 || !strings.HasPrefix(args[0], "--fleet-stamp") {
		return args, 0, false
	}
	switch args[0] {
	case StampWriteFlag:
		if err := s.writeStamp(args[1]); err != nil {
			fmt.Fprintf(stderr, "gpuprep-fleet: writing the stamp: %v\n", err)
			return nil, 1, true
		}
		return nil, 0, true
	case StampFlag:
		if !s.checkStamp(args[1]) {
			fmt.Fprintln(stderr, notStampedMsg)
			return nil, NotStampedRC, true
		}
		s.closeExecFD()
		if err := checkCacheChain(args[1]); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", notStampedMsg, err)
			return nil, NotStampedRC, true
		}
		if _, err := io.WriteString(stderr, StampedMarker); err != nil {
			// The client cannot learn the stamp was verified: it is
			// not, as far as it can tell (and it reads no marker).
			return nil, NotStampedRC, true
		}
		return args[2:], 0, false
	}
	return args, 0, false
}
