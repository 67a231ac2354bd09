"""Deprecated: CDPB's batched core moved to :mod:`otagym.schemes.cdpb.core` as ``CDPBCore``; this module re-exports
its old names (``CDPBRounds`` is ``CDPBCore``) for one release."""

import warnings

from otagym.schemes.cdpb.actions import RhoActionType
from otagym.schemes.cdpb.core import CDPBCore as CDPBRounds

__all__ = ["CDPBRounds", "RhoActionType"]

warnings.warn("otagym.cdpb_env is deprecated: import CDPBCore from otagym.schemes.cdpb", DeprecationWarning,
              stacklevel=2)
