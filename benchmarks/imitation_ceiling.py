"""What ``budget_ppo``'s network can express on a spend task of the suite: the same MLP (its
:class:`~agents.budget_ppo.RelativeSpendPolicy`, two tanh layers of 64) fitted by regression to the relative actions of
``OnlineOptimal`` (behaviour cloning on the states OnlineOptimal visits), then scored as ``budget_ppo`` selects its
models, on the validation realisations (:func:`agents.budget_ppo.validation_score`). Where the clone scores well
above the trained agent, what limits the agent is its training, not its network or its observation.

The targets: OnlineOptimal plays x_t in the task's env; its spend in round t is ``info["cost"]`` after the step, and
its relative action is the action whose multiple of the fair share left F_t is that spend
(:func:`otagym.wrappers.relative_spend`; a spend of nothing is the target -1.2, below the action's clip at -1, so that
the clone's mean lands on it). The fit: the mean action's squared error, Adam, minibatches of 1,024.

Measured (``ReceiveScalingCMDP-v1``, 64 training realisations at 7 budgets log-spaced over [0.01, 0.16], 20,000
steps, 8 minutes on one core): validation 97.3 (nu = 0.01 / 0.04 / 0.16: 98.9 / 98.2 / 94.6); ``budget_ppo`` seed 0
reaches 85.5 there in 5M env steps and 88.6 in 15M.

    python -m benchmarks.imitation_ceiling
    python -m benchmarks.imitation_ceiling --realisations 4 --budgets 2 --steps 500    # a quick look
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from agents.budget_ppo import SPEND_TASKS, BudgetPPOSettings, new_model, validation_score
from baselines.benchmark import play_episodes, references
from otagym.tasks import BENCHMARK_TRAINING_SEEDS, TASKS
from otagym.wrappers import fair_share, relative_action

#: The target of a round that spends nothing: below the action's clip at -1.
NOTHING = -1.2


class TeacherStates:
    """A policy of the ``baselines`` protocol that plays ``teacher`` and records, for each round but an episode's
    last, the observation and the relative action of the spend it led to (``info["cost"]`` of the next round's
    ``act``), the fair share left followed from those costs: F_t = (T - spent) / (T - t)."""

    def __init__(self, teacher: Any, horizon: int) -> None:
        self.teacher, self.horizon = teacher, horizon
        self.observations: list[NDArray] = []
        self.actions: list[NDArray] = []
        self._obs: NDArray | None = None
        self._spent, self._t = np.zeros(1), 0

    def reset(self, scenario: Any, seed: int | None = None, **offline: Any) -> None:
        self.teacher.reset(scenario, seed, **offline)
        self._obs, self._t = None, 0

    def act(self, obs: NDArray, info: dict[str, Any]) -> Any:
        if self._obs is None:
            self._spent = np.zeros(len(obs))
        else:
            fair = fair_share(self.horizon - self._spent, self.horizon - self._t)
            self.observations.append(self._obs)
            self.actions.append(relative_target(info["cost"], fair))
            self._spent, self._t = self._spent + info["cost"], self._t + 1
        self._obs = np.array(obs, dtype=np.float32)
        return self.teacher.act(obs, info)


def relative_target(cost: NDArray, fair: NDArray) -> NDArray:
    """The relative action whose spend is ``cost`` at the fair share left ``fair`` (:data:`NOTHING` for none)."""
    multiple = np.asarray(cost, dtype=float) / np.maximum(fair, 1e-300)
    return np.where(multiple > 0, relative_action(np.clip(multiple, 0.0, 11.0)), NOTHING)


def teacher_states(task_id: str, seeds: tuple[int, ...], nus: NDArray) -> tuple[torch.Tensor, torch.Tensor]:
    """OnlineOptimal's states and relative actions on the realisation of each seed at each budget."""
    recorder = TeacherStates(None, TASKS[task_id].max_episode_steps)
    spec = references(task_id)["OnlineOptimal"]
    for nu in nus:
        recorder.teacher = spec.build(np.full(len(seeds), float(nu)), None)
        play_episodes(recorder, task_id, list(seeds), float(nu), action_type="x")
    return (torch.as_tensor(np.concatenate(recorder.observations)),
            torch.as_tensor(np.concatenate(recorder.actions), dtype=torch.float32))


def clone(model: Any, states: torch.Tensor, actions: torch.Tensor, steps: int, seed: int = 0) -> float:
    """Fit ``model``'s mean action to ``actions`` (Adam, lr 1e-3, minibatches of 1,024); the last minibatch's loss."""
    policy = model.policy
    optimiser = torch.optim.Adam(policy.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(seed)
    loss = torch.tensor(np.nan)
    for _ in range(steps):
        idx = torch.randint(0, states.shape[0], (1024,), generator=generator)
        latent = policy.mlp_extractor.forward_actor(policy.extract_features(states[idx], policy.pi_features_extractor))
        loss = ((policy.action_net(latent).flatten() - actions[idx]) ** 2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return float(loss.detach())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default=SPEND_TASKS[0], choices=SPEND_TASKS)
    parser.add_argument("--realisations", type=int, default=64, help="training realisations (default 64)")
    parser.add_argument("--budgets", type=int, default=7, help="budgets log-spaced over the task's nu range")
    parser.add_argument("--steps", type=int, default=20_000, help="Adam steps (default 20,000)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    low, high = TASKS[args.task].kwargs["nu_range"]
    states, actions = teacher_states(args.task, BENCHMARK_TRAINING_SEEDS[:args.realisations],
                                     np.geomspace(low, high, args.budgets))
    model = new_model(args.task, BudgetPPOSettings(), 0)
    loss = clone(model, states, actions, args.steps)
    score, per_nu = validation_score(model, args.task)
    print(f"{args.task}: {states.shape[0]:,} states, final loss {loss:.4f}, validation {score:.1f} ("
          + ", ".join(f"nu {nu}: {v['score']:.1f}" for nu, v in per_nu.items())
          + f"), {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
