"""Throughput of exp, log, compose and dexpinv on 10^6 elements, difflie beside jaxlie.

Run: python benchmarks/lie_ops.py [--n 1000000] [--repeats 20]
     python benchmarks/lie_ops.py --eager [--repeats 200]
Compiled (jit), warm, block_until_ready, median over repeats; float32 and float64 in one run.
``--eager``: microseconds per call on one element, called outside ``jit`` as in a notebook
(difflie's group maps then run as one compiled program each; jaxlie's op by op), float64.
jaxlie stores SO3 as a quaternion and SE3 as quaternion + translation: it is compared with
difflie's UnitQuaternion (same storage), with difflie's matrix-stored SO3 / SE3 on each
library's native storage, and ("matrix in/out") with jaxlie producing / consuming the same
rotation matrices as difflie's SO3 (``exp(x).as_matrix()``, ``from_matrix(R).log()``).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

import difflie as dl  # noqa: E402

try:
    import jaxlie
except ImportError:  # optional benchmark dependency
    jaxlie = None


def median_time(fn, *args, repeats):
    jax.block_until_ready(fn(*args))  # compile + warm up
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def difflie_ops(G, xi, xi2):
    g, h = G.exp(xi), G.exp(xi2)
    return {
        "exp": (jax.jit(G.exp), (xi,)),
        "log": (jax.jit(lambda a: a.log()), (g,)),
        "compose": (jax.jit(lambda a, b: a @ b), (g, h)),
        "dexpinv": (jax.jit(G.dexpinv), (xi,)),
        "jlog": (jax.jit(lambda a: G.dexpinv(a.log())), (g,)),
    }


def jaxlie_ops(G, xi, xi2, matrix_io=False):
    g, h = jax.vmap(G.exp)(xi), jax.vmap(G.exp)(xi2)
    if matrix_io:  # same inputs and outputs as difflie's matrix-stored SO3
        m = jax.vmap(lambda a: a.as_matrix())(g)
        return {
            "exp": (jax.jit(jax.vmap(lambda x: G.exp(x).as_matrix())), (xi,)),
            "log": (jax.jit(jax.vmap(lambda a: G.from_matrix(a).log())), (m,)),
        }
    ops = {
        "exp": (jax.jit(jax.vmap(G.exp)), (xi,)),
        "log": (jax.jit(jax.vmap(lambda a: a.log())), (g,)),
        "compose": (jax.jit(jax.vmap(lambda a, b: a @ b)), (g, h)),
        "jlog": (jax.jit(jax.vmap(lambda a: a.jlog())), (g,)),
    }
    return ops


def tangent(key, n, dim, dtype):
    xi = jax.random.normal(key, (n, dim), dtype)
    return xi.at[:, -3:].multiply(0.8)


def eager(repeats):
    """Latency of single-element calls outside ``jit``, difflie beside jaxlie."""
    pairs = [("SO3 (matrix)", dl.SO3, getattr(jaxlie, "SO3", None), 3), ("SO3 (quaternion)", dl.UnitQuaternion, None, 3),
             ("SE3", dl.SE3, getattr(jaxlie, "SE3", None), 6), ("SO3xR3", dl.SO3xR3, None, 6),
             ("UnitDualQuaternion", dl.UnitDualQuaternion, None, 6)]  # fmt: skip
    print("| group | op | difflie us/call | jaxlie us/call | speed-up vs jaxlie |")
    print("|---|---|---|---|---|")
    for name, G, J, dim in pairs:
        xi, xi2 = jnp.linspace(0.1, 0.6, dim), jnp.linspace(-0.5, 0.2, dim)
        g, h, p = G.exp(xi), G.exp(xi2), jnp.array([0.3, -0.2, 1.0])
        ours = {"exp": lambda: G.exp(xi), "log": g.log, "compose": lambda: g @ h, "act": lambda: g @ p}
        theirs = {}
        if J is not None:
            a, b = J.exp(xi), J.exp(xi2)
            theirs = {"exp": lambda: J.exp(xi), "log": a.log, "compose": lambda: a @ b, "act": lambda: a @ p}
        for op, fn in ours.items():
            t_ours = median_time(fn, repeats=repeats) * 1e6
            t_theirs = median_time(theirs[op], repeats=repeats) * 1e6 if op in theirs else None
            cells = (f"{t_theirs:.0f}", f"{t_theirs / t_ours:.1f}") if t_theirs else ("-", "-")
            print(f"| {name} | {op} | {t_ours:.0f} | {cells[0]} | {cells[1]} |", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--eager", action="store_true", help="per-call latency outside jit")
    args = parser.parse_args()
    if args.eager:
        return eager(args.repeats)
    print(f"device: {jax.devices()[0].device_kind}, n = {args.n}, median of {args.repeats}")
    if jaxlie is None:
        print("jaxlie not installed: difflie figures only (pip install jaxlie)")
    pairs = [
        ("SO3 (quaternion)", dl.UnitQuaternion, getattr(jaxlie, "SO3", None), 3),
        ("SO3 (matrix)", dl.SO3, getattr(jaxlie, "SO3", None), 3),
        ("SO3 (matrix in/out)", dl.SO3, getattr(jaxlie, "SO3", None), 3),
        ("SE3", dl.SE3, getattr(jaxlie, "SE3", None), 6),
        ("SO3xR3", dl.SO3xR3, None, 6),
        ("UnitDualQuaternion", dl.UnitDualQuaternion, None, 6),
    ]
    rows = []
    for dtype in (jnp.float32, jnp.float64):
        for name, G, J, dim in pairs:
            xi = tangent(jax.random.PRNGKey(0), args.n, dim, dtype)
            xi2 = tangent(jax.random.PRNGKey(1), args.n, dim, dtype)
            ours = difflie_ops(G, xi, xi2)
            theirs = jaxlie_ops(J, xi, xi2, matrix_io="in/out" in name) if J is not None else {}
            for op, (fn, fargs) in ours.items():
                if "in/out" in name and op not in theirs:
                    continue
                t_ours = median_time(fn, *fargs, repeats=args.repeats)
                if op in theirs:
                    t_theirs = median_time(theirs[op][0], *theirs[op][1], repeats=args.repeats)
                    ratio = f"{t_theirs / t_ours:.2f}"
                    theirs_s = f"{args.n / t_theirs / 1e6:.1f}"
                else:
                    ratio, theirs_s = "-", "-"
                row = (jnp.dtype(dtype).name, name, op, f"{args.n / t_ours / 1e6:.1f}", theirs_s, ratio)
                rows.append(row)
                print(" | ".join(row), flush=True)
    print()
    print("| dtype | group | op | difflie (M elem/s) | jaxlie (M elem/s) | speed-up vs jaxlie |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
