"""Command line: ``otagym rollout`` (a seeded rollout, per-round leakage and cost) and ``otagym compare``."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from otagym.env import OTAPrivacyEnv
from otagym.scenario import PRESETS


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
    ro.add_argument("--scenario", default="paper-mnist", choices=sorted(PRESETS))
    ro.add_argument("--rounds", type=int, default=20)
    ro.add_argument("--nu", type=float, default=0.04)
    ro.add_argument("--seed", type=int, default=0)
    ro.set_defaults(func=_rollout)
    from baselines.compare import add_compare_parser  # baselines ships in the same distribution

    add_compare_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
