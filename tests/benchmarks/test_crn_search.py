"""benchmarks/crn_search.py and the SB3 form of its policy (agents/linear.py): the features read the observation
entries they name, the policy plays the env's price action (theta = (c, 0, ...) is the constant action c to the bit),
and the shipped ARS model plays the same actions as the search's policy."""

import json

import numpy as np
import pytest

from baselines.receive_scaling.evaluation import run_policy, sample_realisations
from baselines.receive_scaling.references import _Constant
from otagym import OTAPrivacyEnv
from otagym.schemes.receive_scaling import get_scenario

pytest.importorskip("rliable")
pytest.importorskip("stable_baselines3")

from agents.linear import FEATURES, LinearPricePolicy, linear_price_model, price_features
from agents.policy import AgentPolicy, load_model

from benchmarks import crn_search  # noqa: E402 (run from the repository root: python -m pytest)


def test_features_are_the_observation_entries_they_name():
    env = OTAPrivacyEnv(num_rounds=40, nu_range=(0.01, 0.16), dp_orders=None)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(7):
        obs, *_ = env.step(rng.uniform(-0.3, 0.3, size=1).astype(np.float32))
    core = env.core
    r = core.state
    big_t = core.scenario.num_rounds
    nu, t = r.nu[0], r.t[0]
    z = np.log10(nu) - core.log10_nu_ref
    h = np.log10(r.h_min2[0] / r.mean_h_min2[0])
    p = np.log1p((nu * big_t - r.cost_sum[0]) / ((big_t - t) * nu))
    expected = [1.0, z, z * z, h, p, t / big_t, z * h, z * p, z * t / big_t]
    got = price_features(obs[None].astype(float))[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)  # the observation is float32
    assert len(FEATURES) == got.size
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(price_features(torch.as_tensor(obs[None])).numpy()[0], got, rtol=1e-6, atol=1e-6)


def test_a_bias_only_theta_is_the_constant_action():
    s = get_scenario("paper-mnist", num_rounds=60)
    real = sample_realisations(s, [5, 6])
    nu = np.array([0.02, 0.09])
    for c in (-0.2, 0.0, 0.15):
        theta = np.zeros(len(FEATURES))
        theta[0] = c
        linear = run_policy(crn_search.LinearFeaturePolicy(theta, nu), s, real, dp=False, nu=nu)
        constant = run_policy(_Constant(np.full(2, c), nu), s, real, dp=False, nu=nu)
        np.testing.assert_array_equal(linear.leakage, constant.leakage)
        if c == 0.0:
            reference = constant
    # and a theta on the channel feature h alone (zero mean over rounds) plays differently from a = 0
    theta = np.zeros(len(FEATURES))
    theta[3] = 0.3
    moved = run_policy(crn_search.LinearFeaturePolicy(theta, nu), s, real, dp=False, nu=nu)
    assert np.all(moved.leakage != reference.leakage)


@pytest.mark.slow
def test_scores_by_nu_puts_each_row_on_every_realisation():
    """Row k of scores_by_nu is the policy of theta[k] on the seeds in order, as task_scores scores it alone."""
    seeds = (90_000, 90_001)
    thetas = np.zeros((2, len(FEATURES)))
    thetas[:, 0] = (-0.05, 0.1)
    table = crn_search.scores_by_nu(thetas, "gauss_markov_0.9", seeds)
    for k, c in enumerate(thetas[:, 0]):
        alone = crn_search.task_scores(lambda nus, c=c: _Constant(np.full(nus.size, c), nus),
                                       crn_search.TASKS["gauss_markov_0.9"], seeds, crn_search.NUS)
        for nu, row in table.items():
            np.testing.assert_array_equal(row[k], alone[nu])
    assert not np.array_equal(table["0.04"][0], table["0.04"][1])


def test_objective_is_the_margin_over_the_floor_averaged_or_the_worst_over_nu():
    by_nu = {"0.01": np.array([[1.0, 3.0], [0.0, 0.0]]), "0.04": np.array([[5.0, 5.0], [4.0, 8.0]])}
    floor = {"0.01": 1.0, "0.04": 6.0}
    # row 0: margins 1 and -1; row 1: margins -1 and 0
    np.testing.assert_array_equal(crn_search.objective(by_nu, floor, "mean"), [0.0, -0.5])
    np.testing.assert_array_equal(crn_search.objective(by_nu, floor, "worst-nu"), [-1.0, -1.0])


def test_the_shipped_model_loads_with_sb3_and_plays_the_search_policy(tmp_path):
    from sb3_contrib import ARS

    s = get_scenario("paper-mnist", num_rounds=60)
    real = sample_realisations(s, [11, 12, 13])
    nu = np.array([0.01, 0.04, 0.16])
    theta = np.array([0.05, 0.16, 0.15, 0.01, -0.07, 0.09, 0.01, -0.44, -0.06])
    runs = [{"seed": k, "objective": "mean", "generations": 10, "train_realisations": 4, "test": {},
             "selected": {"generation": 10, "theta": (theta * (1 + k)).tolist(), "validation": v}}
            for k, v in enumerate((0.1, 0.3, 0.2))]
    crn_search.ship("iid", runs, tmp_path)
    model = ARS.load(tmp_path / "model.zip", device="cpu")  # as any SB3 client loads it
    assert isinstance(model.policy, LinearPricePolicy)
    np.testing.assert_allclose(model.policy.parameters_to_vector(), theta * 2, rtol=1e-6)  # the best on validation
    np.testing.assert_allclose(model.weights.numpy(), theta * 2, rtol=1e-6)  # ARS's search would go on from it
    meta = json.loads((tmp_path / "run.json").read_text())
    assert (meta["algo"], meta["seed"], meta["theta"]) == ("ars", 1, runs[1]["selected"]["theta"])
    # otagym's loader (compare, evaluate, sweep) plays it on the env's own action semantics
    agent = run_policy(AgentPolicy(str(tmp_path / "model.zip"), nu), s, real, dp=False, nu=nu)
    search = run_policy(crn_search.LinearFeaturePolicy(theta * 2, nu), s, real, dp=False, nu=nu)
    np.testing.assert_allclose(agent.leakage, search.leakage, rtol=1e-5)  # float32 torch vs float64 numpy
    assert isinstance(load_model(tmp_path / "model.zip"), ARS)


def test_the_linear_policy_clips_to_the_action_space_and_refuses_bad_weights():
    env = OTAPrivacyEnv(num_rounds=40, nu_range=(0.01, 0.16), dp_orders=None)
    obs = np.stack([env.reset(seed=k)[0] for k in range(4)])
    for scale in (1.0, 40.0):  # 40: far outside [-1, 1], clipped
        theta = scale * np.array([0.1, 0.3, -0.2, 0.5, -0.4, 0.2, 0.1, -0.3, 0.05])
        action, _ = linear_price_model(theta, env).predict(obs, deterministic=True)
        np.testing.assert_allclose(action[:, 0], np.clip(price_features(obs.astype(float)) @ theta, -1, 1),
                                   rtol=1e-5, atol=1e-6)
    mine = np.ones(9, dtype=np.float32)
    model = linear_price_model(mine, env)
    mine[0] = 9.0  # the model keeps its own copy
    np.testing.assert_array_equal(model.weights.numpy(), np.ones(9))
    np.testing.assert_array_equal(model.policy.parameters_to_vector(), np.ones(9))
    with pytest.raises(ValueError, match="theta must be 9 or 12 finite weights"):
        linear_price_model(np.zeros(8), env)
    with pytest.raises(ValueError, match="theta must be 9 or 12 finite weights"):
        linear_price_model(np.full(9, np.nan), env)
    with pytest.raises(ValueError, match="observation width must be 3M \\+ 6"):
        price_features(np.zeros((2, 10)))


def test_training_seeds_extend_the_references_own_and_stay_apart_from_validation_and_test():
    from baselines.receive_scaling.references import TEST_SEEDS, TRAIN_SEEDS, VALIDATION_SEEDS

    assert crn_search.training_seeds(32) == TRAIN_SEEDS
    many = crn_search.training_seeds(4096)
    assert many[:32] == TRAIN_SEEDS and len(set(many)) == 4096
    assert not set(many) & (set(VALIDATION_SEEDS) | set(TEST_SEEDS))
    with pytest.raises(ValueError, match="train realisations must be >= 1"):
        crn_search.training_seeds(0)
    more = crn_search.more_test_seeds(4096)
    assert len(set(more)) == 4096 and crn_search.more_test_seeds(0) == ()
    assert not set(more) & (set(many) | set(VALIDATION_SEEDS) | set(TEST_SEEDS))
    with pytest.raises(ValueError, match="more test realisations must be >= 0"):
        crn_search.more_test_seeds(-1)


@pytest.mark.slow
def test_a_search_is_reproducible_to_the_bit():
    pytest.importorskip("cma")
    one, two = (crn_search.search("iid", 3, 10, "mean", train_realisations=2) for _ in range(2))
    for key in ("selected", "checkpoints", "test"):
        assert one[key] == two[key]
    assert one["checkpoints"][0]["theta"] != [0.0] * len(FEATURES)  # it moved


def test_the_residual_policy_at_theta_zero_is_online_optimal():
    """theta = 0 plays OnlineOptimal (an x-policy, no action in between) to 1e-9 of the leakage: the programme's price
    passes through the price action unchanged; a residual on the channel feature plays differently."""
    from baselines.receive_scaling.references import OnlineOptimal

    s = get_scenario("paper-mnist", num_rounds=60, fading="gauss_markov", correlation=0.9)
    real = sample_realisations(s, [5, 6])
    nu = np.array([0.02, 0.09])
    base = run_policy(OnlineOptimal(nu), s, real, dp=False, nu=nu)
    zero = run_policy(crn_search.ResidualFeaturePolicy(np.zeros(len(FEATURES)), nu), s, real, dp=False, nu=nu)
    np.testing.assert_allclose(zero.leakage, base.leakage, rtol=1e-9)
    theta = np.zeros(len(FEATURES))
    theta[3] = 0.1
    moved = run_policy(crn_search.ResidualFeaturePolicy(theta, nu), s, real, dp=False, nu=nu)
    assert np.all(np.abs(moved.leakage / base.leakage - 1) > 1e-6)
    with pytest.raises(ValueError, match="plays the price action"):
        run_policy(crn_search.ResidualFeaturePolicy(theta, nu, {"action_type": "share"}), s, real, dp=False, nu=nu)


@pytest.mark.slow
def test_the_shipped_residual_model_loads_with_sb3_and_plays_the_search_policy(tmp_path):
    """The residual agent's SB3 form reads everything from the observation (float32) and solves the programme
    itself: the search's policy (which reads the env's float64 values) to 1e-5 of the leakage, on the task's own
    T = 500."""
    from sb3_contrib import ARS

    from agents.linear import ObservedOnlineOptimal, OnlineOptimalResidualPolicy

    theta = np.array([0.02, 0.01, 0.0, 0.05, -0.01, 0.02, 0.0, 0.01, 0.0])
    runs = [{"agent": "online_optimal_residual", "seed": 0, "objective": "mean", "generations": 10,
             "train_realisations": 4, "test": {}, "selected": {"generation": 10, "theta": theta.tolist(),
                                                              "validation": 0.1}}]
    crn_search.ship("gauss_markov_0.9", runs, tmp_path)
    model = ARS.load(tmp_path / "model.zip", device="cpu")
    assert isinstance(model.policy, OnlineOptimalResidualPolicy)
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["policy"] == "agents.linear.OnlineOptimalResidualPolicy"
    from otagym.tasks import task_scenario

    s = task_scenario(crn_search.TASKS["gauss_markov_0.9"], 0.04)
    real = sample_realisations(s, [11, 12])
    nu = np.array([0.01, 0.16])
    agent = run_policy(AgentPolicy(str(tmp_path / "model.zip"), nu), s, real, dp=False, nu=nu)
    search = run_policy(crn_search.ResidualFeaturePolicy(theta, nu), s, real, dp=False, nu=nu)
    np.testing.assert_allclose(agent.leakage, search.leakage, rtol=1e-5)
    with pytest.raises(ValueError, match="observation width must be 36"):
        model.policy.base(np.zeros((1, 33)))
    with pytest.raises(ValueError, match="the budget mode's price action"):
        ObservedOnlineOptimal({"action_type": "share"})
    with pytest.raises(ValueError, match="a receive-scaling policy"):
        ObservedOnlineOptimal({"scheme": "cdpb"})
