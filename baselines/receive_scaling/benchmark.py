"""How receive scaling's tasks are scored, and their references: a policy returns x_t
(:class:`baselines.receive_scaling.core.Policy`) and is scored from its leakage, 0 = EqualAlloc and 100 =
OfflineOptimal on the same channel realisation, so the anchors need no stored returns. Every policy is played by
:func:`baselines.benchmark.play_episodes` (x_t policies under :data:`X_POLICY_ENV`); an analytic policy with a tuned
parameter is calibrated on the realisations first (:meth:`~baselines.receive_scaling.compare.PolicySpec.calibrated`).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from baselines.benchmark import SchemeBenchmark, best_constant_action, play_episodes, task_scores_and_costs
from baselines.receive_scaling.compare import POLICIES, PolicySpec
from baselines.receive_scaling.evaluation import leakage_score, reference_leakage, sample_realisations
from baselines.receive_scaling.policies import ACTION_KEYS, EqualAlloc
from baselines.receive_scaling.references import BestConstant, DualPrice, UniformRandom
from otagym.env import OTAPrivacyVectorEnv
from otagym.tasks import TASKS, task_scenario

__all__ = ["ReceiveScalingBenchmark", "BENCHMARK", "X_POLICY_ENV", "offline_returns"]

#: The env arguments under which an x_t policy plays a task (:meth:`ReceiveScalingBenchmark.scores_and_costs`): the
#: action is x_t itself and every round's cost counts as spent (no budget rule of the env's; a policy under budget
#: mode's rule keeps it itself, :class:`~baselines.receive_scaling.policies.Budgeted`). The physics are the task's.
X_POLICY_ENV: dict[str, str] = {"reward_mode": "cmdp", "action_type": "x"}


class ReceiveScalingBenchmark(SchemeBenchmark):
    """Receive scaling's tasks: references are :class:`~baselines.receive_scaling.compare.PolicySpec` (x_t
    policies, calibrated like ``otagym compare``'s cells), scored from their leakage."""

    def references(self, task_id: str) -> dict[str, PolicySpec]:
        """The reference policies by name, floor to ceiling (OfflineOptimal is 100 by definition of the score):
        ``UniformRandom`` (the task's own action, uniform), ``EqualAlloc``, ``BestConstant``, ``AdaScaleTrained`` and
        ``OnlineOptimal`` (:mod:`baselines.receive_scaling.references`; budget mode, so each meets nu on every
        realisation). On a constrained task (a CMDP) ``BestConstant`` is the constant env action per budget with the
        best mean return on training realisations among those that meet the constraint in the mean
        (:func:`~baselines.benchmark.best_constant_action`; with the spend action it is a = 0, EqualAlloc: a constant
        spend meets the constraint exactly when a <= 0, and spending more leaks less), and ``DualPrice`` is the
        online optimum when the constraint holds in expectation only (it is over the limit on about half the
        realisations). On a task of the suite its violation floor (:attr:`otagym.tasks.Task.violation_floor`,
        ``FullPower``: it spends nothing) too."""
        task = TASKS[task_id]
        action = str(task.kwargs["action_type"])
        refs = {"UniformRandom": PolicySpec(lambda nu, p: UniformRandom(nu=nu, action_type=action), matched=False),
                **{name: POLICIES[name] for name in ("EqualAlloc", "BestConstant", "AdaScaleTrained", "OnlineOptimal")}}
        if task.constrained:
            refs["BestConstant"] = PolicySpec(lambda nu, p: BestConstant(
                nu=nu, action=_per_env(lambda v: best_constant_action(task_id, v), nu), action_type=action))
            refs["DualPrice"] = PolicySpec(lambda nu, p: DualPrice(nu=nu), matched=False)
        if task.violation_floor:
            refs[task.violation_floor] = POLICIES[task.violation_floor]
        return refs

    def analytic_policies(self, task_id: str) -> dict[str, PolicySpec]:
        """``otagym compare``'s analytic policies and the task's references."""
        return {**POLICIES, **self.references(task_id)}

    def evaluate(self, spec: Any, task_id: str, seeds: Sequence[int]
                 ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """An analytic policy (a :class:`~baselines.receive_scaling.compare.PolicySpec`) calibrated on the
        realisations as ``otagym compare``'s cells are (:meth:`~baselines.receive_scaling.compare.PolicySpec
        .calibrated`), then played and scored as any x_t policy (:meth:`scores_and_costs`); any other as
        :meth:`SchemeBenchmark.evaluate` plays it."""
        if not isinstance(spec, PolicySpec):
            return super().evaluate(spec, task_id, seeds)
        scores, costs = {}, {}
        scenario, real = task_scenario(task_id), sample_realisations(task_scenario(task_id), seeds)
        for nu in TASKS[task_id].eval_nus:
            policy, _, _ = spec.calibrated(scenario, real, np.full(len(seeds), float(nu)))
            scores[str(float(nu))], costs[str(float(nu))] = self.scores_and_costs(policy, task_id, seeds, nu)
        return scores, costs

    def formulation(self, env_kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """(scenario, reward mode, action type, fading, correlation, coherence rounds), defaults filled in."""
        mode = env_kwargs.get("reward_mode", "budget")
        return (env_kwargs.get("scenario", "paper-mnist"), mode,
                env_kwargs.get("action_type", "price" if mode == "budget" else "normalized"),
                env_kwargs.get("fading", "iid"), env_kwargs.get("correlation"), env_kwargs.get("coherence_rounds"))

    def trained_overrides(self, label: str, run_kwargs: dict[str, Any], task_id: str) -> dict[str, Any]:
        """The action semantics the model was trained with (:data:`~baselines.receive_scaling.policies.ACTION_KEYS`);
        ``ValueError`` when its scenario, reward mode or action type is not the task's. A budget-mode model (its
        action a budget action, which meets the budget by construction) plays a CMDP task of its scenario in budget
        mode: the reward is the same (the leakage saved over EqualAlloc) and so is the cost it reports."""
        kw = run_kwargs or dict(TASKS[task_id].kwargs)
        trained, asked = self.formulation(kw)[:3], self.formulation(TASKS[task_id].kwargs)[:3]
        budget_on_cmdp = trained[0] == asked[0] and trained[1] == "budget" and asked[1] == "cmdp"
        if trained != asked and not budget_on_cmdp:
            raise ValueError(f"policy {label!r} was trained on scenario, reward_mode, action_type = {trained}, and "
                             f"{task_id} is {asked}: its actions would mean something else here")
        return {k: kw[k] for k in ACTION_KEYS if k in kw}

    def anchor_returns(self, task_id: str, nu: float, seeds: Sequence[int]) -> tuple[list[float], list[float]]:
        """EqualAlloc's return (0: the reward is the leakage saved over it) and OfflineOptimal's
        (:func:`offline_returns`)."""
        return [0.0] * len(seeds), offline_returns(task_id, nu, seeds)

    def scores_and_costs(self, policy: Any, task_id: str, seeds: Sequence[int], nu: float,
                         **env_overrides: Any) -> tuple[list[float], list[float]]:
        """The leakage score of ``policy`` (x_t, played by :func:`~baselines.benchmark.play_episodes` in the task's
        env with :data:`X_POLICY_ENV`) and its mean cost over nu on each realisation (``env_overrides`` do not
        apply: the policy returns x_t)."""
        final = play_episodes(policy, task_id, seeds, float(nu), **X_POLICY_ENV).final_info
        optimal = np.array([reference_leakage(task_scenario(task_id, nu), float(nu), s) for s in seeds])
        scores = leakage_score(final["leakage_total"], final["equal_alloc_leakage"], optimal).tolist()
        return scores, (final["convergence_cost_mean"] / float(nu)).tolist()  # info["cost"] = c_t / nu

    def reference_scores(self, task_id: str, anchors: dict[str, tuple[list[float], list[float]]],
                         seeds: Sequence[int], names: Sequence[str] | None = None
                         ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The leakage scores and cost ratios per budget of each reference (``names``, default all) on the
        realisation of each seed (``anchors`` are not needed: the score's anchors are computed on each
        realisation)."""
        scores, costs = {}, {}
        for name, spec in self.references(task_id).items():
            if names is None or name in names:
                scores[name], costs[name] = task_scores_and_costs(lambda nu, b=spec.build: b(nu, None), task_id,
                                                                  seeds)
        return scores, costs


def _per_env(value: Callable[[float], float], nu: NDArray) -> NDArray:
    """``value(nu)`` of each env's budget, computed once per distinct budget."""
    table = {float(v): value(float(v)) for v in np.unique(nu)}
    return np.array([table[float(v)] for v in np.ravel(nu)]).reshape(np.shape(nu))


def offline_returns(task_id: str, nu: float, seeds: Sequence[int]) -> list[float]:
    """OfflineOptimal's episode return in the task's env on the realisation of each seed at ``nu``:
    (L_EqualAlloc - L_OfflineOptimal) / H, H the env's reward scale of that placement and budget (the return of any
    episode over it is the episode's normalised score / 100)."""
    scenario = task_scenario(task_id, nu)
    real = sample_realisations(scenario, seeds)
    per_env = np.full(len(seeds), float(nu))
    equal_alloc = play_episodes(EqualAlloc(nu=per_env), task_id, seeds, float(nu),
                                **X_POLICY_ENV).final_info["equal_alloc_leakage"]
    optimal = np.array([reference_leakage(scenario, float(nu), s) for s in seeds])
    env = OTAPrivacyVectorEnv(len(seeds), **TASKS[task_id].kwargs)
    env.reset(seed=0, options={"distances_m": real.distances_m, "channel_gains": real.channel_gains, "nu": per_env})
    return ((equal_alloc - optimal) / env.core.state.reward_scale).tolist()


BENCHMARK = ReceiveScalingBenchmark()
