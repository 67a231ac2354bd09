"""Reproduce Fig. 1 of the anonymous over-the-air paper (seed 002): eps after T iterations at delta = 1e-5.

Setting of §V: Delta f = sigma = 1 (noise multiplier sigma' = 1), p q in {1, 0.5, 0.1, 0.01}, RDP accounting over
Opacus's orders (1.1 ... 63, "alpha values from 1 to 64") converted by Lemma 2, and for p q = 1 the advanced
composition theorem ('act'). Also drawn: the device-level bound for p = q = 0.1
(otagym.schemes.anonymous.formulas.round_rdp, accounting="device"), which does not rely on the independent sampling of
Corollary 1.

Run from the repository root: ``python examples/anonymous_fig1.py`` (writes results/anonymous_fig1.png, outside the
tracked files: the documentation's copy is made with ``--out docs/anonymous_fig1.png``; prints the numbers that
docs/anonymous.md quotes).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from otagym._io import save_figure
from otagym.schemes.anonymous import (advanced_composition_curve, composed_epsilon, device_level_rdp,
                                      rdp_to_dp_lemma2)
from otagym.accounting import OPACUS_ORDERS, rdp_sgm

RATES = (1.0, 0.5, 0.1, 0.01)
DELTA = 1e-5
TABLE_ROUNDS = (1, 10, 100, 200, 500, 1000)


def curves(rounds: np.ndarray) -> dict[str, np.ndarray]:
    """eps(T) of every curve of the figure (and of the tighter eq. (6) conversion, for the table)."""
    orders = np.asarray(OPACUS_ORDERS)
    out = {f"pq={r:g}": composed_epsilon(rounds, r, 1.0, delta=DELTA, orders=orders) for r in RATES}
    out.update({f"pq={r:g} eq.(6)": composed_epsilon(rounds, r, 1.0, delta=DELTA, orders=orders, lemma2=False)
                for r in RATES})
    out["act (pq=1)"] = advanced_composition_curve(rounds, DELTA)
    per_round = device_level_rdp(0.1, rdp_sgm(q=0.1, noise_multiplier=1.0, orders=orders), orders)
    out["device-level p=q=0.1"] = rdp_to_dp_lemma2(rounds[:, None] * per_round, orders, DELTA)[0]
    return out


def plot(rounds: np.ndarray, eps: dict[str, np.ndarray], path: Path) -> None:
    """The figure, written atomically (:func:`otagym._io.save_figure`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.0, 4.2))
    for r in RATES:
        ax.plot(rounds, eps[f"pq={r:g}"], label=f"RDP, p·q = {r:g}")
    ax.plot(rounds, eps["act (pq=1)"], "k--", label="act (advanced composition), p·q = 1")
    ax.plot(rounds, eps["device-level p=q=0.1"], ":", color="C3", label="device-level bound, p = q = 0.1")
    ax.set(xlabel="iterations T", ylabel="ε (δ = 1e-5)", yscale="log", xlim=(1, rounds[-1]),
           title="Fig. 1 reproduced: Δf = σ = 1")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("results/anonymous_fig1.png"), help="the figure to write")
    parser.add_argument("--rounds", type=int, default=1000, help="last iteration of the figure")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    rounds = np.arange(1, args.rounds + 1)
    eps = curves(rounds)
    plot(rounds, eps, args.out)
    shown = [t for t in TABLE_ROUNDS if t <= args.rounds]
    print("eps at delta = 1e-5 after T iterations (Lemma 2 conversion unless marked eq.(6))")
    print(f"{'curve':>24} " + " ".join(f"{'T=' + str(t):>10}" for t in shown))
    for name, values in eps.items():
        print(f"{name:>24} " + " ".join(f"{values[t - 1]:10.4g}" for t in shown))
    for r in (1.0, 0.5):
        above = np.flatnonzero(eps[f"pq={r:g}"] > 100)
        print(f"pq={r:g}: eps > 100 from T = {rounds[above[0]] if above.size else 'never'}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
