# kvright: one entry point for people and CI. `make demo` and `make test` are all a newcomer needs.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
export KVRIGHT_TOOLS_DIR ?= $(HOME)/.cache/kvright/tools
export KVRIGHT_CLUSTER_DIR ?= $(HOME)/.cache/kvright/cluster

.PHONY: help
help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.PHONY: venv
venv: $(BIN)/.installed ## create .venv with kvright and its test tools

.PHONY: lint
lint: venv ## ruff
	$(BIN)/ruff check capacity kvright kvright_dev tests bench

.PHONY: typecheck
typecheck: venv ## mypy --strict on both packages
	$(BIN)/mypy

.PHONY: contracts
contracts: venv ## import-layer contract: capacity stays pure
	$(BIN)/lint-imports

.PHONY: tools
tools: ## build the pinned control-plane binaries into $(KVRIGHT_TOOLS_DIR) (cached)
	bash deploy/cluster.sh build

.PHONY: cluster-up
cluster-up: tools ## start etcd, kube-apiserver, controller-manager, scheduler and kwok GPU nodes on loopback
	bash deploy/cluster.sh up

.PHONY: cluster-down
cluster-down: ## stop everything cluster-up started (idempotent)
	bash deploy/cluster.sh down

.PHONY: cluster-env
cluster-env: ## print the export line for the local cluster's kubeconfig
	@bash deploy/cluster.sh env

.PHONY: test-unit
test-unit: venv ## pure tests only (no servers)
	$(BIN)/pytest -q tests/unit

.PHONY: vllm-env
vllm-env: ## create or reuse the cached vLLM CPU venv the conformance tests drive (not .venv)
	bash deploy/vllm-env.sh

.PHONY: test-conformance
test-conformance: venv vllm-env ## the real-vLLM conformance suite alone
	$(BIN)/pytest -q -m conformance tests/conformance

.PHONY: test
test: venv lint typecheck contracts tools vllm-env ## everything: lint, types, contracts, unit, cluster, e2e and conformance tests
	PYTEST=$(BIN)/pytest bash deploy/run-tests.sh

.PHONY: crd
crd: venv ## write crds/llmdeployment.yaml and the chart's copy from the models in kvright/api.py
	$(BIN)/python -m kvright.crdgen crds/llmdeployment.yaml charts/kvright/files/crds/llmdeployment.yaml

.PHONY: chart-sync
chart-sync: venv crd ## regenerate the chart's CRD copy (make crd) and its Grafana dashboards
	$(BIN)/python -m kvright.dashboards charts/kvright/files/dashboards

.PHONY: chart-install
chart-install: tools ## helm upgrade --install charts/kvright into the local control plane (after cluster-up)
	$(KVRIGHT_TOOLS_DIR)/helm --kubeconfig $(KVRIGHT_CLUSTER_DIR)/kubeconfig upgrade --install kvright \
	  charts/kvright --namespace kvright-system --create-namespace --take-ownership $(HELM_ARGS)

CONTAINER ?= docker
IMAGE ?= ghcr.io/kvright/kvright:$(shell sed -n 's/^appVersion: "\(.*\)"$$/\1/p' charts/kvright/Chart.yaml)

.PHONY: image
image: ## build the operator image the chart installs (IMAGE=..., CONTAINER=podman); needs a container engine
	$(CONTAINER) build -t $(IMAGE) .

.PHONY: bench
bench: venv ## benchmarks; results are ratios measured side by side (planner, control loop)
	$(BIN)/python -m bench
	$(BIN)/python -m bench.control_loop

.PHONY: bench-operator
bench-operator: venv tools ## 1,000 LLMDeployments in a burst and paced vs the raw API floor, then a 20-minute soak (~35 min; its own control plane unless KUBECONFIG is set)
	$(BIN)/python -m bench --operator --count 1000 --rate 10 --soak-seconds 1200

.PHONY: demo
demo: venv tools ## the main job: plan offline; kvright installed with Helm on the local control plane; the samples; the feedback loop acting
	$(BIN)/kvright plan llama-3.1-70b --gpu h100-sxm --max-model-len 8192 --tpot-ms 50 --concurrency 64
	bash deploy/cluster.sh up
	$(MAKE) --no-print-directory chart-install HELM_ARGS="--set replicaCount=0 --wait"
	$(BIN)/python -m kvright_dev.demo
	$(BIN)/python -m kvright_dev.sim.demo
