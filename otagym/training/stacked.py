"""E models of one architecture as stacked parameters, computed together: per-sample clipped gradient sums, losses,
accuracies and full gradients of all E models in one computation (``torch.func.functional_call`` under ``vmap`` over
the models).

The engines of the env fidelity (:class:`otagym.training.FedSGD`, :class:`otagym.schemes.cdpb.training.CDPBTraining`) compute
through these functions: a single model is the stack of one (:func:`otagym.training.clipped_gradient_sum_and_loss`,
:meth:`otagym.training.Engine.evaluate`), and the envs of a vector env are the stack of all their models
(:meth:`otagym.training.FedSGD.round_all`). Samples go through in passes of at most :data:`SAMPLES_PER_PASS` per
model, the same passes whatever E, so a model's numbers do not depend on the models stacked beside it (identical to
the last bit in the tests' runs; at most the rounding of the grouped kernels).

Shapes: ``params`` maps each parameter name of the template model to a tensor (E, *shape); per-sample data is
(E, B, *sample) with labels (E, B); data shared by all models is (B, *sample) with labels (B,).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Sequence

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn
from torch.func import functional_call, grad, grad_and_value, vmap

__all__ = ["SAMPLES_PER_PASS", "Params", "stack_parameters", "flatten", "clipped_gradient_sums",
           "loss_and_accuracy", "gradient_norm2", "local_steps"]

#: Params: parameter name -> the E models' values stacked on a leading axis, (E, *shape).
Params = dict[str, torch.Tensor]
#: Samples per model and pass (bounds memory and keeps the activations of a pass in cache; measured best at 100-300
#: for the digits CNN on one thread, ``benchmarks/bench_training.py``).
SAMPLES_PER_PASS = 256
#: Bound on the floats of per-sample gradients held per model and pass on the general (``vmap``) path.
_PER_SAMPLE_FLOATS = 2**23


def stack_parameters(models: Sequence[nn.Module]) -> Params:
    """The parameters of ``models`` (one architecture) stacked on a leading axis (E, *shape), detached copies."""
    named = [dict(m.named_parameters()) for m in models]
    return {k: torch.stack([p[k].detach() for p in named]) for k in named[0]}


def flatten(params: Params) -> torch.Tensor:
    """(E, d): each model's parameters as one vector in the order of ``model.parameters()``."""
    return torch.cat([v.reshape(v.shape[0], -1) for v in params.values()], dim=1)


def _buffers(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in model.named_buffers()}


def _logits(model: nn.Module, params: Params, x: torch.Tensor) -> torch.Tensor:
    """(E, B, classes): every model on the shared batch ``x`` (B, *sample)."""
    buffers = _buffers(model)
    return vmap(lambda p: functional_call(model, (p, buffers), (x,)))(params)


def loss_and_accuracy(model: nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor
                      ) -> tuple[NDArray, NDArray]:
    """(mean cross-entropy (E,), accuracy (E,)) of each model on the shared data ``(x, y)``."""
    e = next(iter(params.values())).shape[0]
    loss, correct = np.zeros(e), np.zeros(e)
    with torch.no_grad():
        for xs, ys in zip(torch.split(x, SAMPLES_PER_PASS), torch.split(y, SAMPLES_PER_PASS)):
            out = _logits(model, params, xs)
            loss += nn.functional.cross_entropy(out.transpose(1, 2), ys.expand(e, -1), reduction="none"
                                                ).sum(dim=1).double().numpy()
            correct += (out.argmax(dim=2) == ys).sum(dim=1).numpy()
    return loss / len(y), correct / len(y)


def gradient_norm2(model: nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor) -> NDArray:
    """(E,): ||grad f(w_e)||^2 for each model, f the mean cross-entropy over the shared data ``(x, y)``; gradients
    of the trainable parameters only, accumulated over passes."""
    trainable = {k for k, p in model.named_parameters() if p.requires_grad}
    free = {k: v for k, v in params.items() if k in trainable}
    fixed = {k: v for k, v in params.items() if k not in trainable}
    buffers = _buffers(model)

    def loss(p: Params, q: Params, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, ({**p, **q}, buffers), (xs,))
        return nn.functional.cross_entropy(out, ys, reduction="sum") / len(y)

    total = {k: torch.zeros_like(v) for k, v in free.items()}
    for xs, ys in zip(torch.split(x, SAMPLES_PER_PASS), torch.split(y, SAMPLES_PER_PASS)):
        grads = vmap(grad(loss), in_dims=(0, 0, None, None))(free, fixed, xs, ys)
        for k, g in grads.items():
            total[k] += g
    e = next(iter(params.values())).shape[0]
    return sum((g.reshape(e, -1) ** 2).sum(dim=1) for g in total.values()).double().numpy()


# --- per-sample clipped gradient sums --------------------------------------------------------------------------------

@dataclass
class _Dense:
    """Per-sample gradients of one parameter, (E, B, p)."""

    g: torch.Tensor

    def norm2(self) -> torch.Tensor:
        return (self.g * self.g).sum(dim=2)

    def weighted_sum(self, s: torch.Tensor) -> torch.Tensor:
        return torch.bmm(s.unsqueeze(1), self.g).squeeze(1)


@dataclass
class _Outer:
    """Per-sample gradients delta_i a_i^T of a Linear weight, never formed: ||g_i||^2 = ||delta_i||^2 ||a_i||^2 and
    sum_i s_i g_i = (s delta)^T a. ``delta``: (E, B, out), ``a``: (E, B, in)."""

    delta: torch.Tensor
    a: torch.Tensor

    def norm2(self) -> torch.Tensor:
        return (self.delta * self.delta).sum(dim=2) * (self.a * self.a).sum(dim=2)

    def weighted_sum(self, s: torch.Tensor) -> torch.Tensor:
        return torch.bmm((self.delta * s.unsqueeze(2)).transpose(1, 2), self.a).reshape(s.shape[0], -1)


def _param_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, module) of the modules that own parameters, in the order of ``model.parameters()``."""
    return [(n, m) for n, m in model.named_modules() if next(m.parameters(recurse=False), None) is not None]


def _layers_supported(model: nn.Module) -> bool:
    """Whether every parameter sits in an ``nn.Linear`` or a plain ``nn.Conv2d`` (one group, zero padding given as
    numbers), all trainable: the models whose per-sample gradients :func:`_by_layers` computes."""
    return all((type(m) is nn.Linear or (type(m) is nn.Conv2d and m.groups == 1 and m.padding_mode == "zeros"
                                         and not isinstance(m.padding, str)))
               and all(p.requires_grad for p in m.parameters(recurse=False)) for _, m in _param_layers(model))


def _output_shapes(model: nn.Module, params: Params, x: torch.Tensor) -> list[torch.Size] | None:
    """Per-sample output shape of each parameter layer (one forward of one sample of the first model), or None when a
    layer runs other than once per forward (shared weights: :func:`_by_layers` does not apply)."""
    layers = [m for _, m in _param_layers(model)]
    seen: dict[int, list[torch.Size]] = {k: [] for k in range(len(layers))}
    handles = [m.register_forward_hook(lambda _m, _a, out, k=k: seen[k].append(out.shape[1:]))
               for k, m in enumerate(layers)]
    try:
        with torch.no_grad():
            functional_call(model, ({k: v[0] for k, v in params.items()}, _buffers(model)), (x[0, :1],))
    finally:
        for h in handles:
            h.remove()
    if any(len(s) != 1 for s in seen.values()):
        return None
    return [s[0] for s in seen.values()]


def _unfold(a: torch.Tensor, conv: nn.Conv2d) -> torch.Tensor:
    """im2col of ``a`` (N, C, H, W) for ``conv``: (N, C kh kw, L), by strided windows (a single copy) when there is
    no dilation, else ``nn.functional.unfold``."""
    if conv.dilation != (1, 1):
        return nn.functional.unfold(a, conv.kernel_size, dilation=conv.dilation, padding=conv.padding,
                                    stride=conv.stride)
    (kh, kw), (sh, sw), (ph, pw) = conv.kernel_size, conv.stride, conv.padding
    windows = nn.functional.pad(a, (pw, pw, ph, ph)).unfold(2, kh, sh).unfold(3, kw, sw)  # (N, C, Lh, Lw, kh, kw)
    n, c, lh, lw = windows.shape[:4]
    return windows.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, lh * lw)


def _by_layers(model: nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor, shapes: list[torch.Size]
               ) -> tuple[dict[str, _Dense | _Outer], torch.Tensor]:
    """Per-sample gradients of a model of Linear and Conv2d layers, as Opacus's hooks compute them: each layer's
    input a_i and the gradient delta_i of sum_i l_i at its output, from one forward and one backward (the output
    gradients taken at zero probes added to the outputs); Linear: g_i = delta_i a_i^T (summed over any middle axes),
    Conv2d: g_i = delta_i unfold(a_i)^T; biases: delta_i summed over positions. Returns them by parameter name, and
    the per-sample losses (E, B)."""
    layers = _param_layers(model)
    buffers = _buffers(model)
    e, b = y.shape

    def loss(probes: list[torch.Tensor], p: Params, xe: torch.Tensor, ye: torch.Tensor):
        inputs: dict[int, torch.Tensor] = {}

        def probe(k: int, _module: nn.Module, args: tuple, out: torch.Tensor) -> torch.Tensor:
            inputs[k] = args[0]
            return out + probes[k]

        handles = [m.register_forward_hook(partial(probe, k)) for k, (_, m) in enumerate(layers)]
        try:
            out = functional_call(model, (p, buffers), (xe,))
        finally:
            for h in handles:
                h.remove()
        losses = nn.functional.cross_entropy(out, ye, reduction="none")
        return losses.sum(), ([inputs[k] for k in range(len(layers))], losses)

    probes = [torch.zeros(e, b, *s) for s in shapes]
    deltas, (_, (inputs, losses)) = vmap(grad_and_value(loss, has_aux=True))(probes, params, x, y)
    terms: dict[str, _Dense | _Outer] = {}
    for (name, m), a, delta in zip(layers, inputs, deltas):
        prefix = f"{name}." if name else ""
        if isinstance(m, nn.Conv2d):
            a = _unfold(a.reshape(e * b, *a.shape[2:]), m)
            delta = delta.reshape(e * b, delta.shape[2], -1)  # (E B, out, positions)
            terms[prefix + "weight"] = _Dense(torch.bmm(delta, a.transpose(1, 2)).reshape(e, b, -1))
            if m.bias is not None:
                terms[prefix + "bias"] = _Dense(delta.sum(dim=2).reshape(e, b, -1))
        elif a.dim() == 3:  # (E, B, in): one position per sample
            terms[prefix + "weight"] = _Outer(delta, a)
            if m.bias is not None:
                terms[prefix + "bias"] = _Dense(delta)
        else:
            a, delta = a.reshape(e, b, -1, a.shape[-1]), delta.reshape(e, b, -1, delta.shape[-1])
            terms[prefix + "weight"] = _Dense(torch.einsum("ebso,ebsi->eboi", delta, a).reshape(e, b, -1))
            if m.bias is not None:
                terms[prefix + "bias"] = _Dense(delta.sum(dim=2))
    return terms, losses


def _by_vmap(model: nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor
             ) -> tuple[dict[str, _Dense | _Outer], torch.Tensor]:
    """Per-sample gradients of any model (GroupNorm, shared weights) and the per-sample losses, by ``torch.func``:
    vmap over the models of vmap over the samples of grad_and_value."""
    buffers = _buffers(model)
    e, b = y.shape

    def loss(p: Params, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        out = functional_call(model, (p, buffers), (xi.unsqueeze(0),))
        return nn.functional.cross_entropy(out, yi.unsqueeze(0))

    grads, losses = vmap(vmap(grad_and_value(loss), in_dims=(None, 0, 0)))(params, x, y)
    return {k: _Dense(g.reshape(e, b, -1)) for k, g in grads.items()}, losses


def clipped_gradient_sums(model: nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor,
                          weights: torch.Tensor, clip_norm: float | torch.Tensor, *, by_layers: bool | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum_i w_i clip(g_i, G), per-sample losses): for each of the E models, the per-sample gradients of the
    cross-entropy on its own samples, each scaled by min(1, G / ||g_i||) and by its weight w_i, summed.

    Args:
        model: the architecture (its own weights are not used).
        params: the E models' parameters (:func:`stack_parameters`).
        x: each model's samples, (E, B, *sample).
        y: their labels, (E, B).
        weights: w_i (E, B), applied after clipping; 0 for padding (samples of no model).
        clip_norm: G, one for all or one per model (E,).
        by_layers: the way to the per-sample gradients; None chooses, by measurement
            (``benchmarks/bench_training.py``): models of ``nn.Linear`` and ``nn.Conv2d`` layers (the paper's MNIST
            CNN, the digits CNN) take :func:`_by_layers` (Linear weights' per-sample gradients are never formed: their
            norms and weighted sum come from the layer's input and output gradient), any other model (CifarResNet's
            GroupNorm) ``torch.func`` (:func:`_by_vmap`).

    Returns:
        (E, d) in the order of ``model.parameters()``, and the losses l_i (E, B) (padding included: mask them).
    """
    e, b = y.shape
    names = list(params)
    d = sum(v[0].numel() for v in params.values())
    sums, losses = torch.zeros(e, d), torch.zeros(e, b)
    if b == 0:
        return sums, losses
    use_layers = _layers_supported(model) if by_layers is None else by_layers
    shapes = _output_shapes(model, params, x) if use_layers else None  # None: a layer runs twice, take torch.func
    per_pass = SAMPLES_PER_PASS if shapes is not None else max(1, min(SAMPLES_PER_PASS, _PER_SAMPLE_FLOATS // d))
    clip = torch.as_tensor(clip_norm, dtype=sums.dtype).reshape(-1, 1)
    for start in range(0, b, per_pass):
        part = slice(start, start + per_pass)
        if shapes is not None:
            terms, losses[:, part] = _by_layers(model, params, x[:, part], y[:, part], shapes)
        else:
            terms, losses[:, part] = _by_vmap(model, params, x[:, part], y[:, part])
        norm = torch.sqrt(sum(terms[k].norm2() for k in names))
        scale = torch.clamp(clip / (norm + 1e-12), max=1.0) * weights[:, part]
        sums += torch.cat([terms[k].weighted_sum(scale) for k in names], dim=1)
    return sums, losses


# --- local training (model B) ---------------------------------------------------------------------------------------

def local_steps(model: nn.Module, params: Params, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor, steps: int,
                learning_rate: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(theta_L - theta_0 (P, d), the loss at theta_0 (P,)): for each of P models (``params``, one per client and
    env), ``steps`` = L full-batch gradient steps theta <- theta - lr grad f(theta) on its own data, f the mean
    cross-entropy over its real samples. ``x``: (P, n, *sample), ``y``: (P, n), ``mask``: (P, n), False for
    padding (each model needs at least one real sample). Models go through in passes of at most
    16 :data:`SAMPLES_PER_PASS` samples."""
    if steps < 1:
        raise ValueError(f"steps must be an int >= 1 (L, local steps per round); got {steps}")
    buffers = _buffers(model)
    p_count, n = y.shape

    def loss(p: Params, xs: torch.Tensor, ys: torch.Tensor, ms: torch.Tensor) -> torch.Tensor:
        per_sample = nn.functional.cross_entropy(functional_call(model, (p, buffers), (xs,)), ys, reduction="none")
        return (per_sample * ms).sum() / ms.sum()

    step = vmap(grad_and_value(loss))
    per_pass = max(1, 16 * SAMPLES_PER_PASS // max(n, 1))
    updates, first = [], []
    for start in range(0, p_count, per_pass):
        part = slice(start, start + per_pass)
        theta = {k: v[part] for k, v in params.items()}
        xs, ys, ms = x[part], y[part], mask[part].to(x.dtype)
        current, value0 = theta, None
        for _ in range(steps):
            grads, value = step(current, xs, ys, ms)
            value0 = value if value0 is None else value0
            current = {k: v - learning_rate * grads[k] for k, v in current.items()}
        updates.append(flatten(current) - flatten(theta))
        first.append(value0)
    return torch.cat(updates), torch.cat(first)
