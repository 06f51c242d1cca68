# Two commands for a new user: `make setup` and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU wheel of PyTorch by default; `make setup TORCH_CONSTRAINT=` keeps a torch you installed yourself (GPU users).
TORCH_CONSTRAINT ?= -c constraints-cpu.txt

# Two pytest workers (one thread each, tests/conftest.py), whole files per worker.
PYTEST_PAR ?= -n 2 --dist loadfile

# Random test order (pytest-randomly), so that a test depending on another's leftovers shows up.
# Each `make test` draws a seed and prints it; to re-run the same order give it back:
#   make test SEED=1234567        (or: .venv/bin/python -m pytest -p randomly --randomly-seed=1234567)
# `make test SEED=last` repeats the previous run's order; `-p no:randomly` runs files in order.
ifndef SEED
SEED := $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
endif
PYTEST_ORDER = -p randomly --randomly-seed=$(SEED)
# The 15 slowest tests are listed at the end of each run, so a slow newcomer shows up.
PYTEST_SLOWEST ?= --durations=15
# Extra pytest arguments, e.g. `make test PYTEST_ARGS=tests/test_stats.py` (one file only).
PYTEST_ARGS ?=

.PHONY: setup lint test test-all test-heavy test-slow bench docs docs-screenshots results results-models results-costs results-suite results-claims results-leaderboard results-leaderboard-compute gpu-check gpu-wheels clean

setup:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install $(TORCH_CONSTRAINT) -e ".[dev,gbdt]"

# The guardrails first, so a wrong import or a type error fails fast: ruff (lint and format),
# mypy on ltr_bench, and the layering contracts (pyproject.toml [tool.importlinter]).
lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

# `make test`: everything but the heavy end-to-end runs and the slow real-data checks.
test: lint
	@echo "Using --randomly-seed=$(SEED) (re-run this order: make test SEED=$(SEED))"
	$(BIN)/python -m pytest -q $(PYTEST_PAR) $(PYTEST_ORDER) $(PYTEST_SLOWEST) $(PYTEST_ARGS)

# `make test-all` (CI, and before you push): the heavy end-to-end runs too; only `slow` left out.
test-all: lint
	@echo "Using --randomly-seed=$(SEED) (re-run this order: make test-all SEED=$(SEED))"
	$(BIN)/python -m pytest -q $(PYTEST_PAR) $(PYTEST_ORDER) $(PYTEST_SLOWEST) -m "not slow" $(PYTEST_ARGS)

# `make test-heavy`: only the heavy end-to-end runs, in random order (benchmarks/stress_suite.py --heavy).
test-heavy:
	@echo "Using --randomly-seed=$(SEED) (re-run this order: make test-heavy SEED=$(SEED))"
	$(BIN)/python -m pytest -q $(PYTEST_PAR) $(PYTEST_ORDER) -m heavy $(PYTEST_ARGS)

test-slow:
	$(BIN)/python -m pytest -q -m slow

bench:
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

# The docs site: the reference pages generated from conf/ and the code (docs/gen_reference.py),
# then a strict build (a broken link, page or snippet fails) into site/.
docs:
	$(BIN)/python docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The MLflow UI guide's and the sweeps guide's screenshots: the browser tests (need Chromium)
# write them into docs/.
docs-screenshots:
	LTR_BROWSER_SHOTS=$(CURDIR)/docs/img/mlflow $(BIN)/python -m pytest -q -m "" -p no:randomly \
	  tests/browser/test_mlflow_ui.py
	LTR_BROWSER_SHOTS=$(CURDIR)/docs/img/optuna $(BIN)/python -m pytest -q -m "" -p no:randomly \
	  tests/browser/test_optuna_dashboard.py

# The cheap results pages (seconds each; docs/results/): each command's output with its
# provenance (command, commit, machine, load, date, wall time). Needs LTR_DATA for MQ2008.
PAGE := $(BIN)/python -m ltr_bench.provenance
results:
	$(PAGE) docs/results/first-run.md --title "A first run" -- \
	  $(BIN)/ltr-bench trainer.enable_progress_bar=false
	$(PAGE) docs/results/mq2008-five-folds.md --title "DirectRanker on the five MQ2008 folds" -- \
	  $(BIN)/ltr-bench dataset=mq2008 protocol=letor_folds trainer.enable_progress_bar=false
	$(PAGE) docs/results/bench-metrics.md --title "NDCG speed" -- \
	  $(BIN)/python benchmarks/bench_metrics.py

# Minutes: every ranker fitted once on MQ2008 Fold1 and its saved model measured.
results-models:
	$(PAGE) docs/results/saved-model-size.md --title "Saved-model size per ranker" -- \
	  $(BIN)/python benchmarks/saved_model_size.py

# Minutes, on an idle machine: what a run, a trial, --help and each experiment's quick scale cost
# beyond their floors, where a real sweep job's time goes outside its run, the neural rankers'
# two step loops, and the refit with one and two workers. Needs LTR_DATA for MQ2008.
results-costs:
	$(PAGE) docs/results/fixed-costs.md --title "Fixed costs" -- \
	  $(BIN)/python benchmarks/bench_fixed_costs.py
	$(PAGE) docs/results/job-phases.md --title "A real sweep job's phases outside its run" -- \
	  $(BIN)/python benchmarks/bench_job_phases.py
	$(PAGE) docs/results/sweep-timeline.md --title "Where a tiny sweep's time goes" \
	  --intro "![The tiny sweep's processes over time](sweep-timeline.png)" -- \
	  $(BIN)/python benchmarks/bench_sweep_timeline.py --plot docs/results/sweep-timeline.png
	$(PAGE) docs/results/step-loop.md --title "The neural rankers' two step loops" -- \
	  $(BIN)/python benchmarks/bench_step_loop.py
	$(PAGE) docs/results/quick-scales.md --title "Every experiment at scale=quick" -- \
	  $(BIN)/python benchmarks/bench_quick_scales.py
	$(PAGE) docs/results/refit-workers.md --title "The refit with one and two workers" -- \
	  $(BIN)/python benchmarks/bench_refit_workers.py

# About 20 min, on an idle machine: `make test` in a fresh clone, idle and with one core kept
# busy, beside the machine's speed (LightGBM's 100-tree fit on an MSLR-WEB10K-shaped fold).
results-suite:
	$(PAGE) docs/results/suite-time.md --title "The test suite's time" -- \
	  $(BIN)/python benchmarks/bench_suite_time.py

# The data root the two pages below name ("absent from $LTR_DATA"): $LTR_DATA, else the
# checkout's sibling data, so that the pages read the same wherever they are regenerated
# (tests/experiments/test_committed_results.py compares them with the committed ones).
PAGE_DATA := LTR_DATA=$${LTR_DATA:-$(abspath ../shared/data/letor)}

# Seconds: the claims ledger judged from the committed results bundles (docs/results/bundles/),
# training nothing and reading no MLflow store; claims without a bundle read "not yet run".
results-claims:
	$(PAGE_DATA) $(BIN)/ltr-bench experiment=claims experiment.execute=false threads=1 tracking=none \
	  ++experiment.results_page=docs/results/claims.md

# Seconds: the MQ2008 leaderboard page (every model, five folds, the papers' budget) judged from
# the committed results bundles, training nothing and reading no MLflow store; a model whose part
# has no bundle yet reads "not yet run" with the command that runs it.
results-leaderboard:
	$(PAGE_DATA) $(BIN)/ltr-bench experiment=leaderboard experiment.execute=false threads=1 tracking=none \
	  ++experiment.results_page=docs/results/leaderboard-mq2008.md

# Hours per part: the leaderboard's missing parts run (PARTS=[3] for one, default every part),
# each kept as a bundle under docs/results/bundles/full/ as it finishes; then the page. Commit
# each new bundle folder and the page. Needs LTR_DATA for MQ2008 (docs/guides/leaderboard.md).
PARTS ?= null
results-leaderboard-compute:
	$(BIN)/ltr-bench experiment=leaderboard threads=1 'experiment.parts=$(PARTS)' \
	  ++experiment.results_page=docs/results/leaderboard-mq2008.md

# The GPU check (benchmarks/gpu_check.py): on a machine with a CUDA GPU, the neural rankers'
# device path measured in full (at most ~8 min on one H100) and docs/results/gpu-check.md
# written; QUICK=1 runs the same script on the CPU with small data (a few minutes; CI runs it).
# GPU_CHECK_PAGE writes the page elsewhere. On a GPU machine without a venv it runs python3.
GPU_PY := $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
GPU_CHECK_PAGE ?= docs/results/gpu-check.md
gpu-check:
	$(GPU_PY) benchmarks/gpu_check.py $(if $(QUICK),--quick) --page $(GPU_CHECK_PAGE)

# The wheels a GPU machine without a package registry needs for `make gpu-check`, fetched here
# into .whl/ (listed in .git/info/exclude; carried with the working tree).
gpu-wheels:
	$(BIN)/python benchmarks/gpu_wheels.py

clean:
	rm -rf $(VENV) multirun/*/ outputs/ mlflow.db .ltr_cache site
