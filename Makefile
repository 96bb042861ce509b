# gpuprep — see README.md. `make run` checks this host; `make test` runs every test.
GO       ?= go
BIN      := bin/gpuprep
PKGS     := ./...
export CGO_ENABLED ?= 0
# -s -w: no symbol table or DWARF (28 -> 20 MiB; panics still print stack traces); this is the binary
# `gpuprep fleet` uploads to every host. The version is the commit it was built from.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
PREFIX   ?= /usr/local
# The architecture this machine's go builds for, and the other one gpuprep ships for (fleet's arm64 or amd64 hosts).
HOSTARCH := $(shell $(GO) env GOARCH 2>/dev/null)
AGENTARCH := $(if $(filter arm64,$(HOSTARCH)),amd64,arm64)
# dist: reproducible release binaries. No build ID, no VCS stamp (-buildvcs=false; the version says the commit), no
# paths (-trimpath), the baseline instruction sets: the same commit and Go give the same bytes anywhere.
DIST     ?= dist
DIST_ARCHES := amd64 arm64
DIST_LDFLAGS := -s -w -buildid= -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build build-host install dist dist-check dist-repro image ansible-collection run test unit fuzz crash e2e bench lint deps fixtures kube-apiserver clean

all: build

## build: bin/gpuprep for this machine, and bin/gpuprep-linux-$(AGENTARCH) beside it, which gpuprep fleet copies to
## hosts of the other architecture (the first cross build takes about a minute; later ones seconds)
build: build-host
	GOOS=linux GOARCH=$(AGENTARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/gpuprep-linux-$(AGENTARCH) ./cmd/gpuprep

## build-host: bin/gpuprep alone
build-host:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gpuprep

## install: bin/gpuprep to $(PREFIX)/bin (default /usr/local; DESTDIR for staging)
install: build-host
	install -d '$(DESTDIR)$(PREFIX)/bin'
	install -m 0755 $(BIN) '$(DESTDIR)$(PREFIX)/bin/gpuprep'

## dist: $(DIST)/gpuprep-linux-amd64, $(DIST)/gpuprep-linux-arm64 (static) and $(DIST)/SHA256SUMS, checked (dist-check)
dist:
	rm -rf '$(DIST)' && mkdir -p '$(DIST)'
	for a in $(DIST_ARCHES); do \
		GOOS=linux GOARCH=$$a GOAMD64=v1 GOARM64=v8.0 $(GO) build -trimpath -buildvcs=false -ldflags '$(DIST_LDFLAGS)' \
			-o '$(DIST)'/gpuprep-linux-$$a ./cmd/gpuprep || exit 1; \
	done
	cd '$(DIST)' && sha256sum gpuprep-linux-* > SHA256SUMS
	$(MAKE) dist-check

## dist-check: $(DIST) verifies with sha256sum -c, and each file is a static Linux executable of the architecture
## its name says, as gpuprep fleet reads it
dist-check:
	cd '$(DIST)' && sha256sum -c --strict SHA256SUMS
	$(GO) run ./tools/distcheck '$(DIST)'

## dist-repro: make dist twice, the second from a copy of the tree elsewhere with an empty build cache; the bytes
## must be the same (a few minutes: everything is compiled again, for both architectures). The copy has no .git: it
## is given this tree's VERSION and COMMIT, which make dist stamps in
dist-repro: dist
	@t=$$(mktemp -d) && trap 'chmod -R u+w "$$t"; rm -rf "$$t"' EXIT && \
	git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -C "$$t" -xf - && \
	GOCACHE="$$t/.gocache" $(MAKE) -C "$$t" dist DIST=dist VERSION='$(VERSION)' COMMIT='$(COMMIT)' >/dev/null && \
	cmp '$(DIST)'/SHA256SUMS "$$t/dist/SHA256SUMS" && cat '$(DIST)'/SHA256SUMS && echo "dist-repro: identical"

## image: gpuprep agent's container image, without a container engine: an OCI image layout in $(DIST)/image
## (tools/ociimage: one image per make dist binary, named by architecture; the same binaries give the same digests),
## read back with skopeo where it is installed; push with e.g. skopeo copy oci:$(DIST)/image:amd64 docker://REGISTRY/gpuprep:TAG
image: dist
	rm -rf '$(DIST)/image'
	$(GO) run ./tools/ociimage '$(DIST)/image' $(foreach a,$(DIST_ARCHES),'$(DIST)/gpuprep-linux-$(a)')
	@if command -v skopeo >/dev/null; then for a in $(DIST_ARCHES); do skopeo inspect --format '{{.Os}}/{{.Architecture}} {{.Digest}}' 'oci:$(DIST)/image:'$$a || exit 1; done; fi

## ansible-collection: the Ansible collection gpuprep.node (modules check, apply, rollback, label; role prepare;
## playbook prepare) in $(DIST)/ansible_collections/gpuprep/node, with make dist's static binaries as its binary
## modules; use it with ANSIBLE_COLLECTIONS_PATH=$(DIST)
ansible-collection: dist
	ansible/build.sh '$(DIST)/ansible_collections/gpuprep/node' '$(DIST)'

## run: check this host (and show the bundled example node where there is no NVIDIA GPU)
run: build-host
	@scripts/run.sh $(BIN)

## test: every test — lint, unit (fixtures, real sshd, real kube-apiserver), the real-kernel e2e under QEMU;
## installs what they need
test: deps lint kube-apiserver
	$(MAKE) dist
	GPUPREP_REQUIRE_KUBE=1 GPUPREP_REQUIRE_BROWSER=1 GPUPREP_REQUIRE_ORACLES=1 $(MAKE) unit
	$(MAKE) fuzz
	$(MAKE) e2e
	scripts/leftovers.sh

## crash: kill gpuprep apply at every file-changing syscall of each scenario (about 1 min; make unit kills at 54)
crash:
	GPUPREP_CRASH_ALL=1 $(GO) test -count=1 -run 'TestApplyCrash$$' ./cmd/gpuprep/

## fuzz: every parser's fuzz target (the GRUB editor against the bash oracle, kernel arguments, inventories, host
## ranges, ssh_config, vGPU configs, report JSON, snapshot tarballs), each for a bounded number of runs
# Counts, not durations: Go 1.26's fuzz coordinator can report "context deadline exceeded" as a failure when
# -fuzztime runs out while a worker is busy (go.dev/issue/75804, fixed in Go 1.27); on a loaded 2-core CI machine it
# did. The targets and their counts are in scripts/fuzz.sh (FUZZ_SCALE=10 make fuzz runs ten times as many).
fuzz:
	GO=$(GO) scripts/fuzz.sh

## unit: fast tests against fixture roots; no root, no network
unit:
	$(GO) test -count=1 -timeout 25m $(PKGS)

## e2e: gpuprep check inside a real Debian kernel under QEMU with emulated Intel and AMD IOMMUs
e2e: deps
	$(GO) test -tags e2e -count=1 -v -timeout 45m ./e2e/

## bench: Go benchmarks and whole-command timings against virt-host-validate; fleet check vs
## parallel-ssh and ansible on 200 loopback sshd hosts (root)
bench:
	bash bench/bench.sh
	bash bench/fleet.sh

## lint: gofmt, go vet (also with the e2e tag), golangci-lint with .golangci.yml (scripts/golangci-lint.sh: built once into /var/tmp/gpuprep-tools, ~1.5 min cold), and the committed example root is up to date
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags e2e ./e2e/
	scripts/golangci-lint.sh

deps:
	@scripts/deps.sh

## kube-apiserver: build the real Kubernetes API server the labelling tests use (cached; ~6.5 min cold)
kube-apiserver:
	@scripts/kube-apiserver.sh >/dev/null

## fixtures: regenerate the committed example root from its builder
fixtures:
	$(GO) run ./internal/fixture/mkroot hgx-h200 testdata/roots/hgx-h200

clean:
	rm -rf bin '$(DIST)'
