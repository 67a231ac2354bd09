"""Receive scaling's benchmark tasks, declared: the formulation tasks of the AdaScale paper's comparisons and the
constrained tasks of the benchmark suite. :mod:`otagym.tasks` builds each into a :class:`otagym.tasks.Task` (its id,
versioned; its env keyword arguments: :data:`~otagym.schemes.receive_scaling.scenario.TASK_SETTINGS` and the
declaration's ``settings``; its horizon, the preset's T).
"""

from __future__ import annotations

from typing import Any

__all__ = ["TASKS"]

#: The constrained tasks' formulation: the CMDP of problem (28), reward -(L_t - L_t^EA)/H and the constraint
#: (1/T) sum_t c_t <= nu in ``info["cost"]`` = c_t / nu, left to the agent.
_CMDP = {"reward_mode": "cmdp", "action_type": "spend"}
_GAUSS_MARKOV = {"fading": "gauss_markov", "correlation": 0.9}
_BLOCK = {"fading": "block", "coherence_rounds": 10}
#: The ceiling under Gauss-Markov fading: the programme is solved for the fading's i.i.d. marginal.
_LOWER_BOUND_CEILING = ("the dynamic programme of the fading's i.i.d. marginal: a feasible online policy, so a lower "
                        "bound on the online optimum (OfflineOptimal's 100 bounds it from above)")
_BUDGETS = (0.01, 0.04, 0.16)


def _suite(name: str, settings: dict[str, Any], summary: str, **task: Any) -> dict[str, Any]:
    """A task of the benchmark suite: receive scaling as a CMDP, whose over-limit episodes rank below FullPower's."""
    return dict(name=name, settings={**_CMDP, **settings}, eval_nus=_BUDGETS, summary=summary, suite=True,
                violation_floor="FullPower", **task)


#: Each task's declaration: ``name``, ``settings`` (beside the scheme's task settings), ``eval_nus``, ``summary``,
#: ``suite`` (scored on the benchmark suite's realisations) and any other :class:`otagym.tasks.Task` field.
TASKS: tuple[dict[str, Any], ...] = (
    dict(name="ReceiveScalingIID", settings={}, eval_nus=_BUDGETS, summary="Schedule receive scaling under i.i.d. "
         "Rayleigh fading: the future is unknown, and a good constant price is close to the online optimum."),
    dict(name="ReceiveScalingGaussMarkov", settings=_GAUSS_MARKOV, eval_nus=_BUDGETS,
         summary="Schedule receive scaling under Gauss-Markov fading (correlation 0.9 per round): the present channel "
         "predicts the next ones."),
    dict(name="ReceiveScalingBlock", settings=_BLOCK, eval_nus=_BUDGETS,
         summary="Schedule receive scaling under block fading (10-round coherence, the block position observed): a "
         "strong channel lasts its block, which a constant price overspends."),
    _suite("ReceiveScalingCMDP", {},
           "Schedule receive scaling under i.i.d. Rayleigh fading as a constrained MDP: the action is the round's "
           "spend, between nothing and 11 nu, and the mean cost must stay within nu.",
           versions=("v0: scored on the 32 formulation realisations, an episode over its cost limit scored as any "
                     "other", "v1: the benchmark suite's 128 evaluation realisations and feasible score")),
    _suite("ReceiveScalingCMDPGaussMarkov", _GAUSS_MARKOV,
           "The constrained task under Gauss-Markov fading (correlation 0.9 per round): the present channel predicts "
           "the next ones, which no analytic policy of the papers uses.", ceiling_note=_LOWER_BOUND_CEILING),
    _suite("ReceiveScalingCMDPBlock", _BLOCK,
           "The constrained task under block fading (10-round coherence, the block position observed): a strong "
           "block is worth spending on for its whole length, and overspending on it breaks the constraint."),
    _suite("ReceiveScalingCMDPLogX", {"action_type": "normalized"},
           "The constrained task with the raw receive scaling as the action, x on a log scale over [1e-3 x_max, "
           "x_max]: the round's cost depends on the channel, so a constant action meets the constraint only by "
           "spending almost nothing."),
)
