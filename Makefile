# The two commands of the README. Both install what they need first.
PYTHON ?= python3

.PHONY: reproduce test lint

reproduce:  ## install, then run the quick reproduction on offline data and write the report
	scripts/install.sh
	$(PYTHON) -m gelus reproduce --quick --out runs/quick

test:  ## install with the test tools, then run the linter and the tests
	scripts/install.sh --dev
	$(PYTHON) -m ruff check src tests
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check src tests
