"""The linear policy of a few observation features, as an SB3 policy: a = clip(theta . phi(obs), -1, 1).

The policy that ``benchmarks/crn_search.py`` searches on common random numbers (docs/rl.md §9), in a form every SB3
client loads: :class:`LinearPricePolicy` is an sb3-contrib ARS policy (ARS is itself a random search over a linear
policy's weights) whose features extractor computes :func:`price_features` and whose action head is one bias-free
linear layer, so ``ARS.load("model.zip")`` plays it with ``predict`` (the search's policy up to float32 rounding: the
policy computes in float32) and ARS can train it further. One implementation of the features serves the numpy search
and the torch policy.

The features of an observation of M devices (read by name from its layout,
:class:`otagym.schemes.receive_scaling.observation.ObservationOffsets`): 1, z, z^2, h, p, t, z h, z p, z t, with
z = log10 nu - log10 nu_ref (the observed budget), h = log10(h_min^2 / E[h_min^2]) (this round's weakest channel
against its mean), p = log1p(budget left per round / nu) and t = t / T. With three budgets nu, the terms 1, z, z^2
give each its own constant; theta = 0 is the action's reference, a = 0. The ``"cubic"`` feature set
(:data:`FEATURE_SETS`) adds h^2, h^3 and z h^2: on the constrained tasks the best spend is a threshold-and-saturate
function of the channel (nothing below a threshold, then a spend that levels off), which the line through h cannot
follow.

:class:`OnlineOptimalResidualPolicy` adds the same linear term to a base, the action of ``OnlineOptimal`` (the
dynamic programme over the budget left, docs/rl.md §6) computed from the observation alone
(:class:`ObservedOnlineOptimal`): a = clip(a_OO + theta . phi, -1, 1), so theta = 0 plays the online optimum of the
fading's i.i.d. marginal and theta is a learned residual on it.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import torch
from gymnasium import spaces
from numpy.typing import ArrayLike, NDArray
from sb3_contrib import ARS
from sb3_contrib.ars.policies import ARSPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

from baselines.receive_scaling.policies import ActionPolicy
from otagym.schemes.receive_scaling.observation import ObservationOffsets

__all__ = ["FEATURES", "FEATURE_SETS", "LinearFeaturePolicy", "LinearPricePolicy", "linear_term", "feature_set",
           "ObservedOnlineOptimal", "OnlineOptimalResidualPolicy", "PriceFeatures",
           "linear_price_model", "price_features"]

#: Names of the features of :func:`price_features`, in order.
FEATURES = ("1", "z", "z^2", "h", "p", "t", "z h", "z p", "z t")
#: The feature sets by name: ``"price"`` (:data:`FEATURES`, the budget-mode agents') and ``"cubic"`` (those and h^2,
#: h^3, z h^2: the constrained tasks' agents).
FEATURE_SETS = {"price": FEATURES, "cubic": FEATURES + ("h^2", "h^3", "z h^2")}

Array = TypeVar("Array", np.ndarray, torch.Tensor)


def price_features(obs: Array, features: str = "price") -> Array:
    """(..., F) features of observations (..., 3M + 6) (``features``: a name of :data:`FEATURE_SETS`, F its length);
    numpy arrays or torch tensors."""
    if features not in FEATURE_SETS:
        raise ValueError(f"features must be one of {sorted(FEATURE_SETS)}; got {features!r}")
    layout = ObservationOffsets.of_size(obs.shape[-1])
    z, h = obs[..., layout.log_nu], obs[..., layout.channel]
    p, t = obs[..., layout.fair_share], obs[..., layout.progress]
    xp = torch if isinstance(obs, torch.Tensor) else np
    columns = [xp.ones_like(z), z, z * z, h, p, t, z * h, z * p, z * t]
    if features == "cubic":
        columns += [h * h, h * h * h, z * h * h]
    return xp.stack(columns, -1)


def feature_set(theta: ArrayLike) -> str:
    """The name of the feature set whose length is theta's last axis (:data:`FEATURE_SETS`)."""
    sizes = {len(names): name for name, names in FEATURE_SETS.items()}
    if np.ndim(theta) == 0 or np.shape(theta)[-1] not in sizes or not np.all(np.isfinite(theta)):
        raise ValueError(f"theta must be {' or '.join(map(str, sizes))} finite weights (the feature sets "
                         f"{', '.join(f'{n}: {k}' for k, n in sizes.items())}); got {theta}")
    return sizes[np.shape(theta)[-1]]


def linear_term(theta: NDArray, observation: NDArray) -> NDArray:
    """theta . phi(obs) per env: ``theta`` (F,) or one row per env (N, F), the feature set of its length
    (:func:`feature_set`)."""
    return (theta * price_features(np.asarray(observation, dtype=float), feature_set(theta))).sum(axis=1)


class LinearFeaturePolicy(ActionPolicy):
    """The env's action a = clip(theta . price_features(obs), -1, 1) (``linear_crn``; the action type of
    ``env_kwargs``: the price action of the budget-mode tasks, the spend or log-x action of the constrained ones) as a
    policy of the ``baselines`` protocol, for the batched searches: ``theta`` (F,) or one row per env (N, F)."""

    def __init__(self, theta: NDArray, nu: NDArray | None = None, env_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__(nu, env_kwargs=env_kwargs)
        self.theta = np.asarray(theta, dtype=float)

    def action(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        return np.clip(linear_term(self.theta, observation), -1.0, 1.0)


class PriceFeatures(BaseFeaturesExtractor):
    """SB3 features extractor of :func:`price_features` with the set ``features`` (no parameters)."""

    def __init__(self, observation_space: spaces.Box, features: str = "price") -> None:
        ObservationOffsets.of_size(observation_space.shape[-1])
        super().__init__(observation_space, features_dim=len(FEATURE_SETS[features]))
        self.features = features

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return price_features(observations, self.features)


class LinearPricePolicy(ARSPolicy):
    """ARS's linear policy on :class:`PriceFeatures`: a = clip(theta . phi(obs), -1, 1), theta the weight (1, F) of
    the bias-free action layer (the bias is the feature "1"; ``features`` names the set, :data:`FEATURE_SETS`, saved
    with the model: a model saved without it has the ``"price"`` set). As with ARS's own ``LinearPolicy``,
    ``predict`` clips to the action space (``forward`` returns theta . phi unclipped). Pass the class itself,
    ``ARS(LinearPricePolicy, env, policy_kwargs={"features": "cubic"})`` (a string names only sb3-contrib's own
    policies)."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Box, features: str = "price") -> None:
        if features not in FEATURE_SETS:
            raise ValueError(f"features must be one of {sorted(FEATURE_SETS)}; got {features!r}")
        self.features = features  # before the base class builds the extractor
        super().__init__(observation_space, action_space, net_arch=[], with_bias=False, squash_output=False)

    def make_features_extractor(self) -> PriceFeatures:
        return PriceFeatures(self.observation_space, self.features)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {"observation_space": self.observation_space, "action_space": self.action_space,
                "features": self.features}


class ObservedOnlineOptimal:
    """The price action of :class:`baselines.receive_scaling.references.OnlineOptimalAction` computed from
    receive-scaling observations alone, for policies that see nothing else: each row's nu, placement, round, budget left
    and channel are read back from the observation by its layout's names, the programme of its nu and placement is
    solved at its first round (:func:`~baselines.receive_scaling.references.solve_online_optimal`, about 0.5 s at T =
    500; cached, so the rounds after it and a replayed realisation cost a table look-up) and the round's price action is
    :func:`~baselines.receive_scaling.references.online_optimal_price_action`'s. The observation is float32, so the
    decision is that of the env's own values to about 1e-6 relative.

    Args:
        env_kwargs: the keyword arguments of the env whose observations are read (a task's settings, a zoo model's
            ``run.json``); it must have the budget mode's price action.
    """

    def __init__(self, env_kwargs: dict[str, Any]) -> None:
        from otagym.schemes import get_scheme
        from otagym.schemes.receive_scaling import ReceiveScalingModel, ReceiveScalingScenario
        from otagym.schemes.receive_scaling.actions import action_semantics
        from otagym.schemes.receive_scaling.observation import block_rounds, log10_nu_ref

        scheme = get_scheme(env_kwargs.get("scheme", "receive_scaling"))
        overrides = {k: v for k, v in env_kwargs.items() if k not in (*scheme.env_args, "scheme", "scenario")}
        scenario = scheme.scenario(env_kwargs.get("scenario"), **overrides)
        if not isinstance(scenario, ReceiveScalingScenario):
            raise ValueError(f"env_kwargs: OnlineOptimal is a receive-scaling policy; got scheme={scheme.name!r}")
        semantics = action_semantics(env_kwargs)
        if semantics["reward_mode"] != "budget" or semantics["action_type"] != "price":
            raise ValueError("env_kwargs: OnlineOptimal's action is the budget mode's price action; got "
                             f"reward_mode={semantics['reward_mode']!r}, action_type={semantics['action_type']!r}")
        self.model, self.num_rounds = ReceiveScalingModel(scenario), scenario.num_rounds
        self.block = block_rounds(scenario)
        self.log10_nu_ref = log10_nu_ref(scenario.nu_grid, env_kwargs.get("nu_range"))
        self.price_decades, self.buffer_sd = semantics["price_decades"], semantics["price_buffer_sd"]
        self.snr_scale = self.model.inv_k2 * self.model.x_max / self.model.cost_scale  # E[s_m] / E|h_m|^2
        self.layout = ObservationOffsets.of(scenario.num_devices)

    def __call__(self, observation: NDArray) -> NDArray:
        """a_OO (N,) of observations (N, 3M + 6)."""
        from baselines.receive_scaling.references import online_optimal_price_action, solve_online_optimal

        obs = np.atleast_2d(np.asarray(observation, dtype=float))
        lay, big_t = self.layout, self.num_rounds
        if obs.shape[-1] != lay.size:
            raise ValueError(f"observation width must be {lay.size} (the env's); got {obs.shape[-1]}")
        nu = 10.0 ** (obs[:, lay.log_nu] + self.log10_nu_ref)
        mean = self.model.expected_h_min2(10.0 ** obs[:, lay.slices()["placement"]] / (nu[:, None] * self.snr_scale))
        h = 10.0 ** obs[:, lay.channel] * mean
        t = np.minimum(np.rint(obs[:, lay.progress] * big_t).astype(np.int64), big_t - 1)
        left = np.maximum(obs[:, lay.budget_left], 0.0) * nu * big_t
        prices = solve_online_optimal(self.model, nu, mean, big_t, block=self.block)
        return online_optimal_price_action(self.model, prices, left, h, t, mean, self.price_decades, self.buffer_sd)


class OnlineOptimalResidualPolicy(LinearPricePolicy):
    """a = clip(a_OO(obs) + theta . phi(obs), -1, 1): :class:`LinearPricePolicy`'s linear term as a residual on
    OnlineOptimal's price action (:class:`ObservedOnlineOptimal` of the env of ``env_kwargs``), so ``ARS.load`` plays
    it and ARS can train theta further (the base is no parameter; each new placement or nu costs one programme,
    about 0.5 s at T = 500). ``forward`` returns a_OO + theta . phi unclipped,
    ``predict`` clips, as :class:`LinearPricePolicy`. Pass the class itself with ``policy_kwargs={"env_kwargs":
    ...}``."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Box, env_kwargs: dict[str, Any],
                 features: str = "price") -> None:
        super().__init__(observation_space, action_space, features)
        self.env_kwargs = dict(env_kwargs)
        self.base = ObservedOnlineOptimal(self.env_kwargs)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        base = self.base(obs.detach().cpu().numpy())
        return super().forward(obs) + torch.as_tensor(base, dtype=obs.dtype, device=obs.device)[:, None]

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "env_kwargs": self.env_kwargs}


def linear_price_model(theta: ArrayLike, env: Any, *, online_optimal_base: dict[str, Any] | None = None,
                       **ars_kwargs: Any) -> ARS:
    """An ARS model of :class:`LinearPricePolicy` with weights ``theta`` (F,), stored in float32, on ``env`` (a
    receive-scaling env with an action in [-1, 1], or its vector env), its feature set the one of theta's length
    (:func:`feature_set`); ``ars_kwargs`` go to ``ARS``. With
    ``online_optimal_base`` (the env keyword arguments ``env`` was made with) the policy is
    :class:`OnlineOptimalResidualPolicy`: theta is a residual on OnlineOptimal's action. ``learn`` would continue
    ARS's search from theta."""
    theta = np.array(theta, dtype=np.float32)  # a copy: the model does not share the caller's memory
    if theta.ndim != 1:
        raise ValueError(f"theta must be one row of weights; got shape {theta.shape}")
    features = feature_set(theta)
    policy: type[LinearPricePolicy] = LinearPricePolicy
    ars_kwargs["policy_kwargs"] = {**(ars_kwargs.get("policy_kwargs") or {}), "features": features}
    if online_optimal_base is not None:
        policy = OnlineOptimalResidualPolicy
        ars_kwargs["policy_kwargs"]["env_kwargs"] = online_optimal_base
    model = ARS(policy, env, device="cpu", **ars_kwargs)
    model.weights = torch.tensor(theta)  # the centre of ARS's search
    model.policy.load_from_vector(model.weights)
    return model
