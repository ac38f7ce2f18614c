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
where it acts, the chunks cost 6-12 % (``benchmarks/RESULTS.md``, Hundreds of bodies). The factors carry no derivatives:
a solve is a ``jax.lax.custom_linear_solve`` with the matrix's product and an inverse has the
rule ``d(A^{-1}) = -A^{-1} dA A^{-1}``, so both differentiate, forward and reverse, without
passing through LAPACK, on every platform and release.

Matrices in blocks along a forest of groups of unknowns (the multibody iteration matrix,
``difflie.numerics.sparsity``), laid out by depth: ``K`` levels of ``W`` groups of ``B``
unknowns, each group coupled only with itself, its parent in the level above and its children
below. With a group's diagonal block ``D``, ``down`` (its rows, its parent's columns) and ``up``
(its parent's rows, its columns), block elimination from the leaves:

    S = D - sum_children up_c X_c,   X = S^{-1} down,
    z = S^{-1} (b - sum_children up_c z_c),   x = z - X x_parent,

with each ``S^{-1}`` formed explicitly, a level's groups as one stack. One ``lax.scan`` over
the levels: the compiled program does not grow with their number. Where every level holds one
group (a chain; a path of groups) the arrays have no group axis: a unit axis made XLA copy the
factors at every solve (a ladder of 63 bodies, 20 % of a step).

**Inverses** (:func:`inv`). One matrix of up to 32 rows on CPU is inverted by Gauss-Jordan
elimination with partial pivoting in one ``fori_loop``: for the scan's small blocks a LAPACK
inverse is a chain of small calls (``getrf``, the loop that turns its pivots into a
permutation, two ``trsm``), 1.7-2.4x slower from 6 to 24 rows (measured on one core, 256
blocks in a scan: 11 rows 2.0 against 4.0 us per block); above 32 rows LAPACK is faster
(48 rows: 47 against 89 us). A stack of inverses is a batched Gauss-Jordan loop too while it
is little work (stack x rows^3 up to 5e4: a level of 64 groups of 9 rows, 52 against 83 us;
of 2 groups of 21 rows, 10 against 19 us) and LAPACK's batched calls above (64 of 30 rows:
0.89 against 1.7 ms; 1024 of 11 rows: 2.5 against 3.8 us each); other platforms use LAPACK.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

Factors = tuple[Float[Array, "n n"], Float[Array, "n n"], Float[Array, "n n"]]

# jaxlib's kMinWorkPerTask: a batched LAPACK call with less work (counted as n^3 for getrf and
# m^2 k for trsm) runs on the calling thread.
_SERIAL_WORK = 200_000
# Up to this size one inverse on CPU is a Gauss-Jordan loop rather than LAPACK (module docstring).
_GAUSS_JORDAN_MAX = 32
# Up to this work (stack x rows^3) a stack of inverses on CPU is a batched Gauss-Jordan loop.
_GAUSS_JORDAN_STACK_WORK = 50_000
# Up to this many groups in a level the children's fill reaches their parents by a product.
_ONE_HOT_WIDTH = 16
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


def _dot(a: Float[Array, "*w n k"], b: Float[Array, "*w k ..."]) -> Float[Array, "*w n ..."]:
    """``a @ b`` (a matrix or a vector ``b``, batched over leading axes); for small blocks ``a``
    a broadcast-and-sum, which XLA fuses with its neighbours, where a small dot is a call of its
    own on CPU (the elimination of 256 blocks of 9 x 9: 500 against 750 us; of 16 x 16 and
    larger the dot is faster)."""
    if max(a.shape[-2:]) <= _FUSED_DOT_MAX:
        return _fused_dot(a, b)
    return a @ b if b.ndim == a.ndim or a.ndim == 2 else jnp.einsum("...ij,...j->...i", a, b)


def _fused_dot(a: Float[Array, "*w n k"], b: Float[Array, "*w k ..."]) -> Float[Array, "*w n ..."]:
    """``a @ b`` as a broadcast-and-sum, at any size."""
    if b.ndim == a.ndim:
        return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)
    return jnp.sum(a * b[..., None, :], axis=-1)


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
    return (_stack_inverse(mat), True) if in_batched[0] else (_one_inverse(mat), False)


@jax.custom_batching.custom_vmap
def _stack_inverse(mats):
    """A stack of inverses: batched Gauss-Jordan on CPU for a stack of little work (module
    docstring), LAPACK's batched calls otherwise (guarded by ``_serially_batched``)."""
    stack, n = mats.shape[0], mats.shape[-1]
    if stack * n**3 > _GAUSS_JORDAN_STACK_WORK or n > _GAUSS_JORDAN_MAX:
        return jax.vmap(_lapack_inverse)(mats)
    return jax.lax.platform_dependent(mats, cpu=jax.vmap(_gauss_jordan), default=jax.vmap(_lapack_inverse))


@_stack_inverse.def_vmap
def _stacks_inverse(axis_size, in_batched, mats):
    """A batch of stacks is one larger stack."""
    if not in_batched[0]:
        return _stack_inverse(mats), False
    return _stack_inverse(mats.reshape(-1, *mats.shape[2:])).reshape(mats.shape), True


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
    """A matrix in blocks along a forest of groups of unknowns, by levels (module docstring):
    ``diagonal[k, w]`` is the block of group ``w`` of level ``k``; ``down[k, w]`` its rows and
    its parent group's columns; ``up[k, w]`` its parent's rows and its own columns (zero for a
    root). Each ``(K, W, B, B)``, or ``(K, B, B)`` for one group to a level."""

    diagonal: Float[Array, "K *W B B"]
    down: Float[Array, "K *W B B"]
    up: Float[Array, "K *W B B"]


class BlockFactors(eqx.Module):
    """``S^{-1}`` and ``X = S^{-1} down`` of every group, and the ``up`` blocks of the level
    below each (``factor_blocks``)."""

    inverses: Float[Array, "K *W B B"]
    coupled: Float[Array, "K *W B B"]
    up_below: Float[Array, "K *W B B"]


def _to_parents(c: Float[Array, "*W ..."], parent: Array, narrow: bool) -> Float[Array, "*W ..."]:
    """Sum of the children's ``c`` into their parents' slots of the level above (a pad
    ``parent == W``, a root, adds nowhere): a product with a 0/1 matrix for a narrow level,
    where a scatter-add is a loop over the children on CPU. ``narrow``: levels of one group
    (their axis dropped), each the parent of the next."""
    if narrow:
        return c
    width = c.shape[0]
    if width <= _ONE_HOT_WIDTH:
        hot = jax.nn.one_hot(parent, width, dtype=c.dtype)  # (children, parents); a pad: zeros
        return jnp.sum(hot.reshape(width, width, *(1,) * (c.ndim - 1)) * c[:, None], axis=0)
    return jnp.zeros((width + 1, *c.shape[1:]), c.dtype).at[parent].add(c)[:width]


def _from_parents(x: Float[Array, "*W B"], parent: Array, narrow: bool) -> Float[Array, "*W B"]:
    """Each group's parent's ``x`` from the level above (zero for a root)."""
    if narrow:
        return x
    return jnp.concatenate([x, jnp.zeros_like(x[:1])])[parent]


def factor_blocks(m: Blocks, parent: np.ndarray) -> BlockFactors:
    """Block elimination along the forest from its leaves (module docstring); ``parent (K, W)``:
    the slot of each group's parent in the level above (``W``: none; ``W = 1``: ``m`` has no
    group axis)."""
    narrow = parent.shape[1] == 1
    if narrow and parent.shape[0] == 1:
        d_inv = inv(m.diagonal[0])[None]
        return BlockFactors(d_inv, jnp.zeros_like(d_inv), jnp.zeros_like(d_inv))

    def eliminate(fill, blocks):
        d, down, up, par = blocks
        s_inv = inv(d - fill)
        x = _dot(s_inv, down)
        return _to_parents(_dot(up, x), par, narrow), (s_inv, x)

    xs = (m.diagonal, m.down, m.up, jnp.asarray(parent))
    _, (inverses, coupled) = jax.lax.scan(eliminate, jnp.zeros_like(m.diagonal[0]), xs, reverse=True)
    return BlockFactors(inverses, coupled, jnp.concatenate([m.up[1:], jnp.zeros_like(m.up[:1])]))


def solve_blocks(f: BlockFactors, b: Float[Array, "K *W B"], parent: np.ndarray, indexed: bool | None = False) -> Float[Array, "K *W B"]:
    """``x`` with ``A x = b`` from ``factor_blocks``' result: ``lax.scan`` over the levels or,
    ``indexed``, loops that index them. Under ``vmap`` a scan over batched factors moves
    the batch axis behind the levels' at every solve (a transpose of all the factors); the
    indexed loops read each level where it lies. Indexed is the faster form for a batch (256
    Pandas in chunks of 4 over 0.2 s: 6 %; 16 in one ``vmap``: 9 %), the scan for a single
    system (12 % on a Panda). ``indexed=None``: indexed under a ``vmap`` of the factors, the
    scan otherwise (Newton's solves, which take no derivatives)."""
    if indexed is None:
        return _solve_blocks_by_batch(f, b, tuple(map(tuple, np.asarray(parent).tolist())))
    narrow = parent.shape[1] == 1
    if narrow and parent.shape[0] == 1:
        return _dot(f.inverses[0], b[0])[None]
    inverses, up_below, coupled = f.inverses, f.up_below, f.coupled
    par = jnp.asarray(parent)
    par_below = jnp.asarray(np.concatenate([parent[1:], parent[:1]]))  # the last level's: unused
    if indexed:
        return _solve_blocks_indexed(inverses, up_below, coupled, b, par, par_below, narrow)

    def up_the_tree(z_below, blocks):
        z = _up_level(*blocks, z_below, narrow)
        return z, z

    def down_the_tree(x_above, blocks):
        x = _down_level(*blocks, x_above, narrow)
        return x, x

    zero = jnp.zeros_like(b[0])
    _, z = jax.lax.scan(up_the_tree, zero, (inverses, up_below, b, par_below), reverse=True)
    _, x = jax.lax.scan(down_the_tree, zero, (coupled, z, par))
    return x


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _solve_blocks_by_batch(f: BlockFactors, b: Float[Array, "K *W B"], parent: tuple) -> Float[Array, "K *W B"]:
    """``parent`` as nested tuples: a hashable ``nondiff_argnums`` argument."""
    return _solve_blocks_by_vmap(f, b, parent)


@_solve_blocks_by_batch.defjvp
def _solve_blocks_by_batch_jvp(parent, primals, tangents):
    """Linear in ``b``; the factors carry no derivatives. (A ``custom_vmap`` has no rules for
    JAX's partial evaluation, which a ``grad`` through a checkpointed loop needs.)"""
    f, b = primals
    return _solve_blocks_by_batch(f, b, parent), _solve_blocks_by_batch(f, tangents[1], parent)


def _solve_blocks_by_vmap(f: BlockFactors, b: Float[Array, "K *W B"], parent: tuple) -> Float[Array, "K *W B"]:
    parent = np.asarray(parent)

    @jax.custom_batching.custom_vmap
    def solve(f, b):
        return solve_blocks(f, b, parent)

    @solve.def_vmap
    def rule(axis_size, in_batched, f, b):
        del axis_size
        in_axes = jax.tree.map(lambda batched: 0 if batched else None, in_batched)
        indexed = any(jax.tree.leaves(in_batched[0]))  # shared factors: the scan does not transpose them
        return jax.vmap(lambda f, b: solve_blocks(f, b, parent, indexed), in_axes=tuple(in_axes))(f, b), True

    return solve(f, b)


def _solve_blocks_indexed(inverses, up_below, coupled, b, par, par_below, narrow: bool):
    """``solve_blocks`` as loops that index the factors, level by level."""
    n = b.shape[0]

    def up_the_tree(i, carry):
        z_below, z = carry
        k = n - 1 - i
        zk = _up_level(inverses[k], up_below[k], b[k], par_below[k], z_below, narrow)
        return zk, z.at[k].set(zk)

    def down_the_tree(k, carry):
        x_above, x = carry
        xk = _down_level(coupled[k], z[k], par[k], x_above, narrow)
        return xk, x.at[k].set(xk)

    zero = jnp.zeros_like(b[0])
    _, z = jax.lax.fori_loop(0, n, up_the_tree, (zero, jnp.zeros_like(b)))
    _, x = jax.lax.fori_loop(0, n, down_the_tree, (zero, jnp.zeros_like(b)))
    return x


def _up_level(s_inv, up_below, bk, par_below, z_below, narrow: bool):
    """A level's ``z = S^{-1} (b - sum_children up_c z_c)`` from the level below."""
    return _dot(s_inv, bk - _to_parents(_dot(up_below, z_below), par_below, narrow))


def _down_level(x_up, zk, par, x_above, narrow: bool):
    """A level's ``x = z - X x_parent`` from the level above."""
    return zk - _dot(x_up, _from_parents(x_above, par, narrow))
