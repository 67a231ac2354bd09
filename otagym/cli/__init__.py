"""The command line: the ``otagym`` console commands (``rollout``, ``compare``, ``evaluate``, ``sweep``, ``train``).

This package sits at the top of the dependency graph of ARCHITECTURE.md: it is the one place that uses ``otagym``
(the environment), ``baselines`` (the analytic policies and the comparisons' computations) and ``agents`` (RL
training), and nothing below imports it (the rest of ``otagym`` included). :mod:`otagym.cli.commands` is the entry
point (:func:`main`, also ``python -m otagym.cli``), :mod:`otagym.cli.compare` the ``compare`` command,
:mod:`otagym.cli.evaluate` the ``evaluate`` command, :mod:`otagym.cli.sweep` the sweep engine (config, cells, record
store, process pool and Ray executors; ``compare`` runs on it) and :mod:`otagym.cli.argtypes` the argparse value types.
"""

from otagym.cli.commands import main

__all__ = ["main"]
