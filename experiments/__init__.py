"""The command line: the ``otagym`` console commands (``rollout``, ``compare``, ``train``).

This package sits at the top of the dependency graph of ARCHITECTURE.md: it is the one place that uses ``otagym``
(the environment), ``baselines`` (the analytic policies and the comparisons' computations) and ``agents`` (RL
training), and nothing below imports it. It holds the argparse glue only: parsing, checking options, calling the
computations and printing; :mod:`experiments.cli` is the entry point, :mod:`experiments.compare` the ``compare``
command and :mod:`experiments.argtypes` the argparse value types.
"""
