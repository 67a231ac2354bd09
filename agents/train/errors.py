"""The errors of :func:`agents.train.train`: each says what the caller can do about it (the command line turns them
into one line and exit code 2)."""

from __future__ import annotations


class NoCheckpointError(FileNotFoundError):
    """``train(..., resume=True)`` found no complete checkpoint to continue from."""


class RunExistsError(FileExistsError):
    """A fresh ``train`` was pointed at a folder that holds another run."""


class RunMismatchError(ValueError):
    """``train(..., resume=True)`` was asked for settings other than those the run was trained with."""


class SettingsError(ValueError):
    """A setting of :func:`~agents.train.train` that cannot run, found before the run folder is touched:
    ``argument`` names the parameter at fault (``"config"``: the config file or its entry; ``"env_overrides"``: the
    env keyword arguments), ``message`` says why."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"{argument}: {message}")
        self.argument, self.message = argument, message
