"""The command line: the ``otagym`` console commands (``rollout``, ``compare``, ``sweep``, ``train``).

This package sits at the top of the dependency graph of ARCHITECTURE.md: it is the one place that uses ``otagym``
(the environment), ``baselines`` (the analytic policies and the comparisons' computations) and ``agents`` (RL
training), and nothing below imports it. :mod:`experiments.cli` is the entry point, :mod:`experiments.compare` the
``compare`` command, :mod:`experiments.sweep` the sweep engine (config, cells, record store, process pool and Ray
executors; ``compare`` runs on it) and :mod:`experiments.argtypes` the argparse value types.
"""
