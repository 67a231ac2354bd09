"""The per-episode budget wrappers (otagym.wrappers.budget): closed forms, the limit held by construction, the vector
forms equal to the single one episode by episode in both autoreset modes, and Saute's reshaping summed exactly."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st

import otagym  # noqa: F401  (registers the tasks)
from otagym.env import OTAPrivacyVectorEnv
from otagym.schemes.receive_scaling.actions import spend_action, spend_cost
from otagym.tasks import COST_TOLERANCE, TASKS, sample_realisation
from otagym.wrappers import (
    BudgetLedger,
    RelativeSpend,
    RelativeSpendVector,
    ReserveSafetyLayer,
    ReserveSafetyLayerVector,
    SauteBudget,
    SauteBudgetVector,
    relative_spend,
    spend_cap,
)

TASK = "otagym/ReceiveScalingCMDP-v1"
T = TASKS[TASK].max_episode_steps


def _options(seed: int, nu: float) -> dict:
    return {k: v.copy() for k, v in sample_realisation(TASK, seed).items()} | {"nu": nu}


@settings(deadline=None)
@given(st.floats(-1.0, 1.0), st.floats(1e-3, 1.0))
def test_spend_action_inverts_spend_cost(a, nu):
    assert spend_action(spend_cost(a, nu), nu) == pytest.approx(a, abs=1e-9)


def test_spend_action_clips_to_the_range_and_refuses_nan():
    assert spend_action([-1.0, 0.0, 100.0], 0.1).tolist() == [-1.0, -1.0, 1.0]
    with pytest.raises(ValueError, match="cost"):
        spend_action(np.nan, 0.1)


def test_relative_spend_closed_forms():
    # B = 10 left over k = 5 rounds: F = 2; a = 0 spends F, a = -1 nothing, a = 1 min(11 F, B) = B
    assert relative_spend([0.0, -1.0, 1.0], 10.0, 5).tolist() == pytest.approx([2.0, 0.0, 10.0])
    # m(0.5) = (10^1.5 - 1) / 9
    assert relative_spend(0.5, 10.0, 5) == pytest.approx(2.0 * (10 ** 1.5 - 1) / 9)
    # a reserve of half the fair share for each of the 4 later rounds: cap 10 - 0.5 * 4 * 2 = 6
    assert spend_cap(10.0, 5, 0.5) == pytest.approx(6.0)
    assert relative_spend(1.0, 10.0, 5, reserve=0.5) == pytest.approx(6.0)
    # a floor of half the per-round limit for each of the 4 later rounds: cap 10 - 0.5 * 4 = 8; the tighter cap wins
    assert spend_cap(10.0, 5, floor=0.5) == pytest.approx(8.0)
    assert spend_cap(10.0, 5, reserve=0.5, floor=0.5) == pytest.approx(6.0)
    assert spend_cap(1.0, 5, floor=0.5) == 0.0  # below its floor already: nothing
    # nothing left, nothing spent; the last round may spend all that is left
    assert relative_spend(1.0, -3.0, 7) == 0.0 and relative_spend(0.0, 4.0, 1) == pytest.approx(4.0)


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([0.01, 0.04, 0.16]))
def test_relative_spend_never_breaks_the_limit(seed, nu):
    env = RelativeSpend(gym.make(TASK))
    env.reset(seed=0, options=_options(90_000 + seed % 500, nu))
    rng, cost, done = np.random.default_rng(seed), 0.0, False
    while not done:
        _, _, terminated, truncated, info = env.step(rng.uniform(-1, 1, 1).astype(np.float32))
        cost += info["cost"]
        done = terminated or truncated
    assert cost <= T * (1 + COST_TOLERANCE)


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["relative", "safety layer"]))
def test_the_floor_keeps_every_later_round_its_share(seed, wrapper):
    """With floor f, the budget left before round t is at least f (T - t): the fair share left never falls below f,
    under the relative action and under the safety layer on the env's own spend alike."""
    env = (RelativeSpend(gym.make(TASK), floor=0.5) if wrapper == "relative"
           else ReserveSafetyLayer(gym.make(TASK), reserve=0.0, floor=0.5))
    env.reset(seed=0, options=_options(90_000 + seed % 500, 0.16))
    rng = np.random.default_rng(seed)
    for _ in range(T):
        assert env.ledger.budget_left[0] >= 0.5 * (env.ledger.rounds_left[0]) - 1e-6
        env.step(rng.uniform(0.0, 1.0, 1).astype(np.float32))  # 1 to 11 fair shares: the floor binds


def test_relative_spend_at_zero_is_equal_alloc():
    """a = 0 spends the fair share left, nu every round: EqualAlloc (the reward is the leakage saved over it: 0)."""
    env = RelativeSpend(gym.make(TASK))
    env.reset(seed=0, options=_options(90_001, 0.04))
    costs, rewards = [], []
    for _ in range(T):
        _, reward, *_, info = env.step(np.zeros(1, dtype=np.float32))
        costs.append(info["cost"])
        rewards.append(reward)
    assert np.allclose(costs, 1.0, rtol=1e-5) and np.allclose(rewards, 0.0, atol=1e-5)


def test_wrappers_refuse_an_env_without_the_spend_action():
    with pytest.raises(ValueError, match="action_type='spend'"):
        RelativeSpend(gym.make("otagym/ReceiveScalingCMDPLogX-v0"))
    with pytest.raises(ValueError, match=r"reserve must be a number in \[0, 1\]"):
        ReserveSafetyLayer(gym.make(TASK), reserve=1.5)
    for floor in ("0.5", True, float("nan")):
        with pytest.raises(ValueError, match=r"floor must be a number in \[0, 1\]"):
            RelativeSpend(gym.make(TASK), floor=floor)
    with pytest.raises(TypeError, match="augment must be True or False"):
        SauteBudget(gym.make(TASK), augment="yes")
    for outer in (RelativeSpend, ReserveSafetyLayer):  # the inner one's action is not the env's spend
        with pytest.raises(ValueError, match=f"{outer.__name__} needs the env's own spend action; it is under "
                                             "RelativeSpend, whose action is relative"):
            outer(RelativeSpend(gym.make(TASK)))
    RelativeSpend(ReserveSafetyLayer(gym.make(TASK)), floor=np.float64(0.5))  # a safety layer keeps the spend
    with pytest.raises(ValueError, match="penalty"):
        SauteBudget(gym.make(TASK), penalty=-1.0)
    with pytest.raises(ValueError, match="horizon"):
        BudgetLedger(2, 0)


def _single_episode(wrapper, actions, seed, nu, **kw):
    env = wrapper(gym.make(TASK), **kw)
    env.reset(seed=0, options=_options(seed, nu))
    out = [env.step(a[None].astype(np.float32)) for a in actions]
    return np.array([o[1] for o in out]), np.array([o[4]["cost"] for o in out])


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("wrapper,vector,kw", [(RelativeSpend, RelativeSpendVector, {}),
                                               (ReserveSafetyLayer, ReserveSafetyLayerVector, {"reserve": 0.5}),
                                               (SauteBudget, SauteBudgetVector, {"penalty": 2.0})])
def test_vector_form_equals_the_single_wrapper_across_an_autoreset(mode, wrapper, vector, kw):
    """Two envs: every reward and cost of their first episode equals the single wrapper's on the same realisation and
    actions; after the vector env's own autoreset, the ledger counts the second episode from its first round."""
    seeds, nu, rng = (90_002, 90_003), 0.16, np.random.default_rng(1)
    actions = rng.uniform(0.0, 1.0, (T + 4, 2))  # overspends: the safety layer and the penalty act
    native = OTAPrivacyVectorEnv(2, **TASKS[TASK].kwargs, autoreset_mode=mode)
    env = vector(native, horizon=T, **kw)
    real = [sample_realisation(TASK, s) for s in seeds]
    options = {k: np.stack([r[k] for r in real], axis=native.core.OPTION_AXES[k]) for k in real[0]}
    env.reset(seed=0, options=options | {"nu": np.full(2, nu)})
    rewards, costs = [], []
    for t in range(T + 4):
        _, reward, _, _, info = env.step(actions[t][:, None].astype(np.float32))
        rewards.append(reward)
        costs.append(info["cost"])
    for i, seed in enumerate(seeds):
        r, c = _single_episode(wrapper, actions[:T, i], seed, nu, **kw)
        np.testing.assert_allclose(np.array(rewards[:T])[:, i], r, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.array(costs[:T])[:, i], c, rtol=1e-9, atol=1e-12)
    played = 3 if mode == AutoresetMode.NEXT_STEP else 4  # NEXT_STEP: step T + 1 only resets
    assert (env.ledger.t == played).all()
    np.testing.assert_allclose(env.ledger.spent, np.sum(costs[-played:], axis=0), rtol=1e-12)


def test_reserve_layer_keeps_its_reserve_and_the_limit():
    env = ReserveSafetyLayer(gym.make(TASK), reserve=0.5)
    env.reset(seed=0, options=_options(90_004, 0.16))
    total = 0.0
    for t in range(T):
        cap = spend_cap(env.ledger.budget_left, env.ledger.rounds_left, 0.5)[0]
        _, _, _, _, info = env.step(np.ones(1, dtype=np.float32))  # always 11 nu: capped every round it would break
        assert info["cost"] <= cap + 1e-6  # the env's action is float32: an absolute rounding of about 2e-7 nu
        total += info["cost"]
    assert total <= T * (1 + COST_TOLERANCE)


def test_saute_penalty_sums_to_penalty_times_the_overspend_and_augments_the_state():
    plain, saute = gym.make(TASK), SauteBudget(gym.make(TASK), penalty=3.0, augment=True)
    obs0, _ = saute.reset(seed=0, options=_options(90_005, 0.04))
    plain.reset(seed=0, options=_options(90_005, 0.04))
    assert saute.observation_space.shape == (plain.observation_space.shape[0] + 1,) and obs0[-1] == 1.0
    gap, cost, a = 0.0, 0.0, np.full(1, 0.5, dtype=np.float32)  # 3.5 nu a round: over the limit after 143 rounds
    for _ in range(T):
        obs, r_saute, *_ = saute.step(a)
        _, r_plain, *_, info_plain = plain.step(a)
        gap += r_plain - r_saute
        cost += info_plain["cost"]
    assert cost > T and gap == pytest.approx(3.0 * (cost - T), rel=1e-9)
    assert obs[-1] == pytest.approx((T - cost) / T, rel=1e-6)


def test_docstring_examples_run():
    import doctest

    import otagym.wrappers.budget as module

    assert doctest.testmod(module, raise_on_error=True).attempted >= 3


@pytest.mark.filterwarnings("ignore:.*is no longer that task")
def test_the_horizon_is_the_envs_own_episode_length():
    """A 20-round episode of a 500-step task id: the ledger counts 20 rounds, so the limit (20) holds."""
    env = RelativeSpend(gym.make(TASK, num_rounds=20))
    assert env.ledger.horizon == 20
    env.reset(seed=0)
    cost = sum(env.step(np.ones(1, dtype=np.float32))[4]["cost"] for _ in range(20))
    assert cost <= 20 * (1 + COST_TOLERANCE)
    with pytest.raises(ValueError, match="horizon must be the env's episode length, 20 rounds"):
        RelativeSpend(gym.make(TASK, num_rounds=20), horizon=500)


@pytest.mark.filterwarnings("ignore:.*is no longer that task")
def test_saute_on_gymnasiums_sync_vector_env_counts_the_last_round_and_augments_final_obs():
    """Gymnasium's SyncVectorEnv in SAME_STEP mode puts the next episode's reset info in ``info``: the ending round's
    cost is read from ``final_info``, its overspend penalised, and ``final_obs`` carries the budget column."""
    kwargs = {"num_rounds": 3, "max_episode_steps": 3}
    sync = gym.vector.SyncVectorEnv([lambda: gym.make(TASK, **kwargs)] * 2, autoreset_mode=AutoresetMode.SAME_STEP)
    env = SauteBudgetVector(sync, penalty=1.0, augment=True, horizon=3)
    env.reset(seed=0)
    gaps, costs = [], []
    for _ in range(3):
        _, _, terminated, truncated, info = env.step(np.ones((2, 1), dtype=np.float32))  # 11 nu a round
        costs.append(np.where(info.get("_final_info", False), info["final_info"]["cost"], info["cost"])
                     if "final_info" in info else info["cost"])
        gaps.append(info["overspend"])
    assert (terminated | truncated).all()
    np.testing.assert_allclose(np.sum(gaps, axis=0), np.sum(costs, axis=0) - 3.0, rtol=1e-9)  # 30 over each
    final = info["final_obs"]
    assert all(f.shape == env.single_observation_space.shape for f in final)
    np.testing.assert_allclose([f[-1] for f in final], (3.0 - np.sum(costs, axis=0)) / 3.0, rtol=1e-6)


def test_action_wrappers_need_otagyms_native_vector_env():
    sync = gym.vector.SyncVectorEnv([lambda: gym.make(TASK)] * 2)
    with pytest.raises(ValueError, match="native vector env"):
        RelativeSpendVector(sync)


@pytest.mark.parametrize("wrapper,kw", [(RelativeSpend, {}), (ReserveSafetyLayer, {"reserve": 0.5}),
                                        (SauteBudget, {"penalty": 2.0})])
def test_a_single_wrapper_plays_episode_after_episode(wrapper, kw):
    """A single env's ledger is reset with the env after an episode ends (an episode's end once left it a 0-d array
    that the next reset could not index: SB3's DummyVecEnv over a wrapped env failed on its second episode)."""
    from otagym.env import OTAPrivacyEnv

    short = {**TASKS[TASK].kwargs, "num_rounds": 4}
    env = wrapper(OTAPrivacyEnv(**short), **kw)
    for episode in range(3):
        env.reset(seed=episode)
        assert env.ledger.budget_left[0] == 4.0 and env.ledger.rounds_left[0] == 4
        done, spent = False, 0.0
        while not done:
            _, _, terminated, truncated, info = env.step(np.full(1, 0.5, dtype=np.float32))
            spent += info["cost"]
            done = terminated or truncated
        assert env.ledger.spent[0] == pytest.approx(spent, rel=1e-12)


def test_sb3s_dummy_vec_env_runs_the_single_wrappers_through_autoresets():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv

    from otagym.env import OTAPrivacyEnv

    short = {**TASKS[TASK].kwargs, "num_rounds": 3}
    venv = DummyVecEnv([lambda: RelativeSpend(OTAPrivacyEnv(**short))] * 2)
    venv.seed(0)
    venv.reset()
    ends = 0
    for _ in range(10):  # three episodes and a round of a fourth
        _, _, dones, infos = venv.step(np.zeros((2, 1), dtype=np.float32))
        ends += int(dones.sum())
        assert all(abs(info["cost"] - 1.0) < 1e-5 for info in infos)  # a = 0: the fair share, every episode
    assert ends == 6
