"""Anonymous OTA's constant-sigma policies (:mod:`~baselines.anonymous.policies`: the paper's setting and sigma
calibrated to a target eps) and how its tasks are scored (:mod:`~baselines.anonymous.benchmark`)."""

from otagym._exports import lazy_exports

#: Each public name by the module it lives in: imported on first use (:func:`otagym._exports.lazy_exports`).
_EXPORTS = {"policies": ("BatchEpisodes", "calibrate_sigma", "ConstantSigma", "CalibratedSigma", "PaperSetting")}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=("policies", "benchmark", "sweep"))
