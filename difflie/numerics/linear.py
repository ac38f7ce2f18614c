"""Linear solves of the implicit steps: factor an iteration matrix once, solve often.

Dense matrices:
``P A = L U`` (LAPACK getrf) with the row permutation kept as a 0/1 matrix, so a solve is
``x = U^{-1} L^{-1} (P b)``: a product-and-sum and two triangular solves.
``jax.scipy.linalg.lu_solve`` instead rebuilds the permutation from the pivots (a loop of tiny
kernels on CPU) at every solve, i.e. at every Newton iteration. A singular matrix gives
non-finite solutions, which the Newton iterations report as a failure.

Block-tridiagonal matrices (the multibody iteration matrix ordered by levels,
``difflie.numerics.sparsity``), with diagonal blocks ``D_k``, lower ``L_k`` (block row ``k``,
column ``k-1``) and upper ``U_k`` (row ``k``, column ``k+1``): block Gaussian elimination,

    S_0 = D_0,   S_k = D_k - L_k X_{k-1},   X_k = S_k^{-1} U_k,
    y_k = S_k^{-1} (b_k - L_k y_{k-1}),     x_k = y_k - X_k x_{k+1},

with each ``S_k^{-1}`` formed from a partially pivoted LU. One ``lax.scan`` over the blocks:
the compiled program does not grow with their number.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

Factors = tuple[Float[Array, "n n"], Float[Array, "n n"]]


def factor(mat: Float[Array, "n n"]) -> Factors:
    """``(LU, P)``: the packed unit-lower and upper factors and the permutation matrix."""
    lu, _, perm = jax.lax.linalg.lu(mat)
    return lu, jax.nn.one_hot(perm, mat.shape[0], dtype=mat.dtype)


def solve_factored(factors: Factors, b: Float[Array, " n"]) -> Float[Array, " n"]:
    """``A^{-1} b`` from ``factor``'s result."""
    lu, p = factors
    pb = jnp.sum(p * b[None, :], axis=1)  # broadcast-and-sum: fuses, unlike a small dot on CPU
    y = jax.lax.linalg.triangular_solve(lu, pb[:, None], left_side=True, lower=True, unit_diagonal=True)
    return jax.lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)[:, 0]


def inverse(factors: Factors) -> Float[Array, "n n"]:
    """``A^{-1}`` from ``factor``'s result: for a matrix kept over many solves, where one
    matrix-vector product is cheaper than two triangular solves."""
    lu, p = factors
    y = jax.lax.linalg.triangular_solve(lu, p, left_side=True, lower=True, unit_diagonal=True)
    return jax.lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)


def solve(mat: Float[Array, "n n"], b: Float[Array, " n"]) -> Float[Array, " n"]:
    """``A^{-1} b`` for one dense matrix (factor, then solve)."""
    return solve_factored(factor(mat), b)


def tangent_solve(g: Callable[[Float[Array, " n"]], Float[Array, " n"]], y: Float[Array, " n"]) -> Float[Array, " n"]:
    """``J^{-1} y`` with ``J`` the matrix of the linear map ``g``: the ``tangent_solve`` of
    ``difflie.numerics.newton.implicit_derivatives``: implicit-function-theorem derivatives of a Newton solve."""
    return solve(jax.jacfwd(g)(y), y)


class Blocks(eqx.Module):
    """A block-tridiagonal matrix: ``diagonal``, ``lower`` and ``upper`` blocks, each
    ``(K, B, B)`` (``lower[0]`` and ``upper[K-1]`` are zero)."""

    diagonal: Float[Array, "K B B"]
    lower: Float[Array, "K B B"]
    upper: Float[Array, "K B B"]


class BlockFactors(eqx.Module):
    """``S_k^{-1}``, ``X_k = S_k^{-1} U_k`` and ``L_k`` of a block-tridiagonal matrix."""

    inverses: Float[Array, "K B B"]
    upper: Float[Array, "K B B"]
    lower: Float[Array, "K B B"]


def factor_blocks(m: Blocks) -> BlockFactors:
    """Block elimination of a block-tridiagonal matrix (module docstring)."""
    if m.diagonal.shape[0] == 1:
        inv = inverse(factor(m.diagonal[0]))[None]
        return BlockFactors(inv, jnp.zeros_like(inv), m.lower)

    def eliminate(x_prev, blocks):
        d, lo, up = blocks
        s_inv = inverse(factor(d - lo @ x_prev))
        x = s_inv @ up
        return x, (s_inv, x)

    zero = jnp.zeros_like(m.diagonal[0])
    _, (inverses, upper) = jax.lax.scan(eliminate, zero, (m.diagonal, m.lower, m.upper))
    return BlockFactors(inverses, upper, m.lower)


def solve_blocks(f: BlockFactors, b: Float[Array, "K B"]) -> Float[Array, "K B"]:
    """``x`` with ``A x = b`` from ``factor_blocks``' result."""
    if b.shape[0] == 1:
        return (f.inverses[0] @ b[0])[None]

    def forward(y_prev, blocks):
        s_inv, lo, bk = blocks
        y = s_inv @ (bk - lo @ y_prev)
        return y, y

    def backward(x_next, blocks):
        x_up, yk = blocks
        x = yk - x_up @ x_next
        return x, x

    zero = jnp.zeros_like(b[0])
    _, y = jax.lax.scan(forward, zero, (f.inverses, f.lower, b))
    _, x = jax.lax.scan(backward, zero, (f.upper, y), reverse=True)
    return x
