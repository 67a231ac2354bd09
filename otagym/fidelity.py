"""The training fidelity beside a scheme's batched core: per-env engines, their metrics and the arguments that choose
the data (torch is imported only when ``fidelity="train"``).

Both schemes' cores (:class:`otagym.schemes.receive_scaling.core.ReceiveScalingCore`,
:class:`otagym.schemes.cdpb.core.CDPBCore`) hold a :class:`TrainingRuns` when ``fidelity="train"`` and call it at reset
and after each round with a function that plays their own round on an engine (:class:`otagym.training.FedSGD` for
model A, :class:`otagym.schemes.cdpb.training.CDPBTraining` for model B). The channels, the action mapping and the accounting are
the analytic fidelity's: engines take their randomness from generators spawned from the env's, and spawning does not
advance it. The N envs' models train as one stack of models (``round_all`` of the engine class), each env with the
numbers of its engine alone.

The training fidelity is safe in forked processes (``gym.make_vec(..., vectorization_mode="async")``, whose default
context on Linux is fork): :func:`fork_safe_torch`.
"""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from otagym.datasets import DATASET_NAMES
from otagym.validation import AppliesWith, Flag, Integer, OfType, OneOf, Spec, arg, field_specs

__all__ = ["Fidelity", "DATASET_NAMES", "TRAIN_KEYS", "NOT_MEASURED_WITHOUT_GRADIENT", "TRAIN_ONLY", "TrainingOptions",
           "TRAINING_ARGS", "SUBSET_KEYS", "TrainingRuns", "fork_safe_torch"]

Fidelity = Literal["analytic", "train"]
#: Step info of the training fidelity: the round's training loss, and the latest evaluation (every ``eval_every``
#: rounds and at the last; ``evaluated_round`` = the round after which it was taken, -1 = the initial model);
#: ``diverged`` (1.0 once the model diverged and stopped training: see ``otagym.training.Engine``). With
#: ``eval_gradient=False`` an evaluation is the test loss and accuracy only: ``gradient_norm2`` and the initial
#: ``train_loss`` (f(w_0)) are NaN.
TRAIN_KEYS = ("train_loss", "test_loss", "test_accuracy", "gradient_norm2", "evaluated_round", "diverged")
#: The keys of :data:`TRAIN_KEYS` that ``eval_gradient=False`` leaves NaN (``train_loss`` at a reset only).
NOT_MEASURED_WITHOUT_GRADIENT = ("train_loss", "gradient_norm2")
#: The condition of every training argument but ``fidelity``: it has an effect only under ``fidelity="train"``.
TRAIN_ONLY = AppliesWith("fidelity", ("train",))


@dataclass(frozen=True, kw_only=True)
class TrainingOptions:
    """The env arguments of the training fidelity that every scheme with one takes, checked once (each scheme's
    option struct extends it; the cores' docstrings say what each does). With ``fidelity="analytic"`` the others
    must keep their defaults (else ``ValueError``: they would have no effect)."""

    fidelity: Fidelity = arg("analytic", OneOf(get_args(Fidelity)))
    dataset: str = arg("digits", OneOf(DATASET_NAMES), TRAIN_ONLY)
    data_dir: str | None = arg(None, OfType((str, os.PathLike, type(None)), "a folder path (str or os.PathLike) or "
                                            "None", lambda v: None if v is None else os.fspath(v)), TRAIN_ONLY)
    data_split: str = arg("iid", OneOf(("iid", "classes")), TRAIN_ONLY)
    data_seed: int = arg(0, Integer(0, 2**32 - 1), TRAIN_ONLY)
    eval_every: int = arg(10, Integer(1, 1_000_000), TRAIN_ONLY)
    train_samples: int | None = arg(None, Integer(1, optional=True), TRAIN_ONLY)
    eval_samples: int | None = arg(None, Integer(1, optional=True), TRAIN_ONLY)
    eval_gradient: bool = arg(True, Flag(), TRAIN_ONLY)


#: The env arguments of the training fidelity shared by every scheme (:class:`TrainingOptions`) and their specs.
TRAINING_ARGS: dict[str, Spec] = field_specs(TrainingOptions)
#: The arguments of :data:`TRAINING_ARGS` that train or evaluate on random subsets of the data, to run faster: the
#: number of training samples kept (n_m follows) and the most test and training samples an evaluation measures.
SUBSET_KEYS = ("train_samples", "eval_samples")

#: ``play(i, engine, rng) -> train_loss``: one round of env ``i`` on its engine, with its generator.
Play = Callable[[int, Any, np.random.Generator], float]

#: True in a process forked from one that had imported torch, until :func:`fork_safe_torch` has run there.
_forked_with_torch = False


def _after_fork_in_child() -> None:
    global _forked_with_torch
    _forked_with_torch = _forked_with_torch or "torch" in sys.modules


if hasattr(os, "register_at_fork"):  # POSIX: the only systems that fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


def fork_safe_torch() -> None:
    """Make torch usable in a process forked from one that had imported it; elsewhere do nothing.

    torch's intra-op thread pool (OpenMP) does not survive a fork: in the child, the first parallel operation waits
    forever for threads that only the parent has. ``gym.make_vec(..., vectorization_mode="async")`` forks its workers
    on Linux after building an env (and so a model) in the parent, so without this every worker of the training
    fidelity would hang. In such a child torch is limited to one thread (as ``torch.utils.data.DataLoader`` does in
    its workers), which runs every operation on the calling thread; one thread per worker is also what N workers on N
    cores want. Called by :class:`TrainingRuns` before each use of torch; spawned processes (``context="spawn"``) keep
    torch's default.
    """
    global _forked_with_torch
    if _forked_with_torch:
        import torch

        torch.set_num_threads(1)
        _forked_with_torch = False


class TrainingRuns:
    """One engine per env of a batched core, and the metrics of :data:`TRAIN_KEYS` as arrays (N,).

    The engines of all envs compute together, as one stack of models (:meth:`otagym.training.Engine.groups`: engines
    of one class, architecture and data): each round, the initial and periodic evaluations. Each env's numbers are
    those of its engine alone (its own generator drives its batches and noise), so :attr:`batched` = False, which
    plays the envs one after another, gives the same trajectories (to rounding, far below 1e-6).

    Args:
        options: the training options (``fidelity`` must be ``"train"``; a scheme's option struct extends them).
        num_devices: devices (clients) the data is split over.
        num_envs: N.
        num_rounds: T, rounds per episode (an evaluation follows the last).
    """

    def __init__(self, options: TrainingOptions, num_devices: int, num_envs: int, num_rounds: int) -> None:
        fork_safe_torch()
        from otagym.training import make_federation

        self.federation = make_federation(options.dataset, num_devices, np.random.default_rng(options.data_seed),
                                          split=options.data_split, data_dir=options.data_dir,
                                          train_samples=options.train_samples, eval_samples=options.eval_samples)
        self.eval_every, self.num_rounds = options.eval_every, num_rounds
        #: Whether an evaluation measures f(w) and ||grad f(w)||^2 over the devices' data (else they stay NaN).
        self.eval_gradient = options.eval_gradient
        self.engines: list[Any] = [None] * num_envs
        #: Each env's generator of its engine's randomness (batches, receiver noise), spawned at its reset.
        self.rngs: list[np.random.Generator | None] = [None] * num_envs
        self.metrics = {k: np.zeros(num_envs) for k in TRAIN_KEYS}
        if not self.eval_gradient:
            self.metrics["gradient_norm2"][:] = np.nan
        #: Compute the envs' engines together (True) or one after another (False: the reference of the same numbers).
        self.batched = True

    @staticmethod
    def create(options: TrainingOptions, num_devices: int, num_envs: int, num_rounds: int) -> "TrainingRuns | None":
        """A :class:`TrainingRuns` under ``fidelity="train"``, else None."""
        if options.fidelity != "train":
            return None
        return TrainingRuns(options, num_devices, num_envs, num_rounds)

    def reset(self, rng: np.random.Generator, rows: NDArray, make_engine: Callable[[Any, np.random.Generator], Any]
              ) -> None:
        """A fresh engine ``make_engine(federation, child)`` for each env in ``rows``, each with its own generator
        spawned from ``rng`` (which is not advanced), then its initial evaluation."""
        fork_safe_torch()  # an env built before a fork may reset and play in the child
        reset = np.flatnonzero(rows)
        for i, child in zip(reset, rng.spawn(len(reset))):
            self.rngs[i] = child
            self.engines[i] = make_engine(self.federation, child)
        self._evaluate(reset, np.full(len(reset), -1))
        self.metrics["train_loss"][reset] = np.nan  # f(w_0) where it is measured, else NaN
        for group in self._groups(reset) if self.eval_gradient else ():
            engines = [self.engines[i] for i in group]
            self.metrics["train_loss"][group] = type(engines[0]).train_loss_all(engines)

    def round(self, played: NDArray, play: Play) -> None:
        """Play one round in every env; evaluate every ``eval_every`` rounds and after the last. ``played`` (N,):
        rounds played so far, this one included.

        ``play(i, engine, rng)`` is called for each env with a stand-in for its engine that records the call to
        ``engine.round(...)`` (and returns a placeholder, whose value is not used); the recorded calls are then
        played together, one ``round_all`` per group of engines, and the training losses come from there."""
        fork_safe_torch()
        recorders = [_Recorder(engine) for engine in self.engines]
        for i, recorder in enumerate(recorders):
            play(i, recorder, self.rngs[i])
        for group in self._groups(np.arange(len(self.engines))):
            engines = [self.engines[i] for i in group]
            cls = type(engines[0])
            losses = cls.round_all(engines, **_as_lists(cls.round, [recorders[i] for i in group]))
            for i, engine, loss in zip(group, engines, losses):
                if not engine.diverged:
                    self.metrics["train_loss"][i] = loss
                self.metrics["diverged"][i] = engine.diverged
        due = np.flatnonzero((played % self.eval_every == 0) | (played >= self.num_rounds))
        self._evaluate(due, played[due] - 1)

    def _groups(self, rows: NDArray) -> list[list[int]]:
        """The envs ``rows`` in lists whose engines compute together (one list per env unless :attr:`batched`)."""
        if not self.batched:
            return [[int(i)] for i in rows]
        from otagym.training import Engine

        return [[int(rows[j]) for j in group] for group in Engine.groups([self.engines[i] for i in rows])]

    def _evaluate(self, rows: NDArray, played_rounds: NDArray) -> None:
        """Test loss and accuracy, ||grad f||^2 of the envs ``rows``; ``played_rounds``: the round after which each
        is taken (-1 = the initial model)."""
        metrics, after = self.metrics, dict(zip(rows.tolist(), played_rounds.tolist()))
        for group in self._groups(rows):
            engines = [self.engines[i] for i in group]
            cls = type(engines[0])
            metrics["test_loss"][group], metrics["test_accuracy"][group] = cls.evaluate_all(engines)
            if self.eval_gradient:
                metrics["gradient_norm2"][group] = cls.gradient_norm2_all(engines)
            metrics["evaluated_round"][group] = [after[i] for i in group]
            metrics["diverged"][group] = [e.diverged for e in engines]

    def info(self) -> dict[str, NDArray]:
        """The metrics, copied for a step's info."""
        return {k: v.copy() for k, v in self.metrics.items()}


class _Recorder:
    """Stands in for an engine in a ``play`` function: records the call to ``round`` (the engine's other attributes
    are the engine's own)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.call: tuple[tuple, dict] | None = None

    def round(self, *args: Any, **kwargs: Any) -> "_Placeholder":
        if self.call is not None:
            raise RuntimeError("play must call engine.round once per env and round; it called it twice")
        self.call = (args, kwargs)
        return _PLACEHOLDER

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


class _Placeholder:
    """What a recorded ``round`` returns: its training loss is not known yet (NaN); the batched round sets it."""

    train_loss = float("nan")


_PLACEHOLDER = _Placeholder()


def _as_lists(round_method: Callable, recorders: list[_Recorder]) -> dict[str, list[Any]]:
    """The recorded calls of ``round_method`` as one list per parameter name (for ``round_all``)."""
    signature = inspect.signature(round_method)
    lists: dict[str, list[Any]] = {}
    for recorder in recorders:
        if recorder.call is None:
            raise RuntimeError("play must call engine.round once per env and round; it did not call it")
        bound = signature.bind(recorder.engine, *recorder.call[0], **recorder.call[1])
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:  # after self
            lists.setdefault(name, []).append(value)
    return lists
