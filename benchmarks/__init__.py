"""Speed benchmarks and research scripts of the otagym repository (not installed): run each from the repository root
as a module, ``python -m benchmarks.<script> --help``, so that the scripts import what they share as
``benchmarks.<script>`` (the root first on ``sys.path`` also puts this package before the stray ``benchmarks`` that
opacus and torchrl install).

Speed: :mod:`~benchmarks.bench_env`, :mod:`~benchmarks.bench_numba_probe`, :mod:`~benchmarks.bench_policies`,
:mod:`~benchmarks.bench_training` (docs/speed.md). Results: :mod:`~benchmarks.reference_scores` (the stored reference
scores), :mod:`~benchmarks.rl_results` and :mod:`~benchmarks.crn_search` (docs/results.md, docs/rl.md),
:mod:`~benchmarks.train_suite`, :mod:`~benchmarks.constrained_search` and :mod:`~benchmarks.benchmark_results` (the
benchmark suite, docs/benchmark.md). The scripts that ship models take the zoo as ``--zoo [DIR]``
(:mod:`~benchmarks.zoo`)."""
