"""agents/: configs, training (checkpoints, resume, PPO-Lagrangian), trained models as policies in compare, and the
smoke test that a briefly trained PPO beats a random policy's normalised score on held-out channels."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from agents import ALGOS, CONFIG_DIR  # noqa: E402
from agents.policy import AgentPolicy, load_model  # noqa: E402
from agents.train import latest_checkpoint, load_hyperparams, train  # noqa: E402
from baselines.receive_scaling.compare import POLICIES, PolicySpec, compare  # noqa: E402
from otagym import OTAPrivacyEnv  # noqa: E402
from otagym.cli.commands import main  # noqa: E402
from otagym.tasks import DEVICE_TASKS, TASKS  # noqa: E402

SHORT = {"num_rounds": 25}


@pytest.mark.parametrize("algo", ALGOS)
def test_packaged_configs_load(algo):
    hp = load_hyperparams(algo)
    assert hp["n_envs"] >= 1 and isinstance(hp["policy_kwargs"], dict)
    assert hp["env_kwargs"]["nu_range"] == [0.01, 0.16] and hp["env_kwargs"]["dp_orders"] is None
    assert (CONFIG_DIR / f"{algo}.yml").is_file()


def test_bad_config_and_algo_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="algo"):
        load_hyperparams("dqn")
    with pytest.raises(FileNotFoundError, match="config"):
        load_hyperparams("ppo", tmp_path / "missing.yml")
    (tmp_path / "other.yml").write_text("CartPole-v1:\n  n_envs: 1\n")
    with pytest.raises(ValueError, match="otagym/OTAPrivacy-v0"):
        load_hyperparams("ppo", tmp_path / "other.yml")


class _RandomAgent:
    """An SB3-like model whose actions are uniform on [-1, 1] (seeded)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def predict(self, obs, deterministic=True):
        return self.rng.uniform(-1, 1, (obs.shape[0], 1)), None


@pytest.mark.slow  # a training
def test_briefly_trained_ppo_beats_a_random_policy_on_held_out_channels(tmp_path):
    path = train("ppo", run_dir=tmp_path / "ppo", seed=0, total_timesteps=4096, checkpoint_freq=2048,
                 env_overrides=SHORT, progress=False)
    meta = json.loads((tmp_path / "ppo" / "run.json").read_text())
    assert meta["trained_timesteps"] >= 4096 and meta["env_kwargs"]["reward_mode"] == "budget"
    assert (tmp_path / "ppo" / "monitor.csv").is_file()
    model = load_model(path)
    policies = {"EqualAlloc": POLICIES["EqualAlloc"], "PPO": PolicySpec(lambda nu, p: AgentPolicy(model, nu=nu)),
                "Random": PolicySpec(lambda nu, p: AgentPolicy(_RandomAgent(0), nu=nu))}
    rows = compare("paper-mnist", (0.04,), tuple(range(1000, 1006)), policies, progress=False, **SHORT)
    by = {r["policy"]: r for r in rows}
    assert by["EqualAlloc"]["score"] == pytest.approx(0.0, abs=1e-9)
    # budget mode meets nu by construction, whatever the agent does
    assert by["PPO"]["matched"] and by["Random"]["matched"]
    assert abs(by["PPO"]["cost_mean"] - 0.04) < 1e-9 * 0.04 * 1e3
    assert by["PPO"]["score"] > by["Random"]["score"] + 10.0, (by["PPO"]["score"], by["Random"]["score"])


@pytest.mark.slow
def test_resume_continues_from_the_newest_checkpoint(tmp_path):
    run = tmp_path / "run"
    train("ppo", run_dir=run, total_timesteps=1024, checkpoint_freq=512, env_overrides=SHORT, progress=False,
          config=_small_ppo(tmp_path))
    found = latest_checkpoint(run)
    assert found is not None and found[1] >= 512
    train("ppo", run_dir=run, total_timesteps=2048, checkpoint_freq=512, env_overrides=SHORT, progress=False,
          config=_small_ppo(tmp_path), resume=True)
    meta = json.loads((run / "run.json").read_text())
    assert meta["resumed_from"] == found[1] and meta["trained_timesteps"] >= 2048
    assert sorted(p.name for p in run.glob("*monitor*")) == ["monitor.csv"]


def _small_ppo(tmp_path):
    cfg = tmp_path / "small.yml"
    cfg.write_text("otagym/OTAPrivacy-v0:\n  n_envs: 4\n  n_steps: 64\n  batch_size: 128\n  n_epochs: 1\n"
                   "  gamma: 1.0\n  policy_kwargs: \"dict(net_arch=[16])\"\n  env_kwargs:\n    dp_orders: null\n")
    return cfg


def test_lagrangian_multipliers_are_per_nu_bin_and_ascend_on_their_own_episodes():
    """One multiplier per bin of log nu: each reward is shaped by its env's bin, and dual ascent moves a bin's
    multiplier by its own episodes' mean cost only (spending 11 nu at large nu and nothing at small nu averages
    about 1 over the bins, which one multiplier would accept)."""
    from types import SimpleNamespace

    from stable_baselines3.common.logger import configure

    from agents.lagrangian import DualAscentCallback, LagrangianVecEnv, nu_bin_edges
    from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

    edges = nu_bin_edges((0.01, 0.16), 4)
    np.testing.assert_allclose(edges, [0.02, 0.04, 0.08], rtol=1e-12)
    assert nu_bin_edges((0.01, 0.16), 1).size == 0 and nu_bin_edges(None, 8).size == 0
    with pytest.raises(ValueError, match="lagrange_nu_bins must be an integer >= 1; got 0"):
        nu_bin_edges((0.01, 0.16), 0)
    kwargs = dict(reward_mode="cmdp", action_type="spend", nu_range=(0.01, 0.16), dp_orders=None, **SHORT)
    native, plain = OTAPrivacySB3VecEnv(8, **kwargs), OTAPrivacySB3VecEnv(8, **kwargs)
    env = LagrangianVecEnv(native, initial=1.0, nu_edges=edges)
    env.multipliers[:] = env.integral[:] = [0.0, 1.0, 2.0, 3.0]  # k_P = k_D = 0: the integral is the multiplier
    for venv in (env, plain):
        venv.seed(3)
        venv.reset()
    nus = np.asarray(plain.venv.core.state.nu)
    bins = np.searchsorted(edges, nus, side="right")
    assert len(set(bins)) >= 2
    actions = np.where(nus > 0.04, 1.0, -1.0)[:, None]  # 11 nu above 0.04, nothing below
    callback = DualAscentCallback(env, lr=0.5)
    callback.init_callback(SimpleNamespace(get_env=lambda: env, logger=configure(None, []), num_timesteps=0))
    total_cost = np.zeros(8)
    for _ in range(SHORT["num_rounds"]):
        _, shaped, dones, _ = env.step(actions)
        _, reward, _, infos = plain.step(actions)
        cost = np.array([i["cost"] for i in infos])
        np.testing.assert_allclose(shaped, reward - env.multipliers[bins] * (cost - 1.0) / 25, rtol=1e-6, atol=1e-7)
        total_cost += cost
    assert dones.all() and sorted(env.finished) == sorted(zip(bins.tolist(), (total_cost / 25).tolist()))
    before = env.multipliers.copy()
    callback.on_rollout_end()
    for b in range(4):
        mean = total_cost[bins == b].mean() / 25 if (bins == b).any() else None
        expected = before[b] if mean is None else max(0.0, before[b] + 0.5 * (mean - 1.0))
        assert env.multipliers[b] == pytest.approx(expected, rel=1e-12)
    state = env.state(7)
    assert state == {"multipliers": env.multipliers.tolist(), "integral": env.multipliers.tolist(),
                     "previous_cost": [None if not (bins == b).any() else total_cost[bins == b].mean() / 25
                                       for b in range(4)], "nu_edges": edges.tolist(), "num_timesteps": 7}
    resumed = LagrangianVecEnv(OTAPrivacySB3VecEnv(8, **kwargs), initial=9.0, nu_edges=edges)
    resumed.load_state(state)
    assert resumed.state(7) == state


def test_the_pid_multiplier_follows_stooke_et_al_algorithm_2_by_hand():
    """lambda = max(0, k_P e + I + k_D max(0, J - J_prev)), I <- max(0, I + k_I e), e = J - 1, per bin, against the
    update written out by hand over four rollouts of scripted episode costs (one bin: a task without nu)."""
    from types import SimpleNamespace

    from stable_baselines3.common.logger import configure

    from agents.lagrangian import DualAscentCallback, LagrangianVecEnv
    from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

    env = LagrangianVecEnv(OTAPrivacySB3VecEnv(2, reward_mode="cmdp", action_type="spend", dp_orders=None, **SHORT),
                           initial=0.3)
    callback = DualAscentCallback(env, lr=0.5, kp=2.0, kd=4.0)
    callback.init_callback(SimpleNamespace(get_env=lambda: env, logger=configure(None, []), num_timesteps=0))
    integral, previous = 0.3, None
    for costs in ([1.5, 1.3], [1.2, 1.2], [0.6, 0.8], [0.9, 0.9]):
        env.finished.extend((0, c) for c in costs)
        callback.on_rollout_end()
        j = float(np.mean(costs))
        integral = max(0.0, integral + 0.5 * (j - 1.0))
        rising = 0.0 if previous is None else max(0.0, j - previous)
        expected = max(0.0, 2.0 * (j - 1.0) + integral + 4.0 * rising)
        assert env.multipliers[0] == pytest.approx(expected, rel=1e-12) and env.integral[0] == pytest.approx(integral)
        if previous is None:  # the first overspend: 2 x 0.4 + (0.3 + 0.5 x 0.4) = 1.3, where dual ascent gives 0.5
            assert env.multipliers[0] == pytest.approx(1.3, rel=1e-12)
        previous = j
    with pytest.raises(ValueError, match="lagrange_kp must be finite and >= 0; got -1.0"):
        DualAscentCallback(env, kp=-1.0)


def test_quantile_lagrangian_drives_the_quantile_of_the_episode_costs_to_the_limit():
    """With lagrange_quantile q the controller's J is the q-quantile of the bin's episode costs (numpy's linear
    interpolation), not their mean: costs 0.5, 0.7, 0.9, 1.1, 1.3 have mean 0.9 (dual ascent would lower the
    multiplier) and 0.8-quantile 1.14 (it rises by 0.5 x 0.14)."""
    from types import SimpleNamespace

    from stable_baselines3.common.logger import configure

    from agents.lagrangian import DualAscentCallback, LagrangianVecEnv
    from otagym.wrappers.sb3 import OTAPrivacySB3VecEnv

    env = LagrangianVecEnv(OTAPrivacySB3VecEnv(2, reward_mode="cmdp", action_type="spend", dp_orders=None, **SHORT),
                           initial=1.0)
    callback = DualAscentCallback(env, lr=0.5, quantile=0.8)
    callback.init_callback(SimpleNamespace(get_env=lambda: env, logger=configure(None, []), num_timesteps=0))
    env.finished.extend((0, c) for c in (0.5, 0.7, 0.9, 1.1, 1.3))
    callback.on_rollout_end()
    assert env.multipliers[0] == pytest.approx(1.0 + 0.5 * 0.14, rel=1e-12)
    with pytest.raises(ValueError, match="lagrange_quantile must lie in"):
        DualAscentCallback(env, quantile=1.0)


def test_ppo_lagrangian_updates_its_multiplier_by_dual_ascent(tmp_path):
    cfg = tmp_path / "lag.yml"
    cfg.write_text("otagym/OTAPrivacy-v0:\n  n_envs: 4\n  n_steps: 50\n  batch_size: 100\n  n_epochs: 1\n"
                   "  lagrange_init: 0.5\n  lagrange_lr: 0.1\n  env_kwargs:\n    reward_mode: cmdp\n"
                   "    dp_orders: null\n")
    run = tmp_path / "lag"
    train("ppo_lagrangian", config=cfg, run_dir=run, total_timesteps=300, env_overrides=SHORT, progress=False)
    state = json.loads((run / "lagrange.json").read_text())
    assert len(state["multipliers"]) == 1 and state["multipliers"][0] >= 0 and state["multipliers"][0] != 0.5
    assert state["num_timesteps"] == 300  # the run's last step, though the budget stopped it mid-rollout (200 + 100)
    assert not (run / ".otagym-train.lock").exists()  # the lock's file goes with the lock
    from stable_baselines3.common.monitor import load_results

    from agents.train.summary import training_summary

    episodes = load_results(str(run))
    assert (episodes["cost_limit"] == SHORT["num_rounds"]).all() and (episodes["episode_cost"] > 0).all()
    summary = training_summary(run / "model.zip")
    ratio = (episodes["episode_cost"] / episodes["cost_limit"]).tail(100)
    assert f"episode cost / limit {ratio.mean():.3f} (max {ratio.max():.3f})" in summary
    assert f"Lagrange multipliers at step 300: {state['multipliers'][0]:.4g}" in summary
    with pytest.raises(ValueError, match="cmdp"):
        train("ppo_lagrangian", run_dir=tmp_path / "bad", total_timesteps=10, env_overrides={"reward_mode": "budget"},
              progress=False)


def test_an_algorithm_that_ignores_the_cost_warns_on_a_constrained_task():
    from agents.train.setup import warn_if_unconstrained
    from otagym.tasks import TASKS

    with pytest.warns(UserWarning, match="ppo optimises the reward alone: on otagym/ReceiveScalingCMDP-v1"):
        warn_if_unconstrained("ppo", dict(TASKS["otagym/ReceiveScalingCMDP-v1"].kwargs), "otagym/ReceiveScalingCMDP-v1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_unconstrained("ppo_lagrangian", dict(TASKS["otagym/ReceiveScalingCMDP-v1"].kwargs), None)
        warn_if_unconstrained("ppo", dict(TASKS["otagym/ReceiveScalingIID-v0"].kwargs), None)  # budget mode


@pytest.mark.slow
def test_cli_trains_and_compares_the_agent_with_analytic_policies(tmp_path, capsys):
    run = tmp_path / "cli"
    assert main(["train", "--algo", "ppo", "--config", str(_small_ppo(tmp_path)), "--run-dir", str(run),
                 "--steps", "512", "--no-progress", "--env", "num_rounds=25"]) == 0
    assert (run / "model.zip").is_file()
    out = tmp_path / "cmp"
    assert main(["compare", "--policies", "EqualAlloc", f"PPO:{run / 'model.zip'}", "--rounds", "25", "--nu", "0.04",
                 "--seeds", "2", "--seed-start", "1000", "--out", str(out), "--no-progress"]) == 0
    rows = json.loads((out / "compare.json").read_text())["rows"]
    assert {r["policy"] for r in rows} == {"EqualAlloc", "PPO"}
    assert all(abs(r["cost_mean"] - 0.04) < 1e-6 for r in rows)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:  # refused before any cell runs, naming the field (issue 13)
        main(["compare", "--policies", f"PPO:{tmp_path / 'missing.zip'}", "--out", str(out)])
    assert exc.value.code == 2 and "policies[0].model must be an existing file" in capsys.readouterr().err


#: The zoo's single-agent models (a devices-as-agents task's teams are tested in tests/agents/test_mappo.py).
ZOO = sorted(p for p in (CONFIG_DIR.parent / "zoo").glob("*/*/model.zip")
             if f"otagym/{p.parent.parent.name}" not in DEVICE_TASKS)


@pytest.mark.slow
@pytest.mark.parametrize("path", ZOO, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in ZOO])
def test_shipped_agents_load_with_sb3_and_play_in_compare(path):
    """agents/zoo/<task>/<algo>/: model.zip loads with the algorithm's own ``load``, run.json carries the env keyword
    arguments, the training seed and the package version, and the model plays in the comparison on its task."""
    from agents.policy import ALGO_CLASSES

    meta = json.loads((path.parent / "run.json").read_text())
    assert {"env_kwargs", "seed", "versions", "algo"} <= set(meta) and meta["versions"]["otagym"]
    model = ALGO_CLASSES[meta["algo"]].load(path, device="cpu")
    fading = {k: meta["env_kwargs"][k] for k in ("fading", "correlation", "coherence_rounds")
              if k in meta["env_kwargs"]}
    agent = PolicySpec(lambda nu, p: AgentPolicy(model, nu=nu, env_kwargs=meta["env_kwargs"]))
    rows = compare("paper-mnist", (0.04,), (10_000,), {"EqualAlloc": POLICIES["EqualAlloc"], "agent": agent},
                   progress=False, num_rounds=40, **fading)
    agent = [r for r in rows if r["policy"] == "agent"][0]
    assert np.isfinite(agent["score"])
    # budget mode meets nu by construction; a constrained task's agent keeps the limit only as well as it learned to
    assert agent["matched"] or meta["env_kwargs"].get("reward_mode") == "cmdp"


@pytest.mark.parametrize("algo", ["ppo", "sac", "td3", "trpo"])
def test_rl_zoo3s_unconstrained_configs_warn_on_every_constrained_task_and_only_there(algo):
    """rl_zoo3 wraps each env in its entry's ``env_wrapper``: every constrained task's (and no other's) is
    UnconstrainedLearner, which warns when the made env is a constrained MDP."""
    import gymnasium as gym
    import yaml

    from otagym.tasks import TASKS
    from otagym.wrappers import UnconstrainedLearner

    entries = yaml.safe_load((CONFIG_DIR / f"{algo}.yml").read_text())
    for task in TASKS.values():
        wrapper = entries.get(task.id, {}).get("env_wrapper")
        assert (wrapper == "otagym.wrappers.UnconstrainedLearner") == task.constrained, task.id
    with pytest.warns(UserWarning, match="otagym/ReceiveScalingCMDP-v1 is a constrained MDP and this learner"):
        UnconstrainedLearner(gym.make("otagym/ReceiveScalingCMDP-v1"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        UnconstrainedLearner(gym.make("otagym/ReceiveScalingIID-v0"))


ZOO = Path(__file__).resolve().parents[2] / "agents" / "zoo"


@pytest.mark.parametrize("model_path", [p for p in sorted(ZOO.glob("*/*/model.zip"))
                                        if f"otagym/{p.parent.parent.name}" not in DEVICE_TASKS],
                         ids=lambda p: "/".join(p.parts[-3:-1]))
def test_act_only_models_play_as_loaded_ones(model_path):
    """A zoo model loaded to play only (no optimiser built) predicts the same actions as the model loaded whole, on
    the observations of an episode of its task or env, and has no optimiser that could train."""
    from agents.policy import NoOptimizer, run_metadata

    whole, played = load_model(model_path), load_model(model_path, act_only=True)
    meta = run_metadata(model_path)
    kwargs = TASKS[meta["task"]].kwargs if meta.get("task") in TASKS else (meta.get("env_kwargs") or {})
    env = OTAPrivacyEnv(**kwargs)
    obs, _ = env.reset(seed=3)
    observations = [obs]
    for _ in range(20):
        obs, *_ = env.step(whole.predict(obs, deterministic=True)[0])
        observations.append(obs)
    batch = np.stack(observations)
    np.testing.assert_array_equal(played.predict(batch, deterministic=True)[0],
                                  whole.predict(batch, deterministic=True)[0])
    assert getattr(played.policy, "optimizer", None) is None or isinstance(played.policy.optimizer, NoOptimizer)


def test_act_only_load_imports_no_dynamo():
    """Loading a model to play only does not build a torch optimiser, whose first import of torch._dynamo takes
    about 2 s of ``otagym evaluate``."""
    code = ("import sys; from agents.policy import load_model; "
            f"load_model({str(next(ZOO.glob('*/budget_ppo/model.zip')))!r}, act_only=True); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
