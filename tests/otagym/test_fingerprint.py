"""The numbers a refactoring must not move: a fixed-seed play of every registered env, single and vector, of the
relative-spend wrapper, of the device tasks and of the accountants, against the values stored in ``fingerprint.json``
beside this file. Each play runs through the end of its first episode (the end-of-episode privacy report, the
truncation, the vector env's autoreset) and a few rounds of the next.

A change that means to move them (a fixed bug, a new formula) writes them anew, and its commit says why:

    python tests/otagym/test_fingerprint.py --write

Each case's numbers (thousands of them) are stored as a fingerprint: in 32 consecutive blocks, each block's count of
non-finite numbers, and the sum, a weighted sum (weights sin(i)) and the sum of magnitudes of its finite ones. The
sums are compared to 1e-12 of the magnitudes: bit-identical on the machine that wrote them, with room for a libm that
rounds a last bit differently elsewhere; any change of a number beyond that moves a sum.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import otagym  # noqa: F401  (registers the envs)
from otagym.accounting import DEFAULT_ORDERS, pld_epsilon, rdp_sgm, rdp_to_dp
from otagym.env import OTAPrivacyVectorEnv
from otagym.multiagent import DEVICE_TASKS, parallel_env
from otagym.tasks import TASKS
from otagym.wrappers import RelativeSpendVector

STORED = Path(__file__).with_name("fingerprint.json")
SEED, BLOCKS = 7, 32
#: Rounds played after the first episode ends (a reset, or the vector env's autoreset step, then rounds of the next).
AFTER_END = 3


def _numbers(value: Any) -> list[float]:
    """The floats of an observation, a reward or an info entry, flattened (non-numeric entries give none)."""
    if isinstance(value, dict):
        return [x for key in sorted(value) for x in _numbers(value[key])]
    array = np.asarray(value)
    return array.astype(float).ravel().tolist() if array.dtype.kind in "biuf" else []


def fingerprint(values: list[float]) -> list[list[float]]:
    """Per block of ``values`` (:data:`BLOCKS` of them): [non-finite count, sum, sum of sin(i) x_i, sum of |x_i|] of its
    finite x_i, i the index in ``values``."""
    x = np.asarray(values, dtype=float)
    finite = np.isfinite(x)
    x = np.where(finite, x, 0.0)
    blocks = np.array_split(np.arange(x.size), BLOCKS)
    return [[float((~finite[b]).sum()), float(x[b].sum()), float((np.sin(b) * x[b]).sum()), float(np.abs(x[b]).sum())]
            for b in blocks]


def single_env(env_id: str) -> list[float]:
    """``gym.make(env_id)`` from seed ``SEED`` through its first episode, a reset and ``AFTER_END`` rounds, actions
    sampled by the seeded action space."""
    env = gym.make(env_id)
    obs, info = env.reset(seed=SEED)
    env.action_space.seed(SEED)
    out, left = _numbers(obs) + _numbers(info), None
    while left is None or left > 0:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        out += _numbers(obs) + [float(reward), float(terminated), float(truncated)] + _numbers(info)
        if left is not None:
            left -= 1
        elif terminated or truncated:
            obs, info = env.reset()
            out, left = out + _numbers(obs) + _numbers(info), AFTER_END
    env.close()
    return out


def _vector_play(env: gym.vector.VectorEnv) -> list[float]:
    """A vector env from seed ``SEED`` through the end of its first episodes and ``AFTER_END`` steps more (the
    autoreset step among them)."""
    obs, info = env.reset(seed=SEED)
    env.action_space.seed(SEED)
    out, left = _numbers(obs) + _numbers(info), None
    while left is None or left > 0:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        out += _numbers(obs) + _numbers(reward) + _numbers(terminated) + _numbers(truncated) + _numbers(info)
        if left is not None:
            left -= 1
        elif np.any(terminated) or np.any(truncated):
            left = AFTER_END
    env.close()
    return out


def vector_env(task_id: str) -> list[float]:
    """The native vector env of a task, three envs (:func:`_vector_play`)."""
    return _vector_play(OTAPrivacyVectorEnv(3, **TASKS[task_id].kwargs))


def relative_spend(task_id: str) -> list[float]:
    """The relative-spend wrapper with a floor over a spend task's vector env, three envs (:func:`_vector_play`)."""
    return _vector_play(RelativeSpendVector(OTAPrivacyVectorEnv(3, **TASKS[task_id].kwargs), reserve=0.2, floor=0.5))


def device_env(task_id: str) -> list[float]:
    """A device task's PettingZoo parallel env from seed ``SEED`` until every device is done, each agent's action
    sampled by its seeded space."""
    env = parallel_env(task_id)
    obs, _ = env.reset(seed=SEED)
    out = [x for agent in sorted(obs) for x in _numbers(obs[agent])]
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(SEED + i)
    while env.agents:
        obs, rewards, terminations, truncations, _ = env.step(
            {agent: env.action_space(agent).sample() for agent in env.agents})
        out += ([x for agent in sorted(obs) for x in _numbers(obs[agent])] + [rewards[a] for a in sorted(rewards)]
                + [float(terminations[a] or truncations[a]) for a in sorted(terminations)])
    env.close()
    return out


def accountants() -> list[float]:
    """The RDP of the subsampled Gaussian at the default orders, its (epsilon, order) conversion and the PLD's
    epsilon, on a small grid of q and noise multipliers."""
    q, sigma = np.array([0.01, 0.1, 1.0]), np.array([0.8, 1.5, 4.0])
    rdp = rdp_sgm(q=q[:, None], noise_multiplier=sigma[None, :], orders=DEFAULT_ORDERS)
    eps, order = rdp_to_dp(100 * rdp, DEFAULT_ORDERS, 1e-5)
    return (_numbers(rdp) + _numbers(eps) + _numbers(order)
            + _numbers(pld_epsilon(q=np.array([0.01, 0.1]), noise_multiplier=np.array([1.0, 2.0]), delta=1e-5)))


def cases() -> dict[str, Any]:
    """Every fingerprinted case, by name, as the function that computes it."""
    return {**{f"single {i}": (lambda i=i: single_env(i)) for i in gym.registry if i.startswith("otagym/")},
            **{f"vector {t}": (lambda t=t: vector_env(t)) for t in TASKS},
            **{f"relative spend {t}": (lambda t=t: relative_spend(t)) for t in TASKS
               if TASKS[t].kwargs.get("action_type") == "spend"},
            **{f"devices {t}": (lambda t=t: device_env(t)) for t in DEVICE_TASKS},
            "accountants": accountants}


@pytest.mark.parametrize("name", sorted(cases()))
def test_numbers_are_the_stored_ones(name):
    stored = json.loads(STORED.read_text())
    assert name in stored, f"{name} is not in {STORED.name}: write it with `python {__file__} --write`"
    assert not _moved(fingerprint(cases()[name]()), stored[name])


def _moved(new: list[list[float]], old: list[list[float]]) -> list[int]:
    """The blocks whose fingerprints differ (a different count of blocks: all)."""
    if len(new) != len(old):
        return list(range(max(len(new), len(old))))
    a, b = np.asarray(new), np.asarray(old)
    tolerance = 1e-12 * np.maximum(a[:, 3], b[:, 3]) + 1e-300
    return [i for i in range(len(a)) if a[i, 0] != b[i, 0] or np.any(np.abs(a[i, 1:] - b[i, 1:]) > tolerance[i])]


def test_a_number_moved_in_its_ninth_digit_is_caught():
    values = single_env("otagym/CDPB-v1")
    i = int(np.argmax(np.abs(values)))
    moved = list(values)
    moved[i] *= 1 + 1e-9
    assert len(_moved(fingerprint(moved), fingerprint(values))) == 1  # its block only
    moved[i] = float("nan")
    assert _moved(fingerprint(moved), fingerprint(values))


def test_every_stored_case_is_still_computed():
    assert set(json.loads(STORED.read_text())) == set(cases())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {STORED.name} anew (else: compare)")
    args = parser.parse_args(argv)
    values = {name: fingerprint(compute()) for name, compute in sorted(cases().items())}
    if not args.write:
        stored = json.loads(STORED.read_text())
        moved = [n for n in values if n not in stored or _moved(values[n], stored[n])]
        print("moved: " + (", ".join(moved) or "none"))
        return 1 if moved else 0
    from otagym._io import write_json

    write_json(STORED, values)
    print(f"wrote {STORED} ({len(values)} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
