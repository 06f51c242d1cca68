"""The config layer in code: where the ``conf/`` tree is and what it composes by default
(:mod:`~ltr_bench.config.tree`), config values as Python objects and options parsed once
(:mod:`~ltr_bench.config.util`), and the comments of ``conf/`` read for the generated reference
(:mod:`~ltr_bench.config.docs`). Choices live in ``conf/``; this package holds no default."""
