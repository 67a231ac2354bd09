"""Running policies on the vector env over fixed channel realisations, and the matched-nu calibration (§VII).

Section and equation numbers are those of the AdaScale paper (Moradi Kalarde et al., *Privacy Enhancement in
Over-the-Air Federated Learning via Adaptive Receive Scaling*, arXiv:2510.03860).
"""

from __future__ import annotations

import functools
import operator
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
from gymnasium.vector import AutoresetMode
from numpy.typing import NDArray

from baselines.play import play
from baselines.receive_scaling.core import Policy
from baselines.receive_scaling.policies import OfflineOptimal
from baselines.sweep import CELL_TRAINING_ARGS, training_rounds
from otagym.channel import ChannelModel
from otagym.env import OTAPrivacyVectorEnv
from otagym.accounting import ACCOUNTANTS, DEFAULT_ORDERS, RDPLedger, pld_epsilon
from otagym.schemes.receive_scaling import ReceiveScalingModel, Scenario

__all__ = ["Realisations", "EpisodeResult", "CellTraining", "ANALYTIC", "sample_realisations", "run_policy",
           "calibrate", "training_scenario", "leakage_score", "reference_leakage"]


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
    small = scenario.num_rounds * scenario.num_devices <= _CACHED_TRACE_MAX
    draw = _cached_trace if small else _trace
    dist, gains = zip(*(draw(model, scenario.num_rounds, operator.index(s)) for s in seeds))
    return Realisations(np.stack(dist), np.stack(gains, axis=1))


#: Traces of at most this many gains (1 MB) are cached, up to 1024 of them (1 GB at most; 40 MB at paper-mnist's
#: T = 500, M = 10). A search that plays more distinct seeds than that in turn draws them again.
_CACHED_TRACE_MAX = 125_000


def _trace(model: ChannelModel, num_rounds: int, seed: int) -> tuple[NDArray, NDArray]:
    """The trace of ``seed``, from ``default_rng(seed)``, drawn round by round by the environments' own steps."""
    return model.sample_trace(np.random.default_rng(seed), num_rounds)


@functools.lru_cache(maxsize=1024)
def _cached_trace(model: ChannelModel, num_rounds: int, seed: int) -> tuple[NDArray, NDArray]:
    """:func:`_trace`, read-only, cached per process: a pure function of its arguments (so caching changes no
    number), and the searches and reference scores play the same seeds many times (at every nu, for every candidate
    policy)."""
    trace = _trace(model, num_rounds, seed)
    for array in trace:
        array.flags.writeable = False
    return trace


@dataclass(frozen=True)
class EpisodeResult:
    """Per env: mean convergence cost (the LHS of (28b)), RDP at alpha and eps at delta (both means over devices),
    the total leakage sum_t L_t (objective (28a)) and EqualAlloc's on the same channels and nu, and the wall time of
    the batch (s); with the PLD accountant also eps at delta from each device's privacy loss distribution
    (:func:`otagym.accounting.pld_epsilon`, mean over devices)."""

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
    #: accountant="pld": each env's eps at delta from its devices' privacy loss distributions, mean over devices (N,)
    epsilon_pld: NDArray | None = None


@dataclass(frozen=True)
class CellTraining:
    """Whether a cell also trains the model under its noise (``fidelity="train"``) and how: the env's training
    arguments of a comparison cell, on top of :data:`baselines.sweep.CELL_TRAINING_ARGS`.

    Attributes:
        fidelity: ``"analytic"`` (no model: the default) or ``"train"``.
        dataset: the data trained on (:data:`otagym.datasets.DATASET_NAMES`).
        data_dir: the folder of its files (MNIST, CIFAR-10; None for the embedded ones).
        eval_every: rounds between two test evaluations (None: T/20).
        args: the env's further training arguments: the data subsets of :data:`otagym.fidelity.SUBSET_KEYS` and the
            model update's ``momentum``/``weight_decay``.
    """

    fidelity: str = "analytic"
    dataset: str = "digits"
    data_dir: str | None = None
    eval_every: int | None = None
    args: Mapping[str, Any] | None = None

    def every(self, num_rounds: int) -> int:
        """The rounds between two test evaluations in an episode of ``num_rounds``."""
        return self.eval_every or max(1, num_rounds // 20)

    def env_kwargs(self, num_rounds: int) -> dict[str, Any]:
        """The env's training arguments (none under the analytic fidelity)."""
        if self.fidelity != "train":
            return {}
        return {"eval_every": self.every(num_rounds), "dataset": self.dataset, "data_dir": self.data_dir,
                **CELL_TRAINING_ARGS, **(self.args or {})}


#: The analytic fidelity: no model is trained.
ANALYTIC = CellTraining()


def run_policy(policy: Policy, scenario: Scenario, realisations: Realisations, *, seed: int = 0,
               dp: bool = True, nu: NDArray | None = None, training: CellTraining = ANALYTIC,
               accountant: str = "rdp") -> EpisodeResult:
    """One episode of ``policy`` on every realisation at once (vector env, ``action_type="x"``).

    ``nu`` (N,) is each env's budget as the env observes it (default: the scenario's); the policy is told its own nu
    when it is built. Under ``training.fidelity="train"`` the env also trains its model (the scenario must be the
    training env's own, whose d and n_m follow the model and data: :func:`training_scenario`) and the result has its
    test accuracy after every ``training.eval_every`` rounds (default: T/20) and at the end (:class:`CellTraining`).
    ``accountant="pld"`` (with ``dp``) also reports ``epsilon_pld``, the same rounds composed by the PLD accountant
    (:data:`otagym.accounting.ACCOUNTANTS`); the RDP ``epsilon`` is reported either way.
    """
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {list(ACCOUNTANTS)}; got {accountant!r}")
    n, fidelity = realisations.num_envs, training.fidelity
    eval_every = training.every(scenario.num_rounds)
    env = OTAPrivacyVectorEnv(n, scenario, reward_mode="cmdp", action_type="x", dp_orders=None, fidelity=fidelity,
                              autoreset_mode=AutoresetMode.SAME_STEP,  # reads info["final_info"]
                              **training.env_kwargs(scenario.num_rounds))
    if env.scenario != scenario:
        raise ValueError("scenario: with fidelity='train' pass training_scenario(scenario), whose model_dim and "
                         "dataset_size are the trained model's and data's")
    start = time.perf_counter()
    options = {"distances_m": realisations.distances_m, "channel_gains": realisations.channel_gains}
    if nu is not None:
        options["nu"] = nu
    model, curve = env.core.model, []
    sigma = np.empty((scenario.num_rounds, n, model.class_device.size))  # per class, for the end-of-episode eps

    def record(t: int, info: dict[str, Any]) -> None:
        if t >= 0:
            sigma[t] = info["noise_multiplier"][:, model.class_device]
        if fidelity == "train" and (t + 1) % eval_every == 0 and t + 1 < scenario.num_rounds:
            curve.append((t, info["test_accuracy"]))

    final = play(policy, env, options, training_rounds(scenario.num_rounds, fidelity), seed=seed,
                 on_round=record).final_info
    if curve:
        curve.append((scenario.num_rounds - 1, final["test_accuracy"]))
    return EpisodeResult(
        cost_mean=final["convergence_cost_mean"],
        rdp=np.ascontiguousarray(final["rdp_cumulative"]).mean(axis=-1),  # row by row whatever N (batch-independent)
        epsilon=_episode_epsilon(model, sigma, scenario.delta) if dp else None,
        wall_s=time.perf_counter() - start,
        leakage=final["leakage_total"],
        equal_alloc_leakage=final["equal_alloc_leakage"],
        test_accuracy=final.get("test_accuracy"),
        accuracy_rounds=np.array([r for r, _ in curve]) if curve else None,
        accuracy_curve=np.stack([a for _, a in curve]) if curve else None,
        epsilon_pld=_episode_epsilon_pld(model, sigma, scenario.delta) if dp and accountant == "pld" else None,
    )


def _episode_epsilon(model: ReceiveScalingModel, sigma: NDArray, delta: float) -> NDArray:
    """Each env's eps at ``delta`` over :data:`~otagym.accounting.DEFAULT_ORDERS` (the env's end-of-episode report),
    mean over devices, from its noise multipliers ``sigma`` (T, N, classes); env by env, so that an env's eps does not
    depend on the envs batched with it (the accounting evaluates its elements in sub-batches of similar noise)."""
    eps = np.empty(sigma.shape[1])
    for i in range(sigma.shape[1]):
        ledger = RDPLedger(model.class_q, orders=DEFAULT_ORDERS, chunk=sigma.shape[0])
        for round_sigma in sigma[:, i]:
            ledger.record(round_sigma)
        eps[i] = ledger.epsilon(delta)[0][model.device_class].mean()
    return eps


def _episode_epsilon_pld(model: ReceiveScalingModel, sigma: NDArray, delta: float) -> NDArray:
    """Each env's eps at ``delta`` from the privacy loss distribution of each class's rounds
    (:func:`otagym.accounting.pld_epsilon` at sampling rate ``model.class_q``), mean over devices, from its noise
    multipliers ``sigma`` (T, N, classes); env by env, like :func:`_episode_epsilon`."""
    eps = np.empty(sigma.shape[1])
    for i in range(sigma.shape[1]):
        per_class = pld_epsilon(q=model.class_q, noise_multiplier=sigma[:, i], delta=delta)
        eps[i] = per_class[model.device_class].mean()
    return eps


def training_scenario(scenario: Scenario, dataset: str = "digits", data_dir: str | None = None,
                      subsets: Mapping[str, int] | None = None) -> Scenario:
    """``scenario`` as the training fidelity runs it on ``dataset`` (and ``subsets``, as :func:`run_policy`): d and
    n_m of the trained model and its data."""
    return OTAPrivacyVectorEnv(1, scenario, fidelity="train", dataset=dataset, data_dir=data_dir,
                               **(subsets or {})).scenario


def calibrate(
    make_policy: Callable[[NDArray, NDArray], Policy],
    scenario: Scenario,
    realisations: Realisations,
    nu: NDArray,
    bracket: tuple[float, float],
    *,
    rtol: float = 0.01,
    max_iter: int = 20,
    points: int = 11,
) -> tuple[NDArray, NDArray]:
    """Tune one hyperparameter per env so that the realised mean of c_t equals ``nu`` (N,) within ``rtol`` (§VII).

    ``make_policy(values, nu)`` builds a policy whose hyperparameter is the array ``values`` and whose budget is
    ``nu``, one of each per env of the episode (an env's values are tried side by side: ``nu`` is repeated). Each env's
    bracket (on the log of the parameter) is searched by ``points``-section: one batched episode runs ``points``
    values inside every env's bracket at once (N x points envs; an episode costs about the same for 9 envs or 63) and
    the bracket shrinks to the interval around nu, ``points + 1`` times per episode instead of twice. The direction of
    monotonicity is found from the bracket ends (both ends in one episode). Each env's search uses only its own
    episodes, so its result does not depend on the envs calibrated beside it. Returns ``(values, achieved)``; envs whose
    target lies outside the bracket keep the closest end (check ``achieved``), with a ``UserWarning`` naming their nu
    and the costs the bracket's ends reach.
    """
    n = realisations.num_envs

    def costs(log_values: NDArray) -> NDArray:
        """Mean cost of every env at each of its values, (N, k) -> (N, k), in one episode of N k envs."""
        k = log_values.shape[1]
        nus = np.repeat(nu, k)
        return run_policy(make_policy(np.exp(log_values).ravel(), nus), scenario, realisations.repeat(k), dp=False,
                          nu=nus).cost_mean.reshape(n, k)

    lo = np.full(n, np.log(bracket[0]))
    hi = np.full(n, np.log(bracket[1]))
    c_lo, c_hi = costs(np.stack([lo, hi], axis=1)).T
    increasing = c_hi >= c_lo  # cost grows with the parameter (AdaScale's V) or falls (a DP budget)
    closer = np.abs(c_lo - nu) < np.abs(c_hi - nu)
    value, achieved = np.where(closer, lo, hi), np.where(closer, c_lo, c_hi)
    done = np.abs(achieved - nu) <= rtol * nu
    outside = ~done & ((nu < np.minimum(c_lo, c_hi)) | (nu > np.maximum(c_lo, c_hi)))
    if outside.any():
        i = np.flatnonzero(outside)
        warnings.warn(f"calibration: nu = {', '.join(f'{v:g}' for v in np.unique(nu[i]))} lies outside the mean "
                      f"costs that the parameter's bracket [{bracket[0]:g}, {bracket[1]:g}] reaches ("
                      + "; ".join(f"{a:.3g} to {b:.3g}" for a, b in zip(c_lo[i][:3], c_hi[i][:3]))
                      + (" ..." if len(i) > 3 else "") + "): the closest end is kept and the result misses nu",
                      UserWarning, stacklevel=2)
    fractions = np.arange(1, points + 1) / (points + 1)
    for _ in range(max_iter):
        if done.all():
            break
        z = lo[:, None] + (hi - lo)[:, None] * fractions  # (N, points), ascending
        cost = costs(z)
        miss = np.abs(cost - nu[:, None])
        best = np.argmin(miss, axis=1)
        rows = np.arange(n)
        better = ~done & (miss[rows, best] < np.abs(achieved - nu))
        value = np.where(better, z[rows, best], value)
        achieved = np.where(better, cost[rows, best], achieved)
        # the new bracket: the last point whose cost is on the low-parameter side of nu, and the next one
        below = np.where(increasing[:, None], cost < nu[:, None], cost > nu[:, None])  # the target lies above z_j
        last = below.sum(axis=1) - 1  # monotone: the points below come first
        new_lo = np.where(last >= 0, z[rows, np.maximum(last, 0)], lo)
        new_hi = np.where(last + 1 < points, z[rows, np.minimum(last + 1, points - 1)], hi)
        lo, hi = np.where(done, lo, new_lo), np.where(done, hi, new_hi)
        done |= np.abs(achieved - nu) <= rtol * nu
    return np.exp(value), achieved


def leakage_score(leakage: NDArray, equal_alloc: NDArray, optimal: NDArray) -> NDArray:
    """D4RL-style score of objective (28a) on one channel realisation: 0 = EqualAlloc, 100 = OfflineOptimal.

    100 (L_EqualAlloc - L) / (L_EqualAlloc - L_OfflineOptimal), all at the same nu and channels.
    """
    return 100.0 * (np.asarray(equal_alloc) - np.asarray(leakage)) / (np.asarray(equal_alloc) - np.asarray(optimal))


@functools.lru_cache(maxsize=256)
def reference_leakage(scenario: Scenario, nu: float, seed: int) -> float:
    """OfflineOptimal's sum_t L_t on the realisation of ``seed`` at ``nu``: the 100 of the normalised score.

    A pure function of its arguments, cached per process (about 0.7 s at T = 500; every policy of a (nu, seed) needs
    it): caching changes no number, only how often it is computed.
    """
    real = sample_realisations(scenario, [seed])
    optimal = OfflineOptimal(nu=np.array([float(nu)]))
    optimal.reset(scenario, channel_gains=real.channel_gains)
    return float(optimal.total_leakage()[0])
