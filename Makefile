# muster: see README.md. Every target works from a fresh clone with only a Go
# toolchain; `make tools` builds the control plane the tests run against.
SHELL := /usr/bin/env bash
comma := ,
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
# The Kubernetes release go.mod pins (through its replace of k8s.io/kubernetes).
KUBE_VERSION := $(shell go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/kubernetes)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
LDFLAGS := -X github.com/muster-dev/muster/pkg/version.Version=$(VERSION) \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)
# The integration tests and the demo find their binaries here.
export MUSTER_BIN_DIR := $(BIN)

# Binaries of the control plane, from the module in hack/tools.
TOOLS := \
	etcd=go.etcd.io/etcd/server/v3 \
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
	kubectl=k8s.io/kubernetes/cmd/kubectl \
	kwok=sigs.k8s.io/kwok/cmd/kwok \
	kubelet=k8s.io/kubernetes/cmd/kubelet \
	kube-proxy=k8s.io/kubernetes/cmd/kube-proxy \
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
	containerd=github.com/containerd/containerd/v2/cmd/containerd@containerd \
	containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@containerd \
	ctr=github.com/containerd/containerd/v2/cmd/ctr@containerd

# The next Kubernetes release's control plane, hack/tools/kube-next's pin,
# built with the Go release it needs (go.mod's toolchain, through the module
# proxy), to run muster as built against it: version skew.
KUBE_NEXT_VERSION := $(shell awk '$$1 == "require" && $$2 == "k8s.io/kubernetes" {print $$3}' hack/tools/kube-next/go.mod)
KUBE_NEXT_GO := $(shell awk '$$1 == "toolchain" {print $$2}' hack/tools/kube-next/go.mod)

# What real nodes (muster-local up --real-nodes) run from Debian's packages:
# the OCI runtime, the CNI plugins (bridge, host-local, portmap, loopback),
# kube-proxy's iptables and conntrack, and mmdebstrap, which builds the
# example workloads' images from Debian's packages.
REAL_NODE_PACKAGES := runc containernetworking-plugins iptables conntrack mmdebstrap

.PHONY: build
build: ## Build muster-scheduler, muster-controller, muster-local and kubectl-muster (the kubectl plugin) into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/muster-scheduler ./cmd/scheduler
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/muster-controller ./cmd/controller
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/muster-local ./cmd/muster-local
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-muster ./cmd/kubectl-muster

.PHONY: krew-archives
krew-archives: ## Build the kubectl-muster archives .krew.yaml names, for linux and darwin, amd64 and arm64, into _output/krew/.
	@mkdir -p _output/krew
	@for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do \
		os=$${platform%/*}; arch=$${platform#*/}; dir=$$(mktemp -d); \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags "$(LDFLAGS)" -o $$dir/kubectl-muster ./cmd/kubectl-muster; \
		tar -C $$dir -czf _output/krew/kubectl-muster_$(VERSION)_$${os}_$${arch}.tar.gz .; rm -rf $$dir; \
		echo "_output/krew/kubectl-muster_$(VERSION)_$${os}_$${arch}.tar.gz"; \
	done

# Operators the integration tests run as their users do, each pinned
# exactly: NAME MODULE@VERSION PACKAGE CRD_FILES [WEBHOOK_FILE].
TRAINING_OPERATOR := training-operator github.com/kubeflow/training-operator@v1.9.4 ./cmd/training-operator.v1 \
	'manifests/base/crds/*.yaml' manifests/base/webhook/manifests.yaml
MPI_OPERATOR := mpi-operator github.com/kubeflow/mpi-operator@v0.8.0 ./cmd/mpi-operator manifests/base/kubeflow.org_mpijobs.yaml
JOBSET := jobset sigs.k8s.io/jobset@v0.12.0 . config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml \
	config/components/webhook/manifests.yaml
TRAINER := trainer github.com/kubeflow/trainer/v2@v2.3.0 ./cmd/trainer-controller-manager \
	'manifests/base/crds/*.yaml' manifests/base/webhook/manifests.yaml
KUEUE := kueue sigs.k8s.io/kueue@v0.17.1 ./cmd/kueue 'config/components/crd/bases/*.yaml' \
	config/components/webhook/manifests.yaml

.PHONY: tools
tools: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, kubelet, kube-proxy, containerd, training-operator, mpi-operator, jobset, trainer and kueue into bin/, and install what real nodes need from Debian (skipped when current).
	@for tool in $(TOOLS); do package=$${tool#*=}; module=; \
		if [[ $$package == *@* ]]; then module=$${package#*@}; package=$${package%@*}; fi; \
		hack/build-tool.sh "$${tool%%=*}" "$$package" $$module; done
	@hack/install-packages.sh $(REAL_NODE_PACKAGES)
	@hack/build-operator.sh $(TRAINING_OPERATOR)
	@hack/build-operator.sh $(MPI_OPERATOR)
	@hack/build-operator.sh $(JOBSET)
	@hack/build-operator.sh $(TRAINER)
	@hack/build-operator.sh $(KUEUE)

.PHONY: test
test: tools build images example-images conformance-deps ## Unit, integration and conformance tests, against a real control plane; the Helm chart's tests, in their own module.
	go test -count=1 -timeout 30m ./...
	cd charts && go test -count=1 ./...

.PHONY: control-plane-next
control-plane-next: ## Build kube-apiserver and kube-controller-manager of the next Kubernetes release (hack/tools/kube-next) into bin/control-plane/VERSION/, with the Go release it needs (skipped when current).
	@for tool in kube-apiserver kube-controller-manager; do \
		GOTOOLCHAIN=$(KUBE_NEXT_GO) hack/build-tool.sh control-plane/$(KUBE_NEXT_VERSION)/$$tool k8s.io/kubernetes/cmd/$$tool kube-next || exit 1; done

.PHONY: test-skew
test-skew: tools build images example-images conformance-deps control-plane-next ## The integration and conformance tests against the next release's control plane (KUBE_NEXT_VERSION: its kube-apiserver and kube-controller-manager), muster as built.
	MUSTER_KUBE_VERSION=$(KUBE_NEXT_VERSION) go test -count=1 -timeout 40m ./test/integration/... ./test/conformance/...

.PHONY: unit
unit: ## Unit tests only: no control plane.
	go test -count=1 $$(go list ./... | grep -v /test/)

.PHONY: demo
demo: tools build images example-images ## Start a local cluster, schedule example pods with muster-scheduler, show where they went.
	KEEP=$(KEEP) hack/demo.sh

.PHONY: lint
lint: ## go vet and gofmt.
	go vet ./...
	cd charts && go vet ./...
	go vet -tags bench ./test/perf ./test/perf/elastic ./test/perf/preemption ./test/perf/cost ./test/perf/fragmentation ./test/perf/kueue ./test/integration/multikueue
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [[ -n $$unformatted ]]; then echo "gofmt wants to rewrite:"; echo "$$unformatted"; exit 1; fi

.PHONY: crds
crds: ## Refresh manifests/crds from the scheduler-plugins module that go.mod pins.
	cp "$$(go list -m -f '{{.Dir}}' sigs.k8s.io/scheduler-plugins)/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" manifests/crds/
	chmod 644 manifests/crds/*.yaml

# What test/conformance starts: the real consumers of muster's contracts,
# from Debian's packages.
CONFORMANCE_PACKAGES := python3-torch openmpi-bin mpich openssh-server

.PHONY: conformance-deps
conformance-deps: ## Install torchrun, OpenMPI, MPICH and sshd from Debian's packages (skipped when present).
	@hack/install-packages.sh $(CONFORMANCE_PACKAGES)

# The benchmarks' baseline: scheduler-plugins' last release, built in its
# own module and run as a scheduler of its own (it cannot be linked into a
# 1.37 scheduler), with the Kubernetes patch release the proxy serves.
SCHEDULER_PLUGINS := sigs.k8s.io/scheduler-plugins@v0.34.7 v1.34.4

.PHONY: bench-tools
bench-tools: ## Build bin/scheduler-plugins, Coscheduling's scheduler, for make bench (skipped when current).
	@hack/build-scheduler-plugins.sh $(SCHEDULER_PLUGINS)

BENCH_FRAGMENTATION = BENCH_FRAGMENTATION_DOC=$(CURDIR)/docs/benchmarks-fragmentation.md go test -tags bench -run '^$$' -bench BenchmarkFragmentation -benchtime 1x -timeout 120m ./test/perf/fragmentation

.PHONY: bench
bench: tools build bench-tools ## Benchmarks: default, Coscheduling and muster side by side, then upstream's own gang benchmarks, the in-tree profile (in the harness and as kube-scheduler's own process) against muster, writing docs/benchmarks.md (BENCH_ROUNDS, BENCH_LABELS, BENCH_CASES, BENCH_UPSTREAM, BENCH_DOC, BENCH_FINDINGS, BENCH_TITLE); then the fragmentation benchmark (bench-fragmentation).
	hack/bench.sh
	$(BENCH_FRAGMENTATION)

.PHONY: bench-quick
bench-quick: tools build bench-tools ## A reduced benchmark run, one round of small workloads, for development.
	BENCH_ROUNDS=1 BENCH_LABELS=quick hack/bench.sh

.PHONY: bench-elastic
bench-elastic: tools build ## Elastic groups against the same jobs rigid at min and at max, on the real control plane, BENCH_ELASTIC_ROUNDS (3) rounds of about 4 min; writes docs/elastic-benchmark.md.
	BENCH_ELASTIC_DOC=$(CURDIR)/docs/elastic-benchmark.md go test -tags bench -run '^$$' -bench BenchmarkElasticSharing -benchtime 1x -timeout 30m ./test/perf/elastic

.PHONY: bench-cost
bench-cost: tools build ## What muster-controller and muster-scheduler cost the API server and the machine at 100, 1,000 and 5,000 simulated nodes, or BENCH_COST_SIZES; writes docs/benchmarks-cost.md.
	BENCH_COST_SIZES="$(BENCH_COST_SIZES)" BENCH_COST_DOC=$(CURDIR)/docs/benchmarks-cost.md go test -tags bench -run '^$$' -bench BenchmarkCost -benchtime 1x -timeout 60m ./test/perf/cost

.PHONY: bench-fragmentation
bench-fragmentation: tools build ## Gangs that must stay in one rack, arriving and finishing on 64 racks of 8 nodes: muster, in-tree TAS and muster unconstrained, BENCH_FRAGMENTATION_ROUNDS (3) rounds of about 20 min; writes docs/benchmarks-fragmentation.md.
	$(BENCH_FRAGMENTATION)

.PHONY: bench-preemption
bench-preemption: tools build ## muster's gang-aware preemption against DefaultPreemption, two profiles of one muster-scheduler on the real control plane (about a minute); writes docs/preemption-benchmark.md.
	BENCH_PREEMPTION_DOC=$(CURDIR)/docs/preemption-benchmark.md go test -tags bench -run '^$$' -bench BenchmarkPreemption -benchtime 1x -timeout 30m ./test/perf/preemption

.PHONY: bench-kueue
bench-kueue: tools build ## Kueue in front of muster against Kueue in front of the default scheduler: BENCH_KUEUE_JOBS (200) Jobs of 8 to 64 pods on BENCH_KUEUE_NODES (1,000) nodes, two ClusterQueues that borrow, BENCH_KUEUE_ROUNDS (3) rounds; draws each round's p50 and p99 in docs/benchmarks-kueue-bound.svg; see docs/benchmarks-kueue.md.
	BENCH_KUEUE_FIGURE=$(CURDIR)/docs/benchmarks-kueue-bound.svg go test -tags bench -run '^$$' -bench BenchmarkKueueAdmissionAndScheduling -benchtime 1x -timeout 3h ./test/perf/kueue

.PHONY: bench-multikueue
bench-multikueue: tools build ## MultiKueue: jobs per minute through one manager dispatching to two muster workers against one (one round); see docs/kueue.md.
	go test -tags bench -run '^$$' -bench BenchmarkMultiKueueJobsPerMinute -benchtime 1x -timeout 30m ./test/integration/multikueue

# The images: OCI image archives built with the Go toolchain alone (see
# hack/images). IMAGE_PLATFORMS of more than one makes an image index.
IMAGE_PLATFORMS ?= linux/amd64
export MUSTER_IMAGES_DIR := $(CURDIR)/_output/images

.PHONY: example-images
example-images: ## Build the real-node examples' images (OpenMPI, mpi4py and sshd; PyTorch; Python) from Debian's packages with mmdebstrap into _output/images/examples/, cached by recipe outside the clone.
	@hack/example-images.sh $(MUSTER_IMAGES_DIR)/examples

.PHONY: images
images: ## Build the muster-scheduler and muster-controller images as OCI archives in _output/images/, no container engine needed (IMAGE_PLATFORMS).
	@for platform in $(subst $(comma), ,$(IMAGE_PLATFORMS)); do \
		for program in scheduler controller; do \
			CGO_ENABLED=0 GOOS=$${platform%/*} GOARCH=$${platform#*/} go build -trimpath -buildvcs=false -ldflags "-s -w $(LDFLAGS)" \
				-o $(MUSTER_IMAGES_DIR)/bin/$${platform%/*}_$${platform#*/}/muster-$$program ./cmd/$$program; \
		done; \
	done
	go run ./hack/images -bin-dir $(MUSTER_IMAGES_DIR)/bin -out $(MUSTER_IMAGES_DIR) -version $(VERSION) \
		-kube-version $(KUBE_VERSION) -platforms $(IMAGE_PLATFORMS) muster-scheduler muster-controller
	@# What real nodes run beside muster: every pod's sandbox, and CoreDNS.
	@platform=linux/amd64; dir=$(MUSTER_IMAGES_DIR)/bin/$${platform%/*}_$${platform#*/}; \
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o $$dir/muster-pause ./hack/pause; \
	CGO_ENABLED=0 go build -C hack/tools/coredns -trimpath -buildvcs=false -ldflags "-s -w" -o $$dir/coredns .
	go run ./hack/images -bin-dir $(MUSTER_IMAGES_DIR)/bin -out $(MUSTER_IMAGES_DIR) -version 1 \
		-kube-version $(KUBE_VERSION) -platforms linux/amd64 muster-pause
	go run ./hack/images -bin-dir $(MUSTER_IMAGES_DIR)/bin -out $(MUSTER_IMAGES_DIR) \
		-version $$(go list -C hack/tools/coredns -m -f '{{.Version}}' github.com/coredns/coredns) \
		-kube-version $(KUBE_VERSION) -platforms linux/amd64 coredns

.PHONY: rbac-mutations
rbac-mutations: tools build ## Remove each RBAC rule in turn and show the test that proves it fails without it (about 45 minutes).
	hack/rbac-mutations.sh

.PHONY: clean
clean: ## Remove bin/ and _output/.
	rm -rf $(BIN) _output

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'
