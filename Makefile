# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Both create/reuse .venv from the pinned lock (requirements/lock.txt, no resolver) and the project (editable).
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.linkedqa-installed
export LINKEDQA_HOME ?= $(CURDIR)/warehouse
export PYTHONUNBUFFERED := 1

.PHONY: venv demo test lint bench report serve clean-warehouse help

help:
	@echo "make demo   - build the sample KB, prepare the embedded model, run ELA on 50 WebQSP-EL questions, print metrics"
	@echo "make test   - the full test suite (real data, real engines; no GPU)"
	@echo "make bench  - speed benchmarks (tests/bench), printing ratios against in-run baselines"
	@echo "make lint   - ruff"

venv: $(STAMP)

$(STAMP): pyproject.toml requirements/lock.txt
	@start=$$(date +%s); \
	test -x $(BIN)/python || $(PY) -m venv $(VENV); \
	$(BIN)/python -m pip install -q --disable-pip-version-check -U pip==26.3 2>&1 | grep -v "is ignored" || true; \
	$(BIN)/python -m pip install -q --no-deps -r requirements/lock.txt 2>&1 | grep -v "is ignored"; \
	test $${PIPESTATUS[0]} -eq 0 || { echo "pip install of requirements/lock.txt failed" >&2; exit 1; }; \
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec triton >/dev/null 2>&1 || true; \
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v "is ignored"; \
	test $${PIPESTATUS[0]} -eq 0 || { echo "pip install -e . failed" >&2; exit 1; }; \
	touch $(STAMP); \
	echo "venv ready in $$(( $$(date +%s) - start )) s, size $$(du -sh $(VENV) | cut -f1)"

demo: $(STAMP)
	$(BIN)/linkedqa demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q tests

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/linkedqa kb build --sample
	$(BIN)/python -m tests.bench.run_all

report: $(STAMP)
	$(BIN)/linkedqa report
	$(BIN)/linkedqa report --notebooks

clean-warehouse:
	rm -rf warehouse
