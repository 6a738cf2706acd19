# The two commands of the README. Both set everything up on a fresh machine.
#   make demo   set up, then run the main job: ResNet-50, all directions, verified
#   make test   set up, then run the whole test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_N ?= 1

.PHONY: demo test setup clean

setup: $(STAMP)

$(STAMP): core/pyproject.toml $(wildcard plugins/*/pyproject.toml) tools/install-system-pocl.sh
	@tools/install-system-pocl.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e "core[pocl,onnx,test]" $(foreach p,$(wildcard plugins/*/pyproject.toml),-e $(dir $(p)))
	@touch $(STAMP)

demo: setup
	$(BIN)/wticonv solvers
	$(BIN)/wticonv bench resnet50 -n $(DEMO_N)

test: setup
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache
