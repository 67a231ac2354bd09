"""otagym.multiagent: each device an agent (PettingZoo). PettingZoo's API and seed tests on the task and on small
variants; the paper's rule played through the devices is the single-agent core's round bit for bit; the accountant's
participation rate, the rewards and the costs against closed forms; leaving, truncation, the global state and bad
input."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from gymnasium.utils import seeding
from scipy import stats

pytest.importorskip("pettingzoo")
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test  # noqa: E402

from otagym.multiagent import DEVICE_TASKS, env as aec_env, make_device_env, parallel_env  # noqa: E402
from otagym.schemes.cdpb import CDPBCore  # noqa: E402
from otagym.schemes.cdpb.devices import DEVICE_ENTRIES, THRESHOLD_SCALE_MAX, DeviceRound  # noqa: E402
from otagym.schemes.cdpb.observation import OBS_BOUND, entry_names  # noqa: E402

# PettingZoo's API tests reset with an option of their own, which the env ignores with a warning; its AEC test warns
# of an all-zero observation, which the device of E[h] = 1 sees at t = 0 (no broadcast yet, log10 E[h] = 0, no loss)
pytestmark = [pytest.mark.filterwarnings("ignore:reset options"),
              pytest.mark.filterwarnings("ignore:Observation numpy array is all zeros")]

TASK = "otagym/CDPB-Devices-v0"
#: Four devices 10 dB apart, CDPB-n, tau = 12: at rho = 0.3 P/W^2 and eps-bar = 5 the paper's rule spends 5.8 to 22
#: over the episode, so devices leave at different rounds.
SMALL = {"num_clients": 4, "num_rounds": 12, "channel_scale": (0.1, 0.2, 0.5, 1.0), "strategy": "noisy",
         "lambda_privacy": 5e-3, "epsilon_max": 5.0}
NEVER_SPENT = 1e9  # an eps-bar no device reaches
VARIANTS = {
    "task": {},
    "small": {"scenario_overrides": SMALL},
    "idle": {"scenario_overrides": {**SMALL, "strategy": "idle"}},
    "mixed": {"scenario_overrides": {**SMALL, "strategy": "mixed", "portion": 0.25}},
    "csi_feedback": {"scenario_overrides": {**SMALL, "csi_feedback": True}},
    "client_sampling": {"scenario_overrides": {**SMALL, "client_sampling": 0.6}},
    "budgets": {"scenario_overrides": SMALL, "budget_scale": (0.4, 1.0, 0.6, 0.8), "keep_departed": True},
}


def small_env(**kwargs):
    """A parallel env of the four devices of :data:`SMALL` at rho = 0.3 P/W^2, with ``scenario_overrides`` added."""
    return parallel_env(rho=0.3, scenario_overrides={**SMALL, **kwargs.pop("scenario_overrides", {})}, **kwargs)


def make_variant(name):
    kwargs = VARIANTS[name]
    return make_device_env(TASK, **kwargs) if name == "task" else small_env(**kwargs)


def paper_rule(env):
    """Every live device's action for the paper's rule: threshold c_k = 1 (a = -1); under CDPB-mixed the scenario's
    noise portion (a' = 2 portion - 1)."""
    s = env.side.scenario
    action = [-1.0] + ([2.0 * s.portion - 1.0] if s.strategy == "mixed" else [])
    return {agent: np.array(action) for agent in env.agents}


def record_device_rounds(env):
    """Every :class:`~otagym.schemes.cdpb.devices.DeviceRound` the env's device side plays (of its one episode), all K
    devices included (the env's infos hold the live ones only)."""
    rounds, step = [], env.side.step

    def recorded(rng, actions):
        played = step(rng, actions)
        rounds.append(DeviceRound(*(np.asarray(x)[0] for x in played[:4]),
                                  {key: value[0] for key, value in played.info.items()}))
        return played

    env.side.step = recorded
    return rounds


# --- PettingZoo's own tests --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(VARIANTS))
def test_pettingzoo_parallel_api_and_seed_tests(name):
    env = make_variant(name)
    parallel_api_test(env, num_cycles=200)
    parallel_seed_test(lambda: make_variant(name), num_cycles=50)
    s = env.side.scenario
    assert env.action_space("client_0").shape == ((2,) if s.strategy == "mixed" else (1,))
    assert env.observation_space("client_0").shape == (len(DEVICE_ENTRIES) + s.csi_feedback
                                                        + ("budget_scale" in VARIANTS[name]),)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(VARIANTS))
def test_pettingzoo_aec_api_and_seed_tests(name):
    kwargs = {"scheme": "cdpb", **DEVICE_TASKS[TASK].kwargs} if name == "task" else {
        "rho": 0.3, **VARIANTS[name], "scenario_overrides": {**SMALL, **VARIANTS[name]["scenario_overrides"]}}
    api_test(aec_env(**kwargs), num_cycles=200)
    seed_test(lambda: aec_env(**kwargs), num_cycles=50)


# --- determinism ----------------------------------------------------------------------------------------------------
def play_episode(env, seed, action_seed):
    """Every step's (observations, rewards, terminations, truncations, infos) under uniform random actions."""
    rng = np.random.default_rng(action_seed)
    steps = [env.reset(seed=seed)]
    while env.agents:
        steps.append(env.step({a: rng.uniform(-1, 1, env.action_space(a).shape) for a in env.agents}))
    return steps


def test_the_same_seed_plays_identical_trajectories_and_another_seed_does_not():
    first, again, other = (play_episode(small_env(scenario_overrides={"strategy": "mixed"}), seed, 5)
                           for seed in (3, 3, 4))
    assert len(first) == len(again) and len(first) > 2
    for step, step_again in zip(first, again):
        for part, part_again in zip(step, step_again):
            assert part.keys() == part_again.keys()
            for agent in part:
                np.testing.assert_equal(part[agent], part_again[agent])
    assert first[1][4]["client_0"]["channel_gain"] != other[1][4]["client_0"]["channel_gain"]


# --- one implementation: the paper's rule through the devices is the single-agent core's round ----------------------
@pytest.mark.parametrize("overrides", [
    {}, {"strategy": "idle"}, {"strategy": "mixed", "portion": 0.25}, {"csi_feedback": True},
    {"client_sampling": 0.6}, {"fading": "block", "coherence_rounds": 3}],
    ids=["noisy", "idle", "mixed", "csi_feedback", "client_sampling", "block_fading"])
def test_the_paper_rule_through_the_devices_is_the_single_agent_core_round_bit_for_bit(overrides):
    env = small_env(scenario_overrides={**overrides, "epsilon_max": NEVER_SPENT})
    s = env.side.scenario
    core = CDPBCore(s, 1, action_type="rho")
    rho = np.array([[0.3 * s.rho_max]])
    env.reset(seed=11)
    core_rng = seeding.np_random(11)[0]  # the generator env.reset(seed=11) makes
    core.reset(core_rng)
    for _ in range(s.num_rounds):
        _, rewards, terminations, _, infos = env.step(paper_rule(env))
        reward, terminated, info = core.step(core_rng, rho)
        assert set(rewards.values()) == {reward[0]}
        assert all(terminations.values()) == terminated[0]
        for acc in ("sgm", "theorem1"):
            np.testing.assert_array_equal(env.side.core.state.rdp_sum[acc], core.state.rdp_sum[acc])
        for key in ("channel_gain", "reliable", "sends_noise", "transmit_power_w", "participation", "rdp_round"):
            np.testing.assert_array_equal([infos[f"client_{k}"][key] for k in range(s.num_clients)], info[key][0])
        assert infos["client_0"]["server_utility"] == info["utility"][0]
    assert terminated[0] and not env.agents
    np.testing.assert_array_equal(env.side.core.observation(), core.observation())
    assert {"dp_epsilon", "dp_order"} <= set(info)  # the end-of-episode report, each device's in its info
    for key in CDPBCore.EPISODE_END_KEYS & info.keys():
        np.testing.assert_array_equal([infos[f"client_{k}"][key] for k in range(s.num_clients)], info[key][0])


# --- the accountant's participation rate -----------------------------------------------------------------------------
def threshold_scale(a):
    """c_k from a device's action a (the devices.py docstring: log-linear in a, 1 at a = -1), written out."""
    return math.exp(math.log(THRESHOLD_SCALE_MAX) * (a + 1.0) / 2.0)


@pytest.mark.slow
@pytest.mark.parametrize("client_sampling", [1.0, 0.5])
def test_the_accountants_rate_is_the_closed_form_and_the_realised_frequency_matches_it(client_sampling):
    """q_k = s_c exp(-c_k rho W^2 / (P E[h_k])) every round; the frequency with which each device sends its gradient
    over 2 x 1000 rounds lies in the 99.99% binomial CI around it."""
    actions = (-1.0, -0.8, -0.6, -0.4)
    env = small_env(dp_orders=None, scenario_overrides={
        "num_clients": 8, "num_rounds": 1000, "channel_scale": (0.1, 0.1, 0.2, 0.2, 0.5, 0.5, 1.0, 1.0),
        "epsilon_max": NEVER_SPENT, "client_sampling": client_sampling})
    s = env.side.scenario
    rho = 0.3 * s.power_max_w / s.grad_bound**2
    q = np.array([client_sampling * math.exp(-threshold_scale(actions[k // 2]) * rho * s.grad_bound**2
                                             / (s.power_max_w * 2.0 * s.channel_scale[k])) for k in range(8)])
    env.reset(seed=2)
    sent = np.zeros(8, dtype=int)
    while env.agents:
        _, _, _, _, infos = env.step({f"client_{k}": np.array([actions[k // 2]]) for k in range(8)})
        np.testing.assert_allclose([infos[f"client_{k}"]["participation"] for k in range(8)], q, rtol=1e-13)
        sent += [infos[f"client_{k}"]["reliable"] for k in range(8)]
    for pair in range(4):
        ci = stats.binomtest(int(sent[2 * pair:2 * pair + 2].sum()), 2000).proportion_ci(confidence_level=0.9999)
        assert ci.low <= q[2 * pair] <= ci.high, (pair, sent, q)


def test_with_csi_feedback_a_device_sees_its_channel_and_the_accountant_counts_realised_participation():
    env = small_env(scenario_overrides={"csi_feedback": True, "epsilon_max": NEVER_SPENT})
    s = env.side.scenario
    obs, _ = env.reset(seed=4)
    actions = {a: np.array([0.1 * k - 0.9]) for k, a in enumerate(env.agents)}
    h_th = [0.3 * threshold_scale(0.1 * k - 0.9) * s.grad_bound**2 / s.power_max_w for k in range(4)]
    for _ in range(8):
        seen = {a: 10.0 ** float(obs[a][-1]) * s.mean_gain[k] for k, a in enumerate(env.agents)}
        obs, _, _, _, infos = env.step(actions)
        for k, (agent, info) in enumerate(infos.items()):  # the extra entry: log10(h / E[h]) of the coming round
            assert info["channel_gain"] == pytest.approx(seen[agent], rel=1e-6)
            assert info["reliable"] == (info["channel_gain"] >= h_th[k])
            assert info["participation"] == float(info["reliable"])


def test_a_mixed_device_chooses_its_own_noise_portion():
    """Under CDPB-mixed the second entry is the device's probability of sending noise when it does not send its
    gradient: 1 (a' = 1) always, 0 (a' = -1) never; a device that abstains (c_k = 100) sends its gradient almost
    never."""
    env = small_env(scenario_overrides={"strategy": "mixed", "epsilon_max": NEVER_SPENT})
    env.reset(seed=6)
    big_p = env.side.scenario.power_max_w
    while env.agents:
        _, _, _, _, infos = env.step({a: np.array([1.0, 1.0 if k % 2 else -1.0]) for k, a in enumerate(env.agents)})
        for k, agent in enumerate(infos):
            info = infos[agent]
            if not info["reliable"]:
                assert info["sends_noise"] == bool(k % 2)
                assert info["transmit_power_w"] == (big_p if k % 2 else 0.0)
            assert info["threshold_scale"] == THRESHOLD_SCALE_MAX


# --- rewards and costs ---------------------------------------------------------------------------------------------
def convergence_share(s, rho, infos):
    """lambda_1 6 B_t / tau^2 with B_t = 4 M^2 G / K_t + sigma_q^2 / (K_t^2 rho) (Lemma 4), sigma_q^2 from the live
    devices' powers (a departed device is silent): sum_k h_k (P_k - [reliable] rho W^2 / h_k) + sigma_z^2."""
    received = sum(i["channel_gain"] * i["transmit_power_w"] - (rho * s.grad_bound**2 if i["reliable"] else 0.0)
                   for i in infos.values())
    k_t = max(sum(bool(i["reliable"]) for i in infos.values()), 1)
    term = 4 * s.smoothness**2 * s.grad_second_moment / k_t + (received + s.noise_power_w) / (k_t**2 * rho)
    return s.lambda_convergence * 6.0 * term / s.num_rounds**2


@pytest.mark.parametrize("reward", ["individual", "team"])
def test_rewards_are_the_rounds_share_of_the_utility_charged_with_own_or_worst_privacy_loss(reward):
    scale = 0.198
    env = small_env(reward=reward, reward_scale=scale)
    s = env.side.scenario
    rho = 0.3 * s.rho_max
    rng = np.random.default_rng(8)
    env.reset(seed=8)
    cumulative = np.zeros(s.num_clients)
    left_early = 0
    while env.agents:
        _, rewards, terminations, _, infos = env.step({a: rng.uniform(-1, -0.5, (1,)) for a in env.agents})
        before, share = cumulative.max(), convergence_share(s, rho, infos)
        for agent, info in infos.items():
            cumulative[int(agent.split("_")[1])] = info["rdp_cumulative"]
            assert info["server_num_reliable"] == sum(bool(i["reliable"]) for i in infos.values())
        ended_early = not env.agents and infos[next(iter(infos))]["server_round"] < s.num_rounds - 1
        for agent, info in infos.items():
            privacy = info["rdp_round"] if reward == "individual" else cumulative.max() - before
            expected = -(share + s.lambda_privacy * privacy) / scale
            if ended_early:  # the last devices left: the rounds still to play, without them, are charged now
                assert rewards[agent] < expected - 4 * s.smoothness**2 * s.grad_second_moment * 6 / s.num_rounds**2
            else:
                assert rewards[agent] == pytest.approx(expected, rel=1e-12)
        left_early += sum(terminations.values()) if env.agents else 0
    assert left_early >= 1  # the charges were checked with departed devices silent too


@pytest.mark.parametrize("budget_scale", [1.0, (0.4, 1.0, 0.6, 0.8)])
def test_the_costs_sum_to_tau_times_the_final_privacy_loss_over_the_budget(budget_scale):
    env = small_env(budget_scale=budget_scale)
    s = env.side.scenario
    budget = np.broadcast_to(budget_scale, (s.num_clients,)) * s.epsilon_max
    env.reset(seed=9)
    costs, final = np.zeros(s.num_clients), np.zeros(s.num_clients)
    while env.agents:
        _, _, _, _, infos = env.step(paper_rule(env))
        for agent, info in infos.items():
            k = int(agent.split("_")[1])
            costs[k] += info["cost"]
            final[k] = info["rdp_cumulative"]
            assert info["cost"] == pytest.approx(s.num_rounds * info["rdp_round"] / budget[k], rel=1e-12)
    np.testing.assert_allclose(costs, s.num_rounds * final / budget, rtol=1e-12)
    np.testing.assert_array_equal(final, env.side.core.state.rdp_sum["sgm"][0])


# --- leaving and the episode's end ----------------------------------------------------------------------------------
@pytest.mark.parametrize("accounting, budget_scale", [("sgm", 1.0), ("theorem1", 1.0), ("sgm", (0.4, 1.0, 0.6, 0.8))])
def test_a_device_leaves_when_its_privacy_loss_reaches_the_budget_and_then_transmits_nothing(accounting, budget_scale):
    """... its own budget, where the devices hold shares of eps-bar (``budget_scale``), and sees it in its
    observation."""
    env = small_env(scenario_overrides={"accounting": accounting, "epsilon_max": 5.0 if accounting == "sgm" else 12.0},
                    budget_scale=budget_scale)
    s = env.side.scenario
    budget = np.broadcast_to(budget_scale, (s.num_clients,)) * s.epsilon_max
    rounds = record_device_rounds(env)
    env.reset(seed=1)
    departed: dict[int, int] = {}
    while env.agents:
        live = list(env.agents)
        obs, rewards, terminations, truncations, infos = env.step(paper_rule(env))
        played, t = rounds[-1], len(rounds)
        assert set(obs) == set(rewards) == set(terminations) == set(infos) == set(live)
        for k in range(s.num_clients):
            agent = f"client_{k}"
            if k in departed:  # silent: no power, no participation, no privacy loss
                assert played.info["transmit_power_w"][k] == played.info["participation"][k] == 0.0
                assert played.info["rdp_round"][k] == 0.0 and not played.info["reliable"][k]
                assert agent not in obs and agent not in env.agents
                continue
            spent = played.info["rdp_cumulative"][k] >= budget[k]
            assert terminations[agent] == (spent or t == s.num_rounds) and not truncations[agent]
            assert obs[agent][DEVICE_ENTRIES.index("privacy_used")] == np.float32(
                min(played.info["rdp_cumulative"][k] / budget[k], OBS_BOUND))
            if np.ndim(budget_scale):  # a device given its own budget sees it
                assert obs[agent][-1] == np.float32(np.log10(budget_scale[k]))
            assert (agent in env.agents) == (not terminations[agent])
            if spent:
                departed[k] = t
    assert departed and min(departed.values()) < s.num_rounds - 1  # some device left with rounds to go


def test_with_keep_departed_a_spent_device_stays_silent_and_shares_the_team_reward_to_the_end():
    """Each round's team reward is the one of the env that removes departed devices (same seed and actions; that env
    charges the rounds after its last device left at once); a device that spent its budget is not terminated,
    transmits nothing and gets that reward every round until tau."""
    removed, kept = small_env(), small_env(keep_departed=True)
    s = kept.side.scenario
    removed.reset(seed=1), kept.reset(seed=1)
    rounds = record_device_rounds(kept)
    team_removed, team_kept = [], []
    while removed.agents:
        team_removed.append(next(iter(removed.step(paper_rule(removed))[1].values())))
    for t in range(1, s.num_rounds + 1):
        obs, rewards, terminations, truncations, infos = kept.step(paper_rule(kept))
        assert set(rewards) == set(kept.possible_agents) and not any(truncations.values())
        assert all(terminations.values()) == (t == s.num_rounds) and len(set(rewards.values())) == 1
        team_kept.append(rewards["client_0"])
        gone = ~kept.side.active[0] & ~rounds[-1].left
        assert (rounds[-1].info["transmit_power_w"][gone] == 0.0).all()
    last = len(team_removed) - 1
    assert last < s.num_rounds - 1  # every device left before tau
    np.testing.assert_array_equal(team_removed[:last], team_kept[:last])
    assert team_removed[last] == pytest.approx(sum(team_kept[last:]), rel=1e-12)
    assert kept.agents == [] and not kept.side.active.any()


def test_max_cycles_truncates_and_tau_terminates():
    env = small_env(max_cycles=5, scenario_overrides={"epsilon_max": NEVER_SPENT})
    env.reset(seed=0)
    for t in range(5):
        _, _, terminations, truncations, _ = env.step(paper_rule(env))
    assert not any(terminations.values()) and all(truncations.values()) and len(truncations) == 4
    assert env.agents == []
    with pytest.raises(RuntimeError, match=r"reset\(\)"):
        env.step({})
    env = small_env(scenario_overrides={"epsilon_max": NEVER_SPENT})  # max_cycles = tau: the end is a termination
    env.reset(seed=0)
    for t in range(12):
        assert env.agents == env.possible_agents
        _, _, terminations, truncations, _ = env.step(paper_rule(env))
    assert all(terminations.values()) and not any(truncations.values()) and env.agents == []


# --- observations and the global state ----------------------------------------------------------------------------
@pytest.mark.parametrize("overrides", [{}, {"csi_feedback": True}, {"csi_feedback": True, "client_sampling": 0.6}])
def test_the_state_is_the_servers_observation_and_every_devices(overrides):
    env = small_env(scenario_overrides=overrides)
    s = env.side.scenario
    n_server = len(entry_names(s))
    assert env.state_space.shape == (n_server + 4 * (len(DEVICE_ENTRIES) + s.csi_feedback),)
    obs, _ = env.reset(seed=3)
    for t in range(4):
        state = env.state()
        assert env.state_space.contains(state)
        np.testing.assert_array_equal(state[:n_server], env.side.core.observation()[0])
        for agent, o in obs.items():
            np.testing.assert_array_equal(state[n_server:].reshape(4, -1)[int(agent.split("_")[1])], o)
        obs, _, _, _, infos = env.step(paper_rule(env))
        for agent, o in obs.items():
            k = int(agent.split("_")[1])
            assert o[0] == np.float32((t + 1) / s.num_rounds)
            assert o[3] == np.float32(math.log10(2.0 * s.channel_scale[k]))
            assert o[4] == np.float32(infos[agent]["rdp_cumulative"] / s.epsilon_max)


# --- bad input ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, error, match", [
    ({"scheme": "nope"}, ValueError, "scheme"),
    ({"scheme": "receive_scaling"}, ValueError, r"scheme='receive_scaling' has no per-device decisions.*cdpb"),
    ({"render_mode": "human"}, ValueError, "render_mode must be None"),
    ({"max_cycles": 0}, ValueError, r"max_cycles must be an integer in \[1, 100\]"),
    ({"max_cycles": 101}, ValueError, r"max_cycles must be an integer in \[1, 100\]"),
    ({"rho": 0.0}, ValueError, r"rho must be .*\[1e-12, 1\]"),
    ({"rho": 5e-324}, ValueError, r"rho must be .*\[1e-12, 1\]"),  # the estimate's noise overflowed
    ({"budget_scale": 5e-324}, ValueError, r"budget_scale must be a finite number in \[1e-06, 1\]"),  # inf cost
    ({"reward": "selfish"}, ValueError, "reward must be one of"),
    ({"keep_departed": "yes"}, TypeError, "keep_departed must be"),
    ({"budget_scale": 1.5}, ValueError, r"budget_scale must be a finite number in \[1e-06, 1\]"),
    ({"budget_scale": (0.5, 0.5)}, ValueError, r"budget_scale must be one value or num_clients=\d+ values; got 2"),
    ({"bogus": 1}, TypeError, r"unexpected keyword argument\(s\) \['bogus'\]; the devices' arguments are \[.*"
                              r"this env's own: \['scenario', 'scenario_overrides', 'max_cycles'"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_arguments_are_refused_naming_the_parameter(kwargs, error, match):
    with pytest.raises(error, match=match):
        parallel_env(**kwargs)


def test_a_tasks_scheme_is_not_an_override():
    with pytest.raises(ValueError, match=r"scheme is otagym/CDPB-Devices-v0's \('cdpb'\) and cannot be overridden"):
        make_device_env("otagym/CDPB-Devices-v0", scheme="receive_scaling")


def test_at_the_smallest_rho_and_budget_every_reward_observation_and_info_entry_is_finite():
    """rho 1e-12 P/W^2 and a budget of 1e-6 eps-bar, the floors of the two arguments: below them (5e-324) the
    estimate's noise and the privacy over the budget overflowed to inf."""
    env = make_device_env("otagym/CDPB-Devices-v0", rho=1e-12, budget_scale=1e-6, keep_departed=True)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    while env.agents:
        obs, rewards, _, _, infos = env.step({a: rng.uniform(-1, 1, 1) for a in env.agents})
        assert all(np.isfinite(r) for r in rewards.values()) and all(np.isfinite(o).all() for o in obs.values())
        for info in infos.values():
            assert all(np.isfinite(np.asarray(v, dtype=float)).all() for v in info.values()
                       if np.asarray(v).dtype.kind in "fiub"), info


@pytest.mark.parametrize("change, error, match", [
    ({"client_0": np.array([1.5])}, ValueError, r"actions\['client_0'\] must lie in the action space \[-1, 1\]"),
    ({"client_1": np.array([np.nan])}, ValueError, r"actions\['client_1'\] must lie in"),
    ({"client_0": np.zeros(2)}, ValueError, r"actions\['client_0'\] must have shape \(1,\) or \(\); got shape \(2,\)"),
    ({"client_0": np.zeros((1, 1))}, ValueError, r"actions\['client_0'\] must have shape"),
    ({"client_0": "a"}, TypeError, r"actions\['client_0'\] must be real numbers"),
    ({"client_9": np.zeros(1)}, ValueError, r"actions has unknown agents \['client_9'\]"),
    ({"client_2": None}, ValueError, r"actions must hold an action for every live agent; missing \['client_2'\]"),
])
def test_bad_actions_are_refused_naming_the_agent(change, error, match):
    env = small_env()
    env.reset(seed=0)
    actions = {**paper_rule(env), **change}
    actions = {agent: action for agent, action in actions.items() if action is not None}
    with pytest.raises(error, match=match):
        env.step(actions)


def test_an_action_of_a_departed_agent_is_ignored():
    """TorchRL's PettingZooWrapper passes an action for every agent of its group, departed or not; PettingZoo's
    conversions ignore the departed agents' (an agent name the env does not have is refused above)."""
    first, second = small_env(), small_env()
    first.reset(seed=1)
    second.reset(seed=1)
    gone = False
    while first.agents:
        gone = gone or first.agents != first.possible_agents
        step = first.step(paper_rule(first))
        again = second.step({**{a: np.array([1.0]) for a in second.possible_agents}, **paper_rule(second)})
        assert step[1] == again[1] and step[2] == again[2]
    assert gone


def test_unknown_task_and_reset_options_are_refused():
    with pytest.raises(ValueError, match="task_id must be one of"):
        make_device_env("otagym/CDPB-Devices-v9")
    env = small_env()
    with pytest.raises(ValueError, match=r"reset option channel_gains must have shape \(12, 1, 4\) or \(12, 4\)"):
        env.reset(seed=0, options={"channel_gains": np.ones((12, 3))})
    with pytest.warns(UserWarning, match=r"reset options \['gains'\] are ignored"):
        env.reset(seed=0, options={"gains": 1})


# --- the task and the import -----------------------------------------------------------------------------------------
def test_the_task_keeps_its_settings_under_scenario_overrides():
    env = make_device_env(TASK, scenario_overrides={"epsilon_max": 2.0}, max_cycles=5)
    s = env.side.scenario
    assert (s.num_clients, s.strategy, s.lambda_privacy, s.epsilon_max, env.max_cycles) == (10, "noisy", 5e-3, 2.0, 5)
    assert len(env.possible_agents) == 10 and env.side.rho[0] == 0.3 * s.rho_max


@pytest.mark.slow
def test_otagym_imports_without_pettingzoo():
    code = ("import sys; sys.modules['pettingzoo'] = None\n"
            "import gymnasium as gym, otagym\n"
            "assert 'otagym.multiagent' not in sys.modules\n"
            "gym.make('otagym/CDPB-v1').reset(seed=0)\n"
            "try:\n    import otagym.multiagent\nexcept ImportError:\n    print('refused')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "refused"


@pytest.mark.parametrize("bad", [None, [1, 2], 0.5])
def test_step_and_reset_refuse_what_is_not_a_dict_naming_the_argument(bad):
    from otagym.multiagent import parallel_env

    env = parallel_env()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="actions must be a dict of each live agent's action"):
        env.step(bad)
    if bad is not None:
        with pytest.raises(TypeError, match="options must be a dict of reset options"):
            env.reset(options=bad)


def test_with_no_argument_the_module_gives_the_default_task_and_any_task_has_an_aec_form():
    """``parallel_env()`` is the default task's env (the scheme's raw preset loses its hundred devices within a few
    rounds); ``env(task=...)`` is a task's AEC form, which PettingZoo's API test accepts."""
    from pettingzoo.test import api_test

    from otagym.multiagent import DEFAULT_DEVICE_TASK, env, make_device_env, parallel_env

    default, task = parallel_env(), make_device_env(DEFAULT_DEVICE_TASK)
    assert default.possible_agents == task.possible_agents and len(default.possible_agents) == 10
    assert default.side.scenario == task.side.scenario
    obs, _ = default.reset(seed=3)
    np.testing.assert_array_equal(np.stack(list(obs.values())), np.stack(list(task.reset(seed=3)[0].values())))
    for _ in range(10):  # the paper's rule (a = 0) keeps every device in for the first rounds
        default.step(dict.fromkeys(default.agents, np.zeros(1, dtype=np.float32)))
    assert len(default.agents) == 10
    api_test(env(task=DEFAULT_DEVICE_TASK, max_cycles=6), num_cycles=6)
    assert len(parallel_env(scheme="cdpb").possible_agents) == 100  # arguments describe the env itself
