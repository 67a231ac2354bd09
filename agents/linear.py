"""The linear price policy of nine observation features, as an SB3 policy: a = clip(theta . phi(obs), -1, 1).

The policy that ``benchmarks/crn_search.py`` searches on common random numbers (docs/rl.md §9), in a form every SB3
client loads: :class:`LinearPricePolicy` is an sb3-contrib ARS policy (ARS is itself a random search over a linear
policy's weights) whose features extractor computes :func:`price_features` and whose action head is one bias-free
linear layer, so ``ARS.load("model.zip")`` plays it with ``predict`` (the search's policy up to float32 rounding: the
policy computes in float32) and ARS can train it further. One implementation of the features serves the numpy search
and the torch policy.

The features of an observation of M devices (layout: docs/environment/receive-scaling.md#observation): 1, z, z^2, h,
p, t, z h, z p, z t, with z = log10 nu - log10 nu_ref (the observed budget), h = log10(h_min^2 / E[h_min^2]) (this
round's weakest channel against its mean), p = log1p(budget left per round / nu) and t = t / T. With three budgets
nu, the terms 1, z, z^2 give each its own constant; theta = 0 is the action's reference, a = 0.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import torch
from gymnasium import spaces
from numpy.typing import ArrayLike
from sb3_contrib import ARS
from sb3_contrib.ars.policies import ARSPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

__all__ = ["FEATURES", "LinearPricePolicy", "PriceFeatures", "linear_price_model", "price_features"]

#: Names of the features of :func:`price_features`, in order.
FEATURES = ("1", "z", "z^2", "h", "p", "t", "z h", "z p", "z t")

Array = TypeVar("Array", np.ndarray, torch.Tensor)


def _num_devices(obs_dim: int) -> int:
    """M of a receive-scaling observation of ``obs_dim`` = 3M + 6 entries."""
    if obs_dim < 9 or (obs_dim - 6) % 3:
        raise ValueError(f"observation width must be 3M + 6 with M >= 1 (a receive-scaling observation); got {obs_dim}")
    return (obs_dim - 6) // 3


def price_features(obs: Array) -> Array:
    """(..., 9) features (:data:`FEATURES`) of observations (..., 3M + 6); numpy arrays or torch tensors."""
    m = _num_devices(obs.shape[-1])
    z, h, p, t = obs[..., 2 * m + 4], obs[..., 2 * m], obs[..., 2 * m + 3], obs[..., 2 * m + 1]
    xp = torch if isinstance(obs, torch.Tensor) else np
    return xp.stack([xp.ones_like(z), z, z * z, h, p, t, z * h, z * p, z * t], -1)


class PriceFeatures(BaseFeaturesExtractor):
    """SB3 features extractor of :func:`price_features` (no parameters)."""

    def __init__(self, observation_space: spaces.Box) -> None:
        _num_devices(observation_space.shape[-1])
        super().__init__(observation_space, features_dim=len(FEATURES))

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return price_features(observations)


class LinearPricePolicy(ARSPolicy):
    """ARS's linear policy on :class:`PriceFeatures`: a = clip(theta . phi(obs), -1, 1), theta the weight (1, 9) of
    the bias-free action layer (the bias is the feature "1"). As with ARS's own ``LinearPolicy``, ``predict`` clips
    to the action space (``forward`` returns theta . phi unclipped). It takes no ``policy_kwargs``; pass the class
    itself, ``ARS(LinearPricePolicy, env)`` (a string names only sb3-contrib's own policies)."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Box) -> None:
        super().__init__(observation_space, action_space, net_arch=[], with_bias=False, squash_output=False)

    def make_features_extractor(self) -> PriceFeatures:
        return PriceFeatures(self.observation_space)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {"observation_space": self.observation_space, "action_space": self.action_space}


def linear_price_model(theta: ArrayLike, env: Any, **ars_kwargs: Any) -> ARS:
    """An ARS model of :class:`LinearPricePolicy` with weights ``theta`` (9,), stored in float32, on ``env`` (a
    receive-scaling env with the price action, or its vector env); ``ars_kwargs`` go to ``ARS``. ``learn`` would
    continue ARS's search from theta."""
    theta = np.array(theta, dtype=np.float32)  # a copy: the model does not share the caller's memory
    if theta.shape != (len(FEATURES),) or not np.all(np.isfinite(theta)):
        raise ValueError(f"theta must be {len(FEATURES)} finite weights ({', '.join(FEATURES)}); got {theta}")
    model = ARS(LinearPricePolicy, env, device="cpu", **ars_kwargs)
    model.weights = torch.tensor(theta)  # the centre of ARS's search
    model.policy.load_from_vector(model.weights)
    return model
