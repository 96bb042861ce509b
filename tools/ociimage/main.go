// Command ociimage makes gpuprep agent's container image without a container
// engine: an OCI image layout (opencontainers/image-spec v1.1: oci-layout,
// index.json, blobs/sha256/) holding one image per static binary of make
// dist, each a single layer with /gpuprep, entrypoint /gpuprep, user 0 --
// what deploy/Containerfile describes (FROM scratch, COPY, USER 0,
// ENTRYPOINT). The bytes depend on the binaries alone: tar entries and config
// dates are the Unix epoch, gzip carries no name or time, JSON is Go's
// (sorted keys), so the same binaries give the same digests anywhere. Each
// image is named in index.json by its architecture
// (org.opencontainers.image.ref.name), e.g. skopeo copy oci:DIR:amd64 ...
//
//	go run ./tools/ociimage OUTDIR dist/gpuprep-linux-amd64 dist/gpuprep-linux-arm64
//
// It prints each manifest's digest.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const (
	mtIndex    = "application/vnd.oci.image.index.v1+json"
	mtManifest = "application/vnd.oci.image.manifest.v1+json"
	mtConfig   = "application/vnd.oci.image.config.v1+json"
	mtLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	refName    = "org.opencontainers.image.ref.name"
	epoch      = "1970-01-01T00:00:00Z"
	// what deploy/Containerfile says (TestContainerfileSaysTheSame)
	binPath = "gpuprep" // in the root file system
	user    = "0"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// blobs writes content-addressed blobs under dir/blobs/sha256.
type blobs struct{ dir string }

func (b blobs) put(mediaType string, data []byte) (descriptor, error) {
	sum := sha256.Sum256(data)
	hexd := hex.EncodeToString(sum[:])
	p := filepath.Join(b.dir, "blobs", "sha256", hexd)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return descriptor{}, err
	}
	return descriptor{MediaType: mediaType, Digest: "sha256:" + hexd, Size: int64(len(data))}, nil
}

// layer is a tar of /gpuprep (root-owned, 0755, epoch mtime), and its gzip.
func layer(bin []byte) (tarball, gz []byte, err error) {
	var t bytes.Buffer
	tw := tar.NewWriter(&t)
	hdr := &tar.Header{Name: binPath, Mode: 0o755, Size: int64(len(bin)), ModTime: time.Unix(0, 0),
		Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	var g bytes.Buffer
	zw, err := gzip.NewWriterLevel(&g, gzip.BestCompression)
	if err != nil {
		return nil, nil, err
	}
	if _, err := zw.Write(t.Bytes()); err != nil {
		return nil, nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, nil, err
	}
	return t.Bytes(), g.Bytes(), nil
}

// arch is the architecture make dist's file name says: gpuprep-linux-<arch>.
func arch(path string) (string, error) {
	a, ok := strings.CutPrefix(filepath.Base(path), "gpuprep-linux-")
	if !ok || (a != "amd64" && a != "arm64") {
		return "", fmt.Errorf("%s: not a make dist binary (gpuprep-linux-amd64 or -arm64)", path)
	}
	return a, nil
}

func image(b blobs, path string) (descriptor, error) {
	a, err := arch(path)
	if err != nil {
		return descriptor{}, err
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return descriptor{}, err
	}
	raw, gz, err := layer(bin)
	if err != nil {
		return descriptor{}, err
	}
	l, err := b.put(mtLayer, gz)
	if err != nil {
		return descriptor{}, err
	}
	diff := sha256.Sum256(raw)
	cfg, err := json.Marshal(map[string]any{
		"architecture": a, "os": "linux", "created": epoch,
		"config": map[string]any{"Entrypoint": []string{"/" + binPath}, "User": user,
			"Labels": map[string]string{"org.opencontainers.image.source": "gpuprep deploy/Containerfile, tools/ociimage"}},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}},
		"history": []map[string]string{{"created": epoch, "created_by": "COPY " + filepath.Base(path) + " /" + binPath}},
	})
	if err != nil {
		return descriptor{}, err
	}
	c, err := b.put(mtConfig, cfg)
	if err != nil {
		return descriptor{}, err
	}
	man, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mtManifest, "config": c, "layers": []descriptor{l}})
	if err != nil {
		return descriptor{}, err
	}
	m, err := b.put(mtManifest, man)
	if err != nil {
		return descriptor{}, err
	}
	m.Platform = &platform{Architecture: a, OS: "linux"}
	m.Annotations = map[string]string{refName: a}
	return m, nil
}

// build writes the layout to out (which must not exist) for the binaries.
func build(out string, bins []string) ([]descriptor, error) {
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("%s exists: give a new directory", out)
	}
	b := blobs{dir: out}
	if err := os.MkdirAll(filepath.Join(out, "blobs", "sha256"), 0o755); err != nil {
		return nil, err
	}
	var ms []descriptor
	seen := map[string]bool{}
	for _, p := range bins {
		m, err := image(b, p)
		if err != nil {
			return nil, err
		}
		if seen[m.Platform.Architecture] {
			return nil, fmt.Errorf("%s: a second %s binary", p, m.Platform.Architecture)
		}
		seen[m.Platform.Architecture] = true
		ms = append(ms, m)
	}
	idx, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mtIndex, "manifests": ms})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "index.json"), idx, 0o644); err != nil {
		return nil, err
	}
	return ms, os.WriteFile(filepath.Join(out, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: ociimage OUTDIR gpuprep-linux-ARCH...")
		os.Exit(2)
	}
	ms, err := build(os.Args[1], os.Args[2:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
	for _, m := range ms {
		fmt.Printf("%s:%s manifest %s\n", os.Args[1], m.Platform.Architecture, m.Digest)
	}
}
