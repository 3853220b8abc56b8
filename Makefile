# jobferry — see README.md. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

BIN := $(CURDIR)/bin
OUT := $(CURDIR)/_output
DEV_DIR := $(CURDIR)/.local/dev
WORKERS ?= 2
GO_TEST_FLAGS ?=
E2E_TIMEOUT ?= 60m
CHAOS_SPAN ?= 3m
CHAOS_SEED ?=

# Image names: $(IMAGE_REGISTRY)/jobferry-{manager,worker}:$(VERSION), the
# charts' default image references (their appVersion).
VERSION ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' charts/jobferry-manager/Chart.yaml)
IMAGE_REGISTRY ?= ghcr.io/jobferry
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

export KUBEBUILDER_ASSETS := $(BIN)
export JOBFERRY_BIN_DIR := $(BIN)
export BENCH_N BENCH_WORKERS BENCH_SCALE BENCH_SIM BENCH_KUEUE BENCH_MULTIKUEUE BENCH_KUEUE_ALONE BENCH_KUEUE_QPS BENCH_ARM_LIMIT

.PHONY: help
help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# Tools only later e2e tests use: test-e2e builds them in the background
# while its first tests run (hack/tools/build-late.sh), in this order. (The
# integration layer needs Kueue's CRDs, the registry and helm 4.)
E2E_LATE_TOOLS := coredns kubernetes-1.32/kube-apiserver kubernetes-1.32/kube-controller-manager kubernetes-1.32/kube-scheduler

.PHONY: tools-early
tools-early: ## every tool but those only later e2e tests use (E2E_LATE_TOOLS, which test-e2e builds in the background while its first tests run)
	@hack/tools/build.sh $(BIN) --except $(E2E_LATE_TOOLS)

.PHONY: tools
tools: ## build the pinned control plane (and v1.32's, the oldest minor the charts claim), KWOK, kubectl, helm 3 and 4, controller-gen, Kueue and the local OCI registry into bin/ (only what is missing or outdated)
	@hack/tools/build-late.sh stop $(BIN)
	@hack/tools/build.sh $(BIN)

.PHONY: prometheus
prometheus: ## install prometheus and promtool (Debian 12's package, pinned by version and sha256) into bin/
	@hack/prometheus.sh $(BIN)

.PHONY: nodes
nodes: tools-early ## install what real nodes run besides bin/kubelet and bin/kube-proxy into bin/nodes: containerd, runc, CNI plugins (Debian 12's, pinned), the pause and busybox images; iptables and conntrack with apt-get when missing (root)
	@hack/nodes.sh $(BIN)

.PHONY: build
build: ## build jobferry's own binaries (manager, worker, kubectl-jobferry, jobferry-dev) into bin/
	go build -o $(BIN)/ ./cmd/...

.PHONY: images
images: ## write OCI image archives of the manager and worker into _output/images (no container engine needed)
	@mkdir -p $(OUT)/images/bin
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(OUT)/images/bin/ ./cmd/manager ./cmd/worker
	go run ./hack/images --bin-dir $(OUT)/images/bin --out $(OUT)/images --registry $(IMAGE_REGISTRY) \
		--version $(VERSION) --revision $(REVISION) --created $(SOURCE_DATE_EPOCH)

# A release: $(RELEASE_DIR) holds everything a platform team installs.
RELEASE_DIR ?= $(OUT)/release/$(VERSION)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
PLUGIN_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64,windows/arm64
# -buildvcs=true: the binaries name their commit in jobferry_build_info even
# where GOFLAGS turns VCS stamping off.
RELEASE_LDFLAGS = -s -w -X github.com/jobferry/jobferry/internal/buildinfo.releaseVersion=$(VERSION)

.PHONY: release
release: ## write release VERSION into _output/release/VERSION: multi-arch image archives, the charts packaged at VERSION, plugin archives per platform, their krew manifest, SHA256SUMS, notes from CHANGELOG.md (RELEASE_ALLOW_DIRTY=true: from uncommitted changes)
	go run ./hack/release --check --version $(VERSION) --image-registry $(IMAGE_REGISTRY) $(if $(filter true,$(RELEASE_ALLOW_DIRTY)),--allow-dirty)
	@hack/tools/build.sh $(BIN) helm
	rm -rf $(RELEASE_DIR) $(OUT)/release-build/$(VERSION)
	mkdir -p $(RELEASE_DIR)
	for p in $$(echo $(IMAGE_PLATFORMS) | tr , " "); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build -buildvcs=true -trimpath -ldflags "$(RELEASE_LDFLAGS)" \
			-o $(OUT)/release-build/$(VERSION)/images/$${p/\//_}/ ./cmd/manager ./cmd/worker; \
	done
	go run ./hack/images --platforms $(IMAGE_PLATFORMS) --bin-dir $(OUT)/release-build/$(VERSION)/images --out $(OUT)/release-build/$(VERSION)/archives \
		--registry $(IMAGE_REGISTRY) --version $(VERSION) --revision $(REVISION) --created $(SOURCE_DATE_EPOCH)
	for c in manager worker; do \
		mv $(OUT)/release-build/$(VERSION)/archives/jobferry-$$c.oci.tar $(RELEASE_DIR)/jobferry-$${c}_$(VERSION).oci.tar; \
	done
	for p in $$(echo $(PLUGIN_PLATFORMS) | tr , " "); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build -buildvcs=true -trimpath -ldflags "$(RELEASE_LDFLAGS)" \
			-o $(OUT)/release-build/$(VERSION)/plugin/$${p/\//_}/ ./cmd/kubectl-jobferry; \
	done
	go run ./hack/release --version $(VERSION) --dir $(RELEASE_DIR) --plugin-bin-dir $(OUT)/release-build/$(VERSION)/plugin \
		--helm $(BIN)/helm --created $(SOURCE_DATE_EPOCH)

# Where `make publish` pushes: REGISTRY=registry.example.com/jobferry gives
# images REGISTRY/jobferry-{manager,worker}:VERSION and charts under
# oci://REGISTRY/charts; REGISTRY_CA_FILE verifies a registry whose CA is not
# in the system's trust. Credentials: those of docker login / podman login /
# helm registry login.
REGISTRY_CA_FILE ?=

.PHONY: publish
publish: ## push release VERSION of _output/release/VERSION (`make release`) to REGISTRY: its multi-arch images, and its charts as OCI artifacts
	@test -n "$(REGISTRY)" || { echo "publish: set REGISTRY, e.g. make publish VERSION=$(VERSION) REGISTRY=registry.example.com/jobferry" >&2; exit 2; }
	@hack/tools/build.sh $(BIN) helm
	go run ./hack/release publish --dir $(RELEASE_DIR) --version $(VERSION) --registry $(REGISTRY) --helm $(BIN)/helm \
		$(if $(REGISTRY_CA_FILE),--ca-file $(REGISTRY_CA_FILE))

# The release the real-node tier installs from its own registry: this tree,
# for this machine's platform only, at the newest CHANGELOG.md version.
E2E_RELEASE_DIR := $(OUT)/release-e2e
E2E_RELEASE_VERSION := $(shell sed -n 's/^\#\# \[\([0-9][^]]*\)\].*/\1/p' CHANGELOG.md | head -1)

.PHONY: release-e2e
release-e2e:
	$(MAKE) release VERSION=$(E2E_RELEASE_VERSION) RELEASE_DIR=$(E2E_RELEASE_DIR) RELEASE_ALLOW_DIRTY=true \
		IMAGE_PLATFORMS=linux/$(shell go env GOARCH) PLUGIN_PLATFORMS=$(shell go env GOOS)/$(shell go env GOARCH)

.PHONY: generate
generate: ## regenerate deepcopy code and CRD manifests from api/
	@hack/tools/build.sh $(BIN) controller-gen
	hack/generate.sh

.PHONY: verify
verify: ## fail when generated files are stale or gofmt / go vet complain
	@hack/tools/build.sh $(BIN) controller-gen
	hack/verify.sh

.PHONY: test
test: verify test-unit test-integration test-e2e ## run every test layer

.PHONY: test-unit
test-unit: ## pure unit tests (no servers)
	hack/gotest.sh unit ./... $(GO_TEST_FLAGS)

.PHONY: test-integration
test-integration: tools-early prometheus ## tests against a real kube-apiserver + etcd (controller-runtime envtest), and promtool on the alert rules
	hack/gotest.sh integration -tags integration -run '^TestIntegration' ./... $(GO_TEST_FLAGS)

.PHONY: test-e2e
test-e2e: tools-early build images release-e2e prometheus nodes ## end-to-end tests on real local clusters (apiserver, controller-manager, scheduler, KWOK; the real-node tier: kubelet, containerd, as root)
	@hack/tools/build-late.sh start $(BIN) $(E2E_LATE_TOOLS)
	hack/gotest.sh e2e -tags e2e -timeout $(E2E_TIMEOUT) ./e2e $(GO_TEST_FLAGS); rc=$$?; hack/tools/build-late.sh stop $(BIN); exit $$rc

.PHONY: dev-up
dev-up: tools build ## start a local manager and $(WORKERS) workers in .local/dev
	$(BIN)/jobferry-dev up --workers $(WORKERS) --dir $(DEV_DIR)

.PHONY: dev-down
dev-down: ## stop the local environment started by dev-up or demo
	@if [ -x $(BIN)/jobferry-dev ]; then $(BIN)/jobferry-dev down --dir $(DEV_DIR); else go run ./cmd/jobferry-dev down --dir $(DEV_DIR); fi

.PHONY: demo
demo: tools build ## start a manager and two workers and run sample Jobs end to end (on real nodes as root, else on KWOK's)
	@if [ "$$(id -u)" = 0 ]; then hack/nodes.sh $(BIN) || echo "demo: could not install what real nodes need (above); the demo runs on KWOK's fake nodes"; fi
	$(BIN)/jobferry-dev demo --dir $(DEV_DIR)

.PHONY: demo-down
demo-down: dev-down ## stop what `make demo` left running

.PHONY: bench
bench: tools build ## direct submission vs jobferry vs Kueue + jobferry on fresh local clusters, CPUs split (BENCH_N=1000,5000 BENCH_WORKERS=2 BENCH_SCALE=1 BENCH_KUEUE=false; BENCH_MULTIKUEUE=1: and Kueue's MultiKueue; BENCH_KUEUE_ALONE=1: and Kueue alone on the workers, the Kueue arm's baseline; BENCH_KUEUE_QPS=50: Kueue's clientConnection; BENCH_ARM_LIMIT=15m: every arm at most that long, one that runs out reported as far as it got; BENCH_SIM=1: the manager at scale on simulated workers; BENCH_INSPECTION=1: dispatch while tenants follow logs); report in _output/bench/<time>
	$(BIN)/jobferry-dev bench

.PHONY: chaos
chaos: tools build ## Jobs of every shape through jobferry while faults drawn from a seed hit it, the recorded history checked against its promises (CHAOS_SEED=<today's date> CHAOS_SPAN=3m; a soak: CHAOS_SPAN=1h); record in _output/chaos/<time>
	$(BIN)/jobferry-dev chaos --span=$(CHAOS_SPAN) $(if $(CHAOS_SEED),--seed=$(CHAOS_SEED))

.PHONY: clean
clean: dev-down ## remove build and test output (keeps the Go caches)
	rm -rf $(BIN) $(OUT)
