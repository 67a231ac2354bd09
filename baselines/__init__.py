"""Analytic policies and references for otagym, one package per scheme, named as the scheme: receive scaling (model
A, :mod:`baselines.receive_scaling`), CDPB (model B and the CDPB paper's baselines, :mod:`baselines.cdpb`) and
anonymous OTA's constant-sigma policies (:mod:`baselines.anonymous`); each package's ``benchmark`` module says how its
tasks are scored. Scoring on any task, with rliable's statistics: :mod:`baselines.benchmark`; what every comparison
reports: :mod:`baselines.report`."""

from otagym._exports import lazy_exports

#: Each public name by the scheme package it lives in: imported on first use (:func:`otagym._exports.lazy_exports`),
#: so that ``otagym compare --help`` and a script needing one scheme's policies load only that package.
_EXPORTS = {
    "anonymous": ("BatchEpisodes", "CalibratedSigma", "ConstantSigma", "PaperSetting", "calibrate_sigma"),
    "cdpb": ("CDPB", "CDPB_POLICIES", "CDPBPlan", "GammaBased", "HminBased", "ISBased", "MaxRho", "NoiseFree",
             "StageTwo", "two_stage"),
    "receive_scaling": ("TEST_SEEDS", "TRAIN_SEEDS", "VALIDATION_SEEDS", "ActionPolicy", "AdaScale", "AdaScaleTrained",
                        "BestConstant", "Budgeted", "EqualAlloc", "EstimFuture", "FullPower", "LiuSimeone",
                        "LyapunovDPBudget", "LyapunovDPP", "OfflineOptimal", "OnlineOptimal", "Policy", "Realisations",
                        "UniformRandom", "calibrate", "minimize_round", "run_policy", "sample_realisations"),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=("anonymous", "cdpb", "receive_scaling", "benchmark", "comparison", "report", "sweep"))
