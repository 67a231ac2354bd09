"""Reference policies of CDPB's devices as agents (:mod:`otagym.multiagent`) and their evaluation on a device
task's frozen realisations.

A device policy maps the devices' observations (N, K, entries) to their actions (N, K, A) in [-1, 1]
(:mod:`otagym.schemes.cdpb.devices`: a = -1 is the paper's threshold h_th, a = 1 a threshold 100 h_th).

* :func:`paper_rule`: every device follows the paper's CDPB rule (c_k = 1, the scenario's noise portion);
  :func:`paper_planner`: each device plays the threshold of the paper's planner (Stage II's rho at the task's tau).
* :class:`UniformRandom`: each device draws its action uniformly.
* :class:`ConstantActions`: every device plays a fixed action; :func:`best_common_constant` finds the best action
  common to all devices (the floor), :func:`best_per_device_constants` the best action of each device by coordinate
  search (the computed ceiling: with i.i.d. fading and the sampled accounting a device's loss does not depend on the
  channel it sees, so little is left to a policy that reacts).
* :func:`full_csi_bound`: a return no policy can beat, even one that knows every channel.
* :func:`device_references`: a task's references by name, the searched ones at their stored actions
  (:attr:`otagym.tasks.DeviceTask.reference_actions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import numpy as np
from numpy.typing import NDArray

from otagym.multiagent import device_evaluation_options, device_side
from otagym.schemes.cdpb.devices import THRESHOLD_SCALE_MAX
from otagym.tasks import DEVICE_TASKS

__all__ = ["DevicePolicy", "ConstantActions", "UniformRandom", "paper_rule", "paper_planner", "DeviceEpisodes",
           "evaluate_devices", "best_common_constant", "best_per_device_constants", "full_csi_bound", "ACTION_GRID",
           "device_references"]

#: The actions searched for constants: a in [-1, 1], c = 100^((a + 1)/2) from 1 to 100 (every 0.05 of a decade).
ACTION_GRID: NDArray = np.linspace(-1.0, 1.0, 41)


class DevicePolicy(Protocol):
    def act(self, observations: NDArray) -> NDArray:
        """Actions (N, K, A) from the devices' observations (N, K, entries)."""


@dataclass
class ConstantActions:
    """Every device k plays ``actions[k]`` (shape (K, A), or (A,) for all devices) whatever it observes."""

    actions: NDArray

    def act(self, observations: NDArray) -> NDArray:
        n, k = observations.shape[:2]
        a = np.asarray(self.actions, dtype=float)
        return np.broadcast_to(a if a.ndim == 2 else a[None], (n, k, a.shape[-1])).copy()


@dataclass
class UniformRandom:
    """Each device draws its action uniformly from [-1, 1]^A each round (``width`` = A)."""

    rng: np.random.Generator
    width: int = 1

    def act(self, observations: NDArray) -> NDArray:
        return self.rng.uniform(-1.0, 1.0, observations.shape[:2] + (self.width,))


def paper_planner(task_id: str) -> ConstantActions:
    """The paper's planner, per device: the threshold of Stage II's rho_tau at the task's tau (Algorithm 2,
    :func:`baselines.cdpb.policies.minimize_weighted`), played by each device as c = rho_tau / rho over the server's
    rho; a rho_tau below the server's gives c = 1 (no device can go below h_th, eq. (7)), the paper's rule."""
    from baselines.cdpb.policies import minimize_weighted

    side = device_side(task_id, 1)
    s = side.scenario
    rho_tau = float(minimize_weighted(s, np.array([6.0 * s.lambda_convergence / s.num_rounds]),
                                      np.array([s.lambda_privacy * s.num_rounds]))[0])
    scale = min(max(rho_tau / side.rho[0], 1.0), THRESHOLD_SCALE_MAX)
    rule = paper_rule(task_id).actions.copy()
    rule[0] = 2.0 * np.log(scale) / np.log(THRESHOLD_SCALE_MAX) - 1.0
    return ConstantActions(rule)


def paper_rule(task_id: str) -> ConstantActions:
    """The paper's CDPB rule for every device of a task: threshold h_th (a = -1) and, under CDPB-mixed, the
    scenario's noise portion (a' = 2 portion - 1)."""
    env = device_side(task_id, 1)
    s = env.scenario
    return ConstantActions(np.array([-1.0, 2.0 * s.portion - 1.0])[:env.action_space().shape[0]])


class DeviceEpisodes(NamedTuple):
    """A policy's episodes on realisations (each (S,)): the team's return, the worst device's privacy used over
    its budget at the end, and the devices that left."""

    returns: NDArray
    worst_privacy_used: NDArray
    devices_left: NDArray


def evaluate_devices(task_id: str, policy: DevicePolicy, seeds: Sequence[int], **overrides: Any) -> DeviceEpisodes:
    """Play ``policy`` on the realisations of ``seeds`` of a device task, all in step (the realisation of a seed as
    :func:`~otagym.multiagent.device_evaluation_options` draws it; the rest of the randomness from
    ``default_rng(seeds)``); ``overrides`` change the task's env arguments."""
    seeds = list(seeds)
    side = device_side(task_id, len(seeds), **overrides)
    gains = np.stack([device_evaluation_options(task_id, seed)["channel_gains"] for seed in seeds], axis=1)
    rng = np.random.default_rng(seeds)
    side.reset(rng, channel_gains=gains)
    returns = np.zeros(len(seeds))
    while (side.core.t < side.scenario.num_rounds).any():
        returns += side.step(rng, policy.act(side.observations())).rewards.mean(axis=1)
    return DeviceEpisodes(returns, side.privacy_used().max(axis=1), (~side.active).sum(axis=1))


def _mean_return(task_id: str, seeds: Sequence[int]) -> Callable[[NDArray], float]:
    return lambda actions: float(evaluate_devices(task_id, ConstantActions(actions), seeds).returns.mean())


def best_common_constant(task_id: str, seeds: Sequence[int], grid: NDArray = ACTION_GRID) -> tuple[float, float]:
    """The action of :data:`ACTION_GRID` that, played by every device every round, has the best mean return on
    ``seeds`` (the validation seeds: select there, report on the evaluation seeds); ``(action, mean return)``."""
    score = _mean_return(task_id, seeds)
    values = [score(np.array([a])) for a in grid]
    best = int(np.argmax(values))
    return float(grid[best]), values[best]


def best_per_device_constants(task_id: str, seeds: Sequence[int], start: float, *, grid: NDArray = ACTION_GRID,
                              sweeps: int = 3) -> tuple[NDArray, float]:
    """Coordinate search from every device at ``start``: each sweep sets each device's action in turn to the best of
    ``grid`` given the others'; ``(actions (K, 1), mean return)`` after ``sweeps`` sweeps or none improves."""
    score = _mean_return(task_id, seeds)
    actions = np.full((device_side(task_id, 1).num_devices, 1), start)
    best = score(actions)
    for _ in range(sweeps):
        improved = False
        for k in range(actions.shape[0]):
            for a in grid:
                trial = actions.copy()
                trial[k] = a
                value = score(trial)
                if value > best + 1e-12:
                    actions, best, improved = trial, value, True
        if not improved:
            break
    return actions, best


def full_csi_bound(task_id: str, seeds: Sequence[int]) -> NDArray:
    """An upper bound on the team's return of any device policy on each realisation of a CDPB-n task, even one that
    sees every device's channel of every round: the paper's rule with no device leaving and no privacy charged.

    Under CDPB-n every device transmits at its full power P, its gradient or not (eqs. (10), (11)), so the received
    noise is sigma_q^2 = sum_k P h_k - K_t rho W^2 + sigma_z^2 and the round's term (41) is
    B = 4 M^2 G / K_t + (A - K_t rho W^2) / (K_t^2 rho) with A = sum_k P h_k + sigma_z^2; its derivative in K_t has the
    sign of K_t rho W^2 - 2A < 0 (each of the K_t devices in has P h_k >= rho W^2 (7)), so B falls with every device
    that joins, and K_t is at most the number of devices above h_th: the paper's rule, every able device in, makes
    each round's convergence share the best it can be, whatever is known. The privacy charge is never negative and a
    device's leaving only takes it out. (S,) returns."""
    scenario = device_side(task_id, 1).scenario
    if scenario.strategy != "noisy" or scenario.client_sampling != 1.0:
        raise ValueError("full_csi_bound holds for CDPB-n with every client sampled (strategy='noisy', "
                         f"client_sampling=1); got strategy={scenario.strategy!r}, "
                         f"client_sampling={scenario.client_sampling!r}")
    return evaluate_devices(task_id, paper_rule(task_id), seeds, leave_when_spent=False,
                            scenario_overrides={"lambda_privacy": 0.0}).returns


def _stored_actions(actions: Sequence[float]) -> ConstantActions:
    """A searched reference at its stored actions: one for all devices, or each device's (one action entry)."""
    a = np.asarray(actions, dtype=float)
    return ConstantActions(a if a.size == 1 else a[:, None])


def device_references(task_id: str) -> dict[str, DevicePolicy]:
    """A device task's references by name, floor to ceiling: ``UniformRandom`` (seeded 0), ``PaperRule``,
    ``PaperPlanner``, the searched ``BestCommonConstant`` (the floor) and ``PerDeviceConstants`` (the computed
    ceiling) at their stored actions (:attr:`otagym.tasks.DeviceTask.reference_actions`)."""
    stored = {name: _stored_actions(a) for name, a in DEVICE_TASKS[task_id].reference_actions.items()}
    return {"UniformRandom": UniformRandom(np.random.default_rng(0)), "PaperRule": paper_rule(task_id),
            "PaperPlanner": paper_planner(task_id), **stored}
