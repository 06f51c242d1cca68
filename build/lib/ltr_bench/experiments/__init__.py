"""The papers' tables and figures as runnable experiments (``ltr-bench experiment=<name>``).

One module per experiment family (drivers named by ``conf/experiment/*.yaml``'s ``_target_``):
``synthetic_sensitivity`` (ECML Fig. 2 / journal Fig. 4 and Fig. 5), ``neighbours`` (ECML Fig. 3 /
journal Fig. 6 and the Sect. 5.3 classification), ``letor_tables`` (Tables 1-3 through the real
CLI); ``common`` holds what they share and ``subsets`` the Sect. 4.5 evaluation.
"""

from __future__ import annotations

from ltr_bench.experiments.common import run_experiment

__all__ = ["run_experiment"]
