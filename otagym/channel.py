"""Wireless channel model: placement, COST-231 Hata path loss and small-scale fading. Pure and batched.

Model (§VII of the AdaScale paper): d_m ~ U[r_min, r_max]; PL_m[dB] = 33.44 + 35.22 log10(d_m);
h_{m,t} ~ CN(0, 1/PL_m), so the channel power |h_{m,t}|^2 ~ Exponential(mean 1/PL_m).

Fading processes (all with the same Exponential(1) marginal of the normalised power |h|^2 PL):

* ``iid``: independent every round (the paper's model).
* ``block``: redrawn every ``coherence_rounds`` rounds, constant in between.
* ``gauss_markov``: w_t = rho w_{t-1} + sqrt(1 - rho^2) e_t on the complex small-scale coefficient, e_t ~ CN(0, 1);
  corr(|h_t|^2, |h_{t-1}|^2) = rho^2.

Draws are made device-major (shape ``(M,) + batch``) and returned as a ``batch + (M,)`` view, so reductions over
devices stay fast for thousands of environments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from otagym.validation import AppliesWith, Integer, OneOf, Real, arg

__all__ = ["path_loss_db", "mean_channel_gain", "rayleigh_coefficients", "FadingState", "ChannelModel", "FadingModel",
           "FadingFields", "DISTANCE"]

FadingModel = Literal["iid", "block", "gauss_markov"]

#: A distance in metres: COST-231 Hata path loss needs >= 1 m; beyond 10,000 km nothing is a cell.
DISTANCE = Real(1.0, 1e7)


@dataclass(frozen=True)
class FadingFields:
    """The fading fields of a scenario dataclass (its base): ``fading`` (``"iid"``, ``"block"`` or
    ``"gauss_markov"``), ``coherence_rounds`` (rounds per block of ``"block"``) and ``correlation`` (the Gauss-Markov
    coefficient in [0, 1)); :class:`ChannelModel` reads them. ``coherence_rounds`` applies only with
    ``fading="block"`` and ``correlation`` only with ``fading="gauss_markov"``: under another fading a value other
    than the default (1, 0.0) is refused."""

    fading: FadingModel = arg("iid", OneOf(get_args(FadingModel)))
    coherence_rounds: int = arg(1, Integer(1, 10**6), applies_with=AppliesWith("fading", ("block",)))
    correlation: float = arg(0.0, Real(0.0, 1.0, high_open=True),
                             applies_with=AppliesWith("fading", ("gauss_markov",)))


def path_loss_db(distance_m: ArrayLike) -> NDArray:
    """COST-231 Hata path loss in dB at ``distance_m`` metres: 33.44 + 35.22 log10(d) (§VII)."""
    return 33.44 + 35.22 * np.log10(np.asarray(distance_m, dtype=float))


def mean_channel_gain(distance_m: ArrayLike) -> NDArray:
    """E|h|^2 = 1 / PL (linear, dimensionless power gain) at ``distance_m`` metres."""
    return 10.0 ** (-path_loss_db(distance_m) / 10.0)


@dataclass
class FadingState:
    """Normalised fading power g = |h|^2 / E|h|^2 (batch + (M,)) and, for Gauss-Markov, the complex coefficient."""

    power: NDArray
    coefficient: NDArray | None = None

    def where(self, rows: NDArray, other: "FadingState") -> "FadingState":
        """``other`` in the batch rows where ``rows`` (batch,) is True, this state elsewhere (partial resets)."""
        r = np.asarray(rows, dtype=bool)[..., None]
        return FadingState(power=np.where(r, other.power, self.power),
                           coefficient=None if other.coefficient is None
                           else np.where(r, other.coefficient, self.coefficient))


def _device_major(draw: NDArray) -> NDArray:
    """(M,) + batch -> batch + (M,) as a view (devices stay the slowest axis in memory)."""
    return draw.transpose(tuple(range(1, draw.ndim)) + (0,))


def rayleigh_coefficients(rng: np.random.Generator, num_devices: int, batch_shape: tuple[int, ...] = ()) -> NDArray:
    """Complex small-scale fading coefficients, i.i.d. CN(0, 1) (Rayleigh amplitude, unit mean power), shape
    ``batch_shape + (M,)``; drawn device-major, so a batch extends the draw without changing its first entries."""
    shape = (num_devices,) + batch_shape
    return _device_major((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / np.sqrt(2.0))


@dataclass(frozen=True)
class ChannelModel:
    """The channel of one scenario; every method takes an explicit ``numpy.random.Generator``."""

    num_devices: int
    distance_min_m: float
    distance_max_m: float
    distances_m: tuple[float, ...] | None
    fading: str
    coherence_rounds: int
    correlation: float

    @classmethod
    def from_scenario(cls, s: Any) -> "ChannelModel":
        """The channel of a scenario with placement and fading fields (model A's
        :class:`~otagym.schemes.receive_scaling.scenario.Scenario`)."""
        return cls(s.num_devices, s.distance_min_m, s.distance_max_m, s.distances_m, s.fading,
                   s.coherence_rounds, s.correlation)

    def draw_distances(self, rng: np.random.Generator, batch_shape: tuple[int, ...] = ()) -> NDArray:
        """Device distances in metres, ``batch_shape + (M,)``: fixed if the scenario sets them, else U[min, max]."""
        shape = batch_shape + (self.num_devices,)
        if self.distances_m is not None:
            return np.broadcast_to(np.asarray(self.distances_m), shape).copy()
        return _device_major(rng.uniform(self.distance_min_m, self.distance_max_m, size=shape[-1:] + shape[:-1]))

    def _fresh(self, rng: np.random.Generator, batch_shape: tuple[int, ...]) -> FadingState:
        if self.fading == "gauss_markov":
            coeff = rayleigh_coefficients(rng, self.num_devices, batch_shape)
            return FadingState(power=coeff.real**2 + coeff.imag**2, coefficient=coeff)
        return FadingState(power=_device_major(rng.standard_exponential((self.num_devices,) + batch_shape)))

    def initial(self, rng: np.random.Generator, batch_shape: tuple[int, ...] = ()) -> FadingState:
        """Fading of round 0 (stationary distribution)."""
        return self._fresh(rng, batch_shape)

    def advance(self, rng: np.random.Generator, state: FadingState, next_round: NDArray | int) -> FadingState:
        """Fading of round ``next_round`` (per batch element) given that of the previous round."""
        batch_shape = state.power.shape[:-1]
        if self.fading == "iid":
            return self._fresh(rng, batch_shape)
        if self.fading == "block":
            new = self._fresh(rng, batch_shape)
            redraw = (np.asarray(next_round) % self.coherence_rounds == 0)[..., None]
            return FadingState(power=np.where(redraw, new.power, state.power))
        rho = self.correlation
        e = self._fresh(rng, batch_shape).coefficient
        coeff = rho * state.coefficient + np.sqrt(1.0 - rho * rho) * e
        return FadingState(power=coeff.real**2 + coeff.imag**2, coefficient=coeff)

    def sample_trace(
        self, rng: np.random.Generator, num_rounds: int, batch_shape: tuple[int, ...] = ()
    ) -> tuple[NDArray, NDArray]:
        """A whole channel realisation: ``(distances_m batch+(M,), gains (num_rounds,)+batch+(M,))``, |h|^2 linear.

        Uses the same ``initial``/``advance`` steps as the environments.
        """
        distances = self.draw_distances(rng, batch_shape)
        mean = mean_channel_gain(distances)
        state = self.initial(rng, batch_shape)
        gains = np.empty((num_rounds,) + batch_shape + (self.num_devices,))
        gains[0] = state.power * mean
        for t in range(1, num_rounds):
            state = self.advance(rng, state, t)
            gains[t] = state.power * mean
        return distances, gains
