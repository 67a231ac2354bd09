"""A-FADMM (Elgabli, Ben Issaid, Park & Bennis, *Harnessing Wireless Channels for Scalable and Privacy-Preserving
Federated Learning*, IEEE Transactions on Communications, 2021): analog federated ADMM without channel inversion, its
digital twin D-FADMM and analog gradient descent with truncated channel inversion (A-GD), on linear regression and an
MLP (§5, App. H). Section, appendix, equation and algorithm numbers are the paper's; ``docs/fadmm.md`` (the site's
"A-FADMM, D-FADMM and A-GD" page) reproduces its results.

Notation (the paper's): N workers, model size d, worker n's local model theta_n (primal), the PS's global model Theta,
penalty rho, complex channel h_{n,i} of worker n on the subcarrier carrying element i, gain g_{n,i} = |h_{n,i}|^2.

* **A-FADMM** solves (P2) (3)-(4). The dual is kept as ``mu_{n,i} = lambda*_{n,i} h_{n,i}`` (the channel-weighted
  dual of (14), real; ``*`` is the complex conjugate); the paper's complex lambda is recovered as
  ``lambda* = mu / h``. One iteration k -> k+1: primal (27) (the digital-downlink form of (10): no noise term), or,
  when the channel changed, the frozen primal theta^{k+1} = theta^k with the dual solved from (27) (§2 "Time-varying
  channel", Alg. 1 lines 9-11); upload ``x_{n,i} = h*_{n,i} theta_{n,i} + lambda*_{n,i} / rho`` (Alg. 1 line 14)
  scaled by alpha = min_n alpha_n (§2 "Power control"); over-the-air sum with matched-filter noise
  z ~ CN(0, N_o / T) (23); global update (24); dual (28).
* **D-FADMM** (App. A) solves (P1) with ADMM (20)-(22); each worker's upload theta_n + lambda_n / rho goes as 32-bit
  floats over its equal share of orthogonal subcarriers, error free, in as many 1 ms slots as the Shannon rate of its
  channel needs (App. B, App. H).
* **A-GD** (App. H, [9-11]): each worker sends its gradient divided by its channel where |h_{n,i}| >= epsilon and stays
  silent elsewhere; the PS averages what it receives over the transmitting workers and takes a gradient step.

Radio units: the SNR is P / (N_o W) per subcarrier (App. H), P in W per subcarrier channel use, N_o in W/Hz, W in
Hz, slot (upload) length T in s. An *upload* is one time slot; a *channel use* is one subcarrier for one slot.

Randomness comes only from the ``numpy.random.Generator`` passed in; torch's generator is seeded from it inside
``torch.random.fork_rng`` (as :meth:`otagym.training.Federation.engine` does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn
from torch.func import functional_call, grad, vmap

from otagym.channel import rayleigh_coefficients
from otagym.training.data import digits_dataset, partition
from otagym.validation import POSITIVE, PHYSICAL_RANGE, Integer, OfType, OneOf, Real, arg, check_args, check_dataclass

__all__ = ["Radio", "METHODS", "draw_channels", "transmit_signal", "power_scaling",
           "matched_filter_noise_var", "over_the_air", "global_update", "dual_update", "frozen_primal_dual",
           "shannon_bits_per_slot", "digital_upload_slots", "truncated_inversion", "Task", "LinearRegressionTask",
           "MLPTask", "DigitsMLP", "diabetes_task", "digits_task", "State", "analog_slots", "digital_share",
           "a_fadmm_iteration", "d_fadmm_iteration", "a_gd_iteration", "Trace", "run"]

#: The three schemes of §5.
METHODS = ("a-fadmm", "d-fadmm", "a-gd")
#: Bits per model element of a digital upload (32-bit floats, App. H).
BITS_PER_ELEMENT = 32

GENERATOR = OfType((np.random.Generator,), "a numpy.random.Generator")


@dataclass(frozen=True)
class Radio:
    """The uplink of §5 / App. H (defaults: the paper's linear-regression setting).

    Attributes:
        snr_db: SNR = P / (N_o W) per subcarrier in dB (40 dB in §5).
        noise_psd_w_per_hz: N_o, noise power spectral density in W/Hz (1e-9 in §5 "Scalability").
        subcarrier_bandwidth_hz: W of one subcarrier in Hz (15 kHz, LTE).
        slot_duration_s: T, length of one upload slot in s (1 ms, LTE); the analog matched filter integrates over it.
        num_subcarriers: S, subcarriers of the shared channel (10 for linear regression, 4,096 for the MLP).
        coherence_iterations: the channel is redrawn every this many iterations (block fading, 10 in App. H).
        truncation_threshold: epsilon of A-GD: worker n sends element i only if |h_{n,i}| >= epsilon (1e-6, App. H).
        fading: ``"rayleigh"`` (h ~ CN(0, 1), App. H) or ``"none"`` (h = 1: an AWGN channel, time-invariant as in
            Corollary 1).
    """

    snr_db: float = arg(40.0, Real(-100.0, 300.0))
    noise_psd_w_per_hz: float = arg(1e-9, POSITIVE)
    subcarrier_bandwidth_hz: float = arg(15e3, POSITIVE)
    slot_duration_s: float = arg(1e-3, POSITIVE)
    num_subcarriers: int = arg(10, Integer(1, 10**9))
    coherence_iterations: int = arg(10, Integer(1, 10**9))
    truncation_threshold: float = arg(1e-6, Real(0.0, 1e30))
    fading: str = arg("rayleigh", OneOf(("rayleigh", "none")))

    def __post_init__(self) -> None:
        check_dataclass(self)

    @property
    def snr(self) -> float:
        """P / (N_o W), linear."""
        return 10.0 ** (self.snr_db / 10.0)

    @property
    def power_w(self) -> float:
        """P, transmit power per subcarrier channel use in W: SNR * N_o * W."""
        return self.snr * self.noise_psd_w_per_hz * self.subcarrier_bandwidth_hz

    @property
    def analog_noise_var_w(self) -> float:
        """E|z|^2 = N_o / T in W of the matched-filter output on one subcarrier (23)."""
        return matched_filter_noise_var(self.noise_psd_w_per_hz, self.slot_duration_s)


# --- channel ------------------------------------------------------------------------------------------------------

def draw_channels(rng: np.random.Generator, num_workers: int, num_subcarriers: int,
                  fading: str = "rayleigh") -> NDArray:
    """Complex channels h_{n,i}, (N, S): i.i.d. CN(0, 1) (Rayleigh fading of zero mean and unit variance, App. H), or
    all 1 for ``fading="none"`` (nothing is drawn).

    The Rayleigh draw is :func:`otagym.channel.rayleigh_coefficients` (no path loss is applied). Block fading is
    the caller's (:func:`run`)."""
    if fading == "none":
        return np.ones((num_workers, num_subcarriers), dtype=complex)
    return rayleigh_coefficients(rng, num_workers, (num_subcarriers,)).T


# --- A-FADMM: the analog uplink and the ADMM updates ---------------------------------------------------------------

def transmit_signal(channel: NDArray, local: NDArray, dual: NDArray, rho: float) -> NDArray:
    """``x_{n,i} = h*_{n,i} theta_{n,i} + lambda*_{n,i} / rho`` with ``lambda* = mu / h`` (Alg. 1 line 14), complex
    (N, d).

    No channel inversion: h x = |h|^2 theta + mu / rho, so the PS's sum is that of (7)/(24)."""
    return np.conj(channel) * local + dual / (rho * channel)


def power_scaling(signal: NDArray, power_w: float) -> float:
    """alpha = min_n alpha_n with alpha_n^2 sum_i |x_{n,i}|^2 = P d (§2 "Power control"), P in W per channel use.

    The paper writes the budget as P for the d symbols together; we give each of the d channel uses the power P of
    a digital subcarrier (App. B/H) so the SNR means the same for both (docs/fadmm.md). A worker that sends nothing
    sets no limit (alpha_n = inf)."""
    energy = np.sum(np.abs(signal) ** 2, axis=-1)
    d = signal.shape[-1]
    alpha_n = np.full(energy.shape, np.inf)
    np.divide(power_w * d, energy, out=alpha_n, where=energy > 0)
    return float(np.sqrt(alpha_n.min()))


def matched_filter_noise_var(noise_psd_w_per_hz: float, duration_s: float) -> float:
    """N_o / T (W): variance of the complex noise after the matched filter integrates CN(0, N_o) over T s (23)."""
    return noise_psd_w_per_hz / duration_s


def over_the_air(channel: NDArray, signal: NDArray, alpha: float, noise_var_w: float,
                 rng: np.random.Generator) -> NDArray:
    """sum_n h_{n,i} x_{n,i} + z_i / alpha, complex (d,): every worker sends alpha x_n on the same subcarriers, the
    PS matched-filters (z ~ CN(0, ``noise_var_w``) per subcarrier, (23)) and divides by alpha (§2 "Power control").
    With alpha = inf (nothing sent) the noise vanishes with the division."""
    d = signal.shape[-1]
    z = rng.standard_normal(d) + 1j * rng.standard_normal(d)
    noise_std = math.sqrt(noise_var_w / 2.0) / alpha
    return np.sum(channel * signal, axis=0) + noise_std * z


def global_update(received: NDArray, gain_sum: NDArray | float) -> NDArray:
    """Theta_i = Re{received_i} / sum_n |h_{n,i}|^2 (24); with unit gains and no noise this is D-FADMM's (21)."""
    return np.real(received) / gain_sum


def dual_update(dual: NDArray, gain: NDArray | float, local: NDArray, global_model: NDArray, rho: float) -> NDArray:
    """mu^{k+1} = mu^k + rho |h|^2 (theta^{k+1} - Theta^{k+1}): (28) times h, i.e. (14); with |h| = 1 it is (22)."""
    return dual + rho * gain * (local - global_model)


def frozen_primal_dual(gradient: NDArray, gain: NDArray, local: NDArray, global_model: NDArray,
                       rho: float) -> NDArray:
    """The dual that makes the frozen primal theta^{k+1} = theta^k optimal under the new channel (§2 "Time-varying
    channel", Alg. 1 line 11): (27) solved for ``mu = lambda* h``: mu = -grad f_n(theta^k) - rho |h^{k+1}|^2 (theta^k -
    Theta^k)."""
    return -gradient - rho * gain * (local - global_model)


# --- D-FADMM: orthogonal digital uploads ----------------------------------------------------------------------------

def shannon_bits_per_slot(gain: NDArray, snr: float, bandwidth_hz: float, slot_s: float, share: float) -> NDArray:
    """Bits worker n can send in one slot on its ``share`` subcarriers (App. B/H): share * W T * mean_j log2(1 + SNR
    |h_{n,j}|^2) over its subcarriers j (``gain`` (N, ceil(share))); for an integer share this is the paper's
    sum_j R_{n,j} T with R = W log2(1 + P|h|^2 / (N_o W)). A share below 1 is a fraction of one subcarrier."""
    return share * bandwidth_hz * slot_s * np.mean(np.log2(1.0 + snr * gain), axis=-1)


def digital_upload_slots(bits: float, bits_per_slot: NDArray) -> NDArray:
    """T_n = min{T: T * bits_per_slot_n >= bits}, the slots worker n needs for its upload (App. H), (N,) int."""
    return np.ceil(bits / bits_per_slot).astype(np.int64)


# --- A-GD: truncated channel inversion ------------------------------------------------------------------------------

def truncated_inversion(channel: NDArray, values: NDArray, threshold: float) -> tuple[NDArray, NDArray]:
    """(x, active): x_{n,i} = values_{n,i} / h_{n,i} where |h_{n,i}| >= epsilon, else 0 (silent) (§1, App. H)."""
    active = np.abs(channel) >= threshold
    x = np.zeros(channel.shape, dtype=complex)
    np.divide(values, channel, out=x, where=active)
    return x, active


# --- tasks ----------------------------------------------------------------------------------------------------------

class Task(Protocol):
    """A federated problem min sum_n f_n(theta) split over ``num_workers`` workers; arrays are float64 (N, d)."""

    num_workers: int
    dim: int

    def initial_model(self, rng: np.random.Generator) -> NDArray:
        """Theta^0, (d,)."""

    def primal(self, local: NDArray, dual: NDArray, global_model: NDArray, gain: NDArray | float, rho: float,
               rng: np.random.Generator) -> NDArray:
        """theta_n^{k+1} solving 0 = grad f_n(theta) + mu_n + rho g_n (theta - Theta^k) ((27); (20) with g = 1)."""

    def gradient(self, local: NDArray, rng: np.random.Generator | None) -> NDArray:
        """grad f_n(theta_n) per worker; on a mini-batch drawn from ``rng``, or on all local data if it is None."""

    def metrics(self, local: NDArray, global_model: NDArray) -> dict[str, float]:
        """What one iteration records (e.g. the loss)."""

    @property
    def gd_learning_rate(self) -> float:
        """A-GD's default step on the mean objective (1/N) sum_n f_n."""


class LinearRegressionTask:
    """f_n(theta) = ||y_n - X_n theta||^2 on worker n's rows (App. H); the primal (27) is solved in closed form,
    (2 X_n^T X_n + rho diag(g_n)) theta_n = 2 X_n^T y_n - mu_n + rho g_n Theta.

    Metrics: ``loss`` ``|sum_n f_n(theta_n^k) - f(theta*)|`` (the paper's, §5, on the local models) and ``gap``
    ``f(Theta^k) - f(theta*) >= 0`` on the PS's model, ``theta*`` the least-squares solution of all data."""

    def __init__(self, parts: list[tuple[NDArray, NDArray]]) -> None:
        self.num_workers = len(parts)
        self.dim = parts[0][0].shape[1]
        self._gram = np.stack([2.0 * x.T @ x for x, _ in parts])            # 2 X_n^T X_n, (N, d, d)
        self._moment = np.stack([2.0 * x.T @ y for x, y in parts])          # 2 X_n^T y_n, (N, d)
        self._energy = np.array([y @ y for _, y in parts])                  # ||y_n||^2, (N,)
        x_all, y_all = np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts])
        self.optimum = np.linalg.lstsq(x_all, y_all, rcond=None)[0]
        self.optimal_value = float(np.sum((y_all - x_all @ self.optimum) ** 2))
        self._smoothness = float(np.linalg.eigvalsh(self._gram.sum(axis=0))[-1]) / self.num_workers

    def initial_model(self, rng: np.random.Generator) -> NDArray:
        return np.zeros(self.dim)

    def primal(self, local: NDArray, dual: NDArray, global_model: NDArray, gain: NDArray | float, rho: float,
               rng: np.random.Generator) -> NDArray:
        weight = rho * np.broadcast_to(gain, local.shape)
        system = self._gram + weight[:, :, None] * np.eye(self.dim)
        return np.linalg.solve(system, (self._moment - dual + weight * global_model)[:, :, None])[:, :, 0]

    def gradient(self, local: NDArray, rng: np.random.Generator | None) -> NDArray:
        return np.einsum("nij,nj->ni", self._gram, local) - self._moment

    def objective(self, local: NDArray) -> NDArray:
        """f_n(theta_n) = theta_n^T X_n^T X_n theta_n - 2 theta_n^T X_n^T y_n + ||y_n||^2 per worker, (N,)."""
        quadratic = 0.5 * np.einsum("ni,nij,nj->n", local, self._gram, local)
        return quadratic - np.einsum("ni,ni->n", local, self._moment) + self._energy

    def metrics(self, local: NDArray, global_model: NDArray) -> dict[str, float]:
        shared = np.broadcast_to(global_model, local.shape)
        return {"loss": abs(float(self.objective(local).sum()) - self.optimal_value),
                "gap": float(self.objective(shared).sum()) - self.optimal_value}

    @property
    def gd_learning_rate(self) -> float:
        """1/L, L = lambda_max(2 X^T X) / N the smoothness of (1/N) sum_n f_n: the largest safe constant step."""
        return 1.0 / self._smoothness


class DigitsMLP(nn.Module):
    """The paper's 3-layer MLP (App. H: hidden 128 and 64, ReLU, softmax output) on 8x8 digits: 64-128-64-10,
    d = 17,226 parameters (the paper's MNIST version has 109,184)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                                 nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class MLPTask:
    """f_n = mean cross-entropy of worker n's data (App. H). The primal (27) is approximated as the paper's
    A-SFADMM does: ``local_steps`` Adam steps (learning rate ``local_learning_rate``, a fresh optimiser per
    iteration, starting from theta_n^k) on mini-batches of ``batch_size`` of f_n(theta) + <mu_n, theta> + rho/2
    sum_i g_{n,i} (theta_i - Theta_i)^2, all workers at once (torch.func.vmap). Gradients for A-SGD are mini-batch
    gradients; the frozen-primal dual uses the full local gradient.

    Metrics: ``loss`` (mean training cross-entropy of Theta) and ``accuracy`` (test accuracy of Theta)."""

    def __init__(self, device_data: list[tuple[torch.Tensor, torch.Tensor]],
                 test_data: tuple[torch.Tensor, torch.Tensor], make_model: Callable[[], nn.Module], *,
                 local_steps: int, local_learning_rate: float, batch_size: int, gd_learning_rate: float) -> None:
        self.num_workers = len(device_data)
        self._data = device_data
        self._test = test_data
        self._train = (torch.cat([x for x, _ in device_data]), torch.cat([y for _, y in device_data]))
        self._make_model = make_model
        self._model = make_model()
        self._shapes = [p.shape for p in self._model.parameters()]
        self._names = [name for name, _ in self._model.named_parameters()]
        self.dim = sum(p.numel() for p in self._model.parameters())
        self.local_steps, self.local_learning_rate = local_steps, local_learning_rate
        self.batch_size = min(batch_size, min(len(y) for _, y in device_data))
        self._gd_learning_rate = gd_learning_rate

    def initial_model(self, rng: np.random.Generator) -> NDArray:
        with torch.random.fork_rng():
            torch.manual_seed(int(rng.integers(2**63 - 1)))
            model = self._make_model()
        return torch.nn.utils.parameters_to_vector(model.parameters()).detach().double().numpy()

    def _logits(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The model with the flat parameter vector ``flat`` (d,) applied to ``x``."""
        pieces = torch.split(flat, [math.prod(s) for s in self._shapes])
        params = {n: p.reshape(s) for n, p, s in zip(self._names, pieces, self._shapes)}
        return functional_call(self._model, params, (x,))

    def _cross_entropy(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self._logits(flat, x), y)

    def _batches(self, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        picks = [torch.from_numpy(rng.choice(len(y), self.batch_size, replace=False)) for _, y in self._data]
        return (torch.stack([x[i] for (x, _), i in zip(self._data, picks)]),
                torch.stack([y[i] for (_, y), i in zip(self._data, picks)]))

    def primal(self, local: NDArray, dual: NDArray, global_model: NDArray, gain: NDArray | float, rho: float,
               rng: np.random.Generator) -> NDArray:
        theta = torch.tensor(local, dtype=torch.float32, requires_grad=True)
        mu, center = torch.tensor(dual, dtype=torch.float32), torch.tensor(global_model, dtype=torch.float32)
        weight = torch.tensor(rho * np.broadcast_to(gain, local.shape), dtype=torch.float32)
        optimiser = torch.optim.Adam([theta], lr=self.local_learning_rate)
        for _ in range(self.local_steps):
            x, y = self._batches(rng)
            optimiser.zero_grad()
            augmented = (vmap(self._cross_entropy)(theta, x, y).sum() + (mu * theta).sum()
                         + 0.5 * (weight * (theta - center) ** 2).sum())
            augmented.backward()
            optimiser.step()
        return theta.detach().double().numpy()

    def gradient(self, local: NDArray, rng: np.random.Generator | None) -> NDArray:
        theta = torch.tensor(local, dtype=torch.float32)
        if rng is not None:
            return vmap(grad(self._cross_entropy))(theta, *self._batches(rng)).double().numpy()
        return torch.stack([grad(self._cross_entropy)(t, x, y) for t, (x, y) in zip(theta, self._data)]
                           ).double().numpy()

    def metrics(self, local: NDArray, global_model: NDArray) -> dict[str, float]:
        flat = torch.tensor(global_model, dtype=torch.float32)
        with torch.no_grad():
            loss = float(self._cross_entropy(flat, *self._train))
            x, y = self._test
            accuracy = float((self._logits(flat, x).argmax(dim=1) == y).double().mean())
        return {"loss": loss, "accuracy": accuracy}

    @property
    def gd_learning_rate(self) -> float:
        return self._gd_learning_rate


def diabetes_task(num_workers: int, rng: np.random.Generator) -> LinearRegressionTask:
    """Linear regression on scikit-learn's diabetes data (442 samples, 10 features, embedded): every feature and the
    target standardised to zero mean and unit variance over all samples (so no intercept: d = 10), rows split
    i.i.d. over ``num_workers`` workers (:func:`otagym.training.partition`). Stands in for the paper's California
    Housing (d = 6), which is not embedded."""
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True, scaled=False)
    num_workers = check_args({"num_workers": Integer(1, len(y)), "rng": GENERATOR}, num_workers=num_workers,
                             rng=rng)["num_workers"]
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    y = (y - y.mean()) / y.std()
    return LinearRegressionTask([(x[p], y[p]) for p in partition(y, num_workers, rng)])


def digits_task(num_workers: int, rng: np.random.Generator, *, local_steps: int = 20,
                local_learning_rate: float = 0.01, batch_size: int = 100,
                gd_learning_rate: float = 0.005) -> MLPTask:
    """:class:`DigitsMLP` on scikit-learn's 8x8 digits (:func:`otagym.training.digits_dataset`: 80 % train split
    i.i.d. over ``num_workers`` workers, 20 % test). Defaults are App. H's: 20 local Adam steps at 0.01, mini-batches
    of 100 (capped at the smallest local dataset), A-SGD step 0.005."""
    args = check_args({"rng": GENERATOR, "local_steps": Integer(1, 10**6), "local_learning_rate": Real(*PHYSICAL_RANGE),
                       "batch_size": Integer(1, 10**9), "gd_learning_rate": Real(*PHYSICAL_RANGE)},
                      rng=rng, local_steps=local_steps, local_learning_rate=local_learning_rate,
                      batch_size=batch_size, gd_learning_rate=gd_learning_rate)
    x, y, x_test, y_test = digits_dataset(rng)
    parts = partition(y.numpy(), Integer(1, len(y))("num_workers", num_workers), rng)
    return MLPTask([(x[p], y[p]) for p in parts], (x_test, y_test), DigitsMLP, local_steps=args["local_steps"],
                   local_learning_rate=args["local_learning_rate"], batch_size=args["batch_size"],
                   gd_learning_rate=args["gd_learning_rate"])


# --- the three schemes, one iteration each --------------------------------------------------------------------------

@dataclass
class State:
    """The variables an iteration updates (float64 unless said).

    Attributes:
        local: theta_n, (N, d) (A-GD: every worker holds Theta).
        dual: A-FADMM: ``mu_n = lambda*_n h_n`` (14), real; D-FADMM: lambda_n; A-GD: unused. (N, d).
        global_model: Theta, (d,).
        channel: complex h of the current coherence block: (N, d) for the analog schemes (element i on its own
            subcarrier), (N, ceil(S / N)) for D-FADMM (each worker's own subcarriers).
    """

    local: NDArray
    dual: NDArray
    global_model: NDArray
    channel: NDArray


def analog_slots(dim: int, num_subcarriers: int) -> int:
    """ceil(d / S): slots of one analog upload, element i on subcarrier i mod S (App. H)."""
    return -(-dim // num_subcarriers)


def digital_share(radio: Radio, num_workers: int) -> float:
    """S / N, each worker's equal share of the subcarriers in D-FADMM (App. A)."""
    return radio.num_subcarriers / num_workers


def a_fadmm_iteration(task: Task, radio: Radio, state: State, *, rho: float, channel_changed: bool,
                      rng: np.random.Generator) -> tuple[int, float]:
    """One A-FADMM iteration on ``state`` (Alg. 1 with the analog uplink of App. B and a digital downlink):
    primal (27), or the frozen primal and the dual of :func:`frozen_primal_dual` if ``channel_changed``; upload
    (:func:`transmit_signal`) at alpha = min_n alpha_n; over-the-air sum with noise (23); global (24); dual (28).
    Returns (uploads, channel uses): ceil(d / S) slots, d subcarrier-slots, whatever N is."""
    gain = np.abs(state.channel) ** 2
    if channel_changed:
        state.dual = frozen_primal_dual(task.gradient(state.local, None), gain, state.local, state.global_model, rho)
    else:
        state.local = task.primal(state.local, state.dual, state.global_model, gain, rho, rng)
    x = transmit_signal(state.channel, state.local, state.dual, rho)
    received = over_the_air(state.channel, x, power_scaling(x, radio.power_w), radio.analog_noise_var_w, rng)
    state.global_model = global_update(received, gain.sum(axis=0))
    state.dual = dual_update(state.dual, gain, state.local, state.global_model, rho)
    return analog_slots(task.dim, radio.num_subcarriers), float(task.dim)


def d_fadmm_iteration(task: Task, radio: Radio, state: State, *, rho: float,
                      rng: np.random.Generator) -> tuple[int, float]:
    """One D-FADMM iteration (App. A): primal (20), upload theta_n + lambda_n / rho as 32-bit floats, global (21),
    dual (22). Worker n's upload of 32 d bits takes T_n slots at the Shannon rate of its share S / N of the
    subcarriers (App. B/H). Returns (uploads, channel uses): max_n T_n slots and (S / N) sum_n T_n subcarrier-slots."""
    state.local = task.primal(state.local, state.dual, state.global_model, 1.0, rho, rng)
    upload = (state.local + state.dual / rho).astype(np.float32).astype(np.float64)
    state.global_model = global_update(upload.sum(axis=0), task.num_workers)
    state.dual = dual_update(state.dual, 1.0, state.local, state.global_model, rho)
    share = digital_share(radio, task.num_workers)
    capacity = shannon_bits_per_slot(np.abs(state.channel) ** 2, radio.snr, radio.subcarrier_bandwidth_hz,
                                     radio.slot_duration_s, share)
    slots = digital_upload_slots(BITS_PER_ELEMENT * task.dim, capacity)
    return int(slots.max()), float(share * slots.sum())


def a_gd_iteration(task: Task, radio: Radio, state: State, *, learning_rate: float,
                   rng: np.random.Generator) -> tuple[int, float]:
    """One A-GD iteration: every worker's gradient at Theta by :func:`truncated_inversion`, alpha = min_n alpha_n,
    over-the-air sum with noise (23); the PS divides element i by the number of workers that sent it (known from the
    pilots, as sum_n |h|^2 is in A-FADMM) and steps Theta <- Theta - learning_rate * that mean gradient.
    Returns (uploads, channel uses) as A-FADMM's."""
    shared = np.broadcast_to(state.global_model, state.local.shape)
    x, active = truncated_inversion(state.channel, task.gradient(shared, rng), radio.truncation_threshold)
    received = over_the_air(state.channel, x, power_scaling(x, radio.power_w), radio.analog_noise_var_w, rng)
    senders = active.sum(axis=0)
    mean_gradient = np.where(senders > 0, np.real(received) / np.maximum(senders, 1), 0.0)
    state.global_model = state.global_model - learning_rate * mean_gradient
    state.local = np.tile(state.global_model, (task.num_workers, 1))
    return analog_slots(task.dim, radio.num_subcarriers), float(task.dim)


@dataclass(frozen=True)
class Trace:
    """One run. Per iteration k = 1..K: the task's metrics after it, its uploads (time slots) and channel uses
    (subcarrier-slots); the final global model and the settings used."""

    method: str
    metrics: dict[str, NDArray]
    slots: NDArray
    channel_uses: NDArray
    global_model: NDArray
    settings: dict[str, float]

    @property
    def cumulative_slots(self) -> NDArray:
        """Uploads (time slots) spent by the end of each iteration."""
        return np.cumsum(self.slots)

    @property
    def cumulative_channel_uses(self) -> NDArray:
        """Channel uses spent by the end of each iteration."""
        return np.cumsum(self.channel_uses)

    def reach(self, metric: str, target: float, *, above: bool = False) -> tuple[int, int, float] | None:
        """(iterations, uploads, channel uses) spent when ``metrics[metric]`` first gets to ``target`` or below (at
        or above with ``above``), as one reads it off the paper's curves; None if it never does."""
        values = self.metrics[metric]
        hits = np.flatnonzero(values >= target if above else values <= target)
        if not hits.size:
            return None
        k = int(hits[0])
        return k + 1, int(self.cumulative_slots[k]), float(self.cumulative_channel_uses[k])


RUN_ARGS = {"method": OneOf(METHODS), "rng": GENERATOR, "iterations": Integer(1, 10**7),
            "radio": OfType((Radio,), "a Radio"), "rho": Real(*PHYSICAL_RANGE),
            "learning_rate": Real(*PHYSICAL_RANGE, optional=True)}


def run(method: str, task: Task, rng: np.random.Generator, *, iterations: int, radio: Radio | None = None,
        rho: float = 0.5, learning_rate: float | None = None) -> Trace:
    """Train ``task`` for ``iterations`` iterations of ``method`` over ``radio``; all start from
    ``task.initial_model(rng)`` with zero duals, and the channel is redrawn every ``radio.coherence_iterations``.

    Args:
        method: ``"a-fadmm"``, ``"d-fadmm"`` or ``"a-gd"`` (:data:`METHODS`).
        task: a :class:`LinearRegressionTask` or :class:`MLPTask` (any :class:`Task`).
        rng: the only source of randomness (channels, noise, mini-batches, initial MLP weights).
        iterations: K.
        radio: the uplink (default ``Radio()``).
        rho: the ADMM penalty of (5) (0.5 in §5); unused by A-GD.
        learning_rate: A-GD's step (default ``task.gd_learning_rate``); unused by the ADMM schemes.
    """
    args = check_args(RUN_ARGS, method=method, rng=rng, iterations=iterations, radio=radio or Radio(), rho=rho,
                      learning_rate=learning_rate)
    radio, rho = args["radio"], args["rho"]
    lr = args["learning_rate"] if args["learning_rate"] is not None else task.gd_learning_rate
    subcarriers = math.ceil(digital_share(radio, task.num_workers)) if method == "d-fadmm" else task.dim
    start = task.initial_model(rng)
    state = State(local=np.tile(start, (task.num_workers, 1)), dual=np.zeros((task.num_workers, task.dim)),
                  global_model=start, channel=draw_channels(rng, task.num_workers, subcarriers, radio.fading))
    records: list[dict[str, float]] = []
    slots, uses = np.zeros(iterations, dtype=np.int64), np.zeros(iterations)
    for k in range(iterations):
        changed = False
        if k > 0 and k % radio.coherence_iterations == 0:
            channel = draw_channels(rng, task.num_workers, subcarriers, radio.fading)
            changed, state.channel = not np.array_equal(channel, state.channel), channel
        if method == "a-fadmm":
            slots[k], uses[k] = a_fadmm_iteration(task, radio, state, rho=rho, channel_changed=changed, rng=rng)
        elif method == "d-fadmm":
            slots[k], uses[k] = d_fadmm_iteration(task, radio, state, rho=rho, rng=rng)
        else:
            slots[k], uses[k] = a_gd_iteration(task, radio, state, learning_rate=lr, rng=rng)
        records.append(task.metrics(state.local, state.global_model))
    metrics = {key: np.array([r[key] for r in records]) for key in records[0]}
    return Trace(method, metrics, slots, uses, state.global_model, {"rho": rho, "learning_rate": lr})
