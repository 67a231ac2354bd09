"""Command line: ``otagym rollout`` (a seeded rollout, per-round leakage and cost), ``otagym compare`` (analytic
policies and trained agents on the same channels, :mod:`otagym.cli.compare`), ``otagym evaluate`` (a policy on a
benchmark task's frozen evaluation set, :mod:`otagym.cli.evaluate`), ``otagym sweep`` (a grid of such
cells from a YAML file, resumable, on a process pool or Ray: :mod:`otagym.cli.sweep`) and ``otagym train`` (an RL
scheduler with stable-baselines3).

This module sits above ``otagym``, ``baselines`` and ``agents`` (it imports ``agents`` lazily, per command: it needs
the optional RL dependencies)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import os
import sys
import warnings
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple, NoReturn

import numpy as np

from otagym import __version__
from otagym.cli.argtypes import (HelpFormatter, add_torch_threads_argument, field_type, from_spec, key_value,
                                 non_negative_int, positive_int, writable_dir)
from otagym.schemes import DEFAULT_SCHEME, SCHEMES
from otagym.tasks import BENCHMARK, DEVICE_TASKS, EVALUATION_SEEDS, TASKS
from otagym.validation import Integer, Real

__all__ = [
    "COMPARED_WITH",
    "Command",
    "COMMAND_TABLE",
    "EXAMPLES",
    "HELD_OUT_SEED",
    "INTERRUPTED",
    "TRAIN_MINUTES",
    "TRAIN_MODULES",
    "TRAIN_SEED",
    "build_parser",
    "main",
    "next_steps",
]

#: The first held-out channel seed: trained agents are compared and scored on seeds from here (the benchmark's
#: evaluation set, :data:`otagym.tasks.EVALUATION_SEEDS`, starts here too).
HELD_OUT_SEED = EVALUATION_SEEDS[0]

#: The examples at the end of each help page (``otagym COMMAND --help``); every line parses
#: (tests/otagym/cli/test_friction.py).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "otagym": (
        "otagym compare                                        # the analytic policies on 16 channel realisations",
        "otagym train --task otagym/ReceiveScalingCMDP-v1 --algo budget_apg --steps 24000000 --run-dir runs/apg",
        ("otagym compare --policies OnlineOptimal BestConstant EqualAlloc PPO:runs/ppo/model.zip "
         f"--seed-start {HELD_OUT_SEED} --seeds 8"),
        "otagym evaluate otagym/ReceiveScalingCMDP-v1 agents/zoo/ReceiveScalingCMDP-v1/budget_apg/model.zip",
    ),
    "rollout": (
        "otagym rollout",
        "otagym rollout --scenario paper-cifar10 --nu 0.16 --rounds 10 --seed 3",
        "otagym rollout --scheme cdpb --rounds 5",
    ),
    "compare": (
        "otagym compare                                        # 7 policies x 3 nu x 16 seeds, about 30 s",
        "otagym compare --nu 0.04 --seeds 8 --policies OfflineOptimal AdaScale EqualAlloc",
        ("otagym compare --policies OfflineOptimal AdaScale EqualAlloc PPO:runs/ppo/model.zip "
         f"--seed-start {HELD_OUT_SEED} --seeds 8   # a trained agent on held-out channels"),
        "otagym compare --fading gauss_markov --correlation 0.9 --out results/gm09",
        "otagym compare --scheme cdpb",
    ),
    "evaluate": (
        "otagym evaluate otagym/ReceiveScalingCMDP-v1 AdaScaleTrained --seeds 8      # a quick look",
        "otagym evaluate otagym/ReceiveScalingCMDP-v1 agents/zoo/ReceiveScalingCMDP-v1/budget_ppo/model.zip",
        "otagym evaluate otagym/ReceiveScalingCMDP-v1 runs/s0/model.zip runs/s1/model.zip --seeds 100000:100128",
    ),
    "report": (
        "otagym report results/evaluate/*/budget_ppo.json",
    ),
    "sweep": (
        "otagym sweep examples/sweep_paper.yaml",
        "otagym sweep examples/sweep_paper.yaml --workers 2 --out results/pool",
    ),
    "train": (
        "otagym train --algo ppo --steps 1000000 --run-dir runs/ppo",
        "otagym train --algo ppo --run-dir runs/ppo --resume          # continue from its newest checkpoint",
        "otagym train --algo ppo --task otagym/ReceiveScalingGaussMarkov-v0 --steps 1000000 --run-dir runs/ppo-gm",
        "otagym train --algo budget_apg --task otagym/ReceiveScalingCMDPBlock-v0 --run-dir runs/apg-block",
        "otagym train --algo ppo_lagrangian --task otagym/CDPB-v1 --steps 200000 --run-dir runs/lag-cdpb",
        "otagym train --algo sac --env fading=gauss_markov correlation=0.9 --run-dir runs/sac-gm",
        "otagym train --algo ippo --task otagym/CDPB-Devices-v0 --run-dir runs/ippo   # devices as agents",
    ),
}


def _epilog(command: str) -> str:
    return "examples:\n" + "\n".join("  " + line for line in EXAMPLES[command])


class _Parser(argparse.ArgumentParser):
    """The parser of ``otagym`` and of each of its commands (argparse makes the commands' parsers of the parent's
    class): every help page shows the options' defaults (:class:`~otagym.cli.argtypes.HelpFormatter`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def _usage_error(command: str, argument: str, message: str) -> NoReturn:
    """Stop with one line naming the argument, exit code 2, as argparse does."""
    print(f"otagym {command}: error: argument {argument}: {message}", file=sys.stderr)
    raise SystemExit(2)


def _rollout(args: argparse.Namespace) -> int:
    from otagym.env import OTAPrivacyEnv

    scheme = SCHEMES[args.scheme]
    rollout, preset = scheme.rollout, args.scenario or scheme.default_preset
    overrides = {"num_rounds": args.rounds, **({} if args.nu is None else {"nu": args.nu})}
    env = OTAPrivacyEnv(scheme.get_scenario(preset, **overrides), scheme=scheme.name, **rollout.env_kwargs)
    env.reset(seed=args.seed)
    print(f"scheme={scheme.name} scenario={preset} seed={args.seed} T={args.rounds}"
          + ("" if args.nu is None else f" nu={args.nu}") + f": {rollout.about}")
    widths = [max(len(c.header), 10) for c in rollout.columns]
    print(f"{'round':>5}  {'reward':>10}  " + "  ".join(f"{c.header:>{w}}" for c, w in zip(rollout.columns, widths)))
    action = np.full(env.action_space.shape, rollout.action, dtype=env.action_space.dtype)
    for t in range(args.rounds):
        _, reward, _, _, step = env.step(action)
        values = (format(float(np.mean(step[c.key])), c.fmt) for c in rollout.columns)  # mean over devices
        print(f"{t:5d}  {float(reward) + 0.0:10.3e}  " + "  ".join(f"{v:>{w}}" for v, w in zip(values, widths)))
    print(f"the episode's privacy at delta={env.scenario.delta:g}: cumulative RDP {_per_device(step['rdp_cumulative'])}, "
          f"eps {_per_device(step['dp_epsilon'])}")
    return 0


def _per_device(value: Any) -> str:
    """A privacy number as the env reports it: one, or per device (their mean and the worst)."""
    flat = np.ravel(value)
    return f"{flat[0]:.4g}" if flat.size == 1 else f"{flat.mean():.4g} (mean over devices; worst {flat.max():.4g})"


class Command(NamedTuple):
    """One ``otagym`` command: its line of ``otagym --help`` and ``"module:function"``, the function that adds its
    parser (``function(subparsers, help)``), imported only when the command runs or its help is asked for."""

    help: str
    add_parser: str


#: Every command, in the order ``otagym --help`` lists them. ``otagym --help``, ``--version`` and an unknown command
#: import none of their modules (nor numba, scipy or torch): ``benchmarks/bench_cli.py`` times them.
COMMAND_TABLE: dict[str, Command] = {
    "rollout": Command("a seeded episode of any scheme with a constant action, printing each round",
                       "otagym.cli.commands:_add_rollout_parser"),
    "compare": Command("compare the analytic policies (table, CSV/JSON, plot)",
                       "otagym.cli.compare:add_compare_parser"),
    "evaluate": Command("score a policy on a benchmark task's frozen evaluation set (or any realisations), writing a "
                        "result file", "otagym.cli.evaluate:add_evaluate_parser"),
    "report": Command("check result files of otagym evaluate and print their headline numbers",
                      "otagym.cli.report:add_report_parser"),
    "sweep": Command("run a grid of cells declared in a YAML file (resumable; pool or Ray)",
                     "otagym.cli.sweep.command:add_sweep_parser"),
    "train": Command("train an RL scheduler (stable-baselines3, rl_zoo3-format config)",
                     "otagym.cli.commands:_add_train_parser"),
}


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``otagym`` parser, each help page ending with its :data:`EXAMPLES`: every command of
    :data:`COMMAND_TABLE` with its options (``commands`` None), or with the options of ``commands`` alone (the others
    listed, so that ``otagym --help`` shows them and a mistyped name is refused, argparse style)."""
    parser = _Parser(prog="otagym", description="Privacy in over-the-air federated learning: a Gymnasium "
                     "environment, analytic policies, RL training and benchmark tasks.",
                     epilog=_epilog("otagym") + "\nhelp on one command: otagym COMMAND --help")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMAND_TABLE.items():
        if commands is None or name in commands:
            module, function = command.add_parser.split(":")
            getattr(importlib.import_module(module), function)(sub, command.help)
        else:
            sub.add_parser(name, help=command.help)
    for name, command in sub.choices.items():
        command.epilog = _epilog(name)
        command.set_defaults(command_parser=command)
    return parser


def _add_rollout_parser(sub: argparse._SubParsersAction, help: str) -> None:
    ro = sub.add_parser("rollout", help=help, description="A seeded episode of one scheme with a constant action, "
                        "printing the reward and the scheme's quantities of each round (per-device ones as their mean "
                        "over devices), then the episode's privacy. The action: " + "; ".join(
                            f"{s.name}: {s.rollout.about}" for s in SCHEMES.values()) + ".")
    default = SCHEMES[DEFAULT_SCHEME]
    budgeted = [s.name for s in SCHEMES.values() if _has_nu(s)]
    ro.add_argument("--scheme", default=DEFAULT_SCHEME, choices=list(SCHEMES), help="the scheme")
    ro.add_argument("--scenario", default=None, choices=[p for s in SCHEMES.values() for p in sorted(s.presets)],
                    help="the scheme's preset (default: " + ", ".join(f"{s.default_preset} for {s.name}"
                                                                     for s in SCHEMES.values()) + ")")
    ro.add_argument("--rounds", type=field_type(default.scenario_type, "num_rounds"), default=20, help="rounds T")
    ro.add_argument("--nu", type=field_type(SCHEMES[budgeted[0]].scenario_type, "nu"), default=None,
                    help="convergence cost per round, on " + ", ".join(budgeted) + " (default: the scenario's)")
    ro.add_argument("--seed", type=non_negative_int, default=0, help="channel seed")
    ro.set_defaults(func=_rollout, check=_check_rollout_options)


def _has_nu(scheme: Any) -> bool:
    """Whether the scheme's scenario has a budget per round nu (``otagym rollout --nu`` sets it)."""
    return "nu" in {f.name for f in dataclasses.fields(scheme.scenario_type)}


def _check_rollout_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, argparse style, a preset of another scheme and ``--nu`` on a scheme whose scenario has no nu."""
    scheme = SCHEMES[args.scheme]
    if args.scenario is not None and args.scenario not in scheme.presets:
        parser.error(f"argument --scenario: {args.scenario!r} is not a preset of --scheme {args.scheme}; choose from "
                     f"{sorted(scheme.presets)}")
    if args.nu is not None and not _has_nu(scheme):
        parser.error(f"--scheme {args.scheme} does not use --nu")


def _command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (``otagym`` itself takes no values)."""
    return next((word for word in argv if not word.startswith("-")), None)


#: What Ctrl-C leaves of each command's work, said after "interrupted" (``otagym sweep`` and ``otagym compare``
#: keep their finished cells and say so themselves).
INTERRUPTED = {
    "train": "the run's checkpoints are kept: continue it with the same command and --resume",
    "evaluate": "nothing was written",
    "report": "nothing was written",
    "rollout": "nothing was written",
}


def main(argv: list[str] | None = None) -> int:
    """Run an ``otagym`` command; its exit code (2: a usage error, 1: a failure, 130: interrupted by Ctrl-C, which
    ends in one line saying what was kept)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command_of(argv)
    args = build_parser(() if command is None else (command,)).parse_args(argv)
    if hasattr(args, "check"):
        args.check(args.command_parser, args)
    try:
        with _warnings_in_one_line():
            return int(args.func(args))
    except (KeyboardInterrupt, Exception) as err:
        if isinstance(err, BrokenPipeError):  # the reader left (``otagym rollout | head``): stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's recipe: no error at exit
            return 1
        if _interrupted(err):
            print(f"\notagym {args.command}: interrupted; {_interrupted_note(args)}", file=sys.stderr)
            return 130
        if isinstance(err, OSError) and err.filename is not None:  # a full disk, a read-only folder: one line
            print(f"otagym {args.command}: error: {err.filename}: {err.strerror}", file=sys.stderr)
            return 1
        raise


@contextlib.contextmanager
def _warnings_in_one_line() -> Any:
    """The command's warnings one line each, ``Category: message``: Python's default adds the file and the source
    line that warned, which say nothing to a user of the command line."""
    before = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *_, **__: f"{category.__name__}: {message}\n"
    try:
        yield
    finally:
        warnings.formatwarning = before


def _interrupted_note(args: argparse.Namespace) -> str:
    """What Ctrl-C left of the command's work (:data:`INTERRUPTED`): a training keeps its checkpoints only where its
    algorithm writes them (:data:`agents.ALGOS`, the SB3 ones)."""
    if args.command == "train":
        from agents import ALGOS

        if args.algo not in ALGOS:
            return f"--algo {args.algo} keeps no checkpoints to resume: rerun it, with --overwrite where it saved a run"
    return INTERRUPTED.get(args.command, "what was written is kept")


def _interrupted(err: BaseException | None) -> bool:
    """Whether ``err`` is Ctrl-C's KeyboardInterrupt, or an error it caused: a compiled (numba) kernel interrupted
    mid-call raises SystemError ("returned a result with an exception set") from the KeyboardInterrupt, and a file
    being written when it came may fail on closing (torch's zip writer: RuntimeError "unexpected pos") while the
    KeyboardInterrupt is handled."""
    while err is not None:
        if isinstance(err, KeyboardInterrupt):
            return True
        err = err.__cause__ or err.__context__
    return False


#: ``otagym train --seed``: SB3 seeds numpy's legacy global generator with it, which takes seeds below 2**32.
TRAIN_SEED = Integer(0, 2**32 - 1)
#: ``otagym train --minutes``: up to about 19 years, so that the wall-time limit in seconds stays finite.
TRAIN_MINUTES = Real(0.0, 1e7, low_open=True)


#: The modules ``otagym train`` needs (the rl extra), checked before anything runs.
TRAIN_MODULES = ("yaml", "torch", "stable_baselines3", "sb3_contrib")


#: The extras and modules ``otagym train`` needs beside :data:`TRAIN_MODULES` to train each device algorithm.
DEVICE_TRAIN_MODULES = {"ippo": (("multiagent", ("pettingzoo", "supersuit")),),
                        "mappo": (("multiagent", ("pettingzoo",)), ("torchrl", ("torchrl",)))}


def _check_train(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, argparse style, ``otagym train`` without the extras it needs, or with a task its algorithm does not
    train on (before anything is imported or written); ``--algo`` not given is ``ppo``, or with ``--resume`` the
    run's own (:func:`_recorded_run`)."""
    from agents import ALGOS, BATCHED_ALGOS, DEVICE_ALGOS

    if args.algo is None:
        recorded = _recorded_run(args.run_dir or "runs/ppo").get("algo") if args.resume else None
        args.algo = recorded if recorded in ALGOS + BATCHED_ALGOS + DEVICE_ALGOS else "ppo"

    devices = args.algo in DEVICE_ALGOS
    for extra, modules in (("rl", TRAIN_MODULES), *DEVICE_TRAIN_MODULES.get(args.algo, ())):
        missing = [name for name in modules if importlib.util.find_spec(name) is None]
        if missing:
            parser.error(f"needs the {extra} extra (missing: {', '.join(missing)}): pip install -c constraints.txt "
                         f"-e '.[{extra}]'")
    tasks = sorted(DEVICE_TASKS) if devices else sorted(TASKS)
    if (devices or args.task is not None) and args.task not in tasks:
        what = f"--algo {args.algo} trains on a devices-as-agents task" if devices else "a benchmark task"
        parser.error(f"argument --task: {what}, one of {', '.join(tasks)}; got {args.task!r}")


def _env_overrides(items: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """``--env`` KEY=VALUE pairs as keyword arguments, each VALUE read as YAML (``0.9`` a float, ``null`` None)."""
    import yaml

    out = {}
    for key, value in items:
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            _usage_error("train", "--env", f"{key}={value}: not a YAML value ({getattr(err, 'problem', err)})")
    return out


def _resume_defaults(args: argparse.Namespace) -> dict[str, Any]:
    """``--resume``: what the command leaves out is the run's own, from its ``run.json`` (none there: as given): the
    steps it was asked for (``--steps``), its ``--seed``, ``--checkpoint-freq`` and ``--config`` (where that file is
    still there), its ``--task``, or, for a run on env arguments, those (unless ``--task`` or ``--env`` is given; the
    algorithm: :func:`_check_train`). Returns the env overrides to train with. A value given that differs from the
    run's is refused by the resume, naming it."""
    from pathlib import Path

    meta = _recorded_run(args.run_dir or f"runs/{args.algo}")
    if args.checkpoint_freq is None and isinstance(meta.get("checkpoint_freq"), int):
        args.checkpoint_freq = meta["checkpoint_freq"]
    if args.steps is None and isinstance(meta.get("total_timesteps"), int):
        args.steps = meta["total_timesteps"]
    if args.seed is None and isinstance(meta.get("seed"), int):
        args.seed = meta["seed"]
    if args.config is None and isinstance(meta.get("config"), str) and Path(meta["config"]).is_file():
        args.config = meta["config"]
    if args.task is None and not args.env:
        if meta.get("task") in TASKS:
            args.task = meta["task"]
        elif isinstance(meta.get("env_kwargs"), dict):
            return dict(meta["env_kwargs"])
    return _env_overrides(args.env)


def _recorded_run(run_dir: str) -> dict[str, Any]:
    """The ``run.json`` of the run in ``run_dir`` as a dict (empty where there is none, or it is not an object)."""
    import json
    from pathlib import Path

    try:
        meta = json.loads((Path(run_dir) / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


#: :class:`agents.train.SettingsError`'s parameters as the options of ``otagym train``.
_TRAIN_OPTIONS = {"config": "--config", "env_overrides": "--env", "task": "--task"}


def _train(args: argparse.Namespace) -> int:
    from agents import ALGOS, BATCHED_ALGOS, DEVICE_ALGOS
    from agents.train import NoCheckpointError, RunExistsError, RunMismatchError, SettingsError, train
    from agents.train.summary import training_summary

    # only the SB3 algorithms resume: the others refuse --resume, and must not be given a run's --config first
    resumed = _resume_defaults(args) if args.resume and args.algo in ALGOS else None
    args.seed = 0 if args.seed is None else args.seed
    if args.algo in BATCHED_ALGOS:
        return _train_batched(args)
    if args.algo in DEVICE_ALGOS:
        return _train_devices(args)
    env_overrides = _env_overrides(args.env) if resumed is None else resumed

    try:
        path = train(args.algo, config=args.config, run_dir=args.run_dir or f"runs/{args.algo}", seed=args.seed,
                     total_timesteps=args.steps, checkpoint_freq=args.checkpoint_freq or 100_000, resume=args.resume,
                     overwrite=args.overwrite,
                     max_minutes=args.minutes, env_overrides=env_overrides, task=args.task,
                     progress=not args.no_progress, verbose=args.verbose, torch_threads=args.torch_threads or None)
    except SettingsError as err:  # before the run folder is touched
        _usage_error("train", _TRAIN_OPTIONS.get(err.argument, err.argument), err.message)
    except (NoCheckpointError, RunExistsError, RunMismatchError) as err:  # before any work: one line, exit 2
        print(f"otagym train: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    print(training_summary(path))
    print(next_steps(args.algo, path))
    return 0


#: ``otagym train`` options the batched trainer does not take, and why.
_NOT_BATCHED = {"config": ("--config", "its hyperparameters are its module's settings (agents.budget_ppo."
                                       "BudgetPPOSettings, agents.budget_apg.BudgetAPGSettings)"),
                "env": ("--env", "it trains on a benchmark task's settings exactly (--task)"),
                "resume": ("--resume", ("it keeps no checkpoints to resume from (a run of 4M steps takes minutes): "
                                        "rerun with --overwrite")),
                "minutes": ("--minutes", "a run is a number of env steps (--steps)"),
                "checkpoint_freq": ("--checkpoint-freq", ("it plays the validation realisations every 500,000 env "
                                                          "steps and keeps the best model instead"))}


def _refuse_not_batched(args: argparse.Namespace) -> None:
    """Refuse the options of :data:`_NOT_BATCHED` that were given."""
    for name, (option, why) in _NOT_BATCHED.items():
        if getattr(args, name):
            _usage_error("train", option, f"not with --algo {args.algo}: {why}")


def _train_devices(args: argparse.Namespace) -> int:
    """``otagym train --algo ippo|mappo --task DEVICE_TASK``: the algorithm's trainer
    (:data:`agents.teams.DEVICE_TRAINERS`) on the task's training realisations from ``training_seeds[--seed]``
    on."""
    from dataclasses import replace
    from pathlib import Path

    from agents.teams import DEVICE_TRAINERS

    _refuse_not_batched(args)
    algorithm = DEVICE_TRAINERS[args.algo]()
    task, run_dir = DEVICE_TASKS[args.task], Path(args.run_dir or f"runs/{args.algo}")
    held = [run_dir / name for name in ("run.json", "model.zip", "model.pt") if (run_dir / name).exists()]
    if held and not args.overwrite:  # any run's: a run folder holds one run
        print(f"otagym train: error: {run_dir} holds a run ({', '.join(p.name for p in held)}): replace it with "
              "--overwrite, or choose another --run-dir", file=sys.stderr)
        raise SystemExit(2)
    for path in held:  # --overwrite: the run replaced is gone, whichever algorithm wrote it
        path.unlink()
    settings = algorithm.settings()
    steps = args.steps if args.steps is not None else task.train_steps
    settings = settings if steps is None else replace(settings, total_timesteps=steps)
    seed = task.training_seeds[0] + args.seed
    print(f"training {args.algo} on {args.task} for {settings.total_timesteps:,} device steps (seed {seed})")
    path = algorithm.train(args.task, seed, run_dir, settings, force=args.overwrite)
    print(f"saved {path} (score it: otagym evaluate {args.task} {path})")
    return 0


def _train_batched(args: argparse.Namespace) -> int:
    """``otagym train --algo budget_ppo|budget_apg --task TASK``: the algorithm's trainer
    (:func:`agents.batched_trainer`)."""
    from agents import batched_trainer
    from agents.budget_ppo import SPEND_TASKS
    from agents.train.summary import training_summary

    _refuse_not_batched(args)
    if args.task not in SPEND_TASKS:
        _usage_error("train", "--task", f"--algo {args.algo} trains on a spend task of the benchmark suite, one of "
                     f"{', '.join(SPEND_TASKS)}; got {args.task!r}")
    run_dir = args.run_dir or f"runs/{args.algo}"
    try:
        path = batched_trainer(args.algo)(args.task, run_dir, seed=args.seed, overwrite=args.overwrite,
                                          log=None if args.no_progress else print,
                                          torch_threads=args.torch_threads or None,
                                          **({} if args.steps is None else {"total_timesteps": args.steps}))
    except FileExistsError as err:
        print(f"otagym train: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    print(training_summary(path))
    print(next_steps(args.algo, path))
    return 0


#: The policies a trained receive-scaling agent is compared with after training (the quickstart's): the online
#: optimum, the learnability floor and the budget's even split.
COMPARED_WITH = ("OnlineOptimal", "BestConstant", "EqualAlloc")


def next_steps(algo: str, model_path: Any) -> str:
    """What ``otagym train`` prints at the end: where the model is, and the commands that compare it (receive
    scaling: with :data:`COMPARED_WITH` on held-out channels of its fading) and score it on its benchmark task."""
    from pathlib import Path

    from agents.policy import run_metadata

    env_kwargs = run_metadata(Path(model_path)).get("env_kwargs") or {}
    from otagym.cli.evaluate import task_trained_on

    task_id = task_trained_on(model_path)
    from baselines.comparison import scheme_comparisons

    lines = [f"saved {model_path}"]
    command = scheme_comparisons().get(env_kwargs.get("scheme", DEFAULT_SCHEME))
    if command is not None and command.policies is None and task_id not in BENCHMARK:
        # a comparison that plays trained models (NAME:PATH) scores budget-mode episodes; a constrained task's
        # episodes are scored by evaluate (feasible score)
        channel = "".join(f" --{key.replace('_', '-')} {env_kwargs[key]}"
                          for key in ("fading", "correlation", "coherence_rounds") if env_kwargs.get(key) is not None)
        lines += ["compare it with the analytic policies on held-out channels:",
                  f"  otagym compare --policies {' '.join(COMPARED_WITH)} {algo.upper()}:{model_path} "
                  f"--seed-start {HELD_OUT_SEED} --seeds 8{channel} --out results/{Path(model_path).parent.name}"]
    if task_id is not None:
        seeds = TASKS[task_id].eval_seeds
        lines += [f"score it on its benchmark task (the evaluation set is seeds {seeds[0]}-{seeds[-1]}):",
                  f"  otagym evaluate {task_id} {model_path}"]
    return "\n".join(lines)


def _add_train_parser(sub: argparse._SubParsersAction, help: str) -> None:
    from agents import ALGOS, BATCHED_ALGOS, DEVICE_ALGOS

    p = sub.add_parser("train", help=help, description="Train an RL scheduler with stable-baselines3 on the native "
                       "vector env (needs the rl extra). The run folder gets model.zip, run.json, checkpoints/, "
                       "monitor.csv and tb/.")
    p.add_argument("--algo", default=None, choices=ALGOS + BATCHED_ALGOS + DEVICE_ALGOS,
                   help="algorithm (budget_ppo: PPO batched over the native vector env with the action relative to "
                   "the budget left, on a spend task of the benchmark suite: --task; budget_apg: the pathwise policy "
                   "gradient through the episode's rounds, the same action and tasks; ippo: PPO with one network "
                   "shared by the devices of a devices-as-agents task: --task, the multiagent extra; mappo: its "
                   "shared actor with a centralised critic, TorchRL's recipe: the torchrl extra too; default ppo, or "
                   "with --resume the run's own)")
    p.add_argument("--config", default=None, help="rl_zoo3-format YAML (default: agents/configs/<algo>.yml)")
    p.add_argument("--run-dir", type=writable_dir, default=None, help="output folder (default: runs/<algo>): "
                   "model.zip (mappo: model.pt), run.json; ppo, sac, td3, trpo and ppo_lagrangian also checkpoints/, "
                   "monitor.csv, tb/ (TensorBoard)")
    p.add_argument("--seed", type=from_spec(TRAIN_SEED), default=None,
                   help="seeds the env's generator and the learner (default 0, or with --resume the run's own)")
    p.add_argument("--steps", type=positive_int, default=None,
                   help="total env steps (default: the config's n_timesteps, or with --resume the run's own); "
                   "budget_ppo, budget_apg and mappo round it up to whole batches of steps")
    p.add_argument("--minutes", type=from_spec(TRAIN_MINUTES), default=None,
                   help="also stop after this many minutes of wall time (the progress bar then counts seconds of "
                   "it); a run of --steps is the same on every machine, a run of minutes is not")
    p.add_argument("--checkpoint-freq", type=positive_int, default=None,
                   help="env steps between checkpoints (each at the first rollout boundary at or after a multiple; "
                   "default 100,000)")
    ownership = p.add_mutually_exclusive_group()
    ownership.add_argument("--resume", action="store_true",
                   help="continue the run in --run-dir from its newest complete checkpoint, with the run's own "
                   "algorithm, seed, env settings and hyperparameters (an error if there is none or they differ)")
    ownership.add_argument("--overwrite", action="store_true",
                   help="replace the run in --run-dir (without it, a fresh run refuses a folder that holds one)")
    env = p.add_mutually_exclusive_group()
    env.add_argument("--task", default=None, metavar="TASK_ID",
                     help="train on a benchmark task's env settings exactly, with the config's entry of the task if "
                     "it has one, else its default entry (one of: " + ", ".join(sorted(TASKS)) + "); with --algo "
                     "ippo or mappo, a devices-as-agents task (" + ", ".join(sorted(DEVICE_TASKS)) + ")")
    env.add_argument("--env", nargs="*", type=key_value, default=[], metavar="KEY=VALUE",
                     help="env keyword arguments over the config's env_kwargs, e.g. fading=gauss_markov "
                     "correlation=0.9 (values are YAML)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--verbose", type=int, choices=(0, 1, 2), default=0, help="stable-baselines3's verbosity")
    add_torch_threads_argument(p, "train")
    p.set_defaults(func=_train, check=_check_train)


if __name__ == "__main__":
    sys.exit(main())
