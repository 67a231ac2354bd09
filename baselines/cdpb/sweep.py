"""CDPB's cells of ``otagym sweep`` (:class:`baselines.sweep.EpisodeSweep`): one episode of the CDPB paper's planner
or one of its baselines (:data:`~baselines.cdpb.policies.CDPB_POLICIES`) in the ``scheme="cdpb"`` env, playing rho
(``action_type="rho"``) on the scenario its ``configure`` gives (CDPB-*, gamma-based and noise-free plan their own
horizon tau; hmin-based and IS-based play the cell's rounds), as ``otagym compare --scheme cdpb`` plays them.

A cell records, beside :class:`~baselines.sweep.EpisodeSweep`'s fields (``return`` = -G / reward scale, ``cost`` =
T E_T / eps-bar, at most T exactly when (25c) holds), ``gamma`` (the convergence error 6 mean_t B_t / tau),
``epsilon_sgm`` and ``epsilon_theorem1`` (the worst client's cumulative RDP at alpha under each accounting),
``utility`` (G = lambda_1 gamma + lambda_2 eps, (24)), and the means over rounds of ``rho``, ``num_reliable`` (K_t)
and ``noise_var`` (sigma_q^2); under the training fidelity ``accuracy`` (the model's last test accuracy).
"""

from __future__ import annotations

from baselines.cdpb.policies import CDPB_POLICIES, ISBased
from baselines.sweep import EpisodeColumns, EpisodeSweep, SweepPolicy
from otagym.validation import Real

__all__ = ["CDPBSweep", "SWEEP"]


def _policy(name: str) -> SweepPolicy:
    """:data:`CDPB_POLICIES`' entry ``name`` as a sweep policy (IS-based's client ``sampling`` is settable)."""
    factory, fields = CDPB_POLICIES[name]
    params = {"sampling": Real(0.0, 1.0, low_open=True)} if issubclass(factory, ISBased) else {}
    return SweepPolicy(factory, params, scenario=fields)


class CDPBSweep(EpisodeSweep):
    """CDPB's sweep: the paper's policies in the CDPB env, analytic or training fidelity."""

    fidelities = ("analytic", "train")
    default_policies = tuple(CDPB_POLICIES)
    env_kwargs = {"action_type": "rho"}
    columns = EpisodeColumns(
        final={"gamma": "gamma", "epsilon_sgm": "epsilon_sgm", "epsilon_theorem1": "epsilon_theorem1",
               "utility": "utility"},
        means={"rho": "rho", "num_reliable": "num_reliable", "noise_var": "noise_var"})
    policies = {name: _policy(name) for name in CDPB_POLICIES}


SWEEP = CDPBSweep()
