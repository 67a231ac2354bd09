"""Analytic policies for otagym (model A: receive scaling; the anonymous scheme's constant-sigma policies), the
matched-nu calibration and ``otagym compare``."""

from baselines.anonymous import CalibratedSigma, ConstantSigma, PaperSetting, calibrate_sigma
from baselines.core import Policy, minimize_round
from baselines.evaluation import Realisations, calibrate, run_policy, sample_realisations
from baselines.policies import (AdaScale, EqualAlloc, EstimFuture, FullPower, LiuSimeone, LyapunovDPBudget,
                                LyapunovDPP, OfflineOptimal)

__all__ = ["Policy", "AdaScale", "LyapunovDPP", "LyapunovDPBudget", "EqualAlloc", "EstimFuture", "OfflineOptimal",
           "LiuSimeone", "FullPower", "calibrate", "run_policy", "sample_realisations", "Realisations",
           "minimize_round", "ConstantSigma", "CalibratedSigma", "PaperSetting", "calibrate_sigma"]
