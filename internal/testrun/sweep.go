package testrun

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sudoers is the start of the sudoers.d file of each test user (the rest
// is the user's name: sudo skips names with a dot).
const Sudoers = "/etc/sudoers.d/gpuprep-test-"

func waitDead(owner string) {
	for i := 0; i < 100 && Alive(owner); i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

// Sweep removes what belongs to the owners stale picks: it kills their
// processes (every process whose environment has EnvOwner set to one of
// them, this one excepted), deletes their users and sudoers files and
// removes their directories.
func Sweep(stale func(owner string) bool) {
	killProcs(stale)
	for _, u := range Users(stale) {
		// best effort, as every removal of the sweep: what is left is
		// swept again by the next run
		_ = DeleteUser(u)
		_ = os.Remove(Sudoers + u)
	}
	removeOrphanSudoers()
	removeDirs(stale)
}

// DeleteUser deletes the local user name, even while a process of it
// still runs (an sshd session not ended yet: userdel -f). It tries again
// for a few seconds while userdel fails otherwise: another useradd or
// userdel (another test process's) holds the lock on /etc/passwd.
func DeleteUser(name string) error {
	var err error
	for i := 0; i < 40; i++ {
		var out []byte
		out, err = exec.Command("userdel", "-f", name).CombinedOutput()
		if err == nil {
			return nil
		}
		if _, lerr := user.Lookup(name); lerr != nil {
			return nil // gone (or never made)
		}
		err = fmt.Errorf("userdel -f %s: %v: %s", name, err, bytes.TrimSpace(out))
		time.Sleep(250 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "testrun:", err)
	return err
}

// removeOrphanSudoers removes the test users' sudoers files (Sudoers
// followed by a gpuprep-* user name) whose user is gone.
func removeOrphanSudoers() {
	files, _ := filepath.Glob(Sudoers + "gpuprep-*")
	for _, f := range files {
		if _, err := user.Lookup(strings.TrimPrefix(f, Sudoers)); err != nil {
			_ = os.Remove(f) // best effort
		}
	}
}

// killProcs SIGKILLs the owners' processes; a few passes, for children
// forked meanwhile.
func killProcs(stale func(string) bool) {
	for pass := 0; pass < 3; pass++ {
		pids := Procs(stale)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // gone already, or the next pass
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Procs lists the processes (not this one) whose environment names an
// owner stale picks.
func Procs(stale func(string) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if o := procOwner(pid); o != "" && stale(o) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func procOwner(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(EnvOwner+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// Users lists the local users whose GECOS field names an owner stale
// picks.
func Users(stale func(string) bool) []string {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return nil
	}
	defer f.Close()
	var users []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ":")
		if len(fs) < 5 {
			continue
		}
		if o, ok := strings.CutPrefix(fs[4], Comment); ok && stale(o) {
			users = append(users, fs[0])
		}
	}
	return users
}

// removeDirs removes the owners' directories under /tmp and VarDir (and
// VarDir when it is left empty).
func removeDirs(stale func(string) bool) {
	olds, _ := filepath.Glob(filepath.Join(os.TempDir(), TmpPrefix+"*"))
	for _, d := range olds {
		if o := strings.TrimPrefix(filepath.Base(d), TmpPrefix); isOwner(o) && stale(o) {
			_ = os.RemoveAll(d) // best effort
		}
	}
	for _, base := range varBases() {
		ents, _ := os.ReadDir(base)
		for _, e := range ents {
			if isOwner(e.Name()) && stale(e.Name()) {
				_ = os.RemoveAll(filepath.Join(base, e.Name())) // best effort
			}
		}
		_ = os.Remove(base) // only when empty
	}
}

// varBases are where VarTempDir makes directories, as root and not.
func varBases() []string {
	bases := []string{VarDir}
	if home, err := os.UserHomeDir(); err == nil && os.Geteuid() != 0 {
		bases = append(bases, filepath.Join(home, ".cache", "gpuprep-test"))
	}
	return bases
}

// isOwner reports whether s has an owner's form, PID-STARTTIME.
func isOwner(s string) bool {
	p, t, ok := strings.Cut(s, "-")
	_, err1 := strconv.ParseUint(p, 10, 32)
	_, err2 := strconv.ParseUint(t, 10, 64)
	return ok && err1 == nil && err2 == nil
}
