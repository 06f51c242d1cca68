# Two commands for a new user: `make setup` and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU wheel of PyTorch by default; `make setup TORCH_CONSTRAINT=` keeps a torch you installed yourself (GPU users).
TORCH_CONSTRAINT ?= -c constraints-cpu.txt

# Two pytest workers (one thread each, tests/conftest.py), whole files per worker.
PYTEST_PAR ?= -n 2 --dist loadfile

.PHONY: setup lint test test-all test-slow bench clean

setup:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install $(TORCH_CONSTRAINT) -e ".[dev]"

# The guardrails first, so a wrong import or a type error fails fast: ruff (lint and format),
# mypy on ltr_bench, and the layering contracts (pyproject.toml [tool.importlinter]).
lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

# `make test`: everything but the heavy end-to-end runs and the slow real-data checks.
test: lint
	$(BIN)/python -m pytest -q $(PYTEST_PAR)

# `make test-all` (CI, and before you push): the heavy end-to-end runs too; only `slow` left out.
test-all: lint
	$(BIN)/python -m pytest -q $(PYTEST_PAR) -m "not slow"

test-slow:
	$(BIN)/python -m pytest -q -m slow

bench:
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) multirun/*/ outputs/ mlflow.db .ltr_cache
