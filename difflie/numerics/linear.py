"""Linear solves of the implicit steps: factor an iteration matrix once, solve often.

Dense matrices:
``P A = L U`` (LAPACK getrf) with the row permutation kept as a 0/1 matrix, so a solve is
``x = U^{-1} L^{-1} (P b)``: a product-and-sum and two triangular solves.
``jax.scipy.linalg.lu_solve`` instead rebuilds the permutation from the pivots (a loop of tiny
kernels on CPU) at every solve, i.e. at every Newton iteration. A singular matrix gives
non-finite solutions, which the Newton iterations report as a failure.

**Batches of LAPACK calls on CPU.** jaxlib 0.10.0 to 0.11.0 split a batched LAPACK call
(``getrf``, ``trsm``) of 2e5 flops or more into tasks on XLA's intra-op thread pool and
block a pool thread until they are done; when XLA runs as many such calls at once as the pool
has threads, the tasks never start and the program hangs with every thread idle (a ``vmap`` of
``simulate`` over 16 chains of 32 bodies on two cores). jaxlib 0.11.1 dropped that path. For the
releases that have it, on CPU, a ``vmap`` of the LAPACK calls here hands each call a batch of
less work than that (a ``lax.map`` over chunks), which LAPACK runs on the calling thread: a
``vmap`` of 1024 chains of 32 bodies runs on two cores instead of hanging. With a one-thread
pool (one core, or ``taskset -c 0``) jaxlib never splits a batch and the guard steps aside;
where it acts, the chunks cost 5-12 % (``benchmarks/RESULTS.md``). The factors carry no derivatives:
a solve is a ``jax.lax.custom_linear_solve`` with the matrix's product and an inverse has the
rule ``d(A^{-1}) = -A^{-1} dA A^{-1}``, so both differentiate, forward and reverse, without
passing through LAPACK, on every platform and release.

Block-tridiagonal matrices (the multibody iteration matrix ordered by levels,
``difflie.numerics.sparsity``), with diagonal blocks ``D_k``, lower ``L_k`` (block row ``k``,
column ``k-1``) and upper ``U_k`` (row ``k``, column ``k+1``): block Gaussian elimination,

    S_0 = D_0,   S_k = D_k - L_k X_{k-1},   X_k = S_k^{-1} U_k,
    y_k = S_k^{-1} (b_k - L_k y_{k-1}),     x_k = y_k - X_k x_{k+1},

with each ``S_k^{-1}`` formed explicitly. One ``lax.scan`` over the blocks: the compiled
program does not grow with their number.

**Inverses** (:func:`inv`). One matrix of up to 32 rows on CPU is inverted by Gauss-Jordan
elimination with partial pivoting in one ``fori_loop``: for the scan's small blocks a LAPACK
inverse is a chain of small calls (``getrf``, the loop that turns its pivots into a
permutation, two ``trsm``), 1.7-2.4x slower from 6 to 24 rows (measured on one core, 256
blocks in a scan: 11 rows 2.0 against 4.0 us per block); above 32 rows LAPACK is faster
(48 rows: 47 against 89 us). A stack of inverses (a ``vmap``) and every other platform use
LAPACK, whose batched calls beat a batched Gauss-Jordan (1024 blocks of 11 rows: 2.5 against
3.8 us each).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

Factors = tuple[Float[Array, "n n"], Float[Array, "n n"], Float[Array, "n n"]]

# jaxlib's kMinWorkPerTask: a batched LAPACK call with less work (counted as n^3 for getrf and
# m^2 k for trsm) runs on the calling thread.
_SERIAL_WORK = 200_000
# Up to this size one inverse on CPU is a Gauss-Jordan loop rather than LAPACK (module docstring).
_GAUSS_JORDAN_MAX = 32
# Up to this size a product is a broadcast-and-sum rather than a dot (``_dot``).
_FUSED_DOT_MAX = 12


def _deadlocking_jaxlib() -> bool:
    """Whether this jaxlib parallelises batched LAPACK calls on XLA's pool (module docstring)."""
    import jaxlib

    version = tuple(int(part) for part in jaxlib.__version__.split(".")[:3] if part.isdigit())
    return (0, 10, 0) <= version < (0, 11, 1)


_GUARD = _deadlocking_jaxlib()


def _pool_threads() -> int:
    """Threads of XLA's CPU pool, which JAX sizes from the process's CPU affinity; with one,
    jaxlib runs every batch on the calling thread."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _serially_batched(fn: Callable, cost: int) -> Callable:
    """``fn`` (LAPACK calls on single matrices, about ``cost`` flops), whose ``vmap`` on CPU
    hands LAPACK batches of less than ``_SERIAL_WORK`` flops: a ``lax.map`` over chunks of the
    batch, each chunk guarded again against an enclosing ``vmap``. ``fn`` itself where the
    jaxlib is not affected."""
    if not _GUARD:
        return fn

    @jax.custom_batching.custom_vmap
    def guarded(*args):
        return fn(*args)

    @guarded.def_vmap
    def rule(axis_size, in_batched, *args):
        # Unbatched operands stay so: jax batches a triangular solve with one matrix as one
        # call with more columns.
        in_axes = tuple(0 if b else None for b in in_batched)
        batched = jax.vmap(fn, in_axes=in_axes)
        per_call = max(1, (_SERIAL_WORK - 1) // max(cost, 1))
        if _pool_threads() == 1:
            out = batched(*args)
        elif axis_size <= per_call:
            out = _serially_batched(batched, cost * axis_size)(*args)
        else:
            calls = -(-axis_size // per_call)
            per_call = -(-axis_size // calls)  # as even as the chunks can be
            pad = calls * per_call - axis_size
            chunk = _serially_batched(batched, cost * per_call)

            def split(a):  # padded with copies of the first entry (a valid matrix)
                a = jnp.concatenate([a, jnp.broadcast_to(a[:1], (pad, *a.shape[1:]))]) if pad else a
                return a.reshape(calls, per_call, *a.shape[1:])

            def chunked(*args):
                def one(xs):
                    it = iter(xs)
                    return chunk(*(next(it) if b else a for a, b in zip(args, in_batched)))

                out = jax.lax.map(one, tuple(split(a) for a, b in zip(args, in_batched) if b))
                return jax.tree.map(lambda o: o.reshape(calls * per_call, *o.shape[2:])[:axis_size], out)

            # Chunks on CPU only: a GPU's solvers batch without a thread pool.
            out = jax.lax.platform_dependent(*args, cpu=chunked, default=batched)
        return out, jax.tree.map(lambda _: True, out)

    return guarded


def _getrf(mat: Float[Array, "n n"]) -> tuple[Float[Array, "n n"], Float[Array, "n n"]]:
    """Packed LU factors and the permutation matrix of ``P A = L U``."""
    lu, perm = _serially_batched(lambda a: jax.lax.linalg.lu(a)[::2], mat.shape[0] ** 3)(mat)
    return lu, jax.nn.one_hot(perm, mat.shape[0], dtype=mat.dtype)


def _trsm(a: Float[Array, "n n"], b: Float[Array, "n k"], lower: bool, transpose: bool, unit: bool) -> Float[Array, "n k"]:
    """``op(T)^{-1} b`` for the lower or upper triangle ``T`` of ``a``."""

    def fn(a, b):
        return jax.lax.linalg.triangular_solve(
            a, b, left_side=True, lower=lower, transpose_a=transpose, unit_diagonal=unit
        )

    return _serially_batched(fn, a.shape[0] ** 2 * b.shape[1])(a, b)


def factor(mat: Float[Array, "n n"]) -> Factors:
    """``(A, LU, P)``: the matrix, its packed unit-lower and upper factors and the permutation
    matrix of ``P A = L U``. Only ``A`` carries derivatives (module docstring)."""
    return mat, *_getrf(jax.lax.stop_gradient(mat))


def _dot(a: Float[Array, "n k"], b: Float[Array, "k ..."]) -> Float[Array, "n ..."]:
    """``a @ b``; for a small matrix ``a`` a broadcast-and-sum, which XLA fuses with its
    neighbours, where a small dot is a call of its own on CPU (the elimination of 256 blocks of
    9 x 9: 500 against 750 us; of 16 x 16 and larger the dot is faster)."""
    return a @ b if max(a.shape) > _FUSED_DOT_MAX else _fused_dot(a, b)


def _fused_dot(a: Float[Array, "n k"], b: Float[Array, "k ..."]) -> Float[Array, "n ..."]:
    """``a @ b`` as a broadcast-and-sum, at any size."""
    return jnp.sum(a[:, :, None] * b[None], axis=1) if b.ndim == 2 else jnp.sum(a * b, axis=1)


def _lu_apply(lu: Float[Array, "n n"], pb: Float[Array, "n k"]) -> Float[Array, "n k"]:
    """``U^{-1} L^{-1} pb``: two triangular solves with the packed factors."""
    return _trsm(lu, _trsm(lu, pb, lower=True, transpose=False, unit=True), lower=False, transpose=False, unit=False)


def _lu_solve(lu, p, b):
    """``A^{-1} b = U^{-1} L^{-1} P b`` for a matrix ``b``."""
    return _lu_apply(lu, _fused_dot(p, b))


def _lu_solve_transposed(lu, p, b):
    """``A^{-T} b = P^T L^{-T} U^{-T} b`` for a matrix ``b``."""
    y = _trsm(lu, b, lower=False, transpose=True, unit=False)
    z = _trsm(lu, y, lower=True, transpose=True, unit=True)
    return jnp.sum(p[:, :, None] * z[:, None, :], axis=0)


def solve_factored(factors: Factors, b: Float[Array, " n"]) -> Float[Array, " n"]:
    """``A^{-1} b`` from :func:`factor`'s result (derivatives through ``A``'s product)."""
    mat, lu, p = factors
    lu, p = jax.lax.stop_gradient(lu), jax.lax.stop_gradient(p)
    x = jax.lax.custom_linear_solve(
        lambda x: mat @ x,
        b[:, None],
        solve=lambda _, r: _lu_solve(lu, p, r),
        transpose_solve=lambda _, r: _lu_solve_transposed(lu, p, r),
    )
    return x[:, 0]


def _lapack_inverse(mat: Float[Array, "n n"]) -> Float[Array, "n n"]:
    """``A^{-1} = U^{-1} L^{-1} P`` from LAPACK's LU (no derivatives: see :func:`inv`)."""
    lu, p = _getrf(mat)
    return _lu_apply(lu, p)


def _gauss_jordan(mat: Float[Array, "n n"]) -> Float[Array, "n n"]:
    """``A^{-1}`` by Gauss-Jordan elimination of ``[A | I]`` with partial pivoting: one
    ``fori_loop`` of ``n`` steps, each a pivot search, a row swap (two selects) and a rank-one
    update. A singular matrix divides by zero: a non-finite inverse."""
    n = mat.shape[0]
    rows = jnp.arange(n)

    def step(k, m):
        col = jax.lax.dynamic_index_in_dim(m, k, axis=1, keepdims=False)
        p = jnp.argmax(jnp.where(rows >= k, jnp.abs(col), -1.0))
        row_k = jax.lax.dynamic_index_in_dim(m, k, axis=0, keepdims=False)
        pivot = jax.lax.dynamic_index_in_dim(m, p, axis=0, keepdims=False) / col[p]
        col = jnp.where(rows == p, col[k], col)  # column k once rows k and p are swapped
        m = jnp.where((rows == p)[:, None], row_k, m)
        return jnp.where((rows == k)[:, None], pivot, m - col[:, None] * pivot)

    return jax.lax.fori_loop(0, n, step, jnp.concatenate([mat, jnp.eye(n, dtype=mat.dtype)], axis=1))[:, n:]


@jax.custom_batching.custom_vmap
def _one_inverse(mat):
    """One inverse: Gauss-Jordan for a small matrix on CPU, LAPACK otherwise."""
    if mat.shape[0] > _GAUSS_JORDAN_MAX:
        return _lapack_inverse(mat)
    return jax.lax.platform_dependent(mat, cpu=_gauss_jordan, default=_lapack_inverse)


@_one_inverse.def_vmap
def _batched_inverse(axis_size, in_batched, mat):
    """A stack of inverses goes to LAPACK (batched, guarded by ``_serially_batched``)."""
    return jax.vmap(_lapack_inverse)(mat), True


@jax.custom_jvp
def _inverse(mat):
    return _one_inverse(mat)


@_inverse.defjvp
def _inverse_jvp(primals, tangents):
    """``d(A^{-1}) = -A^{-1} dA A^{-1}``: products only, so reverse mode transposes it."""
    a_inv = _inverse(*primals)
    return a_inv, -a_inv @ tangents[0] @ a_inv


def inv(mat: Float[Array, "*b n n"]) -> Float[Array, "*b n n"]:
    """``A^{-1}`` of one matrix or of a stack of them (module docstring: small single matrices
    by Gauss-Jordan on CPU, stacks by LAPACK)."""
    fn = _inverse
    for _ in range(mat.ndim - 2):
        fn = jax.vmap(fn)
    return fn(mat)


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
        d_inv = inv(m.diagonal[0])[None]
        return BlockFactors(d_inv, jnp.zeros_like(d_inv), m.lower)

    def eliminate(x_prev, blocks):
        d, lo, up = blocks
        s_inv = inv(d - _dot(lo, x_prev))
        x = _dot(s_inv, up)
        return x, (s_inv, x)

    zero = jnp.zeros_like(m.diagonal[0])
    _, (inverses, upper) = jax.lax.scan(eliminate, zero, (m.diagonal, m.lower, m.upper))
    return BlockFactors(inverses, upper, m.lower)


def solve_blocks(f: BlockFactors, b: Float[Array, "K B"], indexed: bool | None = False) -> Float[Array, "K B"]:
    """``x`` with ``A x = b`` from ``factor_blocks``' result: a ``lax.scan`` over the blocks
    or, ``indexed``, loops that index them. Under ``vmap`` a scan over batched factors moves
    the batch axis behind the blocks' at every solve (a transpose of all the factors); the
    indexed loops read each block where it lies. Indexed is the faster form for a batch (256
    Pandas in chunks of 4 over 0.2 s: 6 %; 16 in one ``vmap``: 9 %), the scan for a single
    system (12 % on a Panda). ``indexed=None``: indexed under a ``vmap`` of the factors, the
    scan otherwise (Newton's solves, which take no derivatives)."""
    if indexed is None:
        return _solve_blocks_by_batch(f, b)
    if b.shape[0] == 1:
        return _dot(f.inverses[0], b[0])[None]
    if indexed:
        return _solve_blocks_indexed(f, b)

    def forward(y_prev, blocks):
        y = _forward_block(y_prev, *blocks)
        return y, y

    def backward(x_next, blocks):
        x = _backward_block(x_next, *blocks)
        return x, x

    zero = jnp.zeros_like(b[0])
    _, y = jax.lax.scan(forward, zero, (f.inverses, f.lower, b))
    _, x = jax.lax.scan(backward, zero, (f.upper, y), reverse=True)
    return x


@jax.custom_jvp
def _solve_blocks_by_batch(f: BlockFactors, b: Float[Array, "K B"]) -> Float[Array, "K B"]:
    return _solve_blocks_by_vmap(f, b)


@_solve_blocks_by_batch.defjvp
def _solve_blocks_by_batch_jvp(primals, tangents):
    """Linear in ``b``; the factors carry no derivatives. (A ``custom_vmap`` has no rules for
    JAX's partial evaluation, which a ``grad`` through a checkpointed loop needs.)"""
    f, b = primals
    return _solve_blocks_by_batch(f, b), _solve_blocks_by_batch(f, tangents[1])


@jax.custom_batching.custom_vmap
def _solve_blocks_by_vmap(f: BlockFactors, b: Float[Array, "K B"]) -> Float[Array, "K B"]:
    return solve_blocks(f, b)


@_solve_blocks_by_vmap.def_vmap
def _solve_blocks_by_vmap_rule(axis_size, in_batched, f, b):
    del axis_size
    in_axes = jax.tree.map(lambda batched: 0 if batched else None, in_batched)
    indexed = any(jax.tree.leaves(in_batched[0]))  # shared factors: the scan does not transpose them
    return jax.vmap(lambda f, b: solve_blocks(f, b, indexed), in_axes=tuple(in_axes))(f, b), True


def _solve_blocks_indexed(f: BlockFactors, b: Float[Array, "K B"]) -> Float[Array, "K B"]:
    """``solve_blocks`` as loops that index the factors, block by block."""
    n = b.shape[0]

    def forward(k, carry):
        y_prev, y = carry
        yk = _forward_block(y_prev, f.inverses[k], f.lower[k], b[k])
        return yk, y.at[k].set(yk)

    def backward(i, carry):
        x_next, x = carry
        k = n - 1 - i
        xk = _backward_block(x_next, f.upper[k], y[k])
        return xk, x.at[k].set(xk)

    zero = jnp.zeros_like(b[0])
    _, y = jax.lax.fori_loop(0, n, forward, (zero, jnp.zeros_like(b)))
    _, x = jax.lax.fori_loop(0, n, backward, (zero, jnp.zeros_like(b)))
    return x


def _forward_block(y_prev, s_inv, lo, bk):
    """``y_k = S_k^{-1} (b_k - L_k y_{k-1})``."""
    return _dot(s_inv, bk - _dot(lo, y_prev))


def _backward_block(x_next, x_up, yk):
    """``x_k = y_k - X_k x_{k+1}``."""
    return yk - _dot(x_up, x_next)
