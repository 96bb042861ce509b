package grub

import (
	"encoding/json"
	"fmt"
	"path"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

// KernelstubConfig is Pop!_OS's kernelstub configuration.
const KernelstubConfig = "/etc/kernelstub/configuration"

// kernelstubSection is the part of a configuration section gpuprep reads.
type kernelstubSection struct {
	KernelOptions json.RawMessage `json:"kernel_options"`
	ESPPath       string          `json:"esp_path"`
	SetupLoader   bool            `json:"setup_loader"`
}

// readKernelstubConfig returns the kernel options kernelstub writes into the boot
// entry (after its own "root=UUID=… ro"), read as pop-os/kernelstub
// kernelstub/config.py reads them: JSON with a "default" and a "user"
// section; a configuration without "user" uses a copy of "default"; an
// OEM's kernel_options written as one string (not a list) is split on
// blanks. kernelstub/application.py then builds the entry's options as
// 'root=UUID=%s ro %s' % (root_uuid, " ".join(kernel_opts)). It returns the
// section it read too.
func readKernelstubConfig(root *host.Root) ([]string, kernelstubSection, error) {
	data, err := kargs.ReadFile(root, KernelstubConfig)
	if err != nil {
		return nil, kernelstubSection{}, err
	}
	var cfg map[string]kernelstubSection
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, kernelstubSection{}, fmt.Errorf("%s: %w", KernelstubConfig, err)
	}
	sec, ok := cfg["user"]
	if !ok {
		if sec, ok = cfg["default"]; !ok {
			return nil, kernelstubSection{}, fmt.Errorf("%s: neither a \"user\" nor a \"default\" section, which kernelstub needs", KernelstubConfig)
		}
	}
	if len(sec.KernelOptions) == 0 {
		return nil, kernelstubSection{}, fmt.Errorf("%s: no kernel_options (kernelstub stops: \"No Kernel Parameters found\")", KernelstubConfig)
	}
	var list []string
	if err := json.Unmarshal(sec.KernelOptions, &list); err == nil {
		return list, sec, nil
	}
	var one string
	if err := json.Unmarshal(sec.KernelOptions, &one); err != nil {
		return nil, kernelstubSection{}, fmt.Errorf("%s: kernel_options is neither a list nor a string of options", KernelstubConfig)
	}
	return Words(one), sec, nil
}

// kernelstubEntry is the loader entry kernelstub writes when it sets up the
// loader (setup_loader): <esp_path>/loader/entries/<OS>-current.conf with
// "options root=UUID=… ro <kernel options>" (kernelstub/installer.py,
// setup_kernel and make_loader_entry); nil when it does not, or the ESP is
// not readable.
func kernelstubEntry(root *host.Root, sec kernelstubSection) *File {
	if !sec.SetupLoader {
		return nil
	}
	esp := sec.ESPPath
	if esp == "" {
		esp = "/boot/efi"
	}
	names, _ := root.Glob(path.Clean(esp) + "/loader/entries/*-current.conf")
	if len(names) != 1 {
		return nil // none, or more than one OS: which boots is not known
	}
	data, err := kargs.ReadFile(root, names[0])
	if err != nil {
		return nil
	}
	return &File{names[0], data}
}
