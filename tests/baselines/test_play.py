"""The one loop that plays a policy (:func:`baselines.play.play`): what it tells the policy, what it returns, and that
the scores of every path through it are the same episodes (a benchmark score, ``otagym compare``'s cell, the
reference that needs the future channel)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from baselines.benchmark import ConstantAction, play_episodes
from baselines.play import play
from baselines.receive_scaling.benchmark import BENCHMARK, X_POLICY_ENV
from baselines.receive_scaling.compare import POLICIES, evaluate_cells
from baselines.receive_scaling.evaluation import run_policy, sample_realisations
from baselines.receive_scaling.policies import EqualAlloc, OfflineOptimal
from otagym.env import OTAPrivacyVectorEnv
from otagym.tasks import TASKS, reference_scores, task_scenario

ROOT = Path(__file__).resolve().parents[2]
TASK = "otagym/ReceiveScalingCMDP-v1"
SEEDS = (70_000, 70_003)


class Recorder:
    """Remembers what ``reset`` was told and the rounds ``act`` saw; plays a constant env action."""

    def __init__(self, action: np.ndarray) -> None:
        self.action, self.told, self.rounds = action, None, 0

    def reset(self, scenario, seed=None, **offline):
        self.told = (scenario, seed, offline)

    def act(self, observation, info):
        self.rounds += 1
        return self.action


def test_play_tells_the_policy_the_realisation_calls_on_round_from_the_reset_and_returns_the_episode_end():
    env = OTAPrivacyVectorEnv(3, **TASKS[TASK].kwargs, autoreset_mode=AutoresetMode.SAME_STEP)
    gains = np.ones((500, 3, env.scenario.num_devices))
    options = {"channel_gains": gains, "distances_m": np.full((3, env.scenario.num_devices), 100.0),
               "nu": np.array([0.01, 0.04, 0.16])}
    seen = {}
    policy = Recorder(np.float64(0.0))  # one action for all envs: broadcast to (3, 1)
    played = play(policy, env, options, range(500), seed=7, cost_limit=500.0,
                  on_round=lambda t, info: seen.update({t: info}))
    assert policy.told[0] == env.scenario and policy.told[1] == 7 and policy.told[2]["channel_gains"] is gains
    assert list(seen) == list(range(-1, 500)) and policy.rounds == 500
    assert played.final_info is seen[499]["final_info"]  # the episode's end, not the next episode's reset
    # a = 0 of the spend action spends the fair share left: every episode ends at its limit
    np.testing.assert_allclose(played.cost_ratios, 1.0, rtol=1e-9)


def test_the_cost_ratio_is_the_sum_of_the_rounds_costs_over_the_limit():
    played = play_episodes(ConstantAction(0.3), TASK, SEEDS, 0.04)  # spends 2.2 nu a round until the budget binds
    np.testing.assert_allclose(played.cost_ratios, played.final_info["convergence_cost_mean"] / 0.04, rtol=1e-12)
    assert 1.5 < played.cost_ratios.min()


def test_an_env_that_resets_on_the_next_step_and_reports_no_cost_gives_its_last_info_and_no_cost_ratios():
    env = OTAPrivacyVectorEnv(2, scheme="anonymous", dp_orders=None, num_rounds=5)
    played = play(Recorder(np.zeros(2)), env, {}, range(5))
    assert played.cost_ratios is None and np.isfinite(played.returns).all()
    np.testing.assert_array_equal(played.final_info["round"], 4)


def test_a_policy_whose_reset_takes_no_keywords_is_reset_without_the_realisation():
    class Plain:
        def reset(self, scenario, seed=None):
            self.seed = seed

        def act(self, observation, info):
            return np.zeros(len(observation))

    policy = Plain()
    assert np.isfinite(play_episodes(policy, TASK, SEEDS, 0.04).returns).all() and policy.seed == 0


def test_an_action_of_another_shape_reaches_the_env_which_names_it():
    with pytest.raises(ValueError, match="action"):
        play_episodes(Recorder(np.zeros(5)), TASK, SEEDS, 0.04)


def test_an_x_policy_scored_on_a_task_plays_the_same_episode_as_compares_runner():
    """The benchmark's play (the task's env with :data:`X_POLICY_ENV`) and ``otagym compare``'s ``run_policy`` (an
    env built from the scenario) are one loop on the same realisations: the same leakages, bit for bit."""
    nu = np.full(len(SEEDS), 0.04)
    ours = play_episodes(EqualAlloc(nu=nu), TASK, SEEDS, 0.04, **X_POLICY_ENV).final_info
    scenario = task_scenario(TASK, 0.04)
    theirs = run_policy(EqualAlloc(nu=nu), scenario, sample_realisations(scenario, SEEDS), dp=False, nu=nu)
    assert np.array_equal(ours["leakage_total"], theirs.leakage)
    assert np.array_equal(ours["convergence_cost_mean"], theirs.cost_mean)


def test_a_policy_without_a_budget_of_its_own_is_told_the_scored_one():
    """EqualAlloc() takes nu from the scenario it is reset with: the one of the budget scored, not the preset's."""
    for nu in (0.01, 0.16):
        scores, costs = BENCHMARK.scores_and_costs(EqualAlloc(), TASK, SEEDS, nu)
        np.testing.assert_allclose(scores, 0.0, atol=1e-9)
        np.testing.assert_allclose(costs, 1.0, rtol=1e-12)


def test_the_offline_optimum_is_played_like_any_policy_and_scores_100():
    """OfflineOptimal needs the realisation's future channel: the one loop passes the realisation to ``reset``."""
    scores, costs = BENCHMARK.scores_and_costs(OfflineOptimal(nu=np.full(len(SEEDS), 0.04)), TASK, SEEDS, 0.04)
    np.testing.assert_allclose(scores, 100.0, atol=1e-6)
    np.testing.assert_allclose(costs, 1.0, rtol=1e-6)


def test_a_calibrated_reference_scores_as_compares_cell():
    """AdaScale's V is calibrated on the realisations, then it plays like any policy: the score of its cell."""
    scores, _ = BENCHMARK.evaluate(POLICIES["AdaScale"], TASK, SEEDS[:1])
    cell = evaluate_cells(task_scenario(TASK), POLICIES["AdaScale"], [(TASKS[TASK].eval_nus[0], SEEDS[0])])[0]
    assert scores[str(float(TASKS[TASK].eval_nus[0]))] == [cell["score"]]


def test_evaluating_a_seeded_reference_gives_its_stored_scores():
    """``otagym evaluate IID UniformRandom`` and the stored references play it alike (its draws seeded by the
    reset's seed, the whole evaluation set in one batch)."""
    task = "otagym/ReceiveScalingIID-v0"
    scores, _ = BENCHMARK.evaluate(BENCHMARK.references(task)["UniformRandom"], task, TASKS[task].eval_seeds)
    assert scores == reference_scores(task)["scores"]["UniformRandom"]


@pytest.mark.parametrize("folder", ["baselines", "otagym/cli"])
def test_only_the_one_loop_steps_an_env(folder):
    """No module of the baselines or the command line but :mod:`baselines.play` steps an env (a ``step`` call on
    anything named ``*env*``): every policy is played by :func:`baselines.play.play` (``otagym rollout``, which
    prints one env's rounds, steps it; the device side of a devices-as-agents task is not an env)."""
    stepping = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step" \
                    and "env" in ast.unparse(node.func.value).lower():
                stepping.append(str(path.relative_to(ROOT)))
    assert sorted(set(stepping)) == {"baselines": ["baselines/play.py"],
                                     "otagym/cli": ["otagym/cli/commands.py"]}[folder]
