"""Deprecated: anonymous OTA's batched core moved to :mod:`otagym.schemes.anonymous.core` as ``AnonymousCore``; this
module re-exports its old names (``AnonymousRounds`` is ``AnonymousCore``) for one release."""

import warnings

from otagym.schemes.anonymous.actions import SigmaActionType
from otagym.schemes.anonymous.core import AnonymousCore as AnonymousRounds

__all__ = ["AnonymousRounds", "SigmaActionType"]

warnings.warn("otagym.anonymous_env is deprecated: import AnonymousCore from otagym.schemes.anonymous",
              DeprecationWarning, stacklevel=2)
