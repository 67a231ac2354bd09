"""CDPB's planner and the CDPB paper's baselines (model B: Kim, Seo & Choi, *Privacy-Enhanced Over-the-Air Federated
Learning via Client-Driven Power Balancing*): the two-stage optimiser and the policies
(:mod:`~baselines.cdpb.policies`), the paper's comparison behind ``otagym compare --scheme cdpb``
(:mod:`~baselines.cdpb.compare`) and how its tasks are scored (:mod:`~baselines.cdpb.benchmark`)."""

from otagym._exports import lazy_exports

#: Each public name by the module it lives in: imported on first use (:func:`otagym._exports.lazy_exports`).
_EXPORTS = {
    "policies": ("CDPBPlan", "StageOne", "rho_gamma_lemma1", "rho_theorem3", "minimize_weighted", "stage_one",
                 "two_stage", "CDPB", "StageTwo", "largest_private_rho", "GammaBased", "MaxRho", "HminBased", "ISBased",
                 "NoiseFree", "CDPB_POLICIES"),
    "compare": ("compare_cdpb", "format_cdpb_table", "save_cdpb", "DEFAULT_CDPB_POLICIES", "CDPB_TABLE_NOTES"),
}

__all__ = [name for names in _EXPORTS.values() for name in names]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, submodules=("policies", "compare", "benchmark", "devices", "sweep", "command"))
