"""The Hydra config tree, installed as the package ``ltr_bench.conf`` (see pyproject.toml)."""
