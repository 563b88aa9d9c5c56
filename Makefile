# The two commands of the README. Both install what they need first.
PYTHON ?= python3

.PHONY: reproduce test test-torch lint

reproduce:  ## install, then run the quick reproduction on offline data and write the report
	scripts/install.sh
	$(PYTHON) -m gelus reproduce --quick --out runs/quick

test:  ## install with the test tools, then run the linter and the tests
	scripts/install.sh --dev
	$(PYTHON) -m ruff check src tests
	$(PYTHON) -m pytest -q

# The whole suite on another torch, in its own virtual environment (.venv-torch-$(TORCH), git-ignored),
# e.g. `make test-torch TORCH=2.14.1`: torch==$(TORCH) and the dev extra, constraints.txt's other pins.
# Anything but the CPU build pinned in constraints.txt is a CUDA build here: gigabytes in the venv;
# torchvision is left for pip to match to that torch.
TORCH ?= 2.14.1
TORCH_VENV := .venv-torch-$(TORCH)

test-torch:  ## the whole suite in $(TORCH_VENV) with torch==$(TORCH) (the tests that need a GPU skip without one)
	test -x $(TORCH_VENV)/bin/python || $(PYTHON) -m venv $(TORCH_VENV)
	{ grep -v -E '^torch(vision)?==' constraints.txt || true; echo 'torch==$(TORCH)'; } > $(TORCH_VENV)/constraints.txt
	$(TORCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	    -c $(TORCH_VENV)/constraints.txt -e '.[dev]'
	$(TORCH_VENV)/bin/python -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
	$(TORCH_VENV)/bin/python -m pytest -q

lint:
	$(PYTHON) -m ruff check src tests
