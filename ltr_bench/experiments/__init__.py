"""The papers' tables and figures as runnable experiments (``ltr-bench experiment=<name>``).

One module per experiment family (drivers named by ``conf/experiment/*.yaml``'s ``_target_``):
``synthetic_sensitivity`` (ECML Fig. 2 / journal Fig. 4 and Fig. 5), ``neighbours`` (ECML Fig. 3 /
journal Fig. 6 and the Sect. 5.3 classification), ``letor_tables`` (Tables 2 and 3) and
``table1_sweeps`` (Table 1) through the real CLI; ``common`` holds what they share,
``run_configs`` composes their runs' configs, ``results_key`` and ``fingerprints`` say what
decides their results, and ``subsets`` is the Sect. 4.5 evaluation.
"""

from __future__ import annotations

from ltr_bench.experiments.common import run_experiment

__all__ = ["run_experiment"]
