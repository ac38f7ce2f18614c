"""Dense solves and Newton of difflie.numerics beside lineax and optimistix, inside a compiled loop.

    python benchmarks/numerics.py

Each figure is the cost of one operation inside a ``lax.fori_loop`` of 1000, compiled with
``difflie.xla.jit``, float64: the minimum over 15 runs after a warm-up, with
``block_until_ready``. Sizes are those of the implicit steps' iteration matrices (18: three
bodies, 30: the slider crank's rA step, 66: a ten-body chain). Needs ``pip install -e ".[bench]"``.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import lineax as lx  # noqa: E402
import optimistix as optx  # noqa: E402

from difflie import xla  # noqa: E402
from difflie.numerics import linear  # noqa: E402
from difflie.numerics.newton import Newton, newton_solve  # noqa: E402

N = 1000


def per_call(step, const, b0) -> float:
    """Microseconds per ``b <- step(const, b)`` inside one compiled loop of ``N``."""
    f = xla.jit(lambda const, b0: jax.lax.fori_loop(0, N, lambda i, b: step(const, b), b0))
    jax.block_until_ready(f(const, b0))
    times = []
    for _ in range(15):
        t = time.perf_counter()
        jax.block_until_ready(f(const, b0))
        times.append(time.perf_counter() - t)
    return min(times) / N * 1e6


def main():
    rng = np.random.default_rng(0)
    print("| n | factor + solve: difflie | lineax LU | kept factors: difflie | lineax LU |")
    print("|---:|---:|---:|---:|---:|")
    for n in (18, 30, 66):
        A = jnp.asarray(rng.normal(size=(n, n)) + n * np.eye(n))
        b = jnp.asarray(rng.normal(size=n))
        # 1e-9 b[0] ties the matrix to the loop, so the factorisation is not hoisted out of it.
        ours = per_call(lambda A, b: linear.solve(A + 1e-9 * b[0], b), A, b)
        theirs = per_call(lambda A, b: lx.linear_solve(lx.MatrixLinearOperator(A + 1e-9 * b[0]), b, lx.LU()).value, A, b)
        kept = per_call(lambda f, b: linear.solve_factored(f, b), linear.factor(A), b)
        state = lx.LU().init(lx.MatrixLinearOperator(A), options={})
        kept_lx = per_call(lambda s, b: lx.LU().compute(s, b, {})[0], state, b)
        print(f"| {n} | {ours:.2f} us | {theirs:.2f} us | {kept:.2f} us | {kept_lx:.2f} us |")

    M = jnp.asarray(rng.normal(size=(12, 12)) + 12 * np.eye(12))
    c = jnp.asarray(rng.normal(size=12))

    def F(x, args):
        return args[0] @ x + 0.1 * jnp.sin(x) - args[1]

    x0 = jnp.zeros(12)
    ours = per_call(lambda M, c: newton_solve(F, x0, (M, c), Newton(tol=1e-12, max_iterations=20)).value * 0 + c, M, c)
    root = optx.Newton(rtol=1e-12, atol=1e-12)
    theirs = per_call(lambda M, c: optx.root_find(F, root, x0, (M, c), max_steps=20, throw=False).value * 0 + c, M, c)
    print(f"\nfull Newton, 12 unknowns, to 1e-12: difflie {ours:.2f} us, optimistix.Newton {theirs:.2f} us per solve")


if __name__ == "__main__":
    main()
