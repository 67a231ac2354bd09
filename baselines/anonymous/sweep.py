"""Anonymous OTA's cells of ``otagym sweep`` (:class:`baselines.sweep.EpisodeSweep`): one episode of a constant-sigma
policy (:mod:`~baselines.anonymous.policies`) in the ``scheme="anonymous"`` env, playing sigma
(``action_type="sigma"``): ``PaperSetting`` (Fig. 1's sigma' = 1), ``CalibratedSigma`` (the least sigma that meets
``target_epsilon`` at the scenario's delta with ``confidence``; default the ``otagym/AnonymousOTA-v0`` task's target,
which is also the budget of the env's ``info["cost"]``) and ``ConstantSigma`` (a given ``sigma``).

A cell records, beside :class:`~baselines.sweep.EpisodeSweep`'s fields (``return`` = -(lambda_c gamma + lambda_p
E_T) / reward scale; ``cost`` only under ``CalibratedSigma``: T E_T / E_max, at most T when the target holds),
``gamma`` (the SGD convergence bound), ``utility`` (lambda_c gamma + lambda_p E_T), and the means over rounds of
``sigma``, ``participants`` (a(t)) and ``batch_size`` (b_t).
"""

from __future__ import annotations

from baselines.anonymous.policies import CalibratedSigma, ConstantSigma, PaperSetting
from baselines.sweep import EpisodeColumns, EpisodeSweep, SweepPolicy
from otagym.tasks import TASKS
from otagym.validation import POSITIVE, Real

__all__ = ["AnonymousSweep", "SWEEP"]


class AnonymousSweep(EpisodeSweep):
    """Anonymous OTA's sweep: constant-sigma policies in its env, analytic fidelity (the env has no training one)."""

    default_policies = ("PaperSetting", "CalibratedSigma")
    env_kwargs = {"action_type": "sigma"}
    columns = EpisodeColumns(final={"gamma": "gamma", "utility": "utility"},
                             means={"sigma": "sigma", "participants": "participants", "batch_size": "batch_size"})
    policies = {
        "PaperSetting": SweepPolicy(PaperSetting),
        "CalibratedSigma": SweepPolicy(
            CalibratedSigma, {"target_epsilon": POSITIVE, "confidence": Real(0.0, 1.0, low_open=True, high_open=True)},
            {"target_epsilon": TASKS["otagym/AnonymousOTA-v0"].kwargs["target_epsilon"]},
            env_params=("target_epsilon",)),
        "ConstantSigma": SweepPolicy(ConstantSigma, {"sigma": POSITIVE}),
    }


SWEEP = AnonymousSweep()
