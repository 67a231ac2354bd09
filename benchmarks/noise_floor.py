"""Why the AdaScale paper's nu range costs no accuracy on Fashion-MNIST (docs/results.md, "Accuracy under privacy on
Fashion-MNIST"), measured on the accuracy experiment's deployment, seeds and reduction
(:mod:`benchmarks.accuracy_under_privacy`: ``paper-mnist``, T = 200, evaluations on 2,000 samples):

* **The noise.** EqualAlloc (c_t = nu every round) on the experiment's channel realisations, analytically: each
  round's noise multiplier is sigma_t = (M B / C) sqrt((nu + p_t) / (2 d)) (eq. (25) with c_t of (28b)), where
  p_t = d sigma_n^2 / (h_min,t^2 x_max) is the power limit's term in units of nu; the receiver noise's variance per
  coordinate, sigma_n^2 / (2 eta_t) (13), is (C / (M B))^2 sigma_t^2. The table gives the time-averages of p_t and
  sigma_t and the noise energy against nu = 0.01's.
* **The accuracy.** EqualAlloc trained at nu = 0.01 and 0.16 (the sweep), with and without the paper's weight decay
  of 1e-4 (``training_options``), and a noise-free arm: the same env, model initialisation and batches (each round's
  batches come from the engine's own generator, which the receiver noise's draws advance alike), with the receiver
  noise's power set to 0 in the update. Final test accuracy, mean and 95% CI over the seeds.

    python -m benchmarks.noise_floor --docs                       # docs/noise_floor.md (about 15 min on one core)
    python -m benchmarks.noise_floor --rounds 20 --seeds 1 --out /tmp/nf   # a quick look
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from baselines.report import ci95
from baselines.receive_scaling.evaluation import sample_realisations, training_scenario
from baselines.receive_scaling.policies import EqualAlloc
from benchmarks.accuracy_under_privacy import DOCS, run_sweeps
from otagym import OTAPrivacyVectorEnv, get_scenario
from otagym._io import write_json, write_text

STEM = "noise_floor"
#: The paper's budgets, and one far above them where the noise costs accuracy (docs/results.md).
NUS = (0.01, 0.04, 0.16, 40.96)
TRAINED_NUS = (0.01, 0.16)
#: The AdaScale paper's weight decay (§VII-A, MNIST: "SGD with a weight decay of 1e-4").
PAPER_WEIGHT_DECAY = 1e-4


def noise_rows(scenario: Any, seeds: list[int]) -> list[dict[str, Any]]:
    """Per nu of :data:`NUS`: EqualAlloc's time-average power term p_t (units of nu), noise multiplier sigma_t (mean
    over devices), and noise energy (mean sigma_t^2) over nu = 0.01's, on ``seeds``' realisations."""
    rows, base = [], None
    real = sample_realisations(scenario, seeds)
    for nu in NUS:
        env = OTAPrivacyVectorEnv(len(seeds), scenario, reward_mode="cmdp", action_type="x", dp_orders=None)
        policy = EqualAlloc(nu=np.full(len(seeds), nu))
        policy.reset(scenario, seeds[0], channel_gains=real.channel_gains)
        obs, info = env.reset(seed=seeds[0], options={"distances_m": real.distances_m,
                                                       "channel_gains": real.channel_gains,
                                                       "nu": np.full(len(seeds), nu)})
        sigma = []
        for _ in range(scenario.num_rounds):
            obs, _, _, _, info = env.step(np.broadcast_to(policy.act(obs, info), (len(seeds),))[:, None])
            sigma.append(info["noise_multiplier"].mean(axis=1))
        sigma = np.array(sigma)  # (T, seeds)
        scale = scenario.clip_norm / (scenario.num_devices * float(np.mean(scenario.batch_size)))
        power = 2.0 * scenario.model_dim * (scale * sigma) ** 2 - nu  # p_t, from sigma_t and c_t = nu
        energy = float(np.mean(sigma**2))
        base = base or energy
        rows.append({"nu": nu, "power_term": float(power.mean()), "sigma": float(sigma.mean()),
                     "energy_ratio": energy / base})
    return rows


def noise_free_accuracy(scenario: Any, seed: int, args: argparse.Namespace, weight_decay: float) -> float:
    """Final test accuracy of model A's training on the sweep's cell of ``seed`` (its env, realisation, model
    initialisation and batches) with the receiver noise's power 0 in every round's update."""
    real = sample_realisations(scenario, [seed])
    env = OTAPrivacyVectorEnv(1, scenario, reward_mode="cmdp", action_type="x", dp_orders=None, fidelity="train",
                              dataset=args.dataset, eval_samples=args.eval_samples, eval_gradient=False,
                              weight_decay=weight_decay)
    env.reset(seed=seed, options={"distances_m": real.distances_m, "channel_gains": real.channel_gains})
    training = env.core.training
    engine, rng = training.engines[0], training.rngs[0]
    for _ in range(scenario.num_rounds):
        engine.round(rng, receive_scaling=1.0, noise_power_w=0.0)
    return engine.evaluate()[1]


def accuracy_rows(args: argparse.Namespace, out: Path) -> tuple[list[dict[str, Any]], int]:
    """Per arm (EqualAlloc at each nu of :data:`TRAINED_NUS`, noise-free; each without and with weight decay): the
    final test accuracy over the seeds; and how many sweep cells were computed now."""
    seeds = list(range(args.seeds))
    base = {"scheme": "receive_scaling", "scenarios": ["paper-mnist"], "rounds": args.rounds, "fidelity": "train",
            "dataset": args.dataset, "eval_samples": args.eval_samples, "policies": ["EqualAlloc"],
            "nu": list(TRAINED_NUS), "seeds": seeds}
    cells, computed = run_sweeps([{"name": "noisy", **base},
                                  {"name": "weight_decay", **base,
                                   "training_options": {"weight_decay": PAPER_WEIGHT_DECAY}}], out, None)
    scenario = training_scenario(get_scenario("paper-mnist", num_rounds=args.rounds), args.dataset, None,
                                 {"eval_samples": args.eval_samples})
    rows = []
    for name, decay in (("noisy", 0.0), ("weight_decay", PAPER_WEIGHT_DECAY)):
        for nu in TRAINED_NUS:
            rows.append(_row(f"EqualAlloc, ν = {nu:g}", decay, [c["accuracy"] for c in cells[name] if c["nu"] == nu]))
        rows.append(_row("noise-free", decay, [noise_free_accuracy(scenario, s, args, decay) for s in seeds]))
    return rows, computed


def _row(arm: str, weight_decay: float, values: Sequence[float]) -> dict[str, Any]:
    mean, half = ci95(np.asarray(values, dtype=float))
    return {"arm": arm, "weight_decay": weight_decay, "mean": mean, "ci95": half, "seeds": [float(v) for v in values]}


def markdown(result: dict[str, Any]) -> str:
    s = result["settings"]
    lines = [
        "# The noise floor of the accuracy experiment",
        "",
        f"Written by `python -m benchmarks.{STEM} --docs`. [The papers, reproduced]"
        "(results.md#accuracy-under-privacy-on-fashion-mnist) explains what these numbers mean.",
        "",
        f"`paper-mnist` on {s['dataset']}, T = {s['rounds']} rounds, seeds 0..{s['seeds'] - 1}, evaluations on "
        f"{s['eval_samples']:,} samples (the accuracy experiment's reduction). This run: "
        f"{result['wall_s'] / 60:.1f} min.",
        "",
        "## The noise EqualAlloc adds (c_t = ν every round)",
        "",
        "| ν | power limit's term p̄ (units of ν) | noise multiplier σ̄ | noise energy / ν = 0.01's |",
        "|---|---|---|---|",
        *(f"| {r['nu']:g} | {r['power_term']:.3f} | {r['sigma']:.3f} | {r['energy_ratio']:.2f} |"
          for r in result["noise"]),
        "",
        "## Final test accuracy (mean ± 95% CI over seeds; the seeds' values)",
        "",
        "| arm | weight decay | test accuracy | per seed |",
        "|---|---|---|---|",
        *(f"| {r['arm']} | {r['weight_decay']:g} | {r['mean']:.3f} ± {r['ci95']:.3f} | "
          + ", ".join(f"{v:.3f}" for v in r["seeds"]) + " |" for r in result["accuracy"]),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{STEM}", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=200, help="T (the accuracy experiment's: 200)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    p.add_argument("--eval-samples", type=int, default=2000, help="samples of each evaluation")
    p.add_argument("--dataset", choices=("fashion-mnist",), default="fashion-mnist")
    p.add_argument("--out", type=Path, default=Path("results") / STEM, help="sweeps, records and outputs")
    p.add_argument("--docs", action="store_true", help=f"write {STEM}.md/.json to docs/ instead of --out")
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    scenario = get_scenario("paper-mnist", num_rounds=args.rounds)
    noise = noise_rows(scenario, list(range(args.seeds)))
    try:
        accuracy, computed = accuracy_rows(args, args.out)
    except RuntimeError as err:
        print(err)
        return 1
    result = {"settings": {k: v for k, v in vars(args).items() if k not in ("out", "docs")}, "noise": noise,
              "accuracy": accuracy, "computed": computed, "wall_s": time.perf_counter() - start}
    target = DOCS if args.docs else args.out
    write_text(target / f"{STEM}.md", markdown(result))
    write_json(target / f"{STEM}.json", result)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
