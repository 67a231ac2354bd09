"""Analytic policies for otagym, one module per scheme -- model A (receive scaling: :mod:`baselines.policies` on the
solver of :mod:`baselines.core`), model B (CDPB and the CDPB paper's baselines: :mod:`baselines.cdpb`) and the
anonymous scheme's constant-sigma policies (:mod:`baselines.anonymous`) -- the evaluation and matched-nu calibration
(:mod:`baselines.evaluation`), and the computations behind ``otagym compare`` (:mod:`baselines.compare`,
:mod:`baselines.cdpb_compare`)."""

from baselines.anonymous import BatchEpisodes, CalibratedSigma, ConstantSigma, PaperSetting, calibrate_sigma
from baselines.cdpb import (CDPB, CDPB_POLICIES, CDPBPlan, GammaBased, HminBased, ISBased, MaxRho, NoiseFree, StageTwo,
                            two_stage)
from baselines.core import Policy, minimize_round
from baselines.evaluation import Realisations, calibrate, run_policy, sample_realisations
from baselines.policies import (ActionPolicy, AdaScale, Budgeted, EqualAlloc, EstimFuture, FullPower, LiuSimeone,
                                LyapunovDPBudget, LyapunovDPP, OfflineOptimal)
from baselines.references import (TEST_SEEDS, TRAIN_SEEDS, VALIDATION_SEEDS, AdaScaleTrained, BestConstant,
                                  OnlineOptimal, UniformRandom)

__all__ = ["Policy", "AdaScale", "LyapunovDPP", "LyapunovDPBudget", "EqualAlloc", "EstimFuture", "OfflineOptimal",
           "LiuSimeone", "FullPower", "calibrate", "run_policy", "sample_realisations", "Realisations",
           "minimize_round", "CDPB", "StageTwo", "MaxRho", "GammaBased", "HminBased", "ISBased", "NoiseFree", "CDPB_POLICIES", "CDPBPlan",
           "two_stage", "ConstantSigma", "CalibratedSigma", "PaperSetting", "calibrate_sigma", "BatchEpisodes",
           "ActionPolicy", "Budgeted", "UniformRandom", "BestConstant", "AdaScaleTrained", "OnlineOptimal", "TRAIN_SEEDS",
           "VALIDATION_SEEDS", "TEST_SEEDS"]
