"""The references every RL result on model A is read against (budget mode, so each meets nu by construction):

* :class:`BestConstant`: the best constant price action per nu, chosen on training channels. The learnability floor:
  an agent that does not beat it has learned nothing that the action's reference does not already give.
* :class:`AdaScaleTrained`: AdaScale (Alg. 1 of the AdaScale paper) with V(nu) chosen on training channels, played
  under budget mode's rule (:class:`~baselines.receive_scaling.policies.Budgeted`): the fair online baseline. ``AdaScale`` itself is
  the paper's per-realisation calibration, which uses the evaluation channels.
* :class:`OnlineOptimal`: the Bellman-optimal non-anticipating policy of problem (28) in budget mode, by dynamic
  programming over the budget left (:func:`solve_online_optimal`). Exact, up to its grids, for i.i.d. and block fading;
  under Gauss-Markov fading it is the optimal policy for the fading's i.i.d. marginal, a valid online policy whose
  score is a lower bound on the online optimum's (OfflineOptimal's 100 bounds it from above).

"Training channels" are the realisations of :data:`TRAIN_SEEDS`; held-out evaluation uses :data:`TEST_SEEDS` and
checkpoint selection :data:`VALIDATION_SEEDS` (three disjoint ranges, one convention for every script).

Equation and algorithm numbers are those of the AdaScale paper (Moradi Kalarde et al., *Privacy Enhancement in
Over-the-Air Federated Learning via Adaptive Receive Scaling*, arXiv:2510.03860).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from baselines.receive_scaling.core import Policy
from baselines.receive_scaling.evaluation import leakage_score, reference_leakage, run_policy, sample_realisations
from baselines.receive_scaling.policies import ActionPolicy, AdaScale, Budgeted, _PolicyBase
from otagym.schemes.receive_scaling import ReceiveScalingModel, Scenario
from otagym.tasks import EVALUATION_SEEDS, FORMULATION_VALIDATION_SEEDS, TUNING_SEEDS

__all__ = ["TRAIN_SEEDS", "VALIDATION_SEEDS", "TEST_SEEDS", "UniformRandom", "BestConstant", "AdaScaleTrained",
           "OnlineOptimal", "OnlineOptimalAction", "DualPrice", "tune_on_training", "solve_online_optimal",
           "online_optimal_round", "online_optimal_price_action", "OnlinePrices",
           "PROGRAMMES_CACHED"]

#: Channel realisations (seeds of :func:`~baselines.receive_scaling.evaluation.sample_realisations`) on which references are tuned:
#: :data:`otagym.tasks.TUNING_SEEDS`.
TRAIN_SEEDS: tuple[int, ...] = TUNING_SEEDS
#: Realisations for checkpoint selection and learning curves of trained agents:
#: :data:`otagym.tasks.FORMULATION_VALIDATION_SEEDS`.
VALIDATION_SEEDS: tuple[int, ...] = FORMULATION_VALIDATION_SEEDS
#: Held-out realisations on which results are reported (never used in training or selection): the benchmark tasks'
#: frozen evaluation set.
TEST_SEEDS: tuple[int, ...] = EVALUATION_SEEDS


def tune_on_training(make_policy: Callable[[NDArray, NDArray], Policy], scenario: Scenario, nu: float,
                     low: float, high: float, *, points: int = 17, rounds: int = 2,
                     seeds: tuple[int, ...] = TRAIN_SEEDS) -> tuple[float, float]:
    """The value v in [low, high] whose policy ``make_policy(values, nus)`` has the best mean normalised score on the
    training realisations at ``nu``: a grid of ``points`` values, then ``rounds - 1`` finer grids around the best.
    All values and realisations run side by side in one vector env. Returns ``(v, mean score)``."""
    real = sample_realisations(scenario, seeds)
    optimal = np.array([reference_leakage(scenario, float(nu), s) for s in seeds])
    n = len(seeds)
    lo, hi = float(low), float(high)
    best_v, best_score = lo, -np.inf
    for _ in range(rounds):
        grid = np.linspace(lo, hi, points)
        nus = np.full(points * n, float(nu))
        # env i * points + j plays value j on realisation i
        result = run_policy(make_policy(np.tile(grid, n), nus), scenario, real.repeat(points), dp=False, nu=nus)
        score = leakage_score(result.leakage, result.equal_alloc_leakage, np.repeat(optimal, points))
        mean = score.reshape(n, points).mean(axis=0)
        k = int(np.argmax(mean))
        if mean[k] > best_score:
            best_v, best_score = float(grid[k]), float(mean[k])
        step = grid[1] - grid[0] if points > 1 else 0.0
        lo, hi = max(low, grid[k] - step), min(high, grid[k] + step)
    return best_v, best_score


@functools.lru_cache(maxsize=256)
def tuned_constant_action(scenario: Scenario, nu: float, action_type: str = "price",
                         price_decades: float = 2.0) -> float:
    """The constant budget-mode action with the best mean score on :data:`TRAIN_SEEDS` at ``nu`` (cached)."""
    def make(values: NDArray, nus: NDArray) -> Policy:
        return _Constant(values, nus, action_type=action_type, price_decades=price_decades)

    return tune_on_training(make, scenario, nu, -1.0, 1.0, points=21, rounds=3)[0]


@functools.lru_cache(maxsize=256)
def trained_adascale_scale(scenario: Scenario, nu: float) -> float:
    """The scale v of :class:`AdaScaleTrained` at ``nu`` with the best mean score on :data:`TRAIN_SEEDS` under budget
    mode (cached), searched on log10 v in [-3, 3]."""
    def make(values: NDArray, nus: NDArray) -> Policy:
        return AdaScaleTrained(nu=nus, scale=10.0 ** values)

    return 10.0 ** tune_on_training(make, scenario, nu, -3.0, 3.0, points=13, rounds=3)[0]


class _Constant(ActionPolicy):
    """A fixed env action (one per env)."""

    def __init__(self, action: ArrayLike, nu: ArrayLike | None = None, **kwargs: Any) -> None:
        super().__init__(nu, **kwargs)
        self.value = np.asarray(action, dtype=float)

    def action(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        return self.value


class UniformRandom(ActionPolicy):
    """Env actions drawn uniformly from [-1, 1], independently per env and round, from ``default_rng(seed)`` of
    ``reset``: the floor of every task's reference scores (a random policy of the task's own action space).

    Args:
        nu: the budget per round (array over envs allowed); default: the scenario's.
        action_type: the env's action type (default: the env's, ``"price"``).
        price_decades: the env's argument of the same name (default: the env's).
    """

    def __init__(self, nu: ArrayLike | None = None, *, action_type: str = "price", price_decades: float = 2.0) -> None:
        super().__init__(nu, action_type=action_type, price_decades=price_decades)

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed, **offline)
        self.rng = np.random.default_rng(seed)

    def action(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        return self.rng.uniform(-1.0, 1.0, np.shape(info["next_h_min2"]))


class BestConstant(_Constant):
    """The constant price action a(nu) with the best mean normalised score on the training channels
    (:data:`TRAIN_SEEDS`), never the evaluation ones; ``action`` fixes it instead. One value per distinct nu.

    Args:
        nu: the budget per round (array over envs allowed); default: the scenario's.
        action: a fixed action (scalar or per env) instead of the tuned one.
        action_type: the env's action type (default: the env's, ``"price"``).
        price_decades: the env's argument of the same name (default: the env's).
    """

    def __init__(self, nu: ArrayLike | None = None, action: ArrayLike | None = None, *, action_type: str = "price",
                 price_decades: float = 2.0) -> None:
        super().__init__(np.nan if action is None else action, nu, action_type=action_type,
                         price_decades=price_decades)
        self._given = action is not None

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed, **offline)
        if not self._given:
            nus = np.atleast_1d(self.nu)
            table = {float(v): tuned_constant_action(scenario.replace(nu=float(v)), float(v), self.action_type,
                                                    self.price_decades) for v in np.unique(nus)}
            self.value = np.array([table[float(v)] for v in nus]).reshape(np.shape(self.nu))


class AdaScaleTrained(Budgeted):
    """AdaScale (Alg. 1) with V = v nu / mu_bar per env, v tuned for the best mean score on the training channels
    (:data:`TRAIN_SEEDS`), played under budget mode's rule (cost capped at the budget left, the last round spends the
    rest), so it meets nu on every realisation. ``scale`` fixes v instead; one v per distinct nu.

    mu_bar is the price of the stationary water level at nu on the env's placement (nats per unit of convergence
    cost; :meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.reference_price` without safety stock). AdaScale's round (30)
    sets the price of cost to (Q_t + c_t) / V, about nu / V in steady state; V = v nu / mu_bar makes that v^-1 mu_bar,
    so one v serves every placement. A single V per nu, as the paper's calibration per realisation would become on
    unseen channels, spends at rates 10x apart across placements, runs out of budget on some and scored -172 at
    nu = 0.04 (32 held-out realisations, T = 500).
    """

    def __init__(self, nu: ArrayLike | None = None, scale: ArrayLike | None = None) -> None:
        super().__init__(AdaScale(V=1.0, nu=nu))
        self._nu, self._scale = nu, scale

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        nus = np.atleast_1d(np.asarray(scenario.nu if self._nu is None else self._nu, dtype=float))
        if self._scale is None:
            table = {float(v): trained_adascale_scale(scenario.replace(nu=float(v)), float(v)) for v in np.unique(nus)}
            self.scale = np.array([table[float(v)] for v in nus])
        else:
            self.scale = np.broadcast_to(np.asarray(self._scale, dtype=float), nus.shape)
        super().reset(scenario, seed, **offline)
        self._placed = False

    def act(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        if not self._placed:  # V from the placement, known from the first info
            model, big_t = self.inner.model, self.num_rounds
            mean = model.expected_h_min2(np.atleast_2d(info["mean_channel_gain"]))
            nu = np.broadcast_to(self.inner.nu, mean.shape)
            price = model.reference_price(nu * big_t, big_t, mean, buffer_sd=0.0)
            self.inner.V = (self.scale * nu / price).reshape(np.shape(info["next_h_min2"]))
            self._placed = True
        return super().act(observation, info)


class DualPrice(_PolicyBase):
    """The optimal online policy of problem (28) with its constraint in expectation, E[(1/T) sum_t c_t] <= nu (the
    constrained task's CMDP), under i.i.d. fading: every round plays the minimiser of L_t + mu c_t (as
    ``OfflineOptimal`` does with its realisation's mu) at the one price mu whose expected spend per round under the
    channel law of the env's placement is nu (:meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.reference_price` without
    safety stock: the mu_bar of :class:`AdaScaleTrained`). No budget ledger: the realised mean cost is nu in expectation
    only.

    Optimal by Lagrangian sufficiency (Everett 1963): the rounds' channels are independent of the actions, so this
    policy minimises E[sum_t L_t + mu c_t] over all online policies; any policy pi' that meets the constraint in
    expectation has E[L(pi')] + mu E[c(pi')] >= E[L] + mu nu T, hence E[L(pi')] >= E[L]. Under block or Gauss-Markov
    fading the same holds (the channels still do not depend on the actions) but the price is that of the marginal law.

    Args:
        nu: the budget per round (array over envs allowed); default: the scenario's.
    """

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed, **offline)
        self.price: NDArray | None = None

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        model, big_t = self.model, self.scenario.num_rounds
        if self.price is None:  # the placement is known from the first info
            mean = model.expected_h_min2(np.atleast_2d(info["mean_channel_gain"]))
            nu = np.broadcast_to(self.nu, mean.shape)
            self.price = model.reference_price(nu * big_t, big_t, mean, buffer_sd=0.0).reshape(np.shape(h))
        return model.x_for_cost(model.price_spend(0.0, h, self.price, 1.0), h)


# --- the online optimum by dynamic programming -------------------------------------------------------------------
@dataclass(frozen=True)
class OnlinePrices:
    """The solved dynamic programme of :func:`solve_online_optimal` for N envs, one table per distinct (nu, placement).

    ``budget_grid`` (U, J): the post-decision budgets A_j (0 first, then geometric up to nu T); ``log_level`` (S, U, J):
    at the start of each stage s (a block of rounds; one round under i.i.d. fading) after the first, log eta*(mu) at
    the price mu = lambda_s(A_j), the marginal value of budget left for stages s, s+1, ... (``log_level[0]`` is
    unused: the next stage's table is read); ``row`` (N,): each env's row of the two tables; ``block``: the rounds of a
    stage (the coherence block; 1 under i.i.d. fading); ``num_rounds``: T."""

    budget_grid: NDArray
    log_level: NDArray
    row: NDArray
    block: int
    num_rounds: int

    @property
    def stage_start(self) -> NDArray:
        """(S,): the first round of each stage."""
        return np.arange(0, self.num_rounds, self.block)


def _spend_all_price(model: ReceiveScalingModel, spend: NDArray, cap: NDArray) -> NDArray:
    """-d L / d c of a round that spends ``spend`` on a channel whose full-power eta is ``cap`` = x_max h^2: the
    price at which spending exactly ``spend`` is optimal, eta^2 L'(eta) / (d sigma_n^2) at eta = 1/(c/K + 1/cap)."""
    with np.errstate(divide="ignore"):
        eta = 1.0 / (spend / model.cost_scale + 1.0 / cap)
    return model.cost_slope_of_leakage(eta, 1.0)


def solve_online_optimal(model: ReceiveScalingModel, nu: ArrayLike, mean_h_min2: ArrayLike, num_rounds: int, *,
                         block: int = 1, grid: int = 200, nodes: int = 128) -> OnlinePrices:
    """The Bellman-optimal online policy of problem (28) in budget mode, by the endogenous-grid method.

    The channel's full-power receive scaling g_t = x_max h_min,t^2 is i.i.d. Exponential(mean x_max E[h_min^2]) across
    stages (``block`` rounds each: block fading with that coherence, 1 for i.i.d. fading) and constant within one, and
    is seen at the start of its stage. With V_s(B) the least expected leakage of stages s.. from budget B, the stage
    solves min_c n_s L(eta(c / n_s, g)) + V_{s+1}(B - c), 0 <= c <= B, where a round's spend c buys
    eta = 1/(c/K + 1/g) (eq. (23), (28b)) and a stage's n_s rounds share its spend equally (L(eta(c, g)) is convex in
    c, so equal shares are optimal when g is constant); the last stage spends all of B. Its first-order condition is a
    price: mu = -V'_{s+1}(B - c), and the round plays ``eta = min(eta*(mu), g)`` as OfflineOptimal does (the
    channel-free ``eta*``, :meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.price_receive_scaling`).

    The endogenous-grid method (Carroll 2006) runs backwards on the marginal value lambda_s = -V_s': for each
    post-decision budget A_j the price is mu_j = lambda_{s+1}(A_j) and, on each channel node g_k, the stage spends
    ``c_jk = n_s K max(1/eta*(mu_j) - 1/g_k, 0)`` from B_jk = A_j + c_jk (increasing in j); below B_0k the stage
    spends all of B at the price of spending all. lambda_s(B) is the mean over g_k of the price interpolated at B
    (log-log, linear), by the envelope theorem. Channel nodes: ``nodes`` equal-probability midpoints of the
    Exponential law; ``grid`` budgets, geometric from 1e-9 nu T to nu T. ``nu`` and ``mean_h_min2`` are (N,).

    Envs with the same nu and placement share one programme, and the last :data:`PROGRAMMES_CACHED` programmes are
    cached per process (each a pure function of the model's scenario and its arguments; about 0.5 s and 0.8 MB at
    T = 500), so a search that plays many policies on the same realisations solves each once as long as it plays
    fewer (nu, placement) pairs than that. (Envs that draw a new placement or nu at every reset solve a new
    programme at each.)
    """
    nu = np.atleast_1d(np.asarray(nu, dtype=float))
    mean = np.broadcast_to(np.asarray(mean_h_min2, dtype=float), nu.shape)
    keys, row = np.unique(np.stack([nu, mean], axis=-1), axis=0, return_inverse=True)
    solved = [_programme(model.scenario, float(v), float(m), int(num_rounds), int(block), int(grid), int(nodes))
              for v, m in keys]
    return OnlinePrices(budget_grid=np.stack([b for b, _ in solved]),
                        log_level=np.stack([lv for _, lv in solved], axis=1), row=row.ravel(), block=int(block),
                        num_rounds=int(num_rounds))


#: How many solved programmes :func:`solve_online_optimal` keeps (0.8 MB each at T = 500): more than a residual
#: search plays (3 nu x 128 training realisations and the 16 validation ones).
PROGRAMMES_CACHED = 512


@functools.lru_cache(maxsize=PROGRAMMES_CACHED)
def _programme(scenario: Scenario, nu: float, mean_h_min2: float, num_rounds: int, block: int, grid: int,
               nodes: int) -> tuple[NDArray, NDArray]:
    """One env's programme (:func:`_solve_one`), read-only and cached per process (:data:`PROGRAMMES_CACHED`)."""
    model = ReceiveScalingModel(scenario)
    starts = np.arange(0, num_rounds, block)
    lengths = np.minimum(starts + block, num_rounds) - starts
    ratio = np.concatenate([[0.0], np.geomspace(1e-9, 1.0, grid - 1)])
    e = -np.log1p(-(np.arange(nodes) + 0.5) / nodes)
    solved = _solve_one(model, nu * num_rounds * ratio, model.x_max * mean_h_min2 * e, lengths)
    for array in solved:
        array.flags.writeable = False
    return solved


def _solve_one(model: ReceiveScalingModel, b: NDArray, cap: NDArray, lengths: NDArray) -> tuple[NDArray, NDArray]:
    """The programme of one env: budgets ``b`` (J,), channel nodes ``cap`` (G,), stage lengths (S,); returns ``b`` and
    log eta*(lambda_s(A_j)) (S, J)."""
    grid, nodes = b.size, cap.size
    log_b = np.log(np.maximum(b, 1e-300))
    levels = np.zeros((lengths.size, grid))
    spend_all: dict[int, NDArray] = {}

    def spend_all_price(rounds: int) -> NDArray:  # (G, J): the price of spending all of B over the stage's rounds
        if rounds not in spend_all:
            spend_all[rounds] = _spend_all_price(model, b[None, :] / rounds, cap[:, None])
        return spend_all[rounds]

    lam = spend_all_price(int(lengths[-1])).mean(axis=0)  # the last stage spends all
    offsets = 2000.0 * np.arange(nodes)[:, None]  # node columns laid end to end: one searchsorted serves all
    queries = log_b[None, :] + offsets
    for s in range(lengths.size - 2, -1, -1):
        rounds = int(lengths[s])
        level = model.price_receive_scaling(lam)  # (J,), increasing (lam decreases in A)
        levels[s + 1] = np.log(level)
        spend = rounds * model.cost_scale * np.maximum(1.0 / level[None, :] - 1.0 / cap[:, None], 0.0)  # (G, J)
        keys = np.log(np.maximum(b[None, :] + spend, 1e-300)) + offsets  # log B_jk, increasing in j
        j = np.searchsorted(keys.ravel(), queries.ravel(), side="right").reshape(nodes, grid) - 1
        j -= grid * np.arange(nodes)[:, None]
        below = j < 0  # B_i < B_0k: spend all
        j = np.clip(j, 0, grid - 2)
        k0, k1 = np.take_along_axis(keys, j, axis=1), np.take_along_axis(keys, j + 1, axis=1)
        w = np.clip((queries - k0) / np.maximum(k1 - k0, 1e-300), 0.0, 1.0)
        log_mu = np.log(lam)
        mu = np.exp((1.0 - w) * log_mu[j] + w * log_mu[j + 1])
        lam = np.where(below, spend_all_price(rounds), mu).mean(axis=0)
    return b, levels


def online_optimal_round(model: ReceiveScalingModel, prices: OnlinePrices, remaining: NDArray, h_min2: NDArray,
                         t: ArrayLike) -> tuple[NDArray, NDArray]:
    """Round ``t`` (an int, or one per env) of the solved programme ``prices`` for each of its N envs:
    ``(spend, price)``, the round's convergence cost c_t and the price mu_t (nats per unit of convergence cost) at
    which c_t minimises the round's Lagrangian on its channel (so that
    :meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.price_spend` at mu_t buys c_t).

    With budget left B_t (``remaining``, (N,)) and the full-power level g_t = x_max h_min,t^2, the stage finds the
    post-decision budget A with A + c(lambda_{s+1}(A), g_t) = B_t on its grid (interpolated, log-log: ``np.interp``'s
    rule, row by row), plays eta = min(eta*, g_t) and shares the stage's spend equally over its rounds left; it spends
    all of B_t when even A = 0 asks for more, and in the last stage."""
    block, num_rounds = prices.block, prices.num_rounds
    t = np.broadcast_to(np.asarray(t), np.shape(remaining))
    stage = t // block
    rounds = np.minimum(block * (stage + 1), num_rounds) - t  # rounds left in this stage, this one included
    cap = model.x_max * h_min2
    left = np.maximum(remaining, 0.0)
    last = stage + 1 >= prices.stage_start.size
    table = prices.log_level[np.where(last, 0, stage + 1), prices.row]  # (N, J): log eta* at each A_j
    end = prices.budget_grid[prices.row] + (rounds * model.cost_scale)[:, None] * np.maximum(
        np.exp(-table) - 1.0 / cap[:, None], 0.0)  # the budget B_t at which A_j is the choice, increasing in j
    log_end = np.log(np.maximum(end, 1e-300))
    with np.errstate(divide="ignore"):
        query = np.log(left)
    rows = np.arange(left.size)
    j = np.clip((log_end <= query[:, None]).sum(axis=1) - 1, 0, end.shape[1] - 2)
    x0, x1, y0, y1 = log_end[rows, j], log_end[rows, j + 1], table[rows, j], table[rows, j + 1]
    with np.errstate(invalid="ignore"):
        log_level = np.where(query >= log_end[:, -1], table[:, -1], (y1 - y0) / (x1 - x0) * (query - x0) + y0)
    log_level = np.where(query <= log_end[:, 0], table[:, 0], log_level)  # np.interp's left end
    spend_all = last | (left <= end[:, 0])
    level = np.exp(np.where(spend_all, 0.0, log_level))
    wanted = rounds * model.cost_scale * np.maximum(1.0 / level - 1.0 / cap, 0.0)
    capped = spend_all | (wanted >= left)
    spend = np.where(spend_all, left, np.minimum(wanted, left)) / rounds
    price = np.where(capped, _spend_all_price(model, spend, cap), model.cost_slope_of_leakage(level, 1.0))
    return spend, price


def online_optimal_price_action(model: ReceiveScalingModel, prices: OnlinePrices, remaining: NDArray,
                                h_min2: NDArray, t: ArrayLike, mean_h_min2: NDArray, price_decades: float,
                                buffer_sd: float) -> NDArray:
    """The price action a in [-1, 1] (N,) that plays round ``t`` of the programme (:func:`online_optimal_round`):
    a = log10(mu_t / mu_ref,t) / price_decades, clipped, with mu_ref,t the action's reference
    (:meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.reference_price` of the budget left, the rounds left and the
    channel law)."""
    price = online_optimal_round(model, prices, remaining, h_min2, t)[1]
    reference = model.reference_price(np.maximum(remaining, 0.0), prices.num_rounds - np.asarray(t), mean_h_min2,
                                buffer_sd)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log10(price / reference) / price_decades
    return np.clip(np.nan_to_num(a, nan=0.0), -1.0, 1.0)


class _OnlineProgramme:
    """The programme of :func:`solve_online_optimal` for a policy's envs, solved at their first round (the placement
    is known from the first info), and the budget they have left."""

    grid: int
    nodes: int

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed, **offline)  # type: ignore[misc]
        self.block = scenario.coherence_rounds if scenario.fading == "block" else 1
        self.prices: OnlinePrices | None = None

    def _programme(self, h: NDArray, info: dict[str, Any]) -> tuple[OnlinePrices, NDArray]:
        """The solved programme and each env's budget left (N,), h (N,)."""
        model, big_t = self.model, self.scenario.num_rounds  # type: ignore[attr-defined]
        if self.prices is None:
            self.mean_h_min2 = model.expected_h_min2(np.atleast_2d(info["mean_channel_gain"]))
            self.prices = solve_online_optimal(model, np.broadcast_to(self.nu, self.mean_h_min2.shape),  # type: ignore
                                               self.mean_h_min2, big_t, block=self.block, grid=self.grid,
                                               nodes=self.nodes)
        return self.prices, np.broadcast_to(self.nu * big_t - self.cost_sum, h.shape)  # type: ignore[attr-defined]


class OnlineOptimal(_OnlineProgramme, _PolicyBase):
    """The optimal non-anticipating policy of problem (28) in budget mode (:func:`solve_online_optimal`), solved for
    each env's placement and nu at its first round; each round's x from :func:`online_optimal_round`. Under block
    fading (the scenario's ``fading="block"``) a stage is a coherence block and the rest of the block shares the
    spend equally. Under Gauss-Markov fading the programme is solved for the i.i.d. marginal (the future's law given
    the present is not used): a valid online policy, not the optimum.

    Args:
        nu: the budget per round (array over envs allowed); default: the scenario's.
        grid: the number of budgets of the solved grid, as for :func:`solve_online_optimal`.
        nodes: the number of channel nodes, as for :func:`solve_online_optimal`.
    """

    def __init__(self, nu: ArrayLike | None = None, grid: int = 200, nodes: int = 128) -> None:
        super().__init__(nu)
        self.grid, self.nodes = grid, nodes

    def _decide(self, h: NDArray, info: dict[str, Any]) -> NDArray:
        h1 = np.atleast_1d(h)
        prices, left = self._programme(h1, info)
        spend = online_optimal_round(self.model, prices, left, h1, self.t)[0]
        return self.model.x_for_cost(spend, h1).reshape(np.shape(h))


class OnlineOptimalAction(_OnlineProgramme, ActionPolicy):
    """:class:`OnlineOptimal` as the env's price action: a = log10(mu_t / mu_ref,t) / price_decades, clipped to
    [-1, 1], with mu_t the programme's price of the round (:func:`online_optimal_round`) and mu_ref,t the action's
    reference (:meth:`~otagym.schemes.receive_scaling.model.ReceiveScalingModel.reference_price`). Where mu_t lies within
    ``price_decades`` of the reference it plays what :class:`OnlineOptimal` plays; the clip is what an agent of the
    price action can express. The base of the residual agents of ``benchmarks/crn_search.py`` (docs/rl.md §9), whose
    action is this one plus a learned correction.

    Args:
        nu: the budget per round (array over envs allowed); default: the scenario's.
        grid: the number of budgets of the solved grid, as for :func:`solve_online_optimal`.
        nodes: the number of channel nodes, as for :func:`solve_online_optimal`.
        price_decades: the env's argument of the same name.
        price_buffer_sd: the env's argument of the same name.
        env_kwargs: instead of the two above, the env keyword arguments the actions are meant for (a task's
            settings), resolved with the env's defaults at ``reset``; their action must be the price action.
    """

    def __init__(self, nu: ArrayLike | None = None, grid: int = 200, nodes: int = 128, *, price_decades: float = 2.0,
                 price_buffer_sd: float = 1.0, env_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__(nu, price_decades=price_decades, price_buffer_sd=price_buffer_sd, env_kwargs=env_kwargs)
        self.grid, self.nodes = grid, nodes

    def reset(self, scenario: Scenario, seed: int | None = None, **offline: Any) -> None:
        super().reset(scenario, seed, **offline)
        if self.action_type != "price":
            raise ValueError(f"env_kwargs: OnlineOptimalAction plays the price action; got {self.action_type!r}")

    def action(self, observation: NDArray, info: dict[str, Any]) -> NDArray:
        h = np.atleast_1d(np.asarray(info["next_h_min2"], dtype=float))
        prices, left = self._programme(h, info)
        return online_optimal_price_action(self.model, prices, left, h, self.t, self.mean_h_min2, self.price_decades,
                                           self.price_buffer_sd)
