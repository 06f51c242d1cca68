"""The console commands and what only they use: ``ltr-bench`` (:mod:`~ltr_bench.cli.main`), its
fast ``--help`` (:mod:`~ltr_bench.cli.help`), the refits of a finished sweep
(:mod:`~ltr_bench.cli.refits`), ``ltr-bench-predict`` (:mod:`~ltr_bench.cli.predict`),
``ltr-bench-report`` (:mod:`~ltr_bench.cli.report`), the
hint for a search space given without its model (:mod:`~ltr_bench.cli.search_model_hint`) and a
command's garbage-collection policy (:mod:`~ltr_bench.cli.gc_policy`). Nothing else imports this
package (import-linter's contracts); an experiment runs a command in its own process through
:mod:`ltr_bench.experiments.command_in_process`."""
