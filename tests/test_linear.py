"""Dense solves of the implicit steps (difflie.numerics.linear): against numpy, derivatives
against jnp.linalg.solve, float32, and a solve from kept factors has no pivot loop."""

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
