"""Effect of difflie.xla's CPU compile options, each variant compiled in the same process.

    python benchmarks/xla_options.py [--repeats 9]

1. Short reductions (a ``lax.scan`` of 1000 calls, per call): XLA's defaults (``jax.jit``) vs
   ``difflie.xla.jit``, which keeps reductions out of YNNPACK.
2. Simulations: the new MLIR fusion emitters vs the classic ones, both with the reduction
   option; time per step (per body-step for the batch).

The variants of a case are compiled once each, then run alternately; medians. float64.
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import difflie as dl  # noqa: E402
from difflie import xla  # noqa: E402
from difflie.batch import simulate_batch  # noqa: E402
from difflie.models import four_link, heavy_top, heavy_top_spherical, single_pendulum  # noqa: E402

REDUCE_ONLY = {"xla_cpu_experimental_ynn_fusion_type": xla.CPU_COMPILER_OPTIONS["xla_cpu_experimental_ynn_fusion_type"]}


def alternate(compiled: dict, arg, repeats: int, per: int) -> dict:
    """Median seconds per ``per`` units of each compiled variant, run alternately."""
    for fn in compiled.values():
        jax.block_until_ready(fn(arg))
    times = {name: [] for name in compiled}
    for _ in range(repeats):
        for name, fn in compiled.items():
            t = time.perf_counter()
            jax.block_until_ready(fn(arg))
            times[name].append(time.perf_counter() - t)
    return {name: float(np.median(t)) / per for name, t in times.items()}


def reductions(repeats: int):
    key = jax.random.PRNGKey(0)
    cases = {
        "4096 products J @ omega as broadcast-and-sum, (4096, 3, 3)": (
            lambda a, c: jnp.sum(a[0] * (a[1][:, None, :] + c), -1),
            (jax.random.normal(key, (4096, 3, 3)), jax.random.normal(key, (4096, 3)))),
        "sum(a * b, -1), (4000, 3)": (
            lambda a, c: jnp.sum(a[0] * (a[1] + c), -1),
            (jax.random.normal(key, (4000, 3)), jax.random.normal(key, (4000, 3)))),
        "sum(a, -1), (6000, 3)": (lambda a, c: jnp.sum(a + c, -1), jax.random.normal(key, (6000, 3))),
        "sum over 4 bodies, (36, 12, 4, 3, 3)": (
            lambda a, c: jnp.sum((a[1][None, :, :, None, None] + c) * a[0], axis=2),
            (jax.random.normal(key, (36, 12, 4, 3, 3)), jax.random.normal(key, (12, 4)))),
    }  # fmt: skip
    print("| reduction | XLA defaults (us) | difflie.xla.jit (us) |\n|---|---:|---:|")
    for name, (g, arg) in cases.items():

        def loop(a, g=g):
            def body(c, _):
                return c + 1e-9 * g(a, 1e-30 * jnp.sum(c)), None

            return jax.lax.scan(body, jnp.zeros_like(g(a, 0.0)), None, length=1000)[0]

        compiled = {"default": jax.jit(loop).lower(arg).compile(), "difflie": xla.jit(loop).lower(arg).compile()}
        t = alternate(compiled, arg, repeats, 1000)
        print(f"| {name} | {t['default'] * 1e6:.1f} | {t['difflie'] * 1e6:.1f} |", flush=True)


def emitters(repeats: int):
    modified = dl.GeneralizedAlpha(newton="modified", reuse_across_steps=False)
    w = jnp.asarray(np.random.default_rng(0).normal(size=(3, 3)))

    def rotation_functional(p):
        m = heavy_top(inertia=jnp.diag(p[:3]), omega0=p[3:])
        return jnp.sum(w * dl.simulate(m, dl.RKMK4(), 0.0, 1.0, 1e-3).rotation[-1, 0])

    tops = {
        "inertia": jnp.broadcast_to(jnp.diag(jnp.array([0.3, 0.47, 0.25])), (4096, 3, 3)),
        "omega0": jax.random.normal(jax.random.PRNGKey(1), (4096, 3)) * 10,
    }
    p = jnp.array([0.3, 0.47, 0.25, 0.5, 20.0, -1.0])
    cases = {
        "BackwardEuler rA, single pendulum, per step": (
            lambda m: dl.simulate(m, dl.BackwardEuler(), 0.0, 0.5, 1e-3).position[-1], single_pendulum(), 500),
        "BackwardEuler re, single pendulum, per step": (
            lambda m: dl.simulate(m, dl.BackwardEuler(formulation="re"), 0.0, 0.5, 1e-3).position[-1], single_pendulum(), 500),
        "BackwardEuler rA, four link, per step": (
            lambda m: dl.simulate(m, dl.BackwardEuler(), 0.0, 0.5, 1e-3).position[-1], four_link(), 500),
        "GeneralizedAlpha modified Newton, heavy top, per step": (
            lambda m: dl.simulate(m, modified, 0.0, 1.0, 1e-3).position[-1], heavy_top_spherical(), 1000),
        "GeneralizedAlpha full Newton, heavy top, per step": (
            lambda m: dl.simulate(m, dl.GeneralizedAlpha(), 0.0, 1.0, 1e-3).position[-1], heavy_top_spherical(), 1000),
        "RKMK4 heavy top forward, per step": (rotation_functional, p, 1000),
        "RKMK4 heavy top reverse gradient, per step": (jax.grad(rotation_functional), p, 1000),
        "RKMK4, one vmap of 4096 tops, per body-step": (
            lambda q: simulate_batch(q, dl.RKMK4(), 0.0, 0.05, 1e-3, make_model=lambda k: heavy_top(**k), n_steps=50).rotation,
            tops, 50 * 4096),
    }  # fmt: skip
    new = {**REDUCE_ONLY, "xla_cpu_use_fusion_emitters": True}
    print("\n| case | new emitters (us) | classic emitters (us) | ratio |\n|---|---:|---:|---:|")
    for name, (fn, arg, per) in cases.items():
        compiled = {
            "new": jax.jit(fn, compiler_options=new).lower(arg).compile(),
            "classic": xla.jit(fn).lower(arg).compile(),
        }
        t = alternate(compiled, arg, repeats, per)
        print(f"| {name} | {t['new'] * 1e6:.2f} | {t['classic'] * 1e6:.2f} | {t['classic'] / t['new']:.2f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, difflie.xla options {xla.compiler_options()}\n")
    reductions(args.repeats)
    emitters(args.repeats)


if __name__ == "__main__":
    main()
