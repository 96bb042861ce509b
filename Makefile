# gpuprep — see README.md. `make run` checks this host; `make test` runs every test.
GO       ?= go
BIN      := bin/gpuprep
PKGS     := ./...
export CGO_ENABLED ?= 0
# -s -w: no symbol table or DWARF (28 -> 20 MiB; panics still print stack traces); this is the binary
# `gpuprep fleet` uploads to every host. The version is the commit it was built from.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)

.PHONY: all build run test unit fuzz crash e2e bench lint deps fixtures kube-apiserver clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/gpuprep

## run: check this host (and show the bundled example node where there is no NVIDIA GPU)
run: build
	@scripts/run.sh $(BIN)

## test: every test — lint, unit (fixtures, real sshd, real kube-apiserver), the real-kernel e2e under QEMU;
## installs what they need
test: deps lint kube-apiserver
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
	$(GO) test -count=1 $(PKGS)

## e2e: gpuprep check inside a real Debian kernel under QEMU with emulated Intel and AMD IOMMUs
e2e: deps
	$(GO) test -tags e2e -count=1 -v -timeout 25m ./e2e/

## bench: Go benchmarks and whole-command timings against virt-host-validate; fleet check vs
## parallel-ssh and ansible on 200 loopback sshd hosts (root)
bench:
	bash bench/bench.sh
	bash bench/fleet.sh

## lint: gofmt, go vet (also with the e2e tag), and the committed example root is up to date
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags e2e ./e2e/

deps:
	@scripts/deps.sh

## kube-apiserver: build the real Kubernetes API server the labelling tests use (cached; ~6.5 min cold)
kube-apiserver:
	@scripts/kube-apiserver.sh >/dev/null

## fixtures: regenerate the committed example root from its builder
fixtures:
	$(GO) run ./internal/fixture/mkroot hgx-h200 testdata/roots/hgx-h200

clean:
	rm -rf bin
