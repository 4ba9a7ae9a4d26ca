# gpusight: `make lab` sets up and opens JupyterLab; `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
# Debian's Chromium drives the UI tests; Playwright never downloads a browser of its own.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1
CHROMIUM ?= /usr/bin/chromium

.PHONY: lab check dev venv js test test-py test-ts test-ui test-lab test-wheel test-notebook7 lint format clean

# Root is the usual user in a GPU container, and jupyter refuses root without --allow-root.
# LAB_ARGS adds options (the lab smoke test: --no-browser, a port, no token).
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
LAB_ARGS ?=

lab: dev ## Set up everything and open JupyterLab on the examples
	$(BIN)/jupyter lab --notebook-dir=examples $(LAB_ROOT) $(LAB_ARGS)

check: dev ## Environment check in the terminal
	$(BIN)/gpusight check

# --- setup -------------------------------------------------------------------
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Build hooks off here: the extension is built by `make js` and linked by `develop`.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	HATCH_BUILD_NO_HOOKS=true $(BIN)/python -m pip install -q -e ".[test]"
	touch $@

venv: $(VENV)/.installed

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

js: venv node_modules/.installed ## Build the TypeScript and the labextension
	npm run build
	$(BIN)/jupyter labextension develop --overwrite .

dev: venv js

# --- tests -------------------------------------------------------------------
test: dev lint test-py test-ts test-lab test-wheel test-notebook7 test-ui ## Run every test

# The README's first command as the user runs it (as root in CI): `make lab` serves the example.
test-lab: dev
	$(BIN)/python scripts/check_make_lab.py

test-py: venv
	$(BIN)/python -m pytest -q

test-ts: node_modules/.installed
	npm test

# The release as users get it: sdist and wheel built from a clean copy of the tree (tracked and
# not-ignored files, no build output) with the production labextension (npm run build:prod), then
# the wheel installed into a fresh venv with JupyterLab and checked there. The development build
# in the working tree (make js) is left as it is.
RELEASE := build/release
WHEEL_VENV := build/wheel-venv

test-wheel: venv node_modules/.installed ## Release build from a clean tree, checked, installed fresh
	rm -rf dist $(RELEASE) $(WHEEL_VENV) && mkdir -p $(RELEASE)
	git ls-files -z --cached --others --exclude-standard \
	  | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C $(RELEASE)
	ln -sfn $(CURDIR)/node_modules $(RELEASE)/node_modules
	cd $(RELEASE) && npm run build:prod > build-prod.log 2>&1 || (tail -40 build-prod.log; exit 1)
	cd $(RELEASE) && $(BIN)/python -m build --no-isolation -o $(CURDIR)/dist . > build-dist.log 2>&1 \
	  || (tail -40 build-dist.log; exit 1)
	$(BIN)/python scripts/check_wheel.py dist/*.whl
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -q dist/*.whl "jupyterlab>=4.5,<5"
	$(WHEEL_VENV)/bin/python scripts/check_installed.py

ui-tests/node_modules/.installed: ui-tests/package.json ui-tests/package-lock.json
	cd ui-tests && npm ci --no-audit --no-fund
	touch $@

$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi

# The same wheel beside Notebook 7 (no JupyterLab UI) in a fresh venv: a saved report output
# draws there and the sidebar connects to a kernel (ui-tests/notebook7-smoke.mjs, Chromium).
NB7_VENV := build/notebook7-venv

test-notebook7: test-wheel ui-tests/node_modules/.installed $(CHROMIUM) ## The wheel in Notebook 7
	rm -rf $(NB7_VENV) && $(PYTHON) -m venv $(NB7_VENV)
	$(NB7_VENV)/bin/python -m pip install -q dist/*.whl "notebook>=7,<8"
	cd ui-tests && node notebook7-smoke.mjs $(CURDIR)/$(NB7_VENV)/bin/jupyter

test-ui: dev ui-tests/node_modules/.installed $(CHROMIUM)
	bash ui-tests/setup-nogs-kernel.sh
	cd ui-tests && npx tsc -p tsconfig.json  # the specs, strict
	npx eslint ui-tests/tests
	cd ui-tests && npx playwright test --workers=1

lint: venv node_modules/.installed
	$(BIN)/ruff check python_pkg benchmarks scripts
	$(BIN)/ruff format --check python_pkg benchmarks scripts
	$(BIN)/mypy
	npm run lint

format: venv node_modules/.installed
	$(BIN)/ruff format python_pkg benchmarks scripts
	$(BIN)/ruff check --fix python_pkg benchmarks scripts
	npx prettier --write .

clean:
	rm -rf lib dist build python_pkg/gpusight/labextension python_pkg/gpusight/static src/report/generated tsconfig.tsbuildinfo
