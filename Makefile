# builder: the targets a newcomer would guess. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PRESETS = $(shell $(BIN)/python -c "from builder.spec.presets import preset_names; print(' '.join(preset_names()))")

.DEFAULT_GOAL := help
.PHONY: help install tools engine conformance demo docs test test-unit test-integration test-site lint render bench clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-17s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# builder and what it needs to run, nothing more: what make demo waits for
$(BIN)/builder: pyproject.toml | $(BIN)/python
	@echo "== installing builder and its dependencies into $(VENV) (make install adds the dev tools)"
	$(BIN)/pip install --disable-pip-version-check -e .
	@touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	@touch $@ $(BIN)/builder

install: $(VENV)/.dev ## make .venv and install builder with dev, test and bench extras

tools: ## install the real tools the tests use (sshd, ssh, shellcheck)
	scripts/ensure-tools.sh

# The real consumers of our outputs, in the venv: DeepSpeed's launcher parsers
# (and the CPU torch it imports). torch first, pinned to the wheelhouse's CPU
# build: left to DeepSpeed's requirements, pip would take the multi-GB CUDA one.
TORCH_CPU = torch==2.13.0+cpu
DEEPSPEED = deepspeed==0.19.8
# DistributedRunner, what gaudi_spawn.py runs; only its launcher module is loaded (no deps)
OPTIMUM_HABANA = optimum==2.0.0 optimum-habana==1.20.0
WHEELHOUSE ?= $(HOME)/.cache/builder-tests/wheels

$(VENV)/.conformance: $(VENV)/.dev Makefile
	PYTHON=$(BIN)/python scripts/wheelhouse.sh $(WHEELHOUSE)
	$(BIN)/pip install --quiet --find-links $(WHEELHOUSE) "$(TORCH_CPU)" setuptools wheel
	DS_BUILD_OPS=0 $(BIN)/pip install --quiet --no-build-isolation "$(DEEPSPEED)"
	$(BIN)/pip install --quiet --no-deps --target $(VENV)/optimum-habana $(OPTIMUM_HABANA)
	@touch $@

conformance: $(VENV)/.conformance ## DeepSpeed and the CPU torch in the venv (conformance tests)

engine: ## a running Docker engine, arm64 emulation, the local test base image and the CPU torch wheelhouse
	scripts/engine.sh
	scripts/emulation.sh arm64
	scripts/base-image.sh
	PYTHON=$(BIN)/python scripts/wheelhouse.sh

# Needs only builder itself (seconds on a fresh clone), not make install's dev tools.
# The bundle's warning that launch.socket_ifname is unset is right: node1 and node2
# are placeholders whose interface no one knows; the last lines say where to set it.
demo: $(BIN)/builder ## render the default preset (cuda-deepspeed) and its launch files into build/demo
	$(BIN)/builder render --preset cuda-deepspeed -o build/demo --force
	$(BIN)/builder bundle --preset cuda-deepspeed -o build/demo/cluster --force
	@echo
	@echo "build/demo: the Dockerfile, rootfs/ and the two .def files; build/demo/cluster: keys,"
	@echo "hostfile, .deepspeed_env, launch.sh, plan.json and a README saying how to start the run."
	@echo "The socket_ifname warning is the demo's: its nodes (node1, node2) are placeholders."
	@echo
	@echo "Next, for a real cluster (each command's --help says more):"
	@echo "  . $(BIN)/activate"
	@echo "  builder init --preset cuda-deepspeed -o stack.yaml"
	@echo "      # edit stack.yaml: image.name (your registry), launch.nodes, launch.slots,"
	@echo "      # launch.socket_ifname (ip -br addr on a node), launch.code, launch.cache"
	@echo "  builder build stack.yaml"
	@echo "  builder push stack.yaml              # or, without a registry: builder ship stack.yaml"
	@echo "  builder bundle stack.yaml -o cluster # then put cluster/ at this same path on every node"
	@echo "  builder preflight stack.yaml --cluster-dir cluster"
	@echo "  sh cluster/launch.sh NODE            # on each node, then on the first: sh cluster/launch.sh launch"

# The docs extra: MkDocs and its theme, beside builder (whose CLI and schema the site shows)
$(VENV)/.docs: pyproject.toml | $(BIN)/builder
	$(BIN)/pip install --disable-pip-version-check -e '.[docs]'
	@touch $@

docs: $(VENV)/.docs ## build the documentation site into build/site (warnings are errors)
	$(BIN)/mkdocs build --strict --site-dir build/site

test: install tools engine conformance ## run every test (the integration tests build real images)
	$(BIN)/pytest --durations=25

test-unit: install ## run the tests that need no engine
	$(BIN)/pytest tests/unit

test-integration: install tools engine ## run the tests against a real Docker engine
	$(BIN)/pytest tests/integration

test-site: install tools engine conformance ## pyxis and enroot for real: needs BUILDER_NODE_IMAGE and enroot here
	BUILDER_REQUIRE_REAL=1 $(BIN)/pytest -m site tests/integration/test_pyxis.py

lint: install ## ruff, ruff format, mypy --strict, and builder lint on every preset
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	@for p in $(PRESETS); do echo "== builder lint --preset $$p"; $(BIN)/builder lint --preset $$p || exit 1; done

render: install ## regenerate dockerfiles/ and apptainer/ from the presets (review the diff)
	rm -rf dockerfiles/* apptainer/*
	@for p in $(PRESETS); do \
	  $(BIN)/builder render --preset $$p -f docker -o dockerfiles/$$p --force 2>/dev/null && \
	  $(BIN)/builder render --preset $$p -f apptainer -o apptainer/$$p --force 2>/dev/null || exit 1; \
	done
	@echo "rendered: $(PRESETS)"

bench: install ## print the benchmark figures (bench/)
	@for b in bench/[!_]*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean: ## remove the venv, build outputs and caches
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
