"""Tables and figures built from tracked MLflow runs (``ltr-bench-report``).

- :mod:`.collect`: fold runs of an experiment -> tidy DataFrame (``collect_fold_runs``).
- :mod:`.tables`: Table 1 / Table 3 layouts rendered as Markdown, CSV and LaTeX.
- :mod:`.significance`: corrected t-tests and Friedman/Nemenyi per dataset and metric.
- :mod:`.plots`: p-value heatmaps and critical-difference diagrams (PNG).
- :mod:`.build`: writes the whole report folder; its console script is :mod:`ltr_bench.cli.report`.

Submodules are imported on demand so that ``ltr-bench-report --help`` stays fast.
"""
