# clusterctl task runner; CI (.ci/run) calls `make test` and nothing ad hoc.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SPEC ?= examples/local.yaml
LAB_SPEC ?= examples/baremetal-lab.yaml
# clusterctl's own collection (collections/: clusterctl.node) first, then the extracted ones.
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/collections:$(CURDIR)/.ansible-collections
PYTEST := $(BIN)/python -m pytest

.PHONY: help setup docker tools venv collections up down status lint fmt unit golden integration molecule e2e test bench \
	lab lab-down lab-tools lab-test

help:
	@echo "make up       bring up $(SPEC) on local Docker (installs Docker, image, venv when missing)"
	@echo "make test     lint + unit + golden + CLI + stacks + integration + Molecule + end-to-end"
	@echo "make down     destroy the local example cluster"
	@echo "make lab      the bare-metal lab: $(LAB_SPEC) on VMs behind emulated BMCs, PXE-booted (make lab-down)"
	@echo "make lab-test the bare-metal lab's end-to-end tests (alone: slow under TCG)"
	@echo "make lint | unit | golden | integration | molecule [ROLE=x] | e2e | bench"

docker:
	bash scripts/docker-bootstrap.sh

tools:
	bash scripts/host-tools.sh

$(BIN)/clusterctl: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,cloud]'
	touch $@

venv: $(BIN)/clusterctl

collections: venv
	PYTHON=$(BIN)/python bash scripts/ansible-collections.sh

setup: docker tools venv collections

up: setup
	$(BIN)/clusterctl up $(SPEC) --yes

status: venv
	$(BIN)/clusterctl status $(SPEC)

down: venv
	$(BIN)/clusterctl down $(SPEC) --yes

lint: venv collections
	$(BIN)/ruff check cli tests stacks benchmarks collections lab
	$(BIN)/ruff format --check cli tests stacks benchmarks collections lab
	$(BIN)/mypy
	$(BIN)/yamllint -s roles examples .config inventory
	cd roles && ../$(BIN)/ansible-lint --profile production --offline

fmt: venv
	$(BIN)/ruff format cli tests stacks benchmarks collections lab
	$(BIN)/ruff check --fix cli tests stacks benchmarks collections lab

# Pure Python, no shared state: one worker per core.
unit: venv
	$(PYTEST) -q -n auto tests/unit tests/golden tests/cli tests/stacks tests/conformance tests/security

golden: venv
	$(PYTEST) -q tests/golden --update-golden

integration: setup
	$(PYTEST) -q --durations=10 tests/integration

molecule: setup
	bash scripts/molecule-all.sh $(ROLE)

# The burst module in a second pytest process beside the others (scripts/e2e.sh says why that is safe).
e2e: setup
	bash scripts/e2e.sh

# The bare-metal lab (lab/): the venv gets libvirt's binding, built against this host's libvirt.
lab-tools: tools venv
	$(BIN)/python -c 'import libvirt' 2>/dev/null || \
		$(BIN)/pip install -q "libvirt-python==$$(pkg-config --modversion libvirt)"

lab: setup lab-tools
	$(BIN)/python -m lab up $(LAB_SPEC)

lab-down: venv
	$(BIN)/python -m lab down $(LAB_SPEC)

# The bare-metal lab's end-to-end module, alone: under qemu's TCG its bring-up takes both cores for
# 25 minutes, more than CI's budget has beside the rest (README, "Bare metal").
lab-test: setup lab-tools
	$(PYTEST) -q -p no:cacheprovider --durations=10 tests/e2e/test_baremetal_lab.py

# The README's test command: everything, failing loudly at the first broken step, with each
# phase's time at the end.
test:
	bash scripts/run-phases.sh setup lint+unit molecule+integration+e2e

bench: setup
	$(BIN)/python benchmarks/render_scale.py
