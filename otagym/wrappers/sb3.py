"""Adapter from the native :class:`~otagym.env.OTAPrivacyVectorEnv` to stable-baselines3's ``VecEnv`` API.

SB3 wants same-step autoreset, a list of per-env info dicts, ``terminal_observation`` in the info of an env whose
episode just ended, and ``TimeLimit.truncated``. The adapter builds the native env with ``autoreset_mode=SAME_STEP``
(its default is Gymnasium's NEXT_STEP) and only reshapes its outputs. Requires ``stable-baselines3`` (the ``rl`` extra).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from otagym.env import OTAPrivacyVectorEnv
from otagym.schemes import get_scheme

__all__ = ["OTAPrivacySB3VecEnv"]

class OTAPrivacySB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` over N episodes of any scheme stepped natively in numpy.

    Args:
        num_envs: N.
        vector_wrappers: Gymnasium vector wrappers applied in order to the native env before SB3 sees it, each a
            callable ``VectorEnv -> VectorEnv`` (e.g. ``lambda v: RelativeSpendVector(v, floor=0.5)``, then
            :class:`~otagym.wrappers.PotentialShapingVector`); their action and observation spaces are SB3's, the
            infos stay the native env's.
        **env_kwargs: passed to :class:`~otagym.env.OTAPrivacyVectorEnv` (``scheme``, ``scenario``, reward settings,
            Scenario overrides, a task's ``kwargs``, ...); ``autoreset_mode`` may only be ``SAME_STEP``, which the
            adapter sets.

    Per-env infos carry the scheme's scalar entries (:attr:`otagym.schemes.SchemeInfo.info_keys`) that its settings
    report every step (:attr:`info_keys`), and at the end of
    an episode ``terminal_observation``, ``TimeLimit.truncated`` (False: episodes terminate after T rounds),
    ``episode_rdp`` (mean cumulative RDP at alpha over devices or clients), on receive scaling ``episode_leakage``
    and ``episode_equal_alloc_leakage`` (objective (28a) of the policy and of EqualAlloc on the same channels),
    ``episode_cost`` and ``cost_limit`` (the episode's summed ``info["cost"]`` and its limit, where the scheme reports a
    cost) and ``episode_dp_epsilon`` (mean over devices, when the ledger is on). :attr:`episode_keys` names those an
    ending step always has.
    """

    def __init__(self, num_envs: int = 8, *, vector_wrappers: Sequence[Callable[[Any], Any]] = (),
                 **env_kwargs: Any) -> None:
        mode = env_kwargs.pop("autoreset_mode", AutoresetMode.SAME_STEP)
        if mode not in (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP.value):
            raise ValueError(f"autoreset_mode must be AutoresetMode.SAME_STEP (SB3's VecEnv resets on the step that "
                             f"ends an episode) or left out; got {mode!r}")
        #: The native vector env, and the env stepped (the native one with ``vector_wrappers`` applied).
        self.native = OTAPrivacyVectorEnv(num_envs=num_envs, autoreset_mode=AutoresetMode.SAME_STEP, **env_kwargs)
        self.venv = self.native
        for wrap in vector_wrappers:
            self.venv = wrap(self.venv)
        super().__init__(num_envs, self.venv.single_observation_space, self.venv.single_action_space)
        reported = self.native.core.reset_info()  # the keys of every step's info, less the episode-end ones
        #: The scheme's scalar info entries that these settings report, in each step's per-env info.
        self.info_keys: tuple[str, ...] = tuple(k for k in get_scheme(self.native.scheme).info_keys if k in reported)
        self._leakage = "leakage_total" in self.native.core.EPISODE_END_KEYS
        #: The per-episode entries of an ending step's info (beside ``terminal_observation``).
        self.episode_keys: tuple[str, ...] = ("episode_rdp",) + (
            ("episode_leakage", "episode_equal_alloc_leakage") if self._leakage else ()) + (
            ("episode_cost", "cost_limit") if self.native.cost_limit is not None else ())
        self._actions: np.ndarray | None = None
        self._seed: int | None = None

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        # One generator drives all envs of the native vector env, so one seed is kept (SB3 passes seed + idx).
        self._seed = seed
        return [seed] * self.num_envs

    def reset(self) -> np.ndarray:
        seed = self._seed if self._seed is not None else self._seeds[0]
        obs, _ = self.venv.reset(seed=seed)
        self._seed = None
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        obs, reward, terminated, truncated, info = self.venv.step(self._actions)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{k: info[k][i] for k in self.info_keys} for i in range(self.num_envs)]
        if dones.any():
            final_obs, final_info = info["final_obs"], info["final_info"]
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = final_obs[i]
                infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                infos[i]["episode_rdp"] = float(final_info["rdp_cumulative"][i].mean())
                if self._leakage:
                    infos[i]["episode_leakage"] = float(final_info["leakage_total"][i])
                    infos[i]["episode_equal_alloc_leakage"] = float(final_info["equal_alloc_leakage"][i])
                if "episode_cost" in final_info:
                    infos[i]["episode_cost"] = float(final_info["episode_cost"][i])
                    infos[i]["cost_limit"] = float(final_info["cost_limit"][i])
                if "dp_epsilon" in final_info:
                    infos[i]["episode_dp_epsilon"] = float(final_info["dp_epsilon"][i].mean())
        return obs, reward.astype(np.float32), dones, infos

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(self.native, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        setattr(self.native, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        result = getattr(self.native, method_name)(*method_args, **method_kwargs)
        return [result] * len(self._get_indices(indices))

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False] * len(self._get_indices(indices))
