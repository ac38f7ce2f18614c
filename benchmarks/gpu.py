"""Batched heavy tops on an accelerator: throughput, implicit solver, gradients.

    python benchmarks/gpu.py [--quick] [--max-batch N]

* body-steps per second of one ``vmap`` over ``n`` heavy tops (RKMK4, random inertias and
  spins, 1000 steps of 1e-3 s) for ``n`` up to 10^6, float32 and float64;
* the same for the heavy top on a spherical joint under ``GeneralizedAlpha`` (an index-3 DAE:
  Newton iterations and a linear solve per step for every element of the batch);
* reverse-mode gradient over a 1000-step rollout divided by the forward time, for one top and
  for a batch of 4096 (gradient of the summed loss);
* compile times; Exudyn's single-system rate on the host CPU if it is importable.

Timings are medians of repeated runs after a warm-up, with ``block_until_ready``. The script
runs on whatever ``jax.devices()[0]`` is (it names it); on a CPU it is a slow way to run
``benchmarks/throughput.py``.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from throughput import DT, compile_time, exudyn_rate, make_top, random_tops, timed

from difflie.batch import simulate_batch
from difflie.models.spatial import heavy_top_spherical
from difflie.solvers.generalized_alpha import GeneralizedAlpha
from difflie.solvers.rkmk import RKMK4


def _row(name, n, steps, t, ct):
    rate = n * steps / t
    print(f"  {name:<28s} batch {n:>8d}  steps {steps:>5d}  {t * 1e3:10.2f} ms  {rate:11.4g} body-steps/s  "
          f"compile {ct:5.1f} s", flush=True)
    return (name, n, steps, t, rate, ct)


def rkmk_rate(n, dtype, steps):
    params = random_tops(jax.random.PRNGKey(n), n, dtype)

    def run(p):
        return simulate_batch(p, RKMK4(), 0.0, steps * DT, DT, make_model=make_top, n_steps=steps).rotation

    ct, compiled = compile_time(run, params)
    return _row(f"RKMK4 {jnp.dtype(dtype).name}", n, steps, timed(compiled, params, repeats=3), ct)


def alpha_rate(n, dtype, steps):
    k1, k2 = jax.random.split(jax.random.PRNGKey(n))
    params = {
        "mass": jax.random.uniform(k1, (n,), dtype, 10.0, 20.0),
        "omega0": jnp.asarray([0.0, 150.0, -4.61538], dtype) * jax.random.uniform(k2, (n, 1), dtype, 0.5, 1.0),
    }

    def run(p):
        def make(q):
            return heavy_top_spherical(mass=q["mass"], inertia=jnp.diag(jnp.asarray([0.234375, 0.46875, 0.234375],
                                                                                     dtype)), omega0=q["omega0"])
        sol = simulate_batch(p, GeneralizedAlpha(rho_inf=0.9), 0.0, steps * DT, DT, make_model=make, n_steps=steps)
        return sol.position, sol.stats.newton_iterations

    ct, compiled = compile_time(run, params)
    return _row(f"GeneralizedAlpha {jnp.dtype(dtype).name}", n, steps, timed(compiled, params, repeats=3), ct)


def gradient_ratio(n, dtype, steps=1000):
    params = random_tops(jax.random.PRNGKey(1), n, dtype)
    w = jnp.asarray(np.random.default_rng(0).normal(size=(3, 3)), dtype)

    def loss(p):
        sol = simulate_batch(p, RKMK4(), 0.0, steps * DT, DT, make_model=make_top, n_steps=steps)
        return jnp.sum(w * sol.rotation[:, -1, 0])

    ct_f, fwd = compile_time(loss, params)
    ct_g, grad = compile_time(jax.grad(loss), params)
    tf, tg = timed(fwd, params), timed(grad, params)
    print(f"  gradient {jnp.dtype(dtype).name} batch {n:>6d}: forward {tf * 1e3:.2f} ms, reverse {tg * 1e3:.2f} ms, "
          f"ratio {tg / tf:.2f}; compile {ct_f:.1f} / {ct_g:.1f} s", flush=True)
    return (jnp.dtype(dtype).name, n, tf, tg, ct_f, ct_g)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small batches, few steps (a smoke run)")
    parser.add_argument("--max-batch", type=int, default=1_000_000)
    parser.add_argument("--batches", type=str, default="", help="comma-separated batch sizes (default: 1 .. 10^6)")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)  # the script's choice; float32 runs pass float32 inputs
    dev = jax.devices()[0]
    print(f"jax {jax.__version__}, device {dev.platform}: {dev.device_kind}", flush=True)
    steps = 50 if args.quick else 1000
    default = [1, 1000] if args.quick else [1, 1000, 10_000, 100_000, 1_000_000]
    batches = [int(b) for b in args.batches.split(",")] if args.batches else default
    batches = [b for b in batches if b <= args.max_batch]
    rate_exu, exu_note = exudyn_rate(2000)
    print(f"Exudyn (host CPU, one system): {rate_exu} body-steps/s ({exu_note})", flush=True)
    rows = [rkmk_rate(n, dt, steps) for dt in (jnp.float32, jnp.float64) for n in batches]
    rows += [alpha_rate(n, dt, steps) for dt in (jnp.float32, jnp.float64) for n in batches if n <= 100_000]
    grads = [gradient_ratio(n, dt, steps) for dt in (jnp.float32, jnp.float64) for n in (1, 4096)]

    print(f"\nDevice: {dev.device_kind}; jax {jax.__version__}. Exudyn: {exu_note}, "
          f"{rate_exu:.4g} body-steps/s" if rate_exu else f"\nDevice: {dev.device_kind}; Exudyn: {exu_note}")
    print("\n| solver, dtype | batch | steps | time (ms) | body-steps/s | x Exudyn | compile (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, n, s, t, rate, ct in rows:
        ratio = f"{rate / rate_exu:.0f}" if rate_exu else "n/a"
        print(f"| {name} | {n} | {s} | {t * 1e3:.2f} | {rate:.3g} | {ratio} | {ct:.1f} |")
    print("\n| dtype | batch | forward (ms) | reverse gradient (ms) | ratio | compile fwd / grad (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, n, tf, tg, cf, cg in grads:
        print(f"| {name} | {n} | {tf * 1e3:.2f} | {tg * 1e3:.2f} | {tg / tf:.2f} | {cf:.1f} / {cg:.1f} |")


if __name__ == "__main__":
    main()
