"""Batches of chains and gradients through a long chain (the mechanisms of ``scaling.py``).

    python benchmarks/chains.py batch [--batch 1024] [--bodies 32] [--steps 20] [--solver ga]
    python benchmarks/chains.py gradient [--bodies 64] [--steps 100]

``batch``: ``jax.vmap`` of ``simulate`` over ``batch`` spherical-joint chains of ``bodies``
rods (each released from its own angle below the horizontal), h = 1e-3, float64; compile
time, then the median of ``repeats`` runs after a warm-up (``block_until_ready``): body-steps
per second, beside one chain alone in the same process.

``gradient``: the reverse-mode gradient of the tip's horizontal position after ``steps`` steps
(a free fall leaves it unchanged: only the joints' forces, which depend on the masses, move it)
with respect to all masses (implicit-function theorem through every step), its cost against the forward
run (medians, compiled), and central differences for three masses.
"""

from __future__ import annotations

import argparse
import os
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import difflie as dl  # noqa: E402
from difflie.models import chain  # noqa: E402

H = 1e-3
# Under vmap, modified Newton rebuilds a batch's kept matrices together.
SOLVERS = {
    "ga": lambda: dl.GeneralizedAlpha(rho_inf=0.9, newton="full"),
    "ga-mod": lambda: dl.GeneralizedAlpha(rho_inf=0.9, newton="modified"),
    "be-rA": lambda: dl.BackwardEuler(formulation="rA"),
}


def median_time(fn, repeats):
    jax.block_until_ready(fn())  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def compile_time(fn, *args):
    t = time.perf_counter()
    compiled = fn.lower(*args).compile()
    return compiled, time.perf_counter() - t


def tilted(model, angle):
    """The chain turned by ``angle`` about the world y axis through its pivot (the origin): a
    consistent state, since joints and the pivot are unchanged by a rigid turn."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    Ry = jnp.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    return eqx.tree_at(lambda m: (m.r0, m.R0), model, (model.r0 @ Ry.T, Ry @ model.R0))


def batch(args):
    model, solver = chain(args.bodies), SOLVERS[args.solver]()
    t1 = args.steps * H

    def tip(m):
        return dl.simulate(m, solver, 0.0, t1, H, saveat=dl.SaveAt(t1=True), throw=False).position[-1, -1]

    angles = jnp.linspace(0.0, 0.5, args.batch)
    many = dl.xla.jit(jax.vmap(lambda a: tip(tilted(model, a))))
    one = dl.xla.jit(lambda a: tip(tilted(model, a)))
    many_c, many_compile = compile_time(many, angles)
    one_c, one_compile = compile_time(one, angles[0])
    t_many = median_time(lambda: many_c(angles), args.repeats)
    t_one = median_time(lambda: one_c(angles[0]), args.repeats)
    ends = np.asarray(many_c(angles))
    assert np.allclose(ends[0], np.asarray(one_c(angles[0])), atol=1e-10)
    body_steps = args.bodies * args.steps
    print(f"{args.solver}, {args.batch} chains of {args.bodies} bodies, {args.steps} steps")
    print(f"  batch: compile {many_compile:.1f} s, run {t_many:.3f} s, {args.batch * body_steps / t_many:.3g} body-steps/s")
    print(f"  one chain: compile {one_compile:.1f} s, run {1e3 * t_one:.2f} ms, {body_steps / t_one:.3g} body-steps/s")
    print(f"  batch / one chain: {t_one * args.batch / t_many:.2f}x the throughput")


def gradient(args):
    model, solver = chain(args.bodies), SOLVERS[args.solver]()
    t1 = args.steps * H

    def tip_x(masses):
        m = eqx.tree_at(lambda m: m.bodies.mass, model, masses)
        return dl.simulate(m, solver, 0.0, t1, H, saveat=dl.SaveAt(t1=True)).position[-1, -1, 0]

    masses = model.bodies.mass * (1.0 + 0.2 * jnp.sin(jnp.arange(args.bodies)))  # not all equal
    forward, forward_compile = compile_time(dl.xla.jit(tip_x), masses)
    grad, grad_compile = compile_time(dl.xla.jit(jax.grad(tip_x)), masses)
    t_forward = median_time(lambda: forward(masses), args.repeats)
    t_grad = median_time(lambda: grad(masses), args.repeats)
    g = np.asarray(grad(masses))
    worst = 0.0
    for i in (0, args.bodies // 2, args.bodies - 1):
        eps = 1e-5 * float(masses[i])
        e = jnp.zeros_like(masses).at[i].set(eps)
        fd = float(forward(masses + e) - forward(masses - e)) / (2 * eps)
        worst = max(worst, abs(g[i] - fd) / max(abs(fd), 1e-12))
        print(f"  d tip_x / d m[{i}]: reverse mode {g[i]: .8e}, central differences {fd: .8e}")
    print(f"{args.solver}, {args.bodies}-body chain, {args.steps} steps, gradient w.r.t. {args.bodies} masses")
    print(f"  forward: compile {forward_compile:.1f} s, run {1e3 * t_forward:.1f} ms")
    print(f"  gradient: compile {grad_compile:.1f} s, run {1e3 * t_grad:.1f} ms = {t_grad / t_forward:.2f}x forward")
    print(f"  largest relative difference from central differences: {worst:.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["batch", "gradient"])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--bodies", type=int, default=None, help="default: 32 (batch), 64 (gradient)")
    parser.add_argument("--steps", type=int, default=None, help="default: 20 (batch), 100 (gradient)")
    parser.add_argument("--solver", default="ga", choices=list(SOLVERS))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    args.bodies = args.bodies or (32 if args.what == "batch" else 64)
    args.steps = args.steps or (20 if args.what == "batch" else 100)
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}, {os.cpu_count()} cpus")
    (batch if args.what == "batch" else gradient)(args)


if __name__ == "__main__":
    main()
