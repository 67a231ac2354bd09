"""Client defects: the whole closed box of every action space is accepted, reset and step infos have the same keys
(TorchRL reads one key set across autoresets), and the training fidelity runs in forked workers (``gym.make_vec``'s
async mode) after torch was used in the parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from test_fuzz import _finite as _assert_finite  # a sibling module: pytest puts tests/ on sys.path

from otagym import ENV_ID, OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.schemes import SCHEMES

ROOT = Path(__file__).resolve().parents[2]

#: Every (scheme, env arguments) pair that picks an action space: each action_type (and the reward mode it needs).
ACTION_SETTINGS = [
    ("receive_scaling", {"action_type": "price"}),
    ("receive_scaling", {"action_type": "share"}),
    ("receive_scaling", {"action_type": "normalized"}),
    ("receive_scaling", {"action_type": "spend"}),
    ("receive_scaling", {"action_type": "x"}),
    ("receive_scaling", {"action_type": "eta"}),
    ("receive_scaling", {"action_type": "eta", "reward_mode": "lagrangian", "reward_lambda": 0.1}),
    ("cdpb", {"action_type": "normalized"}),
    ("cdpb", {"action_type": "rho"}),
    ("anonymous", {"action_type": "normalized"}),
    ("anonymous", {"action_type": "sigma"}),
]
#: (scheme, fidelity): every scheme analytic, and under the training fidelity those that have it.
FIDELITIES = [(name, fid) for name, info in SCHEMES.items() for fid in ("analytic", "train")
              if fid == "analytic" or "fidelity" in info.core.ARGS]
#: Small deployments for the training fidelity (a real model per env).
SMALL = {"receive_scaling": {"num_devices": 3}, "cdpb": {"num_clients": 3}, "anonymous": {}}


def _corners(space: gym.spaces.Box) -> list[np.ndarray]:
    """The corners of a Box: its low and its high (an unbounded side's bound is -inf / +inf)."""
    return [space.low.copy(), space.high.copy()]


def test_the_settings_cover_every_action_type_and_an_unbounded_box():
    covered = {(scheme, kw["action_type"]) for scheme, kw in ACTION_SETTINGS}
    for name, info in SCHEMES.items():
        assert {(name, a) for a in info.core.ARGS["action_type"].choices} <= covered
    assert any(np.isinf(OTAPrivacyEnv(scheme=s, **kw).action_space.high).any() for s, kw in ACTION_SETTINGS)


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("scheme,kwargs", ACTION_SETTINGS)
def test_every_corner_of_every_action_space_plays_finite_rounds(scheme, kwargs, vector):
    """Issue: ``action_type="eta"``'s space is Box(0, inf) but +inf (which TorchRL samples) was refused. Every corner
    of every action space is in the space and steps the env with finite observations, rewards and info."""
    env = OTAPrivacyVectorEnv(2, scheme=scheme, num_rounds=3, **kwargs) if vector else OTAPrivacyEnv(
        scheme=scheme, num_rounds=3, **kwargs)
    for corner in _corners(env.action_space):
        assert env.action_space.contains(corner), corner
        env.reset(seed=0)
        for _ in range(3 + vector):  # the vector env also autoresets
            obs, reward, _, _, info = env.step(corner)
            assert env.observation_space.contains(obs) and np.isfinite(reward).all()
            for key, value in info.items():
                _assert_finite(key, value)


def test_eta_at_infinity_is_played_at_the_power_limit_and_nan_is_refused():
    env = OTAPrivacyEnv(action_type="eta", num_rounds=3)
    _, info0 = env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([np.inf]))
    assert info["x"] == env.model.x_max
    assert info["receive_scaling"] == pytest.approx(env.model.x_max * info0["next_h_min2"], rel=1e-12)
    with pytest.raises(ValueError, match=r"action \(eta\) must lie in \[0, inf\].*got \[nan\]"):
        env.step(np.array([np.nan]))
    with pytest.raises(ValueError, match=r"action \(eta\) must lie in \[0, inf\].*got \[-inf\]"):
        env.step(np.array([-np.inf]))


def _kwargs(scheme, fidelity, **extra):
    kwargs = {"scheme": scheme, "num_rounds": 2, **extra}
    if fidelity == "train":
        kwargs.update(fidelity="train", eval_every=1, **SMALL[scheme])
    return kwargs


def _layout(info):
    """key -> (dtype, shape) of every entry (the specs TorchRL builds from an info dict)."""
    return {k: (np.asarray(v).dtype, np.shape(v)) for k, v in info.items()}


@pytest.mark.parametrize("extra", [{}, {"dp_orders": None}], ids=["dp", "no-dp"])
@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("scheme,fidelity", FIDELITIES)
def test_reset_and_step_info_have_the_same_keys(scheme, fidelity, vector, extra):
    """Issue: CDPB's reset info had ``mean_channel_gain`` and its step info did not. ``reset``'s info has exactly the
    keys of a ``step``'s, with the same dtypes and shapes; the episode-end entries (the core's ``EPISODE_END_KEYS``
    and the episode's cost and its limit: the env's ``episode_end_keys``) come in addition at the last step only."""
    kwargs = _kwargs(scheme, fidelity, **extra)
    env = OTAPrivacyVectorEnv(2, **kwargs) if vector else OTAPrivacyEnv(**kwargs)
    _, reset_info = env.reset(seed=0)
    _, _, terminated, _, step_info = env.step(env.action_space.sample())
    assert not np.any(terminated)
    assert _layout(reset_info) == _layout(step_info)
    end_keys = set(env.episode_end_keys)
    assert set(env.core.EPISODE_END_KEYS) <= end_keys and ({"episode_cost", "cost_limit"} <= end_keys) == (
        "cost" in reset_info)
    _, _, terminated, _, last_info = env.step(env.action_space.sample())
    assert np.all(terminated)
    extra_keys = {k for k in set(last_info) - set(reset_info) if not k.startswith("_")}
    assert extra_keys <= end_keys | {"final_obs", "final_info"}, extra_keys
    assert set(reset_info) <= set(last_info)


def test_cdpb_reports_the_mean_channel_gain_at_every_step_with_or_without_csi():
    for csi in (False, True):
        env = OTAPrivacyEnv(scheme="cdpb", num_rounds=2, csi_feedback=csi, client_sampling=0.5)
        _, reset_info = env.reset(seed=0)
        _, _, _, _, info = env.step(env.action_space.sample())
        np.testing.assert_array_equal(info["mean_channel_gain"], reset_info["mean_channel_gain"])
        assert set(info) == set(reset_info)


@pytest.mark.parametrize("make", ["single", "vector_entry_point", "sync_same_step"])
@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_torchrl_gym_wrapper_rolls_out_across_an_autoreset(scheme, make):
    """Issue: TorchRL's ``GymWrapper`` crashed at CDPB's first autoreset (a reset info key missing from the step's)."""
    pytest.importorskip("torchrl")
    from torchrl.envs import GymWrapper

    kwargs = {"scheme": scheme, "num_rounds": 3}
    if make == "single":
        env = GymWrapper(gym.make(ENV_ID, **kwargs))
        env.auto_register_info_dict()
    elif make == "vector_entry_point":
        env = GymWrapper(gym.make_vec(ENV_ID, 2, vectorization_mode="vector_entry_point",
                                      autoreset_mode=AutoresetMode.SAME_STEP, **kwargs))  # TorchRL's only mode
    else:
        env = GymWrapper(gym.make_vec(ENV_ID, 2, vectorization_mode="sync",
                                      vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **kwargs))
    td = env.rollout(8, break_when_any_done=False)
    done = td["next", "done"].reshape(*td.batch_size, -1)[..., 0]
    assert done[..., 2].all() and done[..., 5].all() and not done[..., 3].any()
    rounds = td["next", "round"].reshape(*td.batch_size, -1)[..., 0]
    assert (rounds[..., :3] == np.arange(3)).all() and (rounds[..., 3:6] == np.arange(3)).all()


def test_torchrl_rolls_out_the_eta_actions_it_samples():
    """TorchRL samples +inf from eta's Box(0, inf) (every time): each is played at the power limit."""
    pytest.importorskip("torchrl")
    from torchrl.envs import GymWrapper

    env = GymWrapper(gym.make(ENV_ID, action_type="eta", num_rounds=3))
    env.auto_register_info_dict()
    td = env.rollout(6, break_when_any_done=False)
    assert np.isinf(td["action"].numpy()).all()  # what TorchRL samples
    np.testing.assert_array_equal(td["next", "x"].numpy().ravel(), env.unwrapped.model.x_max)


#: Run in a subprocess: torch used in the parent (two threads, so its OpenMP pool starts), then ``gym.make_vec`` in
#: async mode (fork) with the training fidelity, a few rounds.
ASYNC_SCRIPT = textwrap.dedent("""
    import json
    import sys

    import gymnasium as gym
    import numpy as np
    import torch
    import otagym

    torch.set_num_threads(2)
    x = torch.randn(256, 256)
    float((x @ x).sum())  # torch's thread pool runs in the parent before the fork
    venv = gym.make_vec("otagym/OTAPrivacy-v0", 2, vectorization_mode="async", vector_kwargs={"context": "fork"},
                        scheme=sys.argv[1], fidelity="train", num_rounds=3, eval_every=1, **json.loads(sys.argv[2]))
    venv.reset(seed=0)
    for _ in range(4):  # an autoreset included
        obs, reward, terminated, truncated, info = venv.step(venv.action_space.sample())
        assert np.isfinite(reward).all() and np.isfinite(info["train_loss"]).all()
    venv.close()
    print("stepped")
""")


@pytest.mark.slow
@pytest.mark.parametrize("scheme", [s for s, fid in FIDELITIES if fid == "train"])
def test_async_make_vec_trains_after_torch_was_used_in_the_parent(scheme):
    """Issue: the forked workers hung forever in torch's thread pool, started in the parent before the fork."""
    pytest.importorskip("torch")
    proc = subprocess.Popen([sys.executable, "-c", ASYNC_SCRIPT, scheme, json.dumps(SMALL[scheme])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the script and the workers it forked (its own session)
        proc.communicate()
        pytest.fail("gym.make_vec(..., vectorization_mode='async', fidelity='train') hung")
    assert proc.returncode == 0 and "stepped" in out, err[-3000:]
