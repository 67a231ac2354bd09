"""Deprecated: receive scaling's batched core moved to :mod:`otagym.schemes.receive_scaling` (``Rounds`` is
:class:`~otagym.schemes.receive_scaling.ReceiveScalingCore`)."""

import warnings

from otagym.schemes.receive_scaling import OBS_BOUND, ActionType, RewardMode, Rounds

__all__ = ["Rounds", "ActionType", "RewardMode", "OBS_BOUND"]

warnings.warn("otagym.receive_scaling_env is deprecated: import from otagym.schemes.receive_scaling",
              DeprecationWarning, stacklevel=2)
