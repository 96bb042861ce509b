package main

// Node Feature Discovery v0.19.0's local source restated (not copied: NFD's
// module is not served by the module proxy), the reader of the feature file
// gpuprep check -o nfd and the timer's agent write, as read in
// kubernetes-sigs/node-feature-discovery at tag v0.19.0 (45d276ed):
//   - source/local/local.go: getFeaturesFromFiles (dot files skipped, the
//     files in name order, a later file's key overriding an earlier one's),
//     getFileContent (a regular file over MaxFeatureFileSize, 65536 bytes by
//     its stat size, is refused whole; anything else gives no lines),
//     parseFeatureFile and parseDirectives, updateFeatures;
//   - pkg/nfd-worker/nfd-worker.go GetFeatureLabels: a local label's name is
//     not prefixed by the worker and is dropped unless
//     validation.IsQualifiedName, its value unless
//     validation.IsValidLabelValue (k8s.io/apimachinery: NFD v0.19.0 builds
//     with v0.35.3, this module with a later one of the same rules); the
//     default labelWhiteList "" matches every name;
//   - pkg/nfd-master/nfd-master.go (addNsToMapKeys with the DisableAutoPrefix
//     gate off, its default in pkg/features/features.go; filterFeatureLabel)
//     and pkg/apis/nfd/validate/validate.go Label: with the default
//     configuration (no extra or denied namespaces, no whitelist).
// It is held against NFD's own tests (nfd_local_test's TestNFDLocalSource*).

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuprep/gpuprep/preflight"
	"github.com/gpuprep/gpuprep/report"
)

// nfdFeatureNs is NFD's FeatureLabelNs (api/nfd/v1alpha1/annotations_labels.go).
const nfdFeatureNs = "feature.node.kubernetes.io"

// nfdRead is what the local source makes of feature files: the local.feature
// (raw) and local.label attributes, and the errors nfd-worker logs.
type nfdRead struct {
	features, labels map[string]string
	errs             []string
}

// nfdOpts is parsingOpts: the state the directives set.
type nfdOpts struct {
	expiry                 time.Time
	skipLabel, skipFeature bool
}

// nfdDirective is parseDirectives: a line "# +KEY[=VALUE]"; other "#"
// lines are comments. expiry-time takes an RFC 3339 time (spaces around
// it trimmed), no-label and no-feature apply to the next key line; a bad
// or unknown directive is an error and changes nothing.
func nfdDirective(line string, o *nfdOpts) error {
	d, ok := strings.CutPrefix(line, "# +")
	if !ok {
		return nil
	}
	key, value, hasValue := strings.Cut(d, "=")
	switch key {
	case "expiry-time":
		if !hasValue {
			return fmt.Errorf("invalid directive format in %q, should be '# +expiry-time=value'", line)
		}
		ts, err := time.Parse(time.RFC3339, strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("failed to parse expiry-date directive: %w", err)
		}
		o.expiry = ts
	case "no-feature":
		o.skipFeature = true
	case "no-label":
		o.skipLabel = true
	default:
		return fmt.Errorf("unknown feature file directive %q", key)
	}
	return nil
}

// nfdParseFile is parseFeatureFile at time now: lines split on "\n" and
// trimmed, empty ones skipped; the expiry starts at now, and a key line is
// dropped while it is before now (so a file without the directive never
// expires); KEY=VALUE split at the first "=" (no trimming around it), a
// bare KEY is "true"; a skipped kind deletes the key instead, and the skips
// end at the next key line that is not dropped.
func nfdParseFile(content []byte, now time.Time) nfdRead {
	r := nfdRead{features: map[string]string{}, labels: map[string]string{}}
	o := nfdOpts{expiry: now}
	for _, raw := range bytes.Split(content, []byte("\n")) {
		line := strings.TrimSpace(string(raw))
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			if err := nfdDirective(line, &o); err != nil {
				r.errs = append(r.errs, err.Error())
			}
			continue
		case o.expiry.Before(now):
			continue
		}
		key, value, hasValue := strings.Cut(line, "=")
		if !hasValue {
			value = "true"
		}
		nfdSet(r.features, key, value, o.skipFeature)
		nfdSet(r.labels, key, value, o.skipLabel)
		o.skipFeature, o.skipLabel = false, false
	}
	return r
}

func nfdSet(m map[string]string, key, value string, skip bool) {
	if skip {
		delete(m, key)
	} else {
		m[key] = value
	}
}

// nfdLocalLabels is the local.label attribute NFD makes of one feature
// file's content at time now (a file over the size limit gives none), and
// the errors nfd-worker logs.
func nfdLocalLabels(content []byte, now time.Time) (map[string]string, []string) {
	if len(content) > report.NFDMaxFile {
		return map[string]string{}, []string{fmt.Sprintf("file size limit exceeded: %d bytes > %d bytes", len(content), report.NFDMaxFile)}
	}
	r := nfdParseFile(content, now)
	return r.labels, r.errs
}

// nfdReadDir is getFeaturesFromFiles on dir (NFD's featureFilesDir) at time
// now: a missing dir gives nothing; dot files are skipped; each file read
// as getFileContent does (stat, then the size limit, then the content of a
// regular file), in os.ReadDir's name order, a later file's keys winning.
func nfdReadDir(dir string, now time.Time) nfdRead {
	all := nfdRead{features: map[string]string{}, labels: map[string]string{}}
	files, err := os.ReadDir(dir)
	if err != nil {
		if !os.IsNotExist(err) {
			all.errs = append(all.errs, err.Error())
		}
		return all
	}
	for _, f := range files {
		if strings.HasPrefix(f.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, f.Name())
		st, err := os.Stat(p)
		if err != nil {
			all.errs = append(all.errs, err.Error())
			continue
		}
		if !st.Mode().IsRegular() {
			continue
		}
		if st.Size() > report.NFDMaxFile {
			all.errs = append(all.errs, fmt.Sprintf("%s: file size limit exceeded: %d bytes > %d bytes", f.Name(), st.Size(), report.NFDMaxFile))
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			all.errs = append(all.errs, err.Error())
			continue
		}
		r := nfdParseFile(b, now)
		for k, v := range r.features {
			all.features[k] = v
		}
		for k, v := range r.labels {
			all.labels[k] = v
		}
		all.errs = append(all.errs, r.errs...)
	}
	return all
}

// nfdNodeLabels are the node labels NFD makes of the local source's labels
// with its default configuration, and each dropped key with why: the
// worker (GetFeatureLabels) drops a name that is not a qualified name and a
// value that is not a label value; the master prefixes a name without a
// namespace with feature.node.kubernetes.io/ (addNsToMapKeys), resolves a
// value starting with "@" from the node's features (not restated here: a
// drop), and refuses kubernetes.io and its sub-namespaces other than
// NFD's feature and profile namespaces and theirs (validate.Label).
func nfdNodeLabels(local map[string]string) (kept, dropped map[string]string) {
	kept, dropped = map[string]string{}, map[string]string{}
	for k, v := range local {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			dropped[k] = "worker: invalid name: " + strings.Join(errs, "; ")
			continue
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			dropped[k] = "worker: invalid value: " + strings.Join(errs, "; ")
			continue
		}
		name := k
		if !strings.Contains(name, "/") {
			name = nfdFeatureNs + "/" + name
		}
		if why := nfdMasterRefuses(name, v); why != "" {
			dropped[k] = "master: " + why
			continue
		}
		kept[name] = v
	}
	return kept, dropped
}

// nfdMasterRefuses is filterFeatureLabel's verdict on a prefixed label ("":
// accepted).
func nfdMasterRefuses(name, value string) string {
	if strings.HasPrefix(value, "@") {
		return "a dynamic value (@feature.element)"
	}
	if errs := validation.IsQualifiedName(name); len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	ns, _, _ := strings.Cut(name, "/")
	const profileNs = "profile.node.kubernetes.io"
	if ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") {
		if ns != nfdFeatureNs && ns != profileNs && !strings.HasSuffix(ns, "."+nfdFeatureNs) && !strings.HasSuffix(ns, "."+profileNs) {
			return fmt.Sprintf("namespace %q is not allowed", ns)
		}
	}
	return ""
}

// The restatement agrees with NFD's own tests of the local source
// (source/local/local_test.go at v0.19.0): TestParseDirectives' rows (lines
// 56-88), and TestGetExpirationDate (lines 43-54), which reads
// source/local/testdata/features.d and expects 7 features and 8 labels: the
// files restated here as NFD has them (big_file is 70262 bytes there, of
// key lines; .my.feature a dot file). Which 7 and 8 follows from the rules:
// the expired file and lines gone, the unparsable expiry keeping the
// default (the line stays), no-feature and no-label each for one key.
func TestNFDLocalSourceAsNFDTestsIt(t *testing.T) {
	for _, c := range []struct {
		name, directive string
		wantErr         bool
	}{
		{"valid directive", "# +expiry-time=2080-07-28T11:22:33Z", false},
		{"invalid directive", "# +random-key=random-value", true},
		{"invalid directive format", "# + Something", true},
	} {
		o := nfdOpts{expiry: time.Now()}
		err := nfdDirective(c.directive, &o)
		require.Equal(t, c.wantErr, err != nil, c.name)
	}

	dir := t.TempDir()
	big := strings.Repeat("bigFeatureKey=bigFeatureValue0123456789\n", 70262/40+1)[:70262]
	for name, content := range map[string]string{
		".my.feature":               "hiddenFeatureKey=hiddenFeatureValue\n",
		"big_file":                  big,
		"expired_feature":           "# +expiry-time=2012-07-28T11:22:33Z\nfeatureKeyExpired=featureValue\n",
		"feature_with_comments":     "# Notes: foo bar\nfeatureKeyRandomComment=featureValue\n",
		"features_with_labels":      "# +no-feature\nlabel-only=value\n\n# +no-feature\nlabel-only-2=value\n\nmy-feature=value\n\nfoo=bar\n# +no-label\nfoo=baz\n",
		"multiple_expiration_dates": "# +expiry-time=2012-07-28T11:22:33Z\nfeatureKey=featureValue\n\n# +expiry-time=2080-07-28T11:22:33Z\nfeatureKey2=featureValue2\n\n# +expiry-time=2070-07-28T11:22:33Z\nfeatureKey3=featureValue3\n\n# +expiry-time=2002-07-28T11:22:33Z\nfeatureKey4=featureValue4\n",
		"unparsable_expiry_comment": "# +expiry-time=2080-07-28T11:22:33X\nfeatureKeyUnparsable=featureValue\n",
		"valid_feature":             "# +expiry-time=2080-07-28T11:22:33Z\nfeatureKeyValid=featureValue\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	r := nfdReadDir(dir, time.Now())
	require.Len(t, r.features, 7, "NFD's expectedFeaturesLen")
	require.Len(t, r.labels, 8, "NFD's expectedLabelsLen")
	both := map[string]string{"featureKeyRandomComment": "featureValue", "my-feature": "value", "featureKey2": "featureValue2",
		"featureKey3": "featureValue3", "featureKeyUnparsable": "featureValue", "featureKeyValid": "featureValue"}
	features := map[string]string{"foo": "baz"}
	labels := map[string]string{"label-only": "value", "label-only-2": "value"}
	for k, v := range both {
		features[k], labels[k] = v, v
	}
	require.Equal(t, features, r.features)
	require.Equal(t, labels, r.labels)
	require.Len(t, r.errs, 2, "the size limit and the unparsable expiry, logged: %q", r.errs)

	// TestLocalSource: no files, no labels
	require.Empty(t, nfdReadDir(filepath.Join(dir, "none"), time.Now()).labels)
}

// The rules of the reader that NFD's tests leave out, each as local.go has
// it; and what the worker and the master keep of the labels.
func TestNFDLocalSourceRules(t *testing.T) {
	now := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	r := nfdParseFile([]byte("  bare  \r\nspaced = v\nempty=\nk=a=b\n#+expiry-time=2000-01-01T00:00:00Z\ndup=1\ndup=2\n"+
		"# +expiry-time = 2000-01-01T00:00:00Z\n# +expiry-time\n# +expiry-time= 2026-12-03T07:00:00.5+00:00 \nlate=yes\n# +expiry-time=2026-12-03T06:59:59Z\ngone=1\n"), now)
	require.Equal(t, map[string]string{
		"bare": "true", "spaced ": " v", "empty": "", "k": "a=b", "dup": "2", "late": "yes",
	}, r.labels, "a bare key is true; no trimming around '='; '#+' is a comment; fractional RFC 3339 and spaces taken")
	require.Len(t, r.errs, 2, "'expiry-time ' is an unknown directive, one without '=' an invalid one: %q", r.errs)

	// the expiry: lines after a past one are dropped, and a no-label waits for a line that is not
	r = nfdParseFile([]byte("a=1\n# +no-label\n# +expiry-time=2000-01-01T00:00:00Z\nb=1\n# +expiry-time=2100-01-01T00:00:00Z\na=2\n"), now)
	require.Equal(t, map[string]string{}, r.labels, "a deleted by the no-label that outlived the expired b")
	require.Equal(t, map[string]string{"a": "2"}, r.features)

	// the size limit is NFD's: 65536 bytes are read, one more is not
	at := strings.Repeat("#", report.NFDMaxFile-4) + "\nk=v"
	l, errs := nfdLocalLabels([]byte(at), now)
	require.Equal(t, map[string]string{"k": "v"}, l)
	require.Empty(t, errs)
	l, errs = nfdLocalLabels([]byte(at+"\n"), now)
	require.Empty(t, l)
	require.Len(t, errs, 1)

	long := strings.Repeat("n", 64)
	kept, dropped := nfdNodeLabels(map[string]string{
		nfdFeatureNs + "/gpuprep.ready.vm-vgpu": "true",
		"unprefixed":                            "x",
		"sub." + nfdFeatureNs + "/a":            "x",
		"profile.node.kubernetes.io/a":          "x",
		"example.com/a":                         "x",
		nfdFeatureNs + "/" + long:               "x",
		nfdFeatureNs + "/" + long[:63]:          "x",
		"kubernetes.io/a":                       "x",
		"node.kubernetes.io/a":                  "x",
		nfdFeatureNs + "/v":                     "@local.label.x",
		nfdFeatureNs + "/s":                     "a b",
		nfdFeatureNs + "/l":                     long,
		"spaced ":                               "x",
		nfdFeatureNs + "/-a":                    "x",
	})
	require.Equal(t, map[string]string{
		nfdFeatureNs + "/gpuprep.ready.vm-vgpu": "true", nfdFeatureNs + "/unprefixed": "x", "sub." + nfdFeatureNs + "/a": "x",
		"profile.node.kubernetes.io/a": "x", "example.com/a": "x", nfdFeatureNs + "/" + long[:63]: "x",
	}, kept)
	require.Len(t, dropped, 8, "%q", dropped)
}

// Whatever the report holds (check IDs and a version from a hostile host),
// gpuprep's feature file is one NFD reads without an error and whose every
// label its worker and master keep as written: names qualified and at most
// 63 characters after the prefix, values label values, none a dynamic
// "@" value, all in NFD's own namespace; under the size limit.
func TestNFDKeepsEveryLabelGpuprepWrites(t *testing.T) {
	var ids []string
	for i := 0; i < 300; i++ {
		ids = append(ids, strings.Repeat("x", i%90)+"/é\n=@ #"+string(rune('a'+i%26))+strings.Repeat("y", i))
	}
	ids = append(ids, "", "...", "-a b-", "@x", "# +no-label", "kubernetes.io/x", strings.Repeat("é", 40))
	r := &report.Report{Modes: map[preflight.Mode]*preflight.ModeResult{
		preflight.Container: {Blockers: ids}, preflight.VMVGPU: {Unknown: ids[:50], Skipped: ids[50:60]},
	}}
	var b bytes.Buffer
	now := time.Now()
	require.NoError(t, report.NFD(&b, r, report.NFDOptions{Version: "@dev build (dirty)/\n" + strings.Repeat("9", 100), Expiry: now.Add(time.Hour)}))
	require.LessOrEqual(t, b.Len(), report.NFDMaxFile)
	labels, errs := nfdLocalLabels(b.Bytes(), now)
	require.Empty(t, errs, "nfd-worker would log these for:\n%s", b.String())
	require.Equal(t, len(report.NFDLabels(r, "x")), len(labels), "one label a line, none lost:\n%s", b.String())
	kept, dropped := nfdNodeLabels(labels)
	require.Empty(t, dropped)
	require.Equal(t, labels, kept)
	for k := range labels {
		require.True(t, strings.HasPrefix(k, report.NFDPrefix+"gpuprep."), k)
	}
}
