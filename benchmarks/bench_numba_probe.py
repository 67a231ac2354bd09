"""The measurement behind the README's choice of plain numpy for the physics (issue 12, item 2): two pieces of the
model-A round, the observation builder and the per-round RDP at alpha (the SGM curve of eq. (9)), written as
compiled numba loops and timed against the numpy core at N = 1 (the single env, which rl_zoo3, TorchRL's GymEnv and
RLlib step) and N = 4096 (the native vector env). Both kernels are checked against the core's output first.

    pip install numba && python benchmarks/bench_numba_probe.py

numba is not a dependency of otagym; this script is the only place that uses it.
"""

from __future__ import annotations

import time

import numba as nb
import numpy as np

from otagym import OTAPrivacyVectorEnv


@nb.njit(cache=True, fastmath=False)
def observation_nb(gains, mean_gain, placement, h_min2, mean_h_min2, t, big_t, nu, cost_sum, ref, class_rdp_sum, dc,
                   block, out):
    """:meth:`otagym.receive_scaling_env.Rounds.observation` as loops (float64, clipped to [-10, 10])."""
    n, m = gains.shape
    for i in range(n):
        budget = nu[i] * big_t
        left = budget - cost_sum[i]
        for j in range(m):
            out[i, j] = np.log10(gains[i, j] / mean_gain[i, j])
            out[i, m + j] = placement[i, j]
            out[i, 2 * m + 5 + j] = np.log1p(class_rdp_sum[i, dc[j]])
        out[i, 2 * m] = np.log10(h_min2[i] / mean_h_min2[i])
        out[i, 2 * m + 1] = t[i] / big_t
        out[i, 2 * m + 2] = left / budget
        out[i, 2 * m + 3] = np.log1p(max(left, 0.0) / (max(big_t - t[i], 1) * nu[i]))
        out[i, 2 * m + 4] = np.log10(nu[i]) - ref
        out[i, 3 * m + 5] = (block - t[i] % block) / block
        for j in range(3 * m + 6):
            out[i, j] = min(max(out[i, j], -10.0), 10.0)
    return out

@nb.njit(cache=True)
def rdp_curve_nb(u, log_w, tri, order, out):
    """:meth:`otagym.privacy.SGMCurve.rdp` (its linear branch: log1p of sum_k w_k expm1(tri_k u)) as loops."""
    n, c = u.shape
    for i in range(n):
        for j in range(c):
            s = 0.0
            for k in range(tri.size):
                s += np.exp(log_w[k, j]) * np.expm1(tri[k] * u[i, j])
            out[i, j] = np.log1p(s) / (order - 1)
    return out

def best(fn, reps: int = 2000) -> float:
    """Best of 5 means over ``reps`` calls, in microseconds."""
    fn()
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        ts.append((time.perf_counter() - t0) / reps)
    return min(ts) * 1e6

def main() -> None:
    for n in (1, 4096):
        env = OTAPrivacyVectorEnv(n, dp_orders=None)
        env.reset(seed=0)
        for _ in range(3):
            env.step(np.full((n, 1), 0.5, np.float32))
        r = env.rounds
        out = np.zeros((n, r.obs_dim))
        args = (r.gains, r.mean_gain, np.ascontiguousarray(r._log10_placement), r.h_min2, r.mean_h_min2, r.t,
                r.num_rounds, r.nu, r.cost_sum, r.log10_nu_ref, r.class_rdp_sum, r.model.device_class, r.block_rounds,
                out)
        ref = r.observation()
        got = observation_nb(*args).astype(np.float32)
        assert np.allclose(ref, got, atol=1e-6), np.abs(ref - got).max()
        reps = 2000 if n == 1 else 50
        t_np = best(r.observation, reps)
        t_nb = best(lambda: observation_nb(*args).astype(np.float32), reps)
        curve = r.model.curve
        u = r.model.class_inverse_noise_var(0.1 * r.model.x_max * r.h_min2)
        o2 = np.empty_like(u)
        lw = np.ascontiguousarray(curve._log_w)
        tri = np.ascontiguousarray(curve._tri)
        np.testing.assert_allclose(rdp_curve_nb(u, lw, tri, curve.order, o2), curve.rdp(u), rtol=1e-13)
        t_cnp = best(lambda: curve.rdp(u), reps)
        t_cnb = best(lambda: rdp_curve_nb(u, lw, tri, curve.order, o2), reps)
        print(f"N={n}: observation numpy {t_np:.1f} us, numba {t_nb:.1f} us ({t_np / t_nb:.1f}x); "
              f"RDP at alpha numpy {t_cnp:.1f} us, numba {t_cnb:.1f} us ({t_cnp / t_cnb:.1f}x)")


if __name__ == "__main__":
    main()
