package main

// The test binary as the fixture node's own programs, for the tests that
// run the gpuprep.node collection under real ansible-playbook with apply and
// rollback changing a fixture root (ansible_apply_test.go): Ansible copies
// the collection's module, here this test binary, to the host and runs it
// as AnsiballZ_NAME ARGSFILE; the role's reboot runs it as fixture-boot
// ROOT. TestMain hands both to fixtureHostMain before any test runs.
//
// gpuprep itself changes only / (rootRule, hostProvisionKernel); this
// binary's module writes into a fixture root through the fixture kernel
// simulator, as the in-process apply tests do (simulatedKernel), and never
// into the machine's own /sys.

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/internal/fixture"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/vfio"
)

// fixtureBootName is the name the role's reboot_command runs this binary
// by (ansibleFixtureCollection).
const fixtureBootName = "fixture-boot"

// fixtureHostMain runs this binary as the collection's module or as a
// fixture's boot when argv says so; ok false leaves it to the tests.
func fixtureHostMain(argv []string, stdout, stderr io.Writer) (code int, ok bool) {
	if len(argv) == 2 && filepath.Base(argv[0]) == fixtureBootName {
		if err := bootFixture(argv[1]); err != nil {
			fmt.Fprintf(stderr, "%s %s: %v\n", fixtureBootName, argv[1], err)
			return 1, true
		}
		return 0, true
	}
	return ansibleModuleMain(argv, stdout, fixtureModuleDeps())
}

// fixtureThisMachineEnv names the fixture root that stands in for the
// machine the test binary's module runs on (deps.thisMachine).
const fixtureThisMachineEnv = "GPUPREP_TEST_THIS_MACHINE"

// fixtureModuleDeps: gpuprep's own deps (the test binary's, so a fixture
// root is writable: fixtureRoots), apply and rollback changing the running
// kernel through the simulator, a new one per command as a new process
// sees the tree; / is refused.
func fixtureModuleDeps() *deps {
	d := realDeps()
	// a label through the API journals on this machine (docs/root.md): in a
	// test, the fixture root the test names as this machine, never the
	// real /
	d.thisMachine = func() (*host.Root, error) {
		dir := os.Getenv(fixtureThisMachineEnv)
		if dir == "" {
			return nil, errors.New("the test binary's module journals on this machine only where the test names a fixture root as it (" + fixtureThisMachineEnv + ")")
		}
		return host.NewRoot(dir)
	}
	d.provisionKernel = func(root *host.Root) (vfio.Sysfs, host.Runner, error) {
		if root.IsLive() {
			return nil, nil, errors.New("the test binary's module changes fixture roots only, not /")
		}
		k, err := fixture.NewKernel(root.Dir())
		return k, k, err
	}
	return d
}

// bootFixture is a reboot of the fixture root dir, as its next boot would
// come up: the kernel runs with the arguments the boot loader is
// configured with, btime is the boot's time (after every ask before it)
// and a new boot ID is drawn; with intel_iommu=on on a machine with a DMAR
// table the IOMMU is active: a unit with interrupt remapping, one group per
// PCI function (as simulateReboot lays them out).
func bootFixture(dir string) error {
	root, err := host.NewRoot(dir)
	if err != nil {
		return err
	}
	args, err := configuredArgs(filepath.Join(dir, "etc/default/grub"))
	if err != nil {
		return err
	}
	old, err := root.ReadString("/proc/cmdline")
	if err != nil {
		return err
	}
	cmdline := bootImageArgs(old) + " " + args
	// a boot takes longer than a second: btime is later than any ask
	// (compared in whole seconds: provision.rebootedSince)
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	b := fixture.New(dir)
	b.File("/proc/cmdline", strings.Join(strings.Fields(cmdline), " ")+"\n")
	b.File("/proc/stat", "cpu  1 0 1 1 0 0 0 0 0 0\nbtime "+strconv.FormatInt(time.Now().Unix(), 10)+"\n")
	b.File("/proc/sys/kernel/random/boot_id", newBootID()+"\n")
	if err := b.Err(); err != nil {
		return err
	}
	if hasArg(cmdline, "intel_iommu=on") && root.Exists("/sys/firmware/acpi/tables/DMAR") && len(root.Names("/sys/class/iommu")) == 0 {
		return iommuOn(root)
	}
	return nil
}

// configuredArgs: the arguments grub-mkconfig puts on the default entry's
// linux line, "${GRUB_CMDLINE_LINUX} ${GRUB_CMDLINE_LINUX_DEFAULT}"
// (util/grub.d/10_linux.in, linux_entry ... simple, in GRUB 2.12), from
// /etc/default/grub read as grub-mkconfig reads it: sourced by a shell
// (here real bash).
func configuredArgs(file string) (string, error) {
	out, err := exec.Command("/bin/bash", "-c", `. "$1" && printf '%s %s' "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"`, "bash", file).Output()
	if err != nil {
		return "", fmt.Errorf("sourcing %s: %v", file, err)
	}
	return string(out), nil
}

// bootImageArgs: the arguments of cmdline the boot loader itself sets
// (BOOT_IMAGE, root, ro/rw), which the next boot keeps.
func bootImageArgs(cmdline string) string {
	var keep []string
	for _, f := range strings.Fields(cmdline) {
		if strings.HasPrefix(f, "BOOT_IMAGE=") || strings.HasPrefix(f, "root=") || f == "ro" || f == "rw" {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

func hasArg(cmdline, arg string) bool {
	for _, f := range strings.Fields(cmdline) {
		if f == arg {
			return true
		}
	}
	return false
}

func newBootID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// iommuOn: an Intel IOMMU unit with interrupt remapping, remapped
// interrupts, and one IOMMU group per PCI function.
func iommuOn(root *host.Root) error {
	b := fixture.New(root.Dir())
	b.IOMMU("dmar0", 0xf020df)
	b.Interrupts("IR-IO-APIC", "IR-PCI-MSI-0000:00:14.0", "DMAR-MSI")
	for i, a := range root.Names("/sys/bus/pci/devices") {
		dev, err := root.Realpath("/sys/bus/pci/devices/" + a)
		if err != nil {
			return err
		}
		g := "/sys/kernel/iommu_groups/" + strconv.Itoa(i)
		b.File(g+"/type", "DMA\n").Link(dev+"/iommu_group", g).Link(g+"/devices/"+a, dev)
	}
	return b.Err()
}
