"""What every scheme's training engine shares: the model and the devices' data, the metrics the env reports
(training loss, test loss and accuracy, ||grad f(w)||^2), the divergence guard, and the batching of engines.

A scheme's engine (:class:`~otagym.training.fedsgd.FedSGD` for model A,
:class:`~otagym.schemes.cdpb.training.CDPBTraining` for model B) plays its round and moves the weights with
:meth:`Engine._apply`; the rest is here, once.

Engines of one architecture on the same data (the envs of a vector env) compute together: the ``*_all``
class methods take a list of engines and run their models as one stack (:mod:`otagym.training.stacked`); the
methods of one engine are the list of one. :meth:`Engine.groups` sorts any list of engines into such lists.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from otagym.training import stacked

__all__ = ["Engine", "mean_loss_and_accuracy", "full_gradient_norm2"]


class Engine:
    """A model, its devices' local data and its held-out test data.

    A model that diverges (non-finite loss or weights: noise far above the signal) is put back at its last weights
    of finite training loss and trains no more (:attr:`diverged`); its metrics stay finite.

    Args:
        model: a torch module without batch norm (per-sample or per-client clipping).
        device_data: per device, ``(x, y)`` tensors of its local dataset (n_m samples).
        test_data: ``(x, y)`` of the held-out set for :meth:`evaluate`.
        eval_data: ``(x, y)`` that :meth:`train_loss` and :meth:`gradient_norm2` measure f(w) on (a subset of the
            devices' data, to evaluate faster); None: every device's data.
    """

    def __init__(self, model: nn.Module, device_data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                 test_data: tuple[torch.Tensor, torch.Tensor] | None = None, *,
                 eval_data: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        self.model = model
        self.device_data = list(device_data)
        self.test_data = test_data
        self._all_x = torch.cat([x for x, _ in self.device_data])  # every local sample, by device
        self._all_y = torch.cat([y for _, y in self.device_data])
        self._own_eval_data = eval_data
        self.eval_data = (self._all_x, self._all_y) if eval_data is None else eval_data  # f(w) and its gradient
        #: True once the model diverged: it is back at its last weights of finite training loss and trains no more.
        self.diverged = False
        self._good = self.weights().clone()
        #: What engines that compute together share besides their data (:meth:`batch_key`).
        self._setup: tuple = (type(self), type(model), repr(model), tuple(p.shape for p in model.parameters()))

    @property
    def dim(self) -> int:
        """d, the number of trained parameters."""
        return sum(p.numel() for p in self.model.parameters())

    def weights(self) -> torch.Tensor:
        """w_t as one flat vector (d,), detached."""
        return torch.nn.utils.parameters_to_vector(self.model.parameters()).detach()

    def _checkpoint(self, loss: float) -> bool:
        """Before an update: keep the weights as the last good ones if ``loss`` (at those weights) is finite, else
        diverge. Returns whether the update may go on."""
        if not np.isfinite(loss):
            self._diverge()
            return False
        self._good = self.weights().clone()
        return True

    def _apply(self, w: torch.Tensor) -> None:
        """Set the weights to ``w`` (d,), or diverge if it is not finite."""
        if not torch.isfinite(w).all():
            self._diverge()
            return
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(w, self.model.parameters())

    def _diverge(self) -> None:
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(self._good, self.model.parameters())
        self.diverged = True

    # --- one engine: the list of one ------------------------------------------------------------------------------

    def train_loss(self) -> float:
        """Mean cross-entropy of the current model over every device's data (its ``eval_data``)."""
        return float(type(self).train_loss_all([self])[0])

    def gradient_norm2(self) -> float:
        """||grad f(w_t)||^2 over every device's data (its ``eval_data``; :func:`full_gradient_norm2`)."""
        return float(type(self).gradient_norm2_all([self])[0])

    def evaluate(self) -> tuple[float, float]:
        """(mean cross-entropy, accuracy) on the test data."""
        loss, accuracy = type(self).evaluate_all([self])
        return float(loss[0]), float(accuracy[0])

    # --- engines together -------------------------------------------------------------------------------------------

    @staticmethod
    def groups(engines: Sequence["Engine"]) -> list[list[int]]:
        """Indices of ``engines`` in lists that compute together (same engine class, same architecture, the same
        data tensors), in order of first appearance."""
        out: dict[Any, list[int]] = {}
        for i, engine in enumerate(engines):
            out.setdefault(engine.batch_key(), []).append(i)
        return list(out.values())

    def batch_key(self) -> tuple:
        """Equal for engines that can compute together: the same class, architecture and settings
        (:attr:`_setup`), and the same data tensors (the identity of the objects, taken now)."""
        data = [*self.device_data, *(pair for pair in (self._own_eval_data, self.test_data) if pair is not None)]
        return self._setup, tuple(id(t) for pair in data for t in pair)

    @classmethod
    def _stack(cls, engines: Sequence["Engine"]) -> stacked.Params:
        """The engines' parameters stacked; ValueError unless they form one group (:meth:`groups`)."""
        if not engines or any(e.batch_key() != engines[0].batch_key() or not isinstance(e, cls) for e in engines):
            raise ValueError(f"engines must be one non-empty group of {cls.__name__} (Engine.groups: one class, "
                             "architecture and data); got " + ", ".join(type(e).__name__ for e in engines))
        return stacked.stack_parameters([e.model for e in engines])

    @classmethod
    def train_loss_all(cls, engines: Sequence["Engine"]) -> NDArray:
        """(E,): :meth:`train_loss` of each engine, computed together."""
        first = engines[0]
        return stacked.loss_and_accuracy(first.model, cls._stack(engines), *first.eval_data)[0]

    @classmethod
    def gradient_norm2_all(cls, engines: Sequence["Engine"]) -> NDArray:
        """(E,): :meth:`gradient_norm2` of each engine, computed together; an engine whose value is not finite
        diverges (back to its last good weights) and is measured there."""
        first = engines[0]
        value = stacked.gradient_norm2(first.model, cls._stack(engines), *first.eval_data)
        redo = _diverge_where(engines, value)
        if redo:
            value[redo] = cls.gradient_norm2_all([engines[j] for j in redo])
        return value

    @classmethod
    def evaluate_all(cls, engines: Sequence["Engine"]) -> tuple[NDArray, NDArray]:
        """(test loss (E,), accuracy (E,)): :meth:`evaluate` of each engine, computed together; an engine whose loss
        is not finite diverges and is measured at its last good weights."""
        first = engines[0]
        if first.test_data is None:
            raise ValueError("evaluate needs test_data")
        loss, accuracy = stacked.loss_and_accuracy(first.model, cls._stack(engines), *first.test_data)
        redo = _diverge_where(engines, loss)
        if redo:
            loss[redo], accuracy[redo] = cls.evaluate_all([engines[j] for j in redo])
        return loss, accuracy

    @classmethod
    def round_all(cls, engines: Sequence["Engine"], **calls: Sequence[Any]) -> NDArray:
        """One round of each engine; ``calls`` holds, under each name of the engine's ``round``, one value per engine.
        Returns the training losses (E,) (what ``round`` returns, or its ``train_loss``). This default plays the
        engines one after another; a scheme's engine overrides it to compute them together
        (:meth:`otagym.training.FedSGD.round_all`)."""
        losses = [e.round(**{k: v[j] for k, v in calls.items()}) for j, e in enumerate(engines)]
        return np.array([getattr(loss, "train_loss", loss) for loss in losses], dtype=float)


def _diverge_where(engines: Sequence[Engine], value: NDArray) -> list[int]:
    """Indices of the engines whose ``value`` is not finite and which had not diverged: they diverge now."""
    redo = [j for j, e in enumerate(engines) if not np.isfinite(value[j]) and not e.diverged]
    for j in redo:
        engines[j]._diverge()
    return redo


def mean_loss_and_accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of ``model`` on ``(x, y)``, in passes of
    :data:`~otagym.training.stacked.SAMPLES_PER_PASS` samples."""
    loss, accuracy = stacked.loss_and_accuracy(model, stacked.stack_parameters([model]), x, y)
    return float(loss[0]), float(accuracy[0])


def full_gradient_norm2(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """||grad f(w)||^2 of the global loss f = sum_m (n_m / n) f_m (eq. (2) of the AdaScale paper), the mean
    cross-entropy over every local sample (``x``, ``y``: all devices' data): the true criterion of (16b) that the
    surrogate c_t stands for. Accumulated over passes of :data:`~otagym.training.stacked.SAMPLES_PER_PASS` samples."""
    return float(stacked.gradient_norm2(model, stacked.stack_parameters([model]), x, y)[0])
