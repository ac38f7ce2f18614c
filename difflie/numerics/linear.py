"""Dense linear solves of the implicit steps: factor an iteration matrix once, solve often.

``P A = L U`` (LAPACK getrf) with the row permutation kept as a 0/1 matrix, so a solve is
``x = U^{-1} L^{-1} (P b)``: a product-and-sum and two triangular solves.
``jax.scipy.linalg.lu_solve`` instead rebuilds the permutation from the pivots (a loop of tiny
kernels on CPU) at every solve, i.e. at every Newton iteration. A singular matrix gives
non-finite solutions, which the Newton iterations report as a failure.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

Factors = tuple[Float[Array, "n n"], Float[Array, "n n"]]


def factor(mat: Float[Array, "n n"]) -> Factors:
    """``(LU, P)``: the packed unit-lower and upper factors and the permutation matrix."""
    lu, _, perm = jax.lax.linalg.lu(mat)
    return lu, jax.nn.one_hot(perm, mat.shape[0], dtype=mat.dtype)


def solve_factored(factors: Factors, b: Float[Array, " n"]) -> Float[Array, " n"]:
    """``A^{-1} b`` from :func:`factor`'s result."""
    lu, p = factors
    pb = jnp.sum(p * b[None, :], axis=1)  # broadcast-and-sum: fuses, unlike a small dot on CPU
    y = jax.lax.linalg.triangular_solve(lu, pb[:, None], left_side=True, lower=True, unit_diagonal=True)
    return jax.lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)[:, 0]


def inverse(factors: Factors) -> Float[Array, "n n"]:
    """``A^{-1}`` from :func:`factor`'s result: for a matrix kept over many solves, where one
    matrix-vector product is cheaper than two triangular solves."""
    lu, p = factors
    y = jax.lax.linalg.triangular_solve(lu, p, left_side=True, lower=True, unit_diagonal=True)
    return jax.lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)


def solve(mat: Float[Array, "n n"], b: Float[Array, " n"]) -> Float[Array, " n"]:
    """``A^{-1} b`` for one dense matrix (factor, then solve)."""
    return solve_factored(factor(mat), b)


def tangent_solve(g: Callable[[Float[Array, " n"]], Float[Array, " n"]], y: Float[Array, " n"]) -> Float[Array, " n"]:
    """``J^{-1} y`` with ``J`` the matrix of the linear map ``g``: the ``tangent_solve`` of
    ``jax.lax.custom_root`` (implicit-function-theorem derivatives of a Newton solve)."""
    return solve(jax.jacfwd(g)(y), y)
