"""Dense solves of the implicit steps (difflie.numerics.linear): against numpy, derivatives
against jnp.linalg.solve, float32, a solve from kept factors has no pivot loop, small inverses
by Gauss-Jordan, and batches of LAPACK calls under vmap run in chunks that cannot hang jaxlib
0.10's thread pool."""

import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from difflie.numerics import linear

RNG = np.random.default_rng(7)


def _system(n, dtype=np.float64):
    # A KKT-like matrix (zero block; n even keeps it regular), which needs row pivoting in LU.
    a = RNG.normal(size=(n, n))
    a[n // 2 :, n // 2 :] = 0.0
    return jnp.asarray(a, dtype), jnp.asarray(RNG.normal(size=n), dtype)


@pytest.mark.parametrize("n", [2, 6, 12])
def test_solves_match_numpy(n):
    a, b = _system(n)
    factors = linear.factor(a)
    ref = np.linalg.solve(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(linear.solve_factored(factors, b), ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(linear.solve_factored(factors, 2.0 * b), 2.0 * ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(linear.solve(a, b), ref, rtol=1e-10, atol=1e-12)


def test_derivatives_and_batches_match_jnp_linalg():
    a, b = _system(8)
    grad = jax.grad(lambda a, b: jnp.sum(jnp.sin(linear.solve(a, b))), argnums=(0, 1))(a, b)
    ref = jax.grad(lambda a, b: jnp.sum(jnp.sin(jnp.linalg.solve(a, b))), argnums=(0, 1))(a, b)
    for g, r in zip(grad, ref):
        np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-12)
    tangent = jax.jvp(lambda a: linear.solve(a, b), (a,), (jnp.ones_like(a),))[1]
    ref_t = jax.jvp(lambda a: jnp.linalg.solve(a, b), (a,), (jnp.ones_like(a),))[1]
    np.testing.assert_allclose(tangent, ref_t, rtol=1e-9, atol=1e-12)
    stack = jnp.stack([a, 2.0 * a])
    np.testing.assert_allclose(jax.vmap(linear.solve, (0, None))(stack, b)[1], linear.solve(a, b) / 2, rtol=1e-12)


def test_float32_and_no_pivot_loop_per_solve():
    a, b = _system(12, np.float32)
    x = jax.jit(linear.solve)(a, b)
    assert x.dtype == jnp.float32
    np.testing.assert_allclose(a @ x, b, atol=2e-4)
    factors = linear.factor(a)
    hlo = jax.jit(linear.solve_factored).lower(factors, b).compile().as_text()
    assert " while(" not in hlo


def test_tangent_solve_inverts_the_linear_map():
    a, b = _system(6)
    np.testing.assert_allclose(
        linear.tangent_solve(lambda v: a @ v, b), np.linalg.solve(np.asarray(a), np.asarray(b)), rtol=1e-10, atol=1e-12
    )


_INV = jax.jit(linear.inv)


@pytest.mark.parametrize("n", [2, 12, 32, 40])
def test_one_inverse_matches_numpy_by_gauss_jordan_up_to_32_rows(n):
    # KKT-like matrices need row pivoting; up to 32 rows one inverse on CPU is a Gauss-Jordan
    # loop (no LAPACK call in the program), above that LAPACK's.
    a, _ = _system(n)
    ref = np.linalg.inv(np.asarray(a))
    np.testing.assert_allclose(_INV(a), ref, rtol=1e-9, atol=1e-11 * np.abs(ref).max())
    hlo = _INV.lower(a).compile().as_text()
    assert ("lapack_" in hlo) == (n > linear._GAUSS_JORDAN_MAX or jax.default_backend() != "cpu")
    grad = jax.grad(lambda a: jnp.sum(jnp.sin(linear.inv(a))))(a)
    ref_grad = jax.grad(lambda a: jnp.sum(jnp.sin(jnp.linalg.inv(a))))(a)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-8, atol=1e-11 * np.abs(ref_grad).max())


def test_one_inverse_in_float32_and_of_a_singular_matrix():
    a, _ = _system(12, np.float32)
    a_inv = _INV(a)
    assert a_inv.dtype == jnp.float32
    np.testing.assert_allclose(a_inv @ a, np.eye(12), atol=1e-3)
    assert not np.all(np.isfinite(_INV(jnp.ones((6, 6)))))  # reported as a failure by Newton


def _lapack_batches(fn, *args) -> list[int]:
    """Batch sizes of the LAPACK calls in ``fn``'s compiled program."""
    hlo = jax.jit(fn).lower(*args).compile().as_text()
    batched = (re.search(r"= \(?f\d+\[(\d+),\d+,\d+\]", line) for line in hlo.splitlines() if 'custom_call_target="lapack_' in line)
    return [int(m.group(1)) for m in batched if m]


def test_a_vmap_hands_lapack_chunks_and_keeps_values_and_derivatives():
    # 40 matrices of 24 x 24: 24^3 flops each, so at most 14 per LAPACK call, in 3 chunks (the
    # last padded), where jaxlib 0.10 would split one call of 40 over its thread pool.
    n, batch = 24, 40
    mats = jnp.asarray(RNG.normal(size=(batch, n, n))) + 6.0 * jnp.eye(n)
    rhs = jnp.asarray(RNG.normal(size=(batch, n)))
    ref_inv = np.linalg.inv(np.asarray(mats))
    np.testing.assert_allclose(jax.jit(jax.vmap(linear.inv))(mats), ref_inv, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(linear.inv(mats), ref_inv, rtol=1e-10, atol=1e-12)  # a stack, no vmap
    single = jax.jit(jax.vmap(linear.inv))(mats.astype(jnp.float32))
    assert single.dtype == jnp.float32
    np.testing.assert_allclose(single, ref_inv, rtol=1e-3, atol=1e-4)
    x = jax.jit(jax.vmap(linear.solve))(mats, rhs)
    np.testing.assert_allclose(x, np.linalg.solve(np.asarray(mats), np.asarray(rhs)[..., None])[..., 0], rtol=1e-10)
    one = jax.jit(jax.vmap(linear.solve, (None, 0)))(mats[0], rhs)  # one matrix, many right-hand sides
    np.testing.assert_allclose(one, np.linalg.solve(np.asarray(mats[0]), np.asarray(rhs).T).T, rtol=1e-10)
    if linear._GUARD and linear._pool_threads() > 1:
        assert max(_lapack_batches(jax.vmap(linear.inv), mats)) * n**3 < linear._SERIAL_WORK
        assert max(_lapack_batches(jax.vmap(linear.solve, (None, 0)), mats[0], rhs), default=1) == 1

    def loss(a, b):
        return jnp.sum(jnp.sin(linear.solve(a, b))) + jnp.sum(linear.inv(a) ** 2)

    def loss_ref(a, b):
        return jnp.sum(jnp.sin(jnp.linalg.solve(a, b))) + jnp.sum(jnp.linalg.inv(a) ** 2)

    grads = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1))))(mats, rhs)
    refs = jax.vmap(jax.grad(loss_ref, argnums=(0, 1)))(mats, rhs)
    for g, r in zip(grads, refs):
        np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-12)
    tangents = jax.vmap(lambda a, b: jax.jvp(lambda a: linear.solve(a, b), (a,), (jnp.ones_like(a),))[1])(mats, rhs)
    refs = jax.vmap(lambda a, b: jax.jvp(lambda a: jnp.linalg.solve(a, b), (a,), (jnp.ones_like(a),))[1])(mats, rhs)
    np.testing.assert_allclose(tangents, refs, rtol=1e-9, atol=1e-12)


_CONCURRENT = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from difflie.numerics import linear
rng = np.random.default_rng(0)
a, b = (jnp.asarray(rng.normal(size=(64, 48, 48))) for _ in range(2))
f = jax.jit(jax.vmap(lambda a, b: (linear.inv(a), linear.inv(b) @ linear.inv(a.T))))
for _ in range(20):
    x, y = jax.block_until_ready(f(a, b))
print(float(jnp.max(jnp.abs(x @ a - jnp.eye(48)))))
"""


def test_concurrent_batched_inverses_do_not_hang_on_a_multicore_cpu():
    # Independent batched inverses, run at once by XLA on two or more pool threads: with
    # jnp.linalg.inv and jaxlib 0.10 this program hangs for good (every thread idle).
    try:
        out = subprocess.run([sys.executable, "-c", _CONCURRENT], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("a vmap of two batched inverses hung (jaxlib's parallel batched LAPACK)")
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.split()[-1]) < 1e-10
