"""otagym: a Gymnasium environment for privacy in over-the-air federated learning.

Importing ``otagym`` registers ``otagym/OTAPrivacy-v0`` (entry point :class:`otagym.env.OTAPrivacyEnv`, vector entry
point :class:`otagym.env.OTAPrivacyVectorEnv`; every scheme and setting through keyword arguments) and the benchmark
tasks of :data:`otagym.tasks.TASKS` (versioned ids with fixed settings); registering is idempotent. In a process
that has not imported otagym (RLlib's remote env runners, subprocess workers), give an id as ``"otagym:<id>"``
(``gym.make("otagym:otagym/OTAPrivacy-v0")``): Gymnasium imports the module before the look-up. Gymnasium 1.x loads
no plugin entry points (the ``gymnasium.envs`` group was dropped in 1.0), so that is the way to reach the ids there.
"""

from gymnasium.envs.registration import register, registry

from otagym import _moved
from otagym.schemes.anonymous import ANONYMOUS_PRESETS, AnonymousScenario, get_anonymous_scenario
from otagym.schemes.cdpb import CDPB_PRESETS, CDPBScenario, get_cdpb_scenario
from otagym.env import OTAPrivacyEnv, OTAPrivacyVectorEnv
from otagym.schemes.receive_scaling import PRESETS, Scenario, get_scenario
from otagym.tasks import TASKS, register_tasks

__all__ = ["OTAPrivacyEnv", "OTAPrivacyVectorEnv", "Scenario", "PRESETS", "get_scenario", "ENV_ID", "CDPBScenario",
           "CDPB_PRESETS", "get_cdpb_scenario", "AnonymousScenario", "ANONYMOUS_PRESETS", "get_anonymous_scenario",
           "TASKS"]
__version__ = "0.1.0"

ENV_ID = "otagym/OTAPrivacy-v0"

if ENV_ID not in registry:
    register(
        id=ENV_ID,
        entry_point="otagym.env:OTAPrivacyEnv",
        vector_entry_point="otagym.env:OTAPrivacyVectorEnv",
    )
register_tasks()
_moved.install()  # the earlier layout's module paths, until otagym._moved.REMOVED_IN
