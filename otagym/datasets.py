"""The datasets of the training fidelity, by name: torch-free, so that both the env's argument specs
(:mod:`otagym.fidelity`) and the training engine that builds their models (:mod:`otagym.training.federation`) import
them without importing each other."""

from __future__ import annotations

__all__ = ["DATASET_NAMES"]

#: Datasets of the training fidelity (their models: :data:`otagym.training.federation.DATASETS`).
DATASET_NAMES = ("digits", "mnist", "cifar10")
