# Two commands for a new user: `make setup` and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU wheel of PyTorch by default; `make setup TORCH_CONSTRAINT=` keeps a torch you installed yourself (GPU users).
TORCH_CONSTRAINT ?= -c constraints-cpu.txt

.PHONY: setup test test-slow bench clean

setup:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install $(TORCH_CONSTRAINT) -e ".[dev]"

# The layering contracts (pyproject.toml [tool.importlinter]) first: a wrong import fails fast.
test:
	$(BIN)/lint-imports --no-logo
	$(BIN)/python -m pytest -q

test-slow:
	$(BIN)/python -m pytest -q -m slow

bench:
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) multirun/*/ outputs/ mlflow.db .ltr_cache
