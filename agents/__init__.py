"""RL agents for otagym (stable-baselines3). Training entry points land with the RL issue; the SB3 ``VecEnv``
adapter is :class:`otagym.sb3.OTAPrivacySB3VecEnv`."""
