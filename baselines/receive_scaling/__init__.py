"""Receive scaling's analytic policies and references (model A: Moradi Kalarde et al., the AdaScale paper): the
policies (:mod:`~baselines.receive_scaling.policies`) on the convex round solver
(:mod:`~baselines.receive_scaling.core`), the references (:mod:`~baselines.receive_scaling.references`), the evaluation
and matched-nu calibration (:mod:`~baselines.receive_scaling.evaluation`), the computation behind ``otagym compare``
(:mod:`~baselines.receive_scaling.compare`) and how its tasks are scored
(:mod:`~baselines.receive_scaling.benchmark`)."""

from baselines.receive_scaling.core import Policy, minimize_round
from baselines.receive_scaling.evaluation import Realisations, calibrate, run_policy, sample_realisations
from baselines.receive_scaling.policies import (ActionPolicy, AdaScale, Budgeted, EqualAlloc, EstimFuture, FullPower,
                                                LiuSimeone, LyapunovDPBudget, LyapunovDPP, OfflineOptimal)
from baselines.receive_scaling.references import (TEST_SEEDS, TRAIN_SEEDS, VALIDATION_SEEDS, AdaScaleTrained,
                                                  BestConstant, DualPrice, OnlineOptimal, UniformRandom)

__all__ = ["Policy", "minimize_round", "Realisations", "calibrate", "run_policy", "sample_realisations",
           "ActionPolicy", "AdaScale", "Budgeted", "EqualAlloc", "EstimFuture", "FullPower", "LiuSimeone",
           "LyapunovDPBudget", "LyapunovDPP", "OfflineOptimal", "TEST_SEEDS", "TRAIN_SEEDS", "VALIDATION_SEEDS",
           "AdaScaleTrained", "BestConstant", "DualPrice", "OnlineOptimal", "UniformRandom"]
