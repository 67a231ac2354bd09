"""CDPB's planner and the CDPB paper's baselines (model B: Kim, Seo & Choi, *Privacy-Enhanced Over-the-Air Federated
Learning via Client-Driven Power Balancing*): the two-stage optimiser and the policies
(:mod:`~baselines.cdpb.policies`), the paper's comparison behind ``otagym compare --scheme cdpb``
(:mod:`~baselines.cdpb.compare`) and how its tasks are scored (:mod:`~baselines.cdpb.benchmark`)."""

from baselines.cdpb.compare import CDPB_TABLE_NOTES, DEFAULT_CDPB_POLICIES, compare_cdpb, format_cdpb_table, save_cdpb
from baselines.cdpb.policies import *  # noqa: F403 - the package's face is its policies
from baselines.cdpb.policies import __all__ as _policies

__all__ = [*_policies, "compare_cdpb", "format_cdpb_table", "save_cdpb", "DEFAULT_CDPB_POLICIES", "CDPB_TABLE_NOTES"]
