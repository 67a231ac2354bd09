"""What an analytic policy loses when the deployment's channel statistics are not told: the measurement behind not
registering an unknown-deployment task.

The suite's observation normalises the channel by its mean under the episode's deployment (``channel`` =
log10(h_min,t^2 / E[h_min^2]); the distances are drawn at every reset). A policy that is not told the deployment has
to estimate that mean from the rounds it has seen. The measurement plays the fair-share rule: spend F_t (h_min,t^2 /
E[h_min^2])^p, F_t the fair share left (:func:`otagym.wrappers.relative_spend`: never more than the budget left),
with the true mean (what the observation tells) and with a plug-in estimate (the running mean of the rounds seen so
far, this one included: only ratios of channels enter, so the unknown deployment cancels). p is tuned per budget on
the tuning realisations (:data:`otagym.tasks.TUNING_SEEDS`, p in 0, 0.25, ..., 2), and both are scored on the
validation realisations (feasible score; the evaluation set is not looked at).

Measured (32 validation realisations; IQM told / plug-in at nu = 0.01, 0.04, 0.16):

* ``ReceiveScalingCMDP-v1`` (i.i.d.): 97.2 / 96.2, 87.6 / 86.6, 57.2 / 56.9;
* ``ReceiveScalingCMDPGaussMarkov-v0``: 95.3 / 92.3, 86.7 / 82.0, 56.6 / 56.3;
* ``ReceiveScalingCMDPBlock-v0``: 93.0 / 87.2, 83.6 / 78.3, 55.0 / 52.7;

every episode within its limit. Estimating the statistics online costs the rule 0.3-1.0 points under i.i.d. fading
and at most 6 under correlated fading (fewer independent samples per episode): hiding the deployment leaves a learner
little to win over a plug-in policy, far below the 20 points a task must have to be kept.

    python -m benchmarks.unknown_deployment
    python -m benchmarks.unknown_deployment --task otagym/ReceiveScalingCMDPBlock-v0
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from numpy.typing import NDArray

from baselines.benchmark import cvar, iqm_of, normalized_score, play_episodes, ranked_scores
from otagym.schemes import SCHEMES
from otagym.tasks import BENCHMARK_VALIDATION_SEEDS, TASKS, TUNING_SEEDS
from otagym.wrappers import relative_action, relative_spend

#: The exponents p tried on the tuning realisations.
EXPONENTS = tuple(np.arange(0.0, 2.01, 0.25))


class FairShareRule:
    """Spend F_t (h_min,t^2 / m_t)^p, m_t the channel's mean (``plug_in=False``: the deployment's, as observed) or the
    running mean of the rounds seen so far (``plug_in=True``); a policy of the ``baselines`` protocol playing the spend
    action of a task of ``scheme`` (its observation's ``channel``, ``progress`` and ``budget_left`` entries, read by
    name)."""

    def __init__(self, exponent: float, plug_in: bool, num_rounds: int, scheme: str = "receive_scaling") -> None:
        self.exponent, self.plug_in, self.num_rounds = float(exponent), bool(plug_in), int(num_rounds)
        self._entry_names = SCHEMES[scheme].observation_layout.entry_names
        self._seen: NDArray | None = None
        self._rounds = 0

    def reset(self, scenario: Any, seed: int | None = None, **_: Any) -> None:
        names = self._entry_names(scenario)
        self._channel, self._progress, self._budget_left = (names.index(n) for n in ("channel", "progress",
                                                                                     "budget_left"))
        self._seen, self._rounds = None, 0

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        obs = np.asarray(observation, dtype=float)
        relative = 10.0 ** obs[:, self._channel]  # h_min,t^2 / E[h_min^2]
        if self.plug_in:
            self._seen = relative if self._seen is None else self._seen + relative
            self._rounds += 1
            relative = relative / (self._seen / self._rounds)  # the deployment's mean cancels
        rounds_left = np.rint(self.num_rounds * (1.0 - obs[:, self._progress]))
        budget_left = obs[:, self._budget_left] * self.num_rounds * (1.0 - 1e-5)  # float32's rounding
        spend = relative_spend(relative_action(relative ** self.exponent), budget_left, rounds_left)
        return relative_action(spend)[:, None].astype(np.float32)  # the spend action of a per-round limit of 1


def scores(task_id: str, exponent: float, plug_in: bool, nu: float, seeds: tuple[int, ...]) -> tuple[NDArray, NDArray]:
    """The feasible scores and the episode costs over the limit of the rule on the realisation of each seed."""
    task = TASKS[task_id]
    rule = FairShareRule(exponent, plug_in, task.max_episode_steps, task.scheme)
    episodes = play_episodes(rule, task_id, list(seeds), nu=nu)
    raw = normalized_score(task_id, nu, list(seeds), episodes.returns)
    return ranked_scores(task_id, nu, list(seeds), raw, episodes.cost_ratios), np.asarray(episodes.cost_ratios)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="otagym/ReceiveScalingCMDP-v1", help="a spend task of the suite")
    args = parser.parse_args(argv)
    for nu in TASKS[args.task].eval_nus:
        for plug_in in (False, True):
            tuned = max(EXPONENTS, key=lambda p: iqm_of(scores(args.task, p, plug_in, nu, TUNING_SEEDS)[0]))
            s, cost = scores(args.task, tuned, plug_in, nu, BENCHMARK_VALIDATION_SEEDS)
            print(f"nu={nu:<5} {'plug-in' if plug_in else 'told   '} p={tuned:.2f}  IQM {iqm_of(s):5.1f}  mean "
                  f"{s.mean():7.1f}  CVaR10 {cvar(s):7.1f}  worst {s.min():7.1f}  over {np.mean(cost > 1 + 1e-6):.0%}",
                  flush=True)


if __name__ == "__main__":
    main()
