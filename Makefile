# Every target builds the virtualenv it needs from nothing (python3 and make suffice).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all test lint demo bench bench-spark soak clean

all: test

$(STAMP): setup.cfg setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,dev,spark,connect,websocket]'
	touch $(STAMP)

## make test: lint, type-check, then the whole suite against real nats-server processes.
test: lint
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check jsclient tests benchmarks examples
	$(PY) -m mypy

## make soak: the fault suite run long and hard (leader kills, restarts, churn, a 10-minute soak).
soak: $(STAMP)
	JSCLIENT_SOAK=1 $(PY) -m pytest tests/test_faults.py tests/test_resilience.py -o timeout=1800

## make demo: the main job on an embedded nats-server.
demo: $(STAMP)
	$(PY) examples/demo.py

## make bench: jsclient beside nats-py, pynats2 and a raw-socket bound, in one run.
bench: $(STAMP)
	$(PY) -m benchmarks

## make bench-spark: the jetstream data source against single-process baselines.
bench-spark: $(STAMP)
	$(PY) -m benchmarks.spark_bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
