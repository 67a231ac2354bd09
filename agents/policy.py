"""A trained SB3 model as a policy of the ``baselines`` protocol (``reset``/``act`` returning x_t), so that it plays in
``otagym compare`` and :func:`baselines.run_policy` on the same channel realisations as the analytic policies.

The model sees the env's observation unchanged (it is the same in every formulation) and its action is turned into x_t
by :class:`baselines.receive_scaling.policies.ActionPolicy`, through the same pure functions the env uses, with its own
budget ledger R_t = nu T - sum c_tau exactly as the env keeps it.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sb3_contrib import ARS, TRPO
from stable_baselines3 import PPO, SAC, TD3
from stable_baselines3.common.save_util import load_from_zip_file

from baselines.receive_scaling.policies import ActionPolicy
from otagym.schemes import DEFAULT_SCHEME, SCHEMES

__all__ = ["AgentPolicy", "ALGO_CLASSES", "NoOptimizer", "load_model", "run_metadata", "check_observation_layout"]

#: Algorithm classes by the names ``otagym train`` uses, and ARS: the class of the linear price policies that
#: ``benchmarks/crn_search.py`` ships (:mod:`agents.linear`).
ALGO_CLASSES = {"ppo": PPO, "ppo_lagrangian": PPO, "budget_ppo": PPO, "budget_apg": PPO,
                "sac": SAC, "td3": TD3, "trpo": TRPO, "ars": ARS}


def load_model(path: str | Path, *, act_only: bool = False):
    """An SB3 model from ``model.zip`` (or a checkpoint); the algorithm is read from ``run.json`` beside it, else
    each class of :data:`ALGO_CLASSES` is tried. ``act_only``: a model to play only (``predict``), whose policy's
    optimisers are not built (:class:`NoOptimizer`; torch's first optimiser imports ``torch._dynamo``, about 2 s):
    ``learn`` on it fails."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no trained model at {path} (expected an SB3 .zip written by `otagym train`)")
    meta = run_metadata(path)
    check_observation_layout(meta, path)
    every = list(dict.fromkeys(ALGO_CLASSES.values()))
    order = [ALGO_CLASSES[meta["algo"]]] if meta.get("algo") in ALGO_CLASSES else every
    custom = {}
    if act_only:
        data = load_from_zip_file(path, device="cpu")[0] or {}
        parameters = inspect.signature(data.get("policy_class", object)).parameters.values()
        if any(p.name == "optimizer_class" or p.kind is p.VAR_KEYWORD for p in parameters):  # ARS's policies: none
            custom = {"policy_kwargs": {**data.get("policy_kwargs", {}), "optimizer_class": NoOptimizer}}
    errors = []
    for cls in order:
        try:
            return cls.load(path, device="cpu", custom_objects=custom)
        except Exception as err:  # noqa: BLE001 - SB3 raises several types for a class mismatch
            errors.append(f"{cls.__name__}: {err}")
    raise ValueError(f"{path} is not a model of {', '.join(cls.__name__ for cls in order)}: {errors}")


class NoOptimizer:
    """The optimiser of a policy loaded to play only (:func:`load_model`'s ``act_only``): it takes the parameters
    and the saved state and keeps neither (nothing is trained)."""

    def __init__(self, params: Any, **kwargs: Any) -> None:
        self.param_groups: list[dict[str, Any]] = []

    def load_state_dict(self, state: dict[str, Any], **kwargs: Any) -> None:
        """The saved optimiser state, ignored (SB3 passes ``strict`` as to a module)."""

    def state_dict(self) -> dict[str, Any]:
        return {}


def check_observation_layout(meta: dict[str, Any], path: str | Path) -> None:
    """Refuse (``ValueError``) a model whose ``run.json`` (``meta``) records an observation layout other than its
    scheme's current one (:attr:`otagym.schemes.SchemeInfo.observation_layout`): it would read other entries than
    those it was trained on. A run.json without ``observation_layout`` was written before layouts were versioned, on
    the current layout (every shipped model was)."""
    scheme = (meta.get("env_kwargs") or {}).get("scheme", DEFAULT_SCHEME)
    current = SCHEMES[scheme].observation_layout.version if scheme in SCHEMES else None
    layout = meta.get("observation_layout", current)
    if layout != current:
        raise ValueError(f"{path} was trained on observation layout {layout!r}, not this otagym's {current!r}: "
                         "retrain it (or play it with the otagym version it was trained with)")


def run_metadata(model_path: Path) -> dict[str, Any]:
    """``run.json`` of the run a model (or one of its checkpoints) belongs to; empty if there is none."""
    for candidate in (model_path.parent / "run.json", model_path.parent.parent / "run.json"):
        if candidate.is_file():
            return json.loads(candidate.read_text())
    return {}


class AgentPolicy(ActionPolicy):
    """A trained model as a receive-scaling policy (works on one env or batched over a vector env).

    Args:
        model: an SB3 model, or the path of its ``.zip``.
        nu: the budget per round (array over envs allowed); default: the scenario's.
        env_kwargs: the action semantics the model was trained with (default: from ``run.json`` beside the model,
            else budget mode with the env's defaults).
        deterministic: play the mean action (default) or sample from the policy's distribution.
    """

    def __init__(self, model: Any, nu: ArrayLike | None = None, env_kwargs: dict[str, Any] | None = None,
                 deterministic: bool = True) -> None:
        if isinstance(model, (str, Path)):
            meta = run_metadata(Path(model))
            model = load_model(model)
            env_kwargs = env_kwargs if env_kwargs is not None else meta.get("env_kwargs")
        super().__init__(nu, env_kwargs=env_kwargs or {})
        self.agent = model
        self.deterministic = deterministic

    def action(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        action, _ = self.agent.predict(np.asarray(observation, dtype=np.float32), deterministic=self.deterministic)
        return action
