"""Receive scaling's analytic policies and references (model A: Moradi Kalarde et al., the AdaScale paper): the
policies (:mod:`~baselines.receive_scaling.policies`) on the convex round solver
(:mod:`~baselines.receive_scaling.core`), the references (:mod:`~baselines.receive_scaling.references`), the evaluation
and matched-nu calibration (:mod:`~baselines.receive_scaling.evaluation`), the computation behind ``otagym compare``
(:mod:`~baselines.receive_scaling.compare`) and how its tasks are scored
(:mod:`~baselines.receive_scaling.benchmark`)."""

from otagym._exports import lazy_exports

#: Each public name by the module it lives in: imported on first use (:func:`otagym._exports.lazy_exports`).
_EXPORTS = {
    "core": ("Policy", "minimize_round"),
    "evaluation": ("Realisations", "calibrate", "run_policy", "sample_realisations"),
    "policies": ("ActionPolicy", "AdaScale", "Budgeted", "EqualAlloc", "EstimFuture", "FullPower", "LiuSimeone",
                 "LyapunovDPBudget", "LyapunovDPP", "OfflineOptimal"),
    "references": ("TEST_SEEDS", "TRAIN_SEEDS", "VALIDATION_SEEDS", "AdaScaleTrained", "BestConstant", "DualPrice",
                   "OnlineOptimal", "UniformRandom"),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=("core", "evaluation", "policies", "references", "benchmark", "compare", "sweep", "command"))
