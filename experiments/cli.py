"""Command line: ``otagym rollout`` (a seeded rollout, per-round leakage and cost), ``otagym compare`` (analytic
policies and trained agents on the same channels, :mod:`experiments.compare`), ``otagym evaluate`` (a policy on a
benchmark task's frozen evaluation set, :mod:`experiments.evaluate`), ``otagym sweep`` (a grid of such
cells from a YAML file, resumable, on a process pool or Ray: :mod:`experiments.sweep`) and ``otagym train`` (an RL
scheduler with stable-baselines3).

This module sits above ``otagym``, ``baselines`` and ``agents`` (it imports ``agents`` lazily, per command: it needs
the optional RL dependencies)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

import numpy as np

from experiments.argtypes import _ranged, positive_float, positive_int
from experiments.compare import add_compare_parser
from experiments.evaluate import add_evaluate_parser
from experiments.sweep import add_sweep_parser
from otagym.env import OTAPrivacyEnv
from otagym.schemes import SCHEMES


def _rollout(args: argparse.Namespace) -> int:
    env = OTAPrivacyEnv(args.scenario, num_rounds=args.rounds, nu=args.nu, action_type="x")
    _, info = env.reset(seed=args.seed)
    print(f"scenario={args.scenario} seed={args.seed} T={args.rounds} nu={args.nu}: EqualAlloc-style x_t "
          "(c_t = nu every round)")
    print(f"{'round':>5} {'h_min^2':>10} {'x/x_max':>8} {'sigma_1':>8} {'RDP round':>10} {'RDP cum':>9} {'c_t':>8}")
    for t in range(args.rounds):
        x = env.model.x_for_cost(env.scenario.nu, info["next_h_min2"])
        _, _, _, _, step = env.step(np.array([x]))
        print(f"{t:5d} {step['h_min2']:10.3e} {step['x'] / env.model.x_max:8.4f} {step['noise_multiplier'][0]:8.3f} "
              f"{step['rdp_round'].mean():10.3e} {step['rdp_cumulative'].mean():9.4f} {step['convergence_cost']:8.4f}")
        info = step
    print(f"mean RDP per device at alpha={env.scenario.rdp_order}: {step['rdp_cumulative'].mean():.4f}; "
          f"eps at delta={env.scenario.delta:g}: {step['dp_epsilon'].mean():.4f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="otagym", description="Privacy in over-the-air federated learning.")
    sub = parser.add_subparsers(dest="command", required=True)
    ro = sub.add_parser("rollout", help="seeded rollout printing leakage and cost per round")
    model_a = SCHEMES["receive_scaling"]
    ro.add_argument("--scenario", default=model_a.default_preset, choices=sorted(model_a.presets))
    ro.add_argument("--rounds", type=positive_int, default=20)
    ro.add_argument("--nu", type=positive_float, default=0.04)
    ro.add_argument("--seed", type=int, default=0)
    ro.set_defaults(func=_rollout)
    add_compare_parser(sub)
    add_evaluate_parser(sub)
    add_sweep_parser(sub)
    _add_train_parser(sub)
    args = parser.parse_args(argv)
    if hasattr(args, "check"):
        args.check(sub.choices[args.command], args)
    try:
        return int(args.func(args))
    except OSError as err:  # a full disk, a read-only folder: one line naming the file; what was written is kept
        if err.filename is None:
            raise
        print(f"otagym {args.command}: error: {err.filename}: {err.strerror}", file=sys.stderr)
        return 1


def _parse_env_overrides(items: Sequence[str]) -> dict[str, Any]:
    import yaml

    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--env takes KEY=VALUE (YAML value), e.g. fading=gauss_markov; got {item!r}")
        key, value = item.split("=", 1)
        out[key] = yaml.safe_load(value)
    return out


#: An integer >= 0 (``--torch-threads``: 0 leaves torch's default).
_non_negative_int = _ranged(int, lambda v: v >= 0, "an integer >= 0")


def _train(args: argparse.Namespace) -> int:
    from agents.train import NoCheckpointError, RunExistsError, RunMismatchError, train

    try:
        path = train(args.algo, config=args.config, run_dir=args.run_dir or f"runs/{args.algo}", seed=args.seed,
                     total_timesteps=args.steps, checkpoint_freq=args.checkpoint_freq, resume=args.resume,
                     overwrite=args.overwrite,
                     max_minutes=args.minutes, env_overrides=_parse_env_overrides(args.env),
                     progress=not args.no_progress, verbose=args.verbose, torch_threads=args.torch_threads or None)
    except (NoCheckpointError, RunExistsError, RunMismatchError) as err:  # before any work: one line, exit 2
        print(f"otagym train: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"saved {path}; compare it with the analytic policies on held-out channels:\n"
          f"  otagym compare --policies OfflineOptimal AdaScale EqualAlloc {args.algo.upper()}:{path} "
          "--seed-start 10000 --seeds 8\n"
          f"or score it on a benchmark task (its evaluation set is seeds 10000-10031):\n"
          f"  otagym evaluate otagym/ReceiveScalingIID-v0 {path}")
    return 0


def _add_train_parser(sub: argparse._SubParsersAction) -> None:
    from agents import ALGOS

    p = sub.add_parser("train", help="train an RL scheduler (stable-baselines3, rl_zoo3-format config)")
    p.add_argument("--algo", default="ppo", choices=ALGOS)
    p.add_argument("--config", default=None, help="rl_zoo3-format YAML (default: agents/configs/<algo>.yml)")
    p.add_argument("--run-dir", default=None, help="output folder (default runs/<algo>): model.zip, run.json, "
                   "checkpoints/, monitor.csv, tb/ (TensorBoard)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=positive_int, default=None,
                   help="total env steps (default: the config's n_timesteps)")
    p.add_argument("--minutes", type=positive_float, default=None,
                   help="stop after this many minutes of wall time (the progress bar then counts seconds of it)")
    p.add_argument("--checkpoint-freq", type=positive_int, default=100_000, help="env steps between checkpoints")
    ownership = p.add_mutually_exclusive_group()
    ownership.add_argument("--resume", action="store_true",
                   help="continue the run in --run-dir from its newest complete checkpoint, with the run's own "
                   "algorithm, seed, env settings and hyperparameters (an error if there is none or they differ)")
    ownership.add_argument("--overwrite", action="store_true",
                   help="replace the run in --run-dir (without it, a fresh run refuses a folder that holds one)")
    p.add_argument("--env", nargs="*", default=[], metavar="KEY=VALUE",
                   help="env keyword arguments over the config's env_kwargs, e.g. fading=gauss_markov correlation=0.9")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--verbose", type=int, default=0)
    p.add_argument("--torch-threads", type=_non_negative_int, default=1, metavar="N",
                   help="torch's thread count (default 1: the small MLP policies usually train fastest on one; "
                   "0 leaves torch's default)")
    p.set_defaults(func=_train)


if __name__ == "__main__":
    sys.exit(main())
