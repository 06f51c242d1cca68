"""Run facts about the machine: its hardware and package versions (:mod:`~ltr_bench.machine.facts`,
recorded with every run and results page), the accelerators a run may ask for
(:mod:`~ltr_bench.machine.accelerators`) and MLflow's system metrics of a run
(:mod:`~ltr_bench.machine.system_metrics`)."""
