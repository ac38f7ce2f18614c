"""Long runs at equal cost: energy error of DQVI, SO3xR3Variational, RKMK4 and generalized-alpha.

    python benchmarks/long_run.py [--steps 1000000] [--quick] [--repeats 5] [--plot benchmarks/long_run.png]

Problems (float64): the torque-free body of Holzinger, Gerstmayr & Schöberl (``torque_free()``:
intermediate-axis flip, |Omega| = 100 rad/s; here with ``r0 = (0.5, -1, 2)``,
``v0 = (0.3, -0.2, 0.1)`` so that the world momenta are not trivial) and the heavy top of
Holzinger, Arnold & Gerstmayr 2024 (``heavy_top()``, pinned, |Omega| = 150 rad/s;
generalized-alpha, which needs the pivot as a constraint, runs ``heavy_top_spherical()``, the
same top on a spherical joint). Generalized-alpha uses its default ``rho_inf = 0.9``.

Equal cost: each method's time per step is measured on a compiled ``fori_loop`` of its ``step``
(``CAL_STEPS`` steps, warm, ``block_until_ready``, the methods alternating, median of
``--repeats``); the same through ``jax.jit`` of ``simulate(..., checkpoint=False)`` (the user's
path, with its per-step bookkeeping) is reported beside it. The most expensive method takes
``--steps`` steps of ``H_REF = 1e-3`` (h |Omega| = 0.1 and 0.15, inside DQVI's existence limit
h |Omega| < 1); every other method takes ``h_m = H_REF t_m / t_max`` over the same simulated time
``T = steps * H_REF``, so all spend the same CPU time per simulated second (and at least
``--steps`` steps). Newton costs depend on ``h``,
so the times are measured at ``H_REF``, again at the steps so chosen, and the steps recomputed;
the table reports a third measurement at the final steps. Each method then runs to ``T`` in a
compiled nested scan that keeps, for each of ``N_SAVE`` blocks, the largest ``|E/E0 - 1|`` over
every step and the world momenta at the block's end (``difflie.diagnostics`` on the observed
states); its wall time per step (energy evaluated at every step) is a check on the equal cost.
Growth: the largest error in the last 10 % of the run over that in the first 10 % (about 1:
bounded; about 10: growing linearly from zero; about 3: a random walk).
"""

from __future__ import annotations

import argparse
import platform
import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402
import numpy as np  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from difflie import diagnostics  # noqa: E402
from difflie.models import heavy_top, heavy_top_spherical, torque_free  # noqa: E402
from difflie.simulate import simulate  # noqa: E402
from difflie.solvers import RKMK4  # noqa: E402
from difflie.results import RESULTS  # noqa: E402
from difflie.solvers.generalized_alpha import GeneralizedAlpha  # noqa: E402
from difflie.solvers.variational import DQVI, SO3xR3Variational  # noqa: E402

H_REF, N_SAVE, CAL_STEPS = 1e-3, 2000, 4000
METHODS = {
    "DQVI": DQVI(),
    "SO3xR3Variational": SO3xR3Variational(),
    "RKMK4": RKMK4(),
    "GeneralizedAlpha": GeneralizedAlpha(),
}


def problems() -> dict[str, dict]:
    """Problem name -> {method name: model}."""
    free = torque_free(r0=(0.5, -1.0, 2.0), v0=(0.3, -0.2, 0.1))
    top = {**dict.fromkeys(METHODS, heavy_top()), "GeneralizedAlpha": heavy_top_spherical()}
    return {"torque-free body": dict.fromkeys(METHODS, free), "heavy top": top}


# -- cost ------------------------------------------------------------------------------------------


def step_runners(model, solver):
    """``(bare, through_simulate)``: ``run(h)`` of ``CAL_STEPS`` steps of ``h``, compiled once
    (``h`` traced), as a ``fori_loop`` of ``solver.step`` and through ``simulate``."""

    def bare(h):
        def body(k, c):
            y, _, st, _, _ = solver.step(model, k * h, (k + 1) * h, *c)
            return y, st

        return jax.lax.fori_loop(0, CAL_STEPS, body, solver.init(model, 0.0, h))

    def through_simulate(h):
        return simulate(model, solver, 0.0, CAL_STEPS * h, h, n_steps=CAL_STEPS, checkpoint=False).ts

    return tuple((lambda h, f=jax.jit(f): jax.block_until_ready(f(h))) for f in (bare, through_simulate))


def time_per_step(runs, repeats) -> dict:
    """Seconds per step of each ``runs[key] = (run, h)``, the runs alternating."""
    for run, h in runs.values():
        run(h)  # compile and warm up
    times = {key: [] for key in runs}
    for _ in range(repeats):
        for key, (run, h) in runs.items():
            t = time.perf_counter()
            run(h)
            times[key].append((time.perf_counter() - t) / CAL_STEPS)
    return {key: np.asarray(t) for key, t in times.items()}


def equal_cost_steps(times, T) -> dict[str, tuple[float, int]]:
    """``(h, n)`` per method: the costliest takes ``H_REF``, the others ``H_REF t_m / t_max``,
    rounded to a whole number of ``N_SAVE`` blocks over ``T``."""
    med = {name: np.median(t) for name, t in times.items()}
    t_max = max(med.values())
    out = {}
    for name, t in med.items():
        n = N_SAVE * max(1, round(T * t_max / (H_REF * t) / N_SAVE))
        out[name] = (T / n, n)
    return out


# -- long run --------------------------------------------------------------------------------------


def long_run(model, solver, h, n):
    """``n`` steps of ``h`` from 0 in ``N_SAVE`` blocks: the largest ``|E/E0 - 1|`` of every block
    (over each step), world ``(p, L)`` at the block ends and at 0, whether every step converged;
    and the run's wall time (compiled beforehand)."""
    every = n // N_SAVE

    def observed(y):
        return jax.tree.map(lambda x: x[None], solver.observe(model, y))

    def energy(y):
        return diagnostics.energy(model, observed(y))[0]

    def momenta(y):
        s = observed(y)
        return jnp.concatenate([diagnostics.linear_momentum(model, s)[0], diagnostics.angular_momentum(model, s)[0]])

    @jax.jit
    def run(h):
        y0, st0 = solver.init(model, 0.0, h)
        E0 = energy(y0)

        def step(c, k):
            y, st, peak, ok = c
            y, _, st, _, res = solver.step(model, k * h, (k + 1) * h, y, st)
            return (y, st, jnp.maximum(peak, jnp.abs(energy(y) / E0 - 1)), ok & (res == RESULTS.successful)), None

        def block(c, i):
            y, st, ok = c
            (y, st, peak, ok), _ = jax.lax.scan(step, (y, st, jnp.zeros_like(E0), ok), i * every + jnp.arange(every))
            return (y, st, ok), (peak, momenta(y))

        (_, _, ok), (peak, P) = jax.lax.scan(block, (y0, st0, jnp.array(True)), jnp.arange(N_SAVE))
        return peak, P, momenta(y0), ok

    compiled = run.lower(h).compile()
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(h))
    return [np.asarray(x) for x in out], time.perf_counter() - start


def summarise(peak, P, P0) -> dict[str, float]:
    """Largest energy error overall, in the first and last 10 %; relative momentum deviations."""

    def rel(part):
        return np.max(np.linalg.norm(P[:, part] - P0[part], axis=1)) / np.linalg.norm(P0[part])

    tenth = N_SAVE // 10
    early, late = peak[:tenth].max(), peak[-tenth:].max()
    return dict(max=peak.max(), early=early, late=late, growth=late / early, p=rel(slice(0, 3)), L=rel(slice(3, 6)))


# -- main ------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000, help="steps of the costliest method")
    parser.add_argument("--quick", action="store_true", help="10^4 steps (a check)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--plot", default="benchmarks/long_run.png")
    args = parser.parse_args()
    steps = 10_000 if args.quick else args.steps
    T = steps * H_REF
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, {platform.processor() or platform.machine()}")
    print(f"T = {T:g} s, {steps} steps of h = {H_REF:g} for the costliest method")

    rows, curves = [], {}
    for prob, models in problems().items():
        runners = {name: step_runners(models[name], s) for name, s in METHODS.items()}
        plan = {name: (H_REF, steps) for name in METHODS}
        for _ in range(2):
            plan = equal_cost_steps(time_per_step({k: (runners[k][0], plan[k][0]) for k in METHODS}, args.repeats), T)
        runs = {(k, i): (runners[k][i], plan[k][0]) for k in METHODS for i in (0, 1)}
        times = time_per_step(runs, args.repeats)
        curves[prob] = {}
        for name, solver in METHODS.items():
            h, n = plan[name]
            (peak, P, P0, ok), wall = long_run(models[name], solver, h, n)
            s = summarise(peak, P, P0)
            curves[prob][name] = peak
            t_med, t_min, t_sim = (f(times[name, i]) for f, i in ((np.median, 0), (np.min, 0), (np.median, 1)))
            rows.append((prob, name, h, n, t_med, t_min, t_sim, t_med / h, wall / n, s, bool(ok)))
            print(f"{prob}, {name}: h = {h:.4g}, {n} steps, {1e6 * t_med:.2f} us/step, run {wall:.1f} s "
                  f"({1e6 * wall / n:.2f} us/step with monitoring), max |E/E0 - 1| {s['max']:.3e}, last/first 10 % {s['growth']:.3g}, "
                  f"p {s['p']:.1e}, L {s['L']:.1e}, all steps converged: {bool(ok)}", flush=True)  # fmt: skip

    print("\n| problem | method | h [s] | steps | us/step median (min) | CPU s per simulated s | "
          "us/step via simulate | long run us/step | max rel. energy error | first 10 % | last 10 % | last / first | world p, L rel. deviation |")  # fmt: skip
    print("|---" * 13 + "|")
    for prob, name, h, n, t_med, t_min, t_sim, cost, per_step, s, ok in rows:
        mom = f"{s['p']:.1e}, {s['L']:.1e}" if prob == "torque-free body" else "-"
        flag = "" if ok else " (a step failed)"
        print(f"| {prob} | {name}{flag} | {h:.3g} | {n:.3g} | {1e6 * t_med:.2f} ({1e6 * t_min:.2f}) | {cost:.4f} | "
              f"{1e6 * t_sim:.2f} | {1e6 * per_step:.2f} | {s['max']:.2e} | {s['early']:.2e} | {s['late']:.2e} | {s['growth']:.3g} | {mom} |")  # fmt: skip

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharex=True)
    for ax, (prob, lines) in zip(axes, curves.items()):
        t_blocks = np.arange(1, N_SAVE + 1) * T / N_SAVE
        for (name, peak), row in zip(lines.items(), (r for r in rows if r[0] == prob)):
            ax.semilogy(t_blocks, np.maximum(peak, 1e-17), label=f"{name} (h = {row[2]:.2g})")
        ax.set(title=f"{prob}: equal CPU time", xlabel="t [s]", ylabel="max |E/E0 - 1| per block")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
