"""Analytic policies and references for otagym, one package per scheme, named as the scheme: receive scaling (model
A, :mod:`baselines.receive_scaling`), CDPB (model B and the CDPB paper's baselines, :mod:`baselines.cdpb`) and
anonymous OTA's constant-sigma policies (:mod:`baselines.anonymous`); each package's ``benchmark`` module says how its
tasks are scored. Scoring on any task, with rliable's statistics: :mod:`baselines.benchmark`; what every comparison
reports: :mod:`baselines.report`."""

from baselines.anonymous import BatchEpisodes, CalibratedSigma, ConstantSigma, PaperSetting, calibrate_sigma
from baselines.cdpb import (CDPB, CDPB_POLICIES, CDPBPlan, GammaBased, HminBased, ISBased, MaxRho, NoiseFree, StageTwo,
                            two_stage)
from baselines.receive_scaling import (TEST_SEEDS, TRAIN_SEEDS, VALIDATION_SEEDS, ActionPolicy, AdaScale,
                                       AdaScaleTrained, BestConstant, Budgeted, EqualAlloc, EstimFuture, FullPower,
                                       LiuSimeone, LyapunovDPBudget, LyapunovDPP, OfflineOptimal, OnlineOptimal, Policy,
                                       Realisations, UniformRandom, calibrate, minimize_round, run_policy,
                                       sample_realisations)

__all__ = ["Policy", "AdaScale", "LyapunovDPP", "LyapunovDPBudget", "EqualAlloc", "EstimFuture", "OfflineOptimal",
           "LiuSimeone", "FullPower", "calibrate", "run_policy", "sample_realisations", "Realisations",
           "minimize_round", "CDPB", "StageTwo", "MaxRho", "GammaBased", "HminBased", "ISBased", "NoiseFree",
           "CDPB_POLICIES", "CDPBPlan", "two_stage", "ConstantSigma", "CalibratedSigma", "PaperSetting",
           "calibrate_sigma", "BatchEpisodes", "ActionPolicy", "Budgeted", "UniformRandom", "BestConstant",
           "AdaScaleTrained", "OnlineOptimal", "TRAIN_SEEDS", "VALIDATION_SEEDS", "TEST_SEEDS"]
