package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/gpuprep/gpuprep/preflight"
)

// The Node Feature Discovery local-source feature file, as NFD reads it from
// /etc/kubernetes/node-feature-discovery/features.d/ (read in
// kubernetes-sigs/node-feature-discovery at 76e6cc8c, v0.20.0-devel, same
// file as tag v0.19.0: source/local/local.go parseFeatureFile and
// parseDirectives; docs/usage/customization-guide.md "Input format"):
//   - one `<key>[=<value>]` per line (value "true" when absent); lines
//     starting with "#" are comments, and "# +expiry-time=<RFC3339>" is a
//     directive: the lines after it are dropped once that time is past
//     (re-evaluated at each re-discovery, so expired labels leave the node);
//   - files over MaxFeatureFileSize (65536 bytes) are ignored whole; dot
//     files are ignored, so writers write .name and rename it;
//   - labels from the local source are not prefixed by the worker
//     (pkg/nfd-worker/nfd-worker.go GetFeatureLabels: "No mangling of labels
//     from the custom rules or feature files"), and must pass
//     IsQualifiedName and IsValidLabelValue there or are dropped; nfd-master
//     adds feature.node.kubernetes.io/ to names without a "/"
//     (addNsToMapKeys), which the docs say will stop (DisableAutoPrefix), and
//     refuses kubernetes.io and its sub-namespaces except
//     feature.node.kubernetes.io and profile.node.kubernetes.io (and their
//     sub-namespaces) (pkg/apis/nfd/validate/validate.go Label).
//
// gpuprep therefore writes every key fully qualified in NFD's own namespace,
// feature.node.kubernetes.io, which every nfd-master accepts without
// -extra-label-ns or deny lists, with names that start "gpuprep.":
//
//	feature.node.kubernetes.io/gpuprep.ready.<mode>=true|false
//	feature.node.kubernetes.io/gpuprep.check.<check ID>=fail|error|skip
//	feature.node.kubernetes.io/gpuprep.version=<version>
//
// ready is "true" only when the mode is ready; a mode whose checks failed,
// could not be evaluated or were skipped is "false" (never a pass on missing
// evidence). A check label names each check that keeps a mode from being
// ready, with why.
const (
	NFDPrefix = "feature.node.kubernetes.io/"
	// NFDMaxFile is NFD's MaxFeatureFileSize: a larger file is ignored.
	NFDMaxFile = 65536
	// nfdMaxChecks bounds the check labels (gpuprep has fewer checks).
	nfdMaxChecks = 100
)

// NFDReadyLabel is the label that says whether mode is ready.
func NFDReadyLabel(mode preflight.Mode) string {
	return NFDPrefix + "gpuprep.ready." + labelName(string(mode))
}

// NFDOptions say what a feature file carries besides the report.
type NFDOptions struct {
	Version string
	// Expiry is when NFD must drop the labels (a refresher that stopped
	// must not leave "ready" on the node); zero: no expiry directive.
	Expiry time.Time
}

// NFD writes r as an NFD feature file.
func NFD(w io.Writer, r *Report, o NFDOptions) error {
	var b strings.Builder
	b.WriteString("# gpuprep readiness for Node Feature Discovery (gpuprep check -o nfd)\n")
	if !o.Expiry.IsZero() {
		fmt.Fprintf(&b, "# +expiry-time=%s\n", o.Expiry.UTC().Format(time.RFC3339))
	}
	for _, l := range NFDLabels(r, o.Version) {
		fmt.Fprintf(&b, "%s=%s\n", l[0], l[1])
	}
	if b.Len() > NFDMaxFile {
		return fmt.Errorf("NFD feature file of %d bytes is over NFD's limit of %d", b.Len(), NFDMaxFile)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// NFDLabels are the key/value pairs of r's feature file, in a stable order:
// the modes in report order, the checks sorted, the version.
func NFDLabels(r *Report, version string) [][2]string {
	var out [][2]string
	for _, m := range preflight.Modes {
		if mr := r.Modes[m]; mr != nil {
			out = append(out, [2]string{NFDReadyLabel(m), fmt.Sprint(mr.Ready)})
		}
	}
	status := FailingChecks(r)
	ids := make([]string, 0, len(status))
	for id := range status {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	seen := map[string]bool{}
	for _, id := range ids {
		k := NFDPrefix + labelName("gpuprep.check."+id)
		if seen[k] || len(seen) >= nfdMaxChecks {
			continue
		}
		seen[k] = true
		out = append(out, [2]string{k, string(status[id])})
	}
	return append(out, [2]string{NFDPrefix + "gpuprep.version", LabelValue(version)})
}

// FailingChecks are the checks that keep a mode of r from being ready, each
// with its worst status over the modes: fail, else error (not evaluated),
// else skip.
func FailingChecks(r *Report) map[string]preflight.Status {
	rank := map[preflight.Status]int{preflight.Skip: 1, preflight.Error: 2, preflight.Fail: 3}
	out := map[string]preflight.Status{}
	set := func(ids []string, st preflight.Status) {
		for _, id := range ids {
			if rank[st] > rank[out[id]] {
				out[id] = st
			}
		}
	}
	for _, mr := range r.Modes {
		if mr != nil {
			set(mr.Blockers, preflight.Fail)
			set(mr.Unknown, preflight.Error)
			set(mr.Skipped, preflight.Skip)
		}
	}
	return out
}

// labelName makes s the name part of a qualified label key: at most 63
// characters of [A-Za-z0-9._-], starting and ending with one of [A-Za-z0-9]
// (k8s.io/apimachinery validation.IsQualifiedName).
func labelName(s string) string {
	v := LabelValue(s)
	if v == "" {
		return "x"
	}
	return v
}

// LabelValue makes s a valid Kubernetes label value (IsValidLabelValue): any
// other character becomes "_", at most 63 characters, alphanumeric at both
// ends ("" stays "", which is valid).
func LabelValue(s string) string {
	b := []byte(s)
	if len(b) > 256 {
		b = b[:256]
	}
	for i, c := range b {
		if !labelChar(c) {
			b[i] = '_'
		}
	}
	v := strings.TrimFunc(string(b), func(r rune) bool { return !alnum(byte(r)) })
	if len(v) > 63 {
		v = strings.TrimRightFunc(v[:63], func(r rune) bool { return !alnum(byte(r)) })
	}
	return v
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func labelChar(c byte) bool { return alnum(c) || c == '-' || c == '_' || c == '.' }
