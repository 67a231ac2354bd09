"""Deprecated: :mod:`baselines.receive_scaling.evaluation` (a scheme's baselines are one package); this path goes in the
next release."""

import warnings

from baselines.receive_scaling.evaluation import *  # noqa: F403
from baselines.receive_scaling.evaluation import __all__  # noqa: F401

warnings.warn("baselines.evaluation is deprecated; import from baselines.receive_scaling.evaluation",
              DeprecationWarning, stacklevel=2)

# its old name, beside otagym.tasks.normalized_score (a task's score of returns)
normalized_score = leakage_score  # noqa: F405
