"""agents.budget_apg: the pathwise gradient of the return equals central differences of the env's own return, the
reward's slope in the cost equals the env's rewards differenced, the formula's central differences equal closed forms, the
settings and the options `otagym train` does not take refused at the door, the same seed training the same policy (a
short run through `otagym train`/`evaluate` is tests/agents/test_budget_ppo.py's, for both batched trainers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import otagym  # noqa: F401
from agents.budget_apg import BudgetAPGSettings, central_partials, episode_loss, play_episode, train_budget_apg
from agents.budget_ppo import new_model
from otagym.env import OTAPrivacyVectorEnv
from otagym.tasks import TASKS
from otagym.wrappers import relative_spend, spend_multiplier

TASK = "otagym/ReceiveScalingCMDPGaussMarkov-v0"
T = TASKS[TASK].max_episode_steps


def _env(settings: BudgetAPGSettings, seed: int):
    env = settings.training_env(TASK)
    env.reset(seed=seed)
    return env


@pytest.mark.parametrize("action", ["spend", "price"])
def test_the_pathwise_gradient_is_the_env_returns_slope(action):
    """d(sum of returns)/d(parameter) by the adjoint recursion through the T rounds against central differences of
    the env's returns, on the same channels, for the actor's output bias and three of its weights, with either action
    (the relative spend, the env's price action). The gradient leaves out the cumulative RDP's part of the observation
    (the module says so): measured 0.2-2.5% here."""
    torch.set_num_threads(1)
    settings = BudgetAPGSettings(num_envs=8, action=action)
    policy = new_model(TASK, settings.network(), 0, action).policy
    bias, weight = policy.action_net.bias, policy.action_net.weight
    with torch.no_grad():  # an actor that spends below its share on average, so the caps bind on some rounds only
        bias.fill_(-0.2 if action == "spend" else 0.2)  # (a higher price buys less)
    loss, _ = episode_loss(policy, _env(settings, 3), T, settings)
    (-settings.num_envs * loss).backward()  # the loss is minus the mean return
    analytic = [bias.grad[0].item()] + [weight.grad[0, j].item() for j in range(3)]
    numeric = []
    for tensor, index in [(bias, (0,)), (weight, (0, 0)), (weight, (0, 1)), (weight, (0, 2))]:
        with torch.no_grad():
            tensor[index] += 1e-3
            up = play_episode(policy, _env(settings, 3), T).returns.sum()
            tensor[index] -= 2e-3
            down = play_episode(policy, _env(settings, 3), T).returns.sum()
            tensor[index] += 1e-3
        numeric.append((up - down) / 2e-3)
    np.testing.assert_allclose(analytic, numeric, rtol=0.05)
    assert abs(numeric[0]) > 1  # the bias matters: the comparison is not of two zeros


def test_budget_action_cost_is_what_the_env_spends():
    """core.budget_action_cost (the function the price action's gradient differentiates) at the budget left that the
    env's own costs leave, against the cost each round of random price actions reports: equal to 1e-6 of the per-round
    limit (R_t = nu B_t against the kernel's nu T - sum c_t), every episode ending with its budget spent."""
    env = BudgetAPGSettings(num_envs=4, action="price").training_env(TASK)
    env.reset(seed=1)
    rng, budget = np.random.default_rng(0), np.full(4, float(T))
    for t in range(T):
        action = rng.uniform(-1.0, 1.0, 4)
        predicted = env.core.budget_action_cost(action, budget, T - t, env.core.state.h_min2.copy())
        _, _, _, _, info = env.step(action[:, None].astype(np.float32))
        np.testing.assert_allclose(predicted, info["cost"], rtol=0, atol=1e-6)
        budget -= info["cost"]
    np.testing.assert_allclose(budget, 0.0, atol=1e-9)


@pytest.mark.parametrize("mode", [{}, {"reward_mode": "lagrangian", "reward_lambda": 50.0}])
def test_reward_cost_slope_is_the_env_rewards_differenced(mode):
    """core.reward_cost_slope against two env copies whose rounds spend c and c +- h (the same channel), with the
    task's reward and with the Lagrangian reward (which charges lambda per unit of cost)."""
    kwargs = {**TASKS[TASK].kwargs, **mode}
    envs = [OTAPrivacyVectorEnv(4, **kwargs) for _ in range(3)]
    for env in envs:
        env.reset(seed=11)
    spend = np.array([0.3, 1.0, 2.0, 5.0])
    h = 1e-4 * spend
    rewards = []
    for env, cost in zip(envs, (spend, spend + h, spend - h)):
        action = np.log10(9.0 * cost + 1.0) - 1.0  # the spend action of c_t / nu = cost
        _, reward, _, _, info = env.step(action[:, None])
        rewards.append(reward)
        if env is envs[0]:
            slope = env.core.reward_cost_slope(info["x"], info["h_min2"])
    np.testing.assert_allclose(slope, (rewards[1] - rewards[2]) / (2 * h), rtol=1e-3)
    assert np.all(slope > 0) or mode  # spending more leaks less


def test_central_partials_are_the_closed_forms():
    """relative_spend's partial derivatives by central_partials: m(a) / k in B_t and ln(10) 10^(1 + a) / 9 x B_t / k
    in a where the cap does not bind; where the floor's cap B_t - floor (k - 1) binds, 0 in a and 1 in B_t; a
    broadcast argument held fixed."""
    a = np.array([[0.0, -0.5, 0.3, 1.0]])
    budget = np.array([[100.0, 50.0, 200.0, 10.0]])
    k = np.array([50.0, 100.0, 80.0, 20.0])
    in_a, in_budget = central_partials(lambda x, b: relative_spend(x, b, k, 0.0, 0.5), a, budget)
    assert in_a.shape == in_budget.shape == (1, 4)
    (in_a,), (in_budget,), (a,), (budget,) = in_a, in_budget, a, budget
    m = spend_multiplier(a)
    free = budget / k * m <= budget - 0.5 * (k - 1)
    assert free[:3].all() and not free[3]  # the last is capped: 10 / 20 x 11 > 10 - 0.5 x 19
    np.testing.assert_allclose(in_budget[:3], (m / k)[:3], rtol=1e-6)
    np.testing.assert_allclose(in_a[:3], (np.log(10) * 10 ** (1 + a) / 9 * budget / k)[:3], rtol=1e-6)
    assert in_a[3] == pytest.approx(0.0, abs=1e-9) and in_budget[3] == pytest.approx(1.0)


def test_the_same_seed_trains_the_same_policy():
    """Two gradient steps from the same seed: the same statistics and bit-identical parameters; another seed moves
    them elsewhere."""
    from agents.budget_apg import training_iterations

    settings = BudgetAPGSettings(num_envs=2)

    def trained(seed: int) -> tuple[list[dict[str, float]], list[torch.Tensor]]:
        model = new_model(TASK, settings.network(), seed)
        stats = [s for _, s in training_iterations(model, TASK, settings, seed, 2)]
        return stats, [p.detach().clone() for p in model.policy.parameters()]

    (stats, params), (again, params_again), (_, other) = trained(4), trained(4), trained(5)
    assert stats == again and all(torch.equal(a, b) for a, b in zip(params, params_again))
    assert not all(torch.equal(a, b) for a, b in zip(params, other))


@pytest.mark.parametrize("field,value", [("num_envs", 0), ("learning_rate", 0.0), ("floor", 1.5),
                                         ("max_grad_norm", float("nan")), ("action", "share"), ("reserve", 0.5)])
def test_settings_refuse_bad_values_naming_them(field, value):
    with pytest.raises(ValueError, match=field):
        BudgetAPGSettings(**{field: value})


def test_trainer_refuses_a_task_without_the_spend_action(tmp_path):
    with pytest.raises(ValueError, match="spend tasks"):
        train_budget_apg("otagym/ReceiveScalingCMDPLogX-v0", tmp_path / "run")


@pytest.mark.parametrize("algo", ["budget_ppo", "budget_apg"])
@pytest.mark.parametrize("extra,message", [(["--task", "otagym/ReceiveScalingCMDPLogX-v0"], "argument --task"),
                                           (["--task", TASK, "--config", "x.yml"], "argument --config: not with")])
def test_otagym_train_refuses_what_the_batched_trainers_do_not_take(algo, extra, message, tmp_path, capsys):
    from otagym.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--algo", algo, "--run-dir", str(tmp_path / "run"), *extra])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_training_episodes_draw_nu_from_the_widened_range_and_observe_it_as_the_task_does():
    task, settings = "otagym/ReceiveScalingCMDP-v1", BudgetAPGSettings(nu_widening=2.0)
    kwargs, played = settings.training_env_kwargs(task), {**TASKS[task].kwargs, **settings.env_overrides}
    assert kwargs["nu_range"] == pytest.approx((0.005, 0.32))
    assert {k: v for k, v in kwargs.items() if k != "nu_range"} == {k: v for k, v in played.items() if k != "nu_range"}
    assert BudgetAPGSettings(nu_widening=1.0).training_env_kwargs(task) == played
    assert BudgetAPGSettings(action="spend").env_overrides == {}  # the task's own action
    wide, own = OTAPrivacyVectorEnv(2, **kwargs), OTAPrivacyVectorEnv(2, **played)
    wide.reset(seed=0, options={"nu": 0.02})
    own.reset(seed=0, options={"nu": 0.02})
    assert wide.core.log10_nu_ref == pytest.approx(own.core.log10_nu_ref, rel=1e-15)  # the same centre
    np.testing.assert_array_equal(wide.core.observation(), own.core.observation())  # float32: the task's own
    for bad in (0.5, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="nu_widening"):
            BudgetAPGSettings(nu_widening=bad)
