package grub

import (
	"encoding/json"
	"fmt"

	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/kargs"
)

// KernelstubConfig is Pop!_OS's kernelstub configuration.
const KernelstubConfig = "/etc/kernelstub/configuration"

// readKernelstub returns the kernel options kernelstub writes into the boot
// entry (after its own "root=UUID=… ro"), read as pop-os/kernelstub
// kernelstub/config.py reads them: JSON with a "default" and a "user"
// section; a configuration without "user" uses a copy of "default"; an
// OEM's kernel_options written as one string (not a list) is split on
// blanks. kernelstub/application.py then builds the entry's options as
// 'root=UUID=%s ro %s' % (root_uuid, " ".join(kernel_opts)).
func readKernelstub(root *host.Root) ([]string, error) {
	data, err := kargs.ReadFile(root, KernelstubConfig)
	if err != nil {
		return nil, err
	}
	var cfg map[string]struct {
		KernelOptions json.RawMessage `json:"kernel_options"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", KernelstubConfig, err)
	}
	sec, ok := cfg["user"]
	if !ok {
		if sec, ok = cfg["default"]; !ok {
			return nil, fmt.Errorf("%s: neither a \"user\" nor a \"default\" section, which kernelstub needs", KernelstubConfig)
		}
	}
	if len(sec.KernelOptions) == 0 {
		return nil, fmt.Errorf("%s: no kernel_options (kernelstub stops: \"No Kernel Parameters found\")", KernelstubConfig)
	}
	var list []string
	if err := json.Unmarshal(sec.KernelOptions, &list); err == nil {
		return list, nil
	}
	var one string
	if err := json.Unmarshal(sec.KernelOptions, &one); err != nil {
		return nil, fmt.Errorf("%s: kernel_options is neither a list nor a string of options", KernelstubConfig)
	}
	return Words(one), nil
}
