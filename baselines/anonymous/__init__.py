"""Anonymous OTA's constant-sigma policies (:mod:`~baselines.anonymous.policies`: the paper's setting and sigma
calibrated to a target eps) and how its tasks are scored (:mod:`~baselines.anonymous.benchmark`)."""

from baselines.anonymous.policies import *  # noqa: F403 - the package's face is its policies
from baselines.anonymous.policies import __all__

__all__ = list(__all__)
