"""The device task's reference policies and their batched evaluation, against the PettingZoo env played seed by
seed (an independent path: the parallel API's dicts, one realisation at a time)."""

import numpy as np
import pytest

from baselines.cdpb.devices import (ConstantActions, UniformRandom, best_common_constant, best_per_device_constants,
                                    full_csi_bound, paper_planner,
                                    evaluate_devices, paper_rule)
from otagym.multiagent import DEVICE_TASKS, device_evaluation_options, make_device_env
from otagym.schemes.cdpb.devices import THRESHOLD_SCALE_MAX

TASK = "otagym/CDPB-Devices-v0"
SEEDS = DEVICE_TASKS[TASK].validation_seeds[:3]


def env_return(actions: np.ndarray, seed: int) -> float:
    """The team's return of device k playing ``actions[k]`` on the realisation of ``seed``, through the env."""
    env = make_device_env(TASK)
    env.reset(seed=0, options=device_evaluation_options(TASK, seed))
    total = 0.0
    while env.agents:
        _, rewards, _, _, _ = env.step({a: actions[int(a.split("_")[1])] for a in env.agents})
        total += next(iter(rewards.values()))
    return total


@pytest.mark.slow
def test_the_batched_evaluation_equals_the_parallel_env_seed_by_seed():
    """CDPB-n with every client in: no coin, no sampling, so a replayed realisation fixes the episode; the batched
    evaluation then gives each env's return (the team reward of the live agents, the rest charged when all leave)."""
    actions = np.linspace(-1.0, -0.4, 10)[:, None]
    batched = evaluate_devices(TASK, ConstantActions(actions), SEEDS)
    np.testing.assert_allclose(batched.returns, [env_return(actions, seed) for seed in SEEDS], rtol=1e-12)
    assert batched.worst_privacy_used.shape == batched.devices_left.shape == (3,)


def test_constant_actions_and_the_papers_rule():
    obs = np.zeros((2, 10, 5))
    np.testing.assert_array_equal(ConstantActions(np.array([0.5])).act(obs), np.full((2, 10, 1), 0.5))
    per_device = np.arange(10.0)[:, None] / 10
    np.testing.assert_array_equal(ConstantActions(per_device).act(obs)[1], per_device)
    np.testing.assert_array_equal(paper_rule(TASK).actions, [-1.0])  # c_k = 1, the paper's threshold
    draws = UniformRandom(np.random.default_rng(0)).act(np.zeros((100, 10, 5)))
    assert draws.shape == (100, 10, 1) and -1 <= draws.min() < -0.99 and 0.99 < draws.max() <= 1


@pytest.mark.slow
def test_the_best_common_constant_is_the_argmax_of_its_grid_played_through_the_env():
    """Its value and argmax against the PettingZoo env played seed by seed (an independent path)."""
    grid = np.array([-1.0, -0.5, 0.0])
    action, value = best_common_constant(TASK, SEEDS, grid)
    values = [np.mean([env_return(np.full((10, 1), a), seed) for seed in SEEDS]) for a in grid]
    assert action == grid[int(np.argmax(values))] and value == pytest.approx(max(values), rel=1e-9)


@pytest.mark.slow
def test_the_per_device_search_ends_where_no_single_device_gains_through_the_env():
    """Run to convergence, the search's actions are a coordinate-wise optimum on its grid: no device's change, played
    through the PettingZoo env, beats the value it reports (which is the env's)."""
    grid, seeds = np.array([-1.0, -0.6]), SEEDS[:2]
    actions, value = best_per_device_constants(TASK, seeds, -1.0, grid=grid, sweeps=20)
    assert actions.shape == (10, 1)
    assert value == pytest.approx(np.mean([env_return(actions, s) for s in seeds]), rel=1e-9)
    for k in range(10):
        trial = actions.copy()
        trial[k] = grid[grid != actions[k, 0]][0]
        assert np.mean([env_return(trial, s) for s in seeds]) <= value + 1e-9 * abs(value)


@pytest.mark.slow
def test_no_policy_beats_the_full_csi_bound_on_any_realisation():
    """The bound against the paper's rule (its privacy charge is positive), random per-device constants and uniform
    random devices, realisation by realisation."""
    bound = full_csi_bound(TASK, SEEDS)
    rng = np.random.default_rng(0)
    policies = [paper_rule(TASK), UniformRandom(rng)] + [ConstantActions(rng.uniform(-1, 1, (10, 1)))
                                                         for _ in range(4)]
    for policy in policies:
        assert np.all(evaluate_devices(TASK, policy, SEEDS).returns < bound)
    loose = make_device_env(TASK, leave_when_spent=False, scenario_overrides={"lambda_privacy": 0.0})
    loose.reset(seed=0, options=device_evaluation_options(TASK, SEEDS[0]))
    total = 0.0
    while loose.agents:
        total += next(iter(loose.step({a: np.array([-1.0]) for a in loose.agents})[1].values()))
    assert total == pytest.approx(bound[0], rel=1e-12)


def test_the_papers_planner_per_device_is_the_threshold_of_its_rho(monkeypatch):
    """Its Stage-II rho at tau = 100 (0.109 P/W^2) lies below the server's 0.3 P/W^2: every device is at c = 1, the
    paper's rule; with the server's rho at 0.05 P/W^2 the devices raise their threshold by rho_tau / rho."""
    np.testing.assert_array_equal(paper_planner(TASK).actions, paper_rule(TASK).actions)
    from baselines.cdpb import devices

    real = devices.device_side
    monkeypatch.setattr(devices, "device_side", lambda task_id, n, **kw: real(task_id, n, **{**kw, "rho": 0.05}))
    scale = THRESHOLD_SCALE_MAX ** ((paper_planner(TASK).actions[0] + 1) / 2)
    assert scale * 0.05 == pytest.approx(0.10902, rel=1e-4)
