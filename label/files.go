package label

import (
	"fmt"
	"time"

	"github.com/gpuprep/gpuprep/internal/change"
	"github.com/gpuprep/gpuprep/internal/host"
	"github.com/gpuprep/gpuprep/internal/journal"
)

// WriteFiles writes edits (the kubelet's environment files, a kubeadm
// JoinConfiguration: kube.EditKubeletLabels and the like) through root in
// order, each journalled under command (journal.WriteFile: an intent, the
// atomic write with its backup, a file entry), and tells wrote of each
// once written. It stops at the first that fails.
func WriteFiles(root *host.Root, edits []change.File, command string, now time.Time, wrote func(change.File, host.WriteResult)) error {
	for _, e := range edits {
		res, err := journal.WriteFile(root, e.Path, e.New, 0o644, command, now)
		if err != nil {
			return fmt.Errorf("write %s: %w", e.Path, err)
		}
		if wrote != nil {
			wrote(e, res)
		}
	}
	return nil
}
