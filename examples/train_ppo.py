"""Train PPO on otagym (budget mode, one policy for every nu) and compare it with AdaScale and EqualAlloc on held-out
channel realisations. One million env steps (runs of 1.7M steps took three minutes on 2 cores); `otagym train` /
`otagym compare` do the same from the shell.

    python examples/train_ppo.py [--steps 1000000] [--run-dir runs/example-ppo]
"""

from __future__ import annotations

import argparse

from agents.policy import AgentPolicy, load_model
from agents.train import latest_checkpoint, train
from baselines.receive_scaling.compare import POLICIES, PolicySpec, compare, format_table
from otagym import get_scenario


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps of the run")
    parser.add_argument("--run-dir", default="runs/example-ppo")
    args = parser.parse_args()
    resume = latest_checkpoint(args.run_dir) is not None  # rerun: continue; else (re)start the example's own run
    path = train("ppo", run_dir=args.run_dir, seed=0, total_timesteps=args.steps, resume=resume,
                 overwrite=not resume)
    model = load_model(path)
    policies = {name: POLICIES[name] for name in ("AdaScale", "EqualAlloc")}
    policies["PPO"] = PolicySpec(lambda nu, p: AgentPolicy(model, nu=nu))
    rows = compare("paper-mnist", (0.01, 0.04, 0.16), tuple(range(10_000, 10_004)), policies)
    print(format_table(rows, get_scenario("paper-mnist")))


if __name__ == "__main__":
    main()
