"""``OTAPrivacyEnv`` and its natively vectorised twin ``OTAPrivacyVectorEnv``: the scheme-agnostic shells. One step is
one federated-learning round.

Both classes are thin shells around a scheme's batched core (:func:`make_core`), which holds N episodes as numpy
arrays and steps them with the scheme's pure functions; the single env is the core with N = 1, so the physics exists
once. The default scheme is model A (:class:`otagym.schemes.receive_scaling.core.ReceiveScalingCore`: channel
inversion + receive scaling, AdaScale paper §IV-V); :class:`OTAPrivacyEnv` points to each scheme's page.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from numpy.typing import NDArray

from otagym._moved import deprecation, renamed
from otagym.schemes import DEFAULT_SCHEME, Core, Scheme, get_scheme
from otagym.validation import Integer, OfType, Real, check_args, real_array

__all__ = ["AUTORESET_MODES", "OTAPrivacyEnv", "OTAPrivacyVectorEnv", "Scheme", "make_core", "warn_if_not_the_task"]


def make_core(scheme: Scheme, scenario: Any, num_envs: int, kwargs: dict[str, Any]) -> Core:
    """The batched core of ``scheme`` (looked up in :data:`otagym.schemes.SCHEMES`) with env keyword arguments (the
    core's ``ARGS``) split from scenario overrides.

    ``scenario=None`` picks the scheme's default preset (``paper-mnist``, ``paper-cdpb``, ``paper-anonymous``, ...).
    """
    info = get_scheme(scheme)
    env_kwargs = {k: v for k, v in kwargs.items() if k in info.env_args}
    overrides = {k: v for k, v in kwargs.items() if k not in info.env_args}
    return info.core(info.scenario(scenario, **overrides), num_envs, **env_kwargs)


#: Keyword arguments of ``gym.make`` / ``gym.make_vec`` that say how an env runs, not which env it is.
_RUN_ARGUMENTS = frozenset({"render_mode", "num_envs", "vectorization_mode", "vector_kwargs", "wrappers",
                            "autoreset_mode"})


def _same(a: Any, b: Any) -> bool:
    """Whether two settings are the same value (a list and a tuple of equal entries are)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays and such
        return False


def warn_if_not_the_task(spec: Any, rounds: int | None = None, time_limit: bool = True) -> None:
    """Warn (``UserWarning``) when a benchmark task's id (:data:`otagym.tasks.TASKS`) was made with keyword
    arguments that change its settings: ``gym.make("otagym/ReceiveScalingIID-v0", num_rounds=100)`` makes another
    env under the task's id, whose scores the task's reference scores do not describe. The warning names each such
    setting and the task's value; where the episode's length (``rounds``, None: not said) is not the task's, it names
    the task's cost limit (the limit of its own length) and, for longer episodes of a single env (``time_limit``),
    its time limit, which ``gym.make`` applies after the env is made (a ``TimeLimit`` the env cannot see:
    ``num_rounds=1000`` on a task of 500 rounds is cut at 500 unless ``gym.make`` was given
    ``max_episode_steps=1000``; the vector env takes the limit itself and refuses a shorter one). ``spec``: the
    ``EnvSpec`` Gymnasium gives the made env (its kwargs: the task's updated with the caller's)."""
    from otagym.tasks import TASKS

    task = TASKS.get(getattr(spec, "id", None))
    if task is None:
        return
    fixed = {**task.kwargs, "cost_limit": task.cost_limit, "max_episode_steps": task.max_episode_steps}
    missing, kept = object(), _RUN_ARGUMENTS | get_scheme(task.scheme).action_args
    changed = [f"{k}={v!r} (the task's: {'its default' if fixed.get(k, missing) is missing else repr(fixed[k])})"
               for k, v in (spec.kwargs or {}).items() if k not in kept and not _same(v, fixed.get(k, missing))]
    notes = []
    if rounds is not None and rounds != task.max_episode_steps and _same((spec.kwargs or {}).get("cost_limit"),
                                                                          task.cost_limit):
        notes.append(f" Its cost_limit is still the task's {task.cost_limit!r}, the limit of {task.max_episode_steps} "
                     f"rounds: give cost_limit for episodes of {rounds}.")
    if time_limit and rounds is not None and rounds > task.max_episode_steps:
        notes.append(f" Its time limit is the task's, which ends every episode at round {task.max_episode_steps} of "
                     f"{rounds}, unless gym.make was given max_episode_steps={rounds}.")
    if changed:
        warnings.warn(f"{task.id} made with {', '.join(changed)} is no longer that task: its scores are not comparable "
                      "with the task's reference scores; make otagym/OTAPrivacy-v0 for other settings."
                      + "".join(notes), UserWarning, stacklevel=4)


class _OldCoreName:
    """``rounds``, the shells' first name for their :attr:`core`: deprecated (:mod:`otagym._moved`)."""

    core: Core

    @property
    def rounds(self) -> Core:
        warnings.warn(deprecation(f"{type(self).__name__}.rounds", f"{type(self).__name__}.core"), DeprecationWarning,
                      stacklevel=2)
        return self.core


class _TaskSpec:
    """The ``spec`` that ``gym.make`` / ``gym.make_vec`` set on the env they make, checked as it is set
    (:func:`warn_if_not_the_task`)."""

    _spec: Any = None

    @property
    def spec(self) -> Any:
        return self._spec

    @spec.setter
    def spec(self, value: Any) -> None:
        self._spec = value
        warn_if_not_the_task(value, int(self.core.num_rounds), time_limit=not isinstance(self, VectorEnv))


def _env_config_arguments(scenario: Any, render_mode: str | None, scheme: Any,
                          kwargs: dict[str, Any]) -> tuple[Any, str | None, Any, dict[str, Any]]:
    """:class:`OTAPrivacyEnv`'s arguments with a Mapping passed as ``scenario`` read as its keyword arguments.

    RLlib builds an env class as ``cls(env_config)`` (its ``EnvContext``, a dict): so a Mapping in ``scenario`` (the
    first positional argument) holds keyword arguments, ``"scenario"`` (optional: a preset name, a Scenario or None),
    ``"scheme"``, ``"render_mode"`` and any other the env takes. Keyword arguments given beside it are merged with it;
    a name given both ways is a TypeError (``scheme="receive_scaling"`` and ``render_mode=None``, the defaults, count
    as not given). Anything else is returned as it is.
    """
    if not isinstance(scenario, Mapping):
        return scenario, render_mode, scheme, kwargs
    config = dict(scenario)
    not_names = [k for k in config if not isinstance(k, str)]
    if not_names:
        raise TypeError(f"an env config mapping passed as scenario must have keyword-argument names as keys; got "
                        f"{not_names!r}")
    given = dict(kwargs)
    if render_mode is not None:
        given["render_mode"] = render_mode
    if not (isinstance(scheme, str) and scheme == DEFAULT_SCHEME):
        given["scheme"] = scheme
    both = sorted(set(config) & set(given))
    if both:
        raise TypeError(f"{', '.join(both)} given both in the env config mapping passed as scenario and as keyword "
                        f"argument(s): give each once")
    config.update(given)
    inner = config.pop("scenario", None)
    if isinstance(inner, Mapping):
        raise TypeError(f"scenario in an env config mapping must be a preset name, a Scenario or None; got a mapping "
                        f"({inner!r}): put its keys in the outer mapping")
    return inner, config.pop("render_mode", None), config.pop("scheme", DEFAULT_SCHEME), config


def _reset_options(core: Core, options: Mapping[str, Any] | None, single: bool) -> dict[str, Any]:
    """``reset``'s ``options`` (a dict or None) as the core's keyword arguments. The single env checks each option
    against the core's shapes less the batch axis (so that a message names the shape the single env accepts) and
    inserts that axis."""
    allowed = sorted(core.OPTION_AXES)
    OfType((Mapping, type(None)), f"a dict of reset options (keys among {allowed}) or None")("options", options)
    opts = dict(options or {})
    unknown = set(opts) - set(core.OPTION_AXES)
    if unknown:
        raise ValueError(f"unknown reset option(s) {sorted(unknown)}; allowed: {allowed}")
    if single:
        shapes = core.option_shapes()
        opts = {k: _single_option(k, v, shapes[k], core.OPTION_AXES[k]) for k, v in opts.items()}
    return opts


def _single_option(name: str, value: Any, shapes: tuple[tuple[int, ...], ...], axis: int) -> NDArray:
    """A single env's reset option, checked against the core's ``shapes`` (N = 1) without the batch ``axis`` (a
    shape without that axis is taken as it is: ``nu``'s ()), as a float array with the axis inserted."""
    unbatched = tuple(dict.fromkeys(s[:axis] + s[axis + 1:] if len(s) > axis else s for s in shapes))
    return np.expand_dims(real_array(f"reset option {name}", value, unbatched), axis)


class _EpisodeCost:
    """The cost of each env's episode so far, and at an episode's end ``info["episode_cost"]`` (the sum of its
    core's ``info["cost"]``) and ``info["cost_limit"]`` (the env argument ``cost_limit``; by default T, the limit
    every task's cost has: a mean cost of at most 1 per round), Safety-Gymnasium's return-cost-limit convention, in
    both shells; nothing where the scheme reports no cost."""

    #: The info keys an episode's last step adds (masked by ``terminated`` in the vector env).
    KEYS = ("episode_cost", "cost_limit")

    #: ``cost_limit``, the env argument: the episode limit of the summed cost, None for the default (T).
    SPEC = Real(0.0, low_open=True, optional=True)

    def __init__(self, core: Core, limit: float | None = None) -> None:
        if "cost" not in core.reset_info():
            if limit is not None:
                raise ValueError(f"cost_limit must be None: these settings report no info['cost']; got {limit!r}")
        else:
            limit = float(core.num_rounds) if limit is None else limit
        self.limit = limit
        self.total = np.zeros(core.num_envs)
        #: Every info key that only an episode's last step has: the core's ``EPISODE_END_KEYS`` and these.
        self.end_keys = tuple(core.EPISODE_END_KEYS) + (self.KEYS if self.limit is not None else ())

    def reset(self) -> None:
        self.total[:] = 0.0

    def add(self, info: dict[str, Any], terminated: NDArray) -> None:
        if self.limit is None:
            return
        if self.total.size == 1:  # the single env in scalars: a ufunc here took 5 us of its 25 us step (bench_env.py)
            self.total[0] += info["cost"][0]
            ended = bool(terminated[0])
        else:
            np.add(self.total, info["cost"], self.total)
            ended = np.count_nonzero(terminated) > 0
        if ended:
            info["episode_cost"] = self.total.copy()
            info["cost_limit"] = np.full(self.total.shape, self.limit)
            self.total[terminated] = 0.0


class OTAPrivacyEnv(_OldCoreName, _TaskSpec, gym.Env[NDArray[np.float32], NDArray]):
    """One over-the-air federated-learning deployment of any registered scheme: each step is one FL round.

The env is a shell: the scheme's batched core (:data:`otagym.schemes.SCHEMES`, built by :func:`make_core` with
N = 1) holds the episode and defines the observation, the action, the reward, ``info`` and the ``reset`` options.
Each scheme's page says what they are:

* ``scheme="receive_scaling"`` (default): receive scaling, model A of the AdaScale paper (the server picks its
  receive scaling each round under a convergence budget): ``docs/environment/receive-scaling.md``
  (the site's "Receive scaling (model A)" page) and :class:`otagym.schemes.receive_scaling.core.ReceiveScalingCore`.
* ``scheme="cdpb"``: client-driven power balancing, model B: ``docs/environment/cdpb.md`` and
  :class:`otagym.schemes.cdpb.core.CDPBCore`.
* ``scheme="anonymous"``: anonymous over-the-air computation, model C: ``docs/environment/anonymous.md`` and
  :class:`otagym.schemes.anonymous.core.AnonymousCore`.

``reset``'s info has the keys of a step's (same dtypes and shapes; the last step's episode-end keys, the core's
``EPISODE_END_KEYS`` and the episode's cost, :attr:`episode_end_keys`, aside): ``round`` = -1 and 0 for the other
per-round entries (nothing played yet), the episode's constants and the next round's channel where the scheme
reports them. So a client that reads the key set once (TorchRL) keeps it across autoresets. Episodes terminate after
the scenario's ``num_rounds`` rounds (the FL run ends). Where the scheme reports a cost, the last step's info has the
episode's summed ``cost`` (``episode_cost``) and its limit (``cost_limit``, T: :attr:`cost_limit`), as
Safety-Gymnasium reports cost beside return.

Args:
    scenario: a preset name of the scheme (:attr:`otagym.schemes.SchemeInfo.presets`; None: its default preset) or
        its Scenario. A Mapping here (or as the only positional argument) holds keyword arguments, as RLlib passes
        its ``env_config``: ``OTAPrivacyEnv({"scenario": "paper-cifar10", "num_rounds": 20})``, with optional
        ``"scenario"``, ``"scheme"`` and ``"render_mode"`` keys; keyword arguments beside it are merged, a name given
        both ways is a TypeError.
    render_mode: ``None``, ``"ansi"`` (a text line per round) or ``"rgb_array"`` (the action and the mean cumulative
        RDP over the episode so far, as an image).
    scheme: a name in :data:`otagym.schemes.SCHEMES` (default :data:`otagym.schemes.DEFAULT_SCHEME`).
    cost_limit: (keyword) the episode limit of the summed ``info["cost"]`` that the last step reports (a finite
        number > 0; None: T, every task's); only where the scheme's settings report a cost.
    **kwargs: the scheme's env arguments (its core's ``ARGS``, documented by the core) and any field of its
        Scenario (e.g. ``num_rounds=100``); anything else is a TypeError.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, scenario: Any = None, render_mode: str | None = None, *, scheme: Scheme = DEFAULT_SCHEME,
                 **kwargs: Any):
        scenario, render_mode, scheme, kwargs = _env_config_arguments(scenario, render_mode, scheme, kwargs)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}; got {render_mode!r}")
        self.render_mode = render_mode
        self.scheme = scheme
        info = get_scheme(scheme)
        #: What a round's render records, the scheme's scalar info entries
        #: (:attr:`~otagym.schemes.SchemeInfo.info_keys`), and which of them the image plots (``action_key``).
        self._render_keys, self._action_key = info.info_keys, info.action_key
        limit = check_args({"cost_limit": _EpisodeCost.SPEC}, cost_limit=kwargs.pop("cost_limit", None))["cost_limit"]
        self.core = make_core(scheme, scenario, 1, kwargs)
        self.scenario = self.core.scenario
        self.model = getattr(self.core, "model", None)
        self.observation_space = self.core.observation_space()
        self.action_space = self.core.action_space()
        self._history: list[dict[str, float]] = []
        self._episode_cost = _EpisodeCost(self.core, limit)

    @property
    def cost_limit(self) -> float | None:
        """The episode limit of the summed ``info["cost"]``: the ``cost_limit`` argument, by default T rounds (a mean
        cost of at most 1 per round), as every task's :attr:`otagym.tasks.Task.cost_limit` (which its spec's kwargs
        register); None where the scheme's settings report no cost. The last step's info holds it beside
        ``episode_cost``."""
        return self._episode_cost.limit

    @property
    def episode_end_keys(self) -> tuple[str, ...]:
        """The info keys only an episode's last step has (the core's ``EPISODE_END_KEYS``, and ``episode_cost`` and
        ``cost_limit`` where the scheme reports a cost); ``reset``'s info has every other key of a step's."""
        return self._episode_cost.end_keys

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.core.reset(self.np_random, **_reset_options(self.core, options, single=True))
        self._episode_cost.reset()
        self._history = []
        return self.core.observation()[0], {k: v[0] for k, v in self.core.reset_info().items()}

    def step(self, action: NDArray):
        if self.core.fading is None:
            raise RuntimeError("call reset() before step()")
        if self.core.t[0] >= self.core.num_rounds:
            raise RuntimeError("episode is over (T rounds played): call reset()")
        reward, terminated, info = self.core.step(self.np_random, action)
        self._episode_cost.add(info, terminated)
        info.update(self.core.next_channel_info())
        obs = self.core.observation()[0]
        info = {k: v[0] for k, v in info.items()}
        if self.render_mode is not None:
            self._history.append({"round": int(info["round"]), "reward": float(reward[0]),
                                  "rdp": float(np.mean(info["rdp_cumulative"])),
                                  **{k: float(info[k]) for k in self._render_keys if k in info}})
        return obs, float(reward[0]), bool(terminated[0]), False, info

    def render(self) -> str | NDArray[np.uint8] | None:
        """``ansi``: the last round as text; ``rgb_array``: the episode so far as an (H, W, 3) uint8 image."""
        if self.render_mode is None:
            return None
        if self.render_mode == "ansi":
            if not self._history:
                return "(no round played yet)"
            h = self._history[-1]
            return "  ".join(f"{k}={v:.4g}" for k, v in h.items())
        return _render_history(self._history, self.scenario, self._action_key)


def _render_history(history: list[dict[str, float]], scenario: Any, key: str) -> NDArray[np.uint8]:
    """The episode so far as an RGB image (matplotlib, Agg): the round's decision (the info entry ``key``) and the
    mean cumulative RDP per round."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.4), dpi=80)
    t = [h["round"] for h in history]
    axes[0].plot(t, [h.get(key, np.nan) for h in history])
    axes[0].set(title=key, xlabel="round", yscale="log")
    axes[1].plot(t, [h["rdp"] for h in history])
    axes[1].set(title="mean cumulative RDP", xlabel="round")
    for ax in axes:
        ax.set_xlim(0, scenario.num_rounds)
    fig.tight_layout()
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    plt.close(fig)
    return image


#: The autoreset modes of :class:`OTAPrivacyVectorEnv` (``DISABLED`` is not offered: every episode ends after T rounds).
AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)


def _autoreset_mode(value: Any) -> AutoresetMode:
    """``autoreset_mode`` as an :class:`AutoresetMode` (a member or its value, as ``SyncVectorEnv`` takes it)."""
    allowed = (" or ".join(f"AutoresetMode.{m.name}" for m in AUTORESET_MODES) + " (or "
               + " or ".join(repr(m.value) for m in AUTORESET_MODES) + ")")
    if not isinstance(value, (AutoresetMode, str)):
        raise TypeError(f"autoreset_mode must be {allowed}; got {value!r}")
    mode = value if isinstance(value, AutoresetMode) else {m.value: m for m in AutoresetMode}.get(value)
    if mode not in AUTORESET_MODES:
        raise ValueError(f"autoreset_mode must be {allowed}; got {value!r}")
    return mode


class OTAPrivacyVectorEnv(_OldCoreName, _TaskSpec, VectorEnv):
    """Natively vectorised :class:`OTAPrivacyEnv`: N episodes stepped as numpy arrays by the same batched core.

    ``autoreset_mode`` (Gymnasium's :class:`~gymnasium.vector.AutoresetMode`, or its value ``"NextStep"`` /
    ``"SameStep"``) says what happens after an episode ends, as in ``SyncVectorEnv``:

    * ``NEXT_STEP`` (default, Gymnasium's own): the ending step returns the episode's last observation and info; the
      next ``step`` starts a new episode in those envs and ignores their actions, returning its first observation,
      reward 0, ``terminated``/``truncated`` False and the ``reset`` info. Every Gymnasium vector wrapper supports it
      (``RecordEpisodeStatistics`` of gymnasium 1.2 counts episodes right only under it; the observation wrappers,
      ``NormalizeObservation`` and ``FlattenObservation`` among them, accept no other).
    * ``SAME_STEP``: the ending step returns the first observation of the next episode, and ``info["final_obs"]`` /
      ``info["final_info"]`` (masked by ``"_final_obs"`` / ``"_final_info"``) hold the last observation and the info
      of the ending step. TorchRL's ``GymWrapper`` accepts only this mode; SB3's adapter
      (:class:`otagym.wrappers.sb3.OTAPrivacySB3VecEnv`) uses it.

    Both modes play the same episodes (same seed and actions: the same trajectories, shifted by the reset step). Every
    episode lasts T rounds and ``reset`` starts all envs, so all envs end their episodes on the same step. Every step
    info entry is an array over envs with an all-True ``"_key"`` mask, except the episode-end keys (the core's
    ``EPISODE_END_KEYS`` and the episode's cost: :attr:`episode_end_keys`), masked by ``terminated``.
    ``reset(options=...)`` accepts ``distances_m`` (N, M), ``channel_gains`` (T, N, M) and ``nu`` (N,) or a scalar.
    ``max_episode_steps`` is what ``gym.make_vec`` passes from a registered id's spec (as to ``CartPoleVectorEnv``):
    an episode ends after its T rounds (``num_rounds`` sets T), so it must be at least T (no effect) or None.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}  # the default; instances: their own

    def __init__(self, num_envs: int = 8, scenario: Any = None, render_mode: str | None = None, *,
                 scheme: Scheme = DEFAULT_SCHEME, max_episode_steps: int | None = None,
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, **kwargs: Any):
        if render_mode is not None:
            raise ValueError(f"render_mode must be None (no rendering); got {render_mode!r}")
        mode = _autoreset_mode(autoreset_mode)
        self.scheme = scheme
        limit = check_args({"cost_limit": _EpisodeCost.SPEC}, cost_limit=kwargs.pop("cost_limit", None))["cost_limit"]
        self.core = make_core(scheme, scenario, num_envs, kwargs)
        # an episode ends after its num_rounds: a limit at or above them has no effect, one below is refused
        check_args({"max_episode_steps": Integer(self.core.num_rounds, optional=True)},
                   max_episode_steps=max_episode_steps)
        self.scenario = self.core.scenario
        self.model = getattr(self.core, "model", None)
        self.num_envs = self.core.num_envs
        self.single_observation_space = self.core.observation_space()
        self.single_action_space = self.core.action_space()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._all = np.ones(self.num_envs, dtype=bool)
        # as SyncVectorEnv: Gymnasium's vector wrappers read the metadata, TorchRL's GymWrapper the attribute
        self.autoreset_mode = mode
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self._autoreset = np.zeros(self.num_envs, dtype=bool)  # NEXT_STEP: envs whose episode ended on the last step
        self._episode_cost = _EpisodeCost(self.core, limit)

    @property
    def cost_limit(self) -> float | None:
        """The episode limit of each env's summed ``info["cost"]`` (:attr:`OTAPrivacyEnv.cost_limit`)."""
        return self._episode_cost.limit

    @property
    def episode_end_keys(self) -> tuple[str, ...]:
        """The info keys only an episode's last step has, masked by ``terminated``
        (:attr:`OTAPrivacyEnv.episode_end_keys`)."""
        return self._episode_cost.end_keys

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict[str, Any] | None = None):
        """Reset every env. ``seed``: an int, or one int per env as Gymnasium's vector envs take; one generator drives
        all envs, so a sequence seeds it with all of them (``numpy.random.SeedSequence(seeds)``): the same sequence
        gives the same trajectories, but env i is not the single env seeded ``seeds[i]``."""
        if seed is not None and not np.isscalar(seed):
            seeds = list(seed)
            if len(seeds) != self.num_envs or not all(isinstance(v, (int, np.integer)) and v >= 0 for v in seeds):
                raise ValueError(f"seed must be an int >= 0 or a sequence of num_envs={self.num_envs} ints >= 0; "
                                 f"got {seed!r}")
            super().reset()
            self._np_random = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(v) for v in seeds])))
            self._np_random_seed = int(seeds[0])
        else:
            super().reset(seed=seed)
        self.core.reset(self.np_random, **_reset_options(self.core, options, single=False))
        self._episode_cost.reset()
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        info = self.core.reset_info()
        info.update({f"_{k}": self._all for k in list(info)})
        return self.core.observation(), info

    def step(self, actions: NDArray):
        if self.core.fading is None:
            raise RuntimeError("call reset() before step()")
        if self._autoreset.any():  # NEXT_STEP, the step after episodes ended: start new ones, ignore the actions
            return self._autoreset_step()
        reward, terminated, info = self.core.step(self.np_random, actions)
        self._episode_cost.add(info, terminated)
        masks = {f"_{k}": (terminated if k in self.episode_end_keys else self._all) for k in info}
        if terminated.any() and self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._autoreset = terminated.copy()
        elif terminated.any():
            final_obs = self.core.observation()
            final_info = dict(info, **masks)
            self.core.reset(self.np_random, terminated)
            info["final_obs"], masks["_final_obs"] = final_obs, terminated
            info["final_info"], masks["_final_info"] = final_info, terminated
        # the channel the next actions apply to: under SAME_STEP after the autoreset; under NEXT_STEP at an episode's
        # end, the channel after its last round (the next actions are ignored), as the single env reports it
        nxt = self.core.next_channel_info()
        info.update(nxt)
        masks.update({f"_{k}": self._all for k in nxt})
        info.update(masks)
        return self.core.observation(), reward, terminated, np.zeros(self.num_envs, dtype=bool), info

    def _autoreset_step(self):
        """NEXT_STEP's reset step: new episodes where the last step ended one (the same ``core.reset`` call, with the
        same draws, as SAME_STEP makes within the ending step), first observations, reward 0, not done, the reset
        info masked by the reset envs. Every episode lasts T rounds and ``reset`` starts all envs, so the envs that
        ended are all of them: no env has a round to play on this step."""
        mask, self._autoreset = self._autoreset, np.zeros(self.num_envs, dtype=bool)
        if not mask.all():  # unreachable while episodes share T; stepping the others would need a core step on a subset
            raise RuntimeError(f"autoreset of only some envs ({np.flatnonzero(mask).tolist()}) is not supported")
        self.core.reset(self.np_random, mask)
        info = self.core.reset_info()
        info.update({f"_{k}": mask for k in list(info)})
        false = np.zeros(self.num_envs, dtype=bool)
        return self.core.observation(), np.zeros(self.num_envs), false, false.copy(), info


def __getattr__(name: str) -> Any:
    return renamed(__name__, name)
