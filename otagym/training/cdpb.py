"""Deprecated: model B's training fidelity moved to :mod:`otagym.training.power_balancing`; this module re-exports
its old names for one release."""

import warnings

from otagym.training.power_balancing import CDPBTraining, clip_to_norm

__all__ = ["CDPBTraining", "clip_to_norm"]

warnings.warn("otagym.training.cdpb is deprecated: import from otagym.training.power_balancing (or otagym.training)",
              DeprecationWarning, stacklevel=2)
