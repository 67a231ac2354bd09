"""Running policies on the vector env over fixed channel realisations, and the matched-nu calibration (§VII)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.typing import NDArray

from baselines.core import Policy
from otagym.channel import ChannelModel
from otagym.env import OTAPrivacyVectorEnv
from otagym.privacy import DEFAULT_ORDERS
from otagym.receive_scaling import Scenario

__all__ = ["Realisations", "EpisodeResult", "sample_realisations", "run_policy", "calibrate", "training_scenario"]


@dataclass(frozen=True)
class Realisations:
    """Channel realisations for a batch of envs: placements (N, M) and channel powers |h|^2 (T, N, M)."""

    distances_m: NDArray
    channel_gains: NDArray

    @property
    def num_envs(self) -> int:
        return self.distances_m.shape[0]

    def repeat(self, times: int) -> "Realisations":
        """Each realisation ``times`` times in a row (env i*times + j is realisation i)."""
        return Realisations(np.repeat(self.distances_m, times, axis=0), np.repeat(self.channel_gains, times, axis=1))


def sample_realisations(scenario: Scenario, seeds: list[int] | tuple[int, ...]) -> Realisations:
    """One realisation per seed (placement and fading), each from ``numpy.random.default_rng(seed)``."""
    model = ChannelModel.from_scenario(scenario)
    dist, gains = zip(*(model.sample_trace(np.random.default_rng(s), scenario.num_rounds) for s in seeds))
    return Realisations(np.stack(dist), np.stack(gains, axis=1))


@dataclass(frozen=True)
class EpisodeResult:
    """Per env: mean convergence cost (the LHS of (28b)), RDP at alpha and eps at delta (both means over devices),
    the total leakage sum_t L_t (objective (28a)) and EqualAlloc's on the same channels and nu, and the wall time of
    the batch (s)."""

    cost_mean: NDArray
    rdp: NDArray
    epsilon: NDArray | None
    wall_s: float
    leakage: NDArray
    equal_alloc_leakage: NDArray
    test_accuracy: NDArray | None = None  # fidelity="train": the trained model's final test accuracy
    #: fidelity="train": the rounds after which the model was evaluated (-1 = the initial model), (E,), and the test
    #: accuracy then, (E, N)
    accuracy_rounds: NDArray | None = None
    accuracy_curve: NDArray | None = None


def run_policy(policy: Policy, scenario: Scenario, realisations: Realisations, *, seed: int = 0,
               dp: bool = True, nu: NDArray | None = None, fidelity: str = "analytic", eval_every: int | None = None,
               dataset: str = "digits", data_dir: str | None = None) -> EpisodeResult:
    """One episode of ``policy`` on every realisation at once (vector env, ``action_type="x"``).

    ``nu`` (N,) is each env's budget as the env observes it (default: the scenario's); the policy is told its own nu
    when it is built. ``fidelity="train"`` also trains the env's model (the scenario must be the training env's own,
    whose d and n_m follow the model and data: :func:`training_scenario`) and reports its test accuracy after every
    ``eval_every`` rounds (default: T/20) and at the end, on ``dataset`` (``data_dir`` for MNIST and CIFAR-10).
    """
    n = realisations.num_envs
    eval_every = eval_every or max(1, scenario.num_rounds // 20)
    env = OTAPrivacyVectorEnv(n, scenario, reward_mode="cmdp", action_type="x",
                              dp_orders=DEFAULT_ORDERS if dp else None, fidelity=fidelity,
                              eval_every=eval_every, dataset=dataset, data_dir=data_dir)
    if env.scenario != scenario:
        raise ValueError("scenario: with fidelity='train' pass training_scenario(scenario), whose model_dim and "
                         "dataset_size are the trained model's and data's")
    start = time.perf_counter()
    policy.reset(scenario, seed, channel_gains=realisations.channel_gains)
    options = {"distances_m": realisations.distances_m, "channel_gains": realisations.channel_gains}
    if nu is not None:
        options["nu"] = nu
    obs, info = env.reset(seed=seed, options=options)
    curve = [(-1, info["test_accuracy"])] if fidelity == "train" else []
    for t in range(scenario.num_rounds):
        x = np.broadcast_to(policy.act(obs, info), (n,))
        obs, _, terminated, _, info = env.step(x[:, None])
        if fidelity == "train" and (t + 1) % eval_every == 0 and t + 1 < scenario.num_rounds:
            curve.append((t, info["test_accuracy"]))
    final = info["final_info"]
    if curve:
        curve.append((scenario.num_rounds - 1, final["test_accuracy"]))
    return EpisodeResult(
        cost_mean=final["convergence_cost_mean"],
        rdp=final["rdp_cumulative"].mean(axis=-1),
        epsilon=final["dp_epsilon"].mean(axis=-1) if dp else None,
        wall_s=time.perf_counter() - start,
        leakage=final["leakage_total"],
        equal_alloc_leakage=final["equal_alloc_leakage"],
        test_accuracy=final.get("test_accuracy"),
        accuracy_rounds=np.array([r for r, _ in curve]) if curve else None,
        accuracy_curve=np.stack([a for _, a in curve]) if curve else None,
    )


def training_scenario(scenario: Scenario, dataset: str = "digits", data_dir: str | None = None) -> Scenario:
    """``scenario`` as the training fidelity runs it on ``dataset``: d and n_m of the trained model and its data."""
    return OTAPrivacyVectorEnv(1, scenario, fidelity="train", dataset=dataset, data_dir=data_dir).scenario


def calibrate(
    make_policy: Callable[[NDArray], Policy],
    scenario: Scenario,
    realisations: Realisations,
    nu: NDArray,
    bracket: tuple[float, float],
    *,
    rtol: float = 0.01,
    max_iter: int = 40,
) -> tuple[NDArray, NDArray]:
    """Tune one hyperparameter per env so that the realised mean of c_t equals ``nu`` (N,) within ``rtol`` (§VII).

    ``make_policy(values)`` builds a policy whose hyperparameter is the array ``values`` (one per env). All envs are
    bisected in lockstep on the log of the parameter, one batched episode per step; the direction of monotonicity is
    found from the bracket ends. Returns ``(values, achieved)``; envs whose target lies outside the bracket keep the
    closest end (check ``achieved``).
    """
    n = realisations.num_envs
    lo = np.full(n, np.log(bracket[0]))
    hi = np.full(n, np.log(bracket[1]))
    c_lo = run_policy(make_policy(np.exp(lo)), scenario, realisations, dp=False, nu=nu).cost_mean
    c_hi = run_policy(make_policy(np.exp(hi)), scenario, realisations, dp=False, nu=nu).cost_mean
    increasing = c_hi >= c_lo  # cost grows with the parameter (AdaScale's V) or falls (a DP budget)
    value, achieved = np.where(np.abs(c_lo - nu) < np.abs(c_hi - nu), lo, hi), np.where(
        np.abs(c_lo - nu) < np.abs(c_hi - nu), c_lo, c_hi)
    done = np.abs(achieved - nu) <= rtol * nu
    for _ in range(max_iter):
        if done.all():
            break
        mid = 0.5 * (lo + hi)
        cost = run_policy(make_policy(np.exp(mid)), scenario, realisations, dp=False, nu=nu).cost_mean
        better = ~done & (np.abs(cost - nu) < np.abs(achieved - nu))
        value, achieved = np.where(better, mid, value), np.where(better, cost, achieved)
        done |= np.abs(cost - nu) <= rtol * nu
        go_up = (cost < nu) == increasing
        lo = np.where(~done & go_up, mid, lo)
        hi = np.where(~done & ~go_up, mid, hi)
    return np.exp(value), achieved
