"""The callbacks of a run's ``learn``: atomic checkpoints at rollout boundaries (:class:`AtomicCheckpoint`), the
step and time budget (:class:`Budget`), the progress bar (:class:`ProgressBar`) and, for PPO-Lagrangian, the dual
ascent of its multiplier, in the order :func:`run_callbacks` gives them."""

from __future__ import annotations

import pickle
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

from agents.lagrangian import DualAscentCallback, LagrangianVecEnv
from agents.train.save import OFF_POLICY, RunState, checkpoint_files
from agents.train.setup import RunRequest
from otagym._io import atomic_write, write_json


class AtomicCheckpoint(BaseCallback):
    """A checkpoint every ``every`` env steps, at the first rollout boundary at or after each multiple (after the
    update of the rollout before, so that the run's state is the parameters, the env and the generators: nothing of
    a rollout in progress): the run's current segment in ``run.json`` is brought up to the steps trained, then the
    replay buffer (SAC/TD3), PPO-Lagrangian's multiplier, the run's state (:class:`~agents.train.save.RunState`) and
    the model are written, each atomically (:func:`~agents.train.checkpoint_files`). A kill between them leaves a
    record at least as far as the newest complete checkpoint (which a resume continues from, trimming the record to
    it)."""

    def __init__(self, every: int, run: Path, meta: dict[str, Any], state: RunState, start: int = 0) -> None:
        super().__init__()
        self.every, self.run, self.meta, self.state = int(every), run, meta, state
        self.next_at = (int(start) // self.every + 1) * self.every

    def _on_training_start(self) -> None:
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        steps = int(self.model.num_timesteps)
        if steps < self.next_at:
            return
        self.next_at = (steps // self.every + 1) * self.every
        files = checkpoint_files(self.run, steps)
        self.record_segment(steps)  # first: a kill while the checkpoint is written leaves a record of the steps
        if self.meta["algo"] in OFF_POLICY:
            with atomic_write(files["replay_buffer"], "wb") as fh:
                self.model.save_replay_buffer(fh)
        if self.meta["algo"] == "ppo_lagrangian":
            write_json(files["lagrange"], self.training_env.state(steps))
        try:
            state = pickle.dumps(self.state.capture(), protocol=pickle.HIGHEST_PROTOCOL)
        except (TypeError, AttributeError, pickle.PicklingError) as err:  # an env that cannot be pickled
            state = None
            warnings.warn(f"checkpoint {files['model'].name} without the run's state ({err}): a resume from it "
                          "continues on a fresh stream of channels", stacklevel=2)
        if state is not None:
            with atomic_write(files["state"], "wb") as fh:
                fh.write(state)
        with atomic_write(files["model"], "wb") as fh:
            self.model.save(fh)

    def record_segment(self, steps: int) -> None:
        """The current segment ends at ``steps`` after the wall time so far (written to ``run.json``)."""
        self.meta["segments"][-1].update(end_steps=int(steps), wall_s=time.perf_counter() - self.start)
        write_json(self.run / "run.json", self.meta)


class Budget(BaseCallback):
    """Stops ``learn`` once ``total_steps`` env steps are done (a rollout in progress is dropped, so on-policy
    algorithms end where asked, not at the next rollout boundary) or ``seconds`` of wall time have passed."""

    def __init__(self, total_steps: int, seconds: float | None = None) -> None:
        super().__init__()
        self.total_steps, self.seconds = int(total_steps), seconds

    def _on_training_start(self) -> None:
        self.deadline = None if self.seconds is None else time.perf_counter() + self.seconds

    def _on_step(self) -> bool:
        return self.model.num_timesteps < self.total_steps and (
            self.deadline is None or time.perf_counter() < self.deadline)


class ProgressBar(BaseCallback):
    """A tqdm bar on stderr that shows what bounds the run.

    Without a time budget: env steps out of ``total_steps`` (a resumed run starts at the steps already done). With one:
    seconds of wall time out of ``seconds`` (the budget; the run may also end earlier, at ``total_steps``), with the
    env steps done out of ``total_steps`` as a postfix.

    Args:
        total_steps: env steps asked for, including those of a resumed run.
        seconds: the wall-time budget in seconds, or None.
        desc: the bar's label.
    """

    def __init__(self, total_steps: int, seconds: float | None = None, desc: str = "train") -> None:
        super().__init__()
        self.total_steps = int(total_steps)
        self.seconds = seconds
        self.desc = desc
        #: The bar's total and unit: steps, or the time budget in seconds.
        self.total: float = float(seconds) if seconds is not None else self.total_steps
        self.unit = "s" if seconds is not None else "step"
        self.bar = None

    def _on_training_start(self) -> None:
        from tqdm.auto import tqdm

        if self.seconds is None:
            self.bar = tqdm(total=self.total, initial=self.model.num_timesteps, desc=self.desc, unit=self.unit,
                            unit_scale=True)
        else:
            self.start = time.perf_counter()
            self.bar = tqdm(total=self.total, desc=self.desc, unit=self.unit,
                            bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}{postfix}]")
            self._postfix()

    def _postfix(self) -> None:
        self.bar.set_postfix_str(f"{self.model.num_timesteps:,}/{self.total_steps:,} steps", refresh=False)

    def _on_step(self) -> bool:
        if self.seconds is None:
            self.bar.update(self.model.num_timesteps - self.bar.n)
        else:
            self._postfix()
            self.bar.update(min(time.perf_counter() - self.start, self.total) - self.bar.n)
        return True

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self._on_step()
            self.bar.refresh()
            self.bar.close()


def run_callbacks(request: RunRequest, checkpoint: AtomicCheckpoint, lagrangian: LagrangianVecEnv | None,
                  hp: dict[str, Any], resumed_from: tuple[Path, int] | None) -> list[BaseCallback]:
    """The run's callbacks in order: ``checkpoint``, PPO-Lagrangian's dual ascent, the progress bar (the request's
    ``progress``; a resume first says which checkpoint it continues, ``resumed_from``, on stderr) and the budget
    last."""
    run, total, max_minutes = request.run, request.total, request.max_minutes
    callbacks: list[BaseCallback] = [checkpoint]
    if lagrangian is not None:
        callbacks.append(DualAscentCallback(lagrangian, lr=float(hp.get("lagrange_lr", 0.5)),
                                            path=run / "lagrange.json", kp=float(hp.get("lagrange_kp", 0.0)),
                                            kd=float(hp.get("lagrange_kd", 0.0)),
                                            quantile=None if hp.get("lagrange_quantile") is None
                                            else float(hp["lagrange_quantile"])))
    if request.progress:  # before the budget: its clock starts first, so it reads the whole budget when the limit stops
        if request.resume:
            print(f"resuming {run} from " + (f"{resumed_from[0].name} ({resumed_from[1]:,} env steps)" if resumed_from
                                              else "its start (it has no checkpoint to continue from)"),
                  file=sys.stderr)
        callbacks.append(ProgressBar(total, None if max_minutes is None else 60.0 * max_minutes, desc=request.algo))
    callbacks.append(Budget(total, None if max_minutes is None else 60.0 * max_minutes))
    return callbacks
