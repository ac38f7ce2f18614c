"""The structure of a multibody step's iteration matrix: an elimination order by levels, and
the Jacobian from compressed forward-mode derivatives.

The unknowns of an implicit step belong to bodies: each body's own (its increments or
accelerations) and the multipliers of the constraint rows it carries. Residual row ``k`` is the
equation of unknown ``k`` (the system is square and paired index by index). Two unknowns couple
only where their bodies are the same or act on each other through a constraint row or a force
element, so the iteration matrix is sparse.

**Order.** Bodies are numbered by breadth-first levels from the ground (each connected part in
turn; a part not tied to the ground from a pseudo-peripheral body, as in reverse Cuthill-McKee,
George & Liu 1981). A body acts only on bodies of its own and the adjacent levels, and a
constraint row between two levels is carried by the body of the later one, so the matrix in
this order is block tridiagonal. Consecutive levels are merged into blocks of up to
``block_size`` unknowns (one block: the dense matrix). With ``K`` blocks of size ``B`` the
factorisation (``difflie.numerics.linear.factor_blocks``) costs ``O(K B^3)``: linear in the
number of bodies for chains and trees of bounded width; loop closures widen the levels only.

**Compression** (Curtis, Powell & Reid 1974). Unknowns whose bodies are three or more couplings
apart never share a row, so one forward-mode derivative gives the columns of all of them. Bodies
are coloured greedily at distance two; a seed is a colour and a position among a body's
unknowns, and the Jacobian costs ``colours x (unknowns per body)`` derivative passes instead of
one per unknown.

The structure is built with NumPy when a step is traced, from the static topology of the model
(``difflie.Model.coupling``, ``difflie.Model.row_bodies``).

**Why this method** (measured: ``benchmarks/RESULTS.md``, Scaling). A dense ``jacfwd`` and LU
cost ``O(n^3)``: 36 ms for the matrix of a 64-body chain against 0.6 ms here. JAX has no
sparse direct solver that runs under ``jit``, ``vmap`` and ``grad`` on CPU
(``jax.experimental.sparse.linalg.spsolve`` is cuSolver on GPU and a host callback elsewhere).
A Schur complement on the mass blocks leaves ``G M^-1 G^T`` to factor, whose pattern is
the joints' adjacency: it still needs an ordering, and that is what the levels give.
Eliminating along a tree (Baraff 1996) is linear for any tree but needs a second mechanism for
loop closures; levels handle chains, trees and loops alike, in one ``lax.scan`` whose compiled
size does not depend on the number of bodies. Their cost is the width of a level: a hub with
many arms makes wide blocks (cubic in the width).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import linear


@dataclasses.dataclass(frozen=True, eq=False)
class Sparsity:
    """Blocks of a square iteration matrix and the seeds that build them (all static).

    ``index (K, B)``: the unknowns of each block (padding: ``n``); ``seeds``: one 0/1 matrix
    ``(n_leaf, s_leaf)`` per leaf of the unknowns; ``seed_col (n,)``: the compressed column of
    each unknown; ``couples(r, c)``: whether unknowns ``r`` and ``c`` (arrays) share a row.
    ``reads (3, K, B, B)``: where the diagonal, lower and upper blocks read the flattened
    compressed Jacobian, built on first use (a caller that takes the dense path of one block
    never needs it: 3 n^2 entries).
    """

    n: int
    leaves: tuple[int, ...]
    seeds: tuple[np.ndarray, ...]
    index: np.ndarray
    seed_col: np.ndarray
    couples: Callable[[np.ndarray, np.ndarray], np.ndarray]

    @functools.cached_property
    def reads(self) -> np.ndarray:
        """Flat gather indices into ``J S`` (``n x s``) of the diagonal, lower and upper blocks;
        a pad, or a pair of unknowns that share no row, reads entry ``n s``: a zero appended
        to it. One index array in the program, where a row index, a column index and a mask
        were three (at 1024 bodies the spider's program held 170 MB of such constants)."""
        n, index, s = self.n, self.index, self.num_seeds
        neighbour = [index, np.roll(index, 1, axis=0), np.roll(index, -1, axis=0)]
        neighbour[1][0] = n  # no block before the first
        neighbour[2][-1] = n  # nor after the last
        reads = []
        safe_col = np.append(self.seed_col, 0)
        for other in neighbour:
            r = np.broadcast_to(index[:, :, None], other.shape + other.shape[-1:])
            c = np.broadcast_to(other[:, None, :], r.shape)
            read = (r < n) & (c < n)
            read &= self.couples(np.minimum(r, n - 1), np.minimum(c, n - 1))
            reads.append(np.where(read, np.minimum(r, n - 1) * s + safe_col[c], n * s))
        return np.stack(reads).astype(np.int32 if n * s < 2**31 else np.int64)

    @property
    def num_blocks(self) -> int:
        return self.index.shape[0]

    @property
    def block_size(self) -> int:
        return self.index.shape[1]

    @property
    def num_seeds(self) -> int:
        return sum(s.shape[1] for s in self.seeds)

    # -- vectors ------------------------------------------------------------------------------

    def to_blocks(self, b: Float[Array, " n"]) -> Float[Array, "K B"]:
        return jnp.concatenate([b, jnp.zeros((1,), b.dtype)])[self.index]

    def from_blocks(self, xb: Float[Array, "K B"]) -> Float[Array, " n"]:
        return xb.reshape(-1)[_positions(self.index, self.n)]

    # -- matrices -----------------------------------------------------------------------------

    def blocks(self, compressed: Float[Array, "n s"]) -> linear.Blocks:
        """Diagonal, lower and upper blocks from the compressed Jacobian ``J S``."""
        dtype = compressed.dtype
        parts = jnp.concatenate([compressed.reshape(-1), jnp.zeros((1,), dtype)])[self.reads]
        pad = (self.index == self.n)[:, :, None] & np.eye(self.block_size, dtype=bool)
        return linear.Blocks(parts[0] + jnp.asarray(pad, dtype), parts[1], parts[2])

    def value_and_factors(
        self, f: Callable[[tuple[Array, ...]], Float[Array, " n"]], parts: Sequence[Array]
    ) -> tuple[Float[Array, " n"], linear.BlockFactors]:
        """``f(parts)`` and the factors of ``df/dparts``; ``parts`` are the flat leaves of the
        unknowns. Each leaf is pushed forward on its own seeds, the others held fixed, so a leaf
        that enters ``f`` through a small part of it (the multipliers, through ``G^T lambda``)
        costs that part only."""
        parts = tuple(parts)
        value, columns = None, []
        for i, (leaf, seed) in enumerate(zip(parts, self.seeds)):
            if leaf.shape[0] == 0:
                continue

            def push(s, i=i, leaf=leaf):
                return jax.jvp(lambda z: f(parts[:i] + (z,) + parts[i + 1 :]), (leaf,), (s,))

            value, cols = jax.vmap(push, in_axes=1, out_axes=(None, 1))(jnp.asarray(seed, leaf.dtype))
            columns.append(cols)
        return value, linear.factor_blocks(self.blocks(jnp.concatenate(columns, axis=1)))

    def solve(self, factors: linear.BlockFactors, b: Float[Array, " n"], indexed: bool | None = False) -> Float[Array, " n"]:
        """``A^{-1} b`` with the factors of ``A``; ``indexed``: the form of the block solve
        (``linear.solve_blocks``; ``None``: by batch, for Newton's solves)."""
        return self.from_blocks(linear.solve_blocks(factors, self.to_blocks(b), indexed))

    def tangent_solve(self, g: Callable[[Array], Array], y: Float[Array, " n"]) -> Float[Array, " n"]:
        """``J^{-1} y`` for the linear map ``g`` of this structure (``difflie.numerics.newton.implicit_derivatives``)."""
        seeds = jnp.asarray(_block_diagonal(self.seeds), y.dtype)
        compressed = jax.vmap(g, in_axes=1, out_axes=1)(seeds)
        return self.solve(linear.factor_blocks(self.blocks(compressed)), y)


def dense(leaves: Sequence[int]) -> Sparsity:
    """One block holding every unknown: the plain dense matrix."""
    leaves = tuple(int(k) for k in leaves)
    n = sum(leaves)
    order = np.arange(n)
    return _assemble(n, leaves, [order], np.arange(n), [np.eye(k) for k in leaves], lambda r, c: np.ones(r.shape, bool))


def block_structure(
    num_bodies: int,
    coupling: np.ndarray | None,
    body_unknowns: np.ndarray,
    row_bodies: np.ndarray,
    leaves: Sequence[int],
    block_size: int | None,
) -> Sparsity:
    """The structure of a step whose unknowns are ``[body unknowns, multipliers]``.

    ``coupling (e, 2)``: pairs of bodies acting on each other (ground: -1; ``None``: any pair);
    ``body_unknowns (n_b,)``: the body of each body unknown; ``row_bodies (m, 2)``: the bodies of
    each multiplier's constraint row; ``leaves``: sizes of the flat leaves the unknowns come in
    (in order, summing to ``n_b + m``); ``block_size``: the largest block built by merging
    levels (``None``: one dense block)."""
    leaves = tuple(int(k) for k in leaves)
    body_unknowns = np.asarray(body_unknowns, np.int64)
    row_bodies = np.asarray(row_bodies, np.int64).reshape(-1, 2)
    n = body_unknowns.shape[0] + row_bodies.shape[0]
    if sum(leaves) != n:
        raise ValueError(f"block_structure: leaves {leaves} do not add up to {n} unknowns")
    if coupling is None or block_size is None or num_bodies <= 1:
        return dense(leaves)

    pairs = np.concatenate([np.asarray(coupling, np.int64).reshape(-1, 2), row_bodies])
    adjacent = np.eye(num_bodies, dtype=bool)
    inner = pairs[(pairs >= 0).all(axis=1)]
    adjacent[inner[:, 0], inner[:, 1]] = adjacent[inner[:, 1], inner[:, 0]] = True
    grounded = np.zeros(num_bodies, bool)
    grounded[pairs[(pairs < 0).any(axis=1)].max(axis=1)] = True
    levels = _levels(adjacent, grounded)
    level = np.empty(num_bodies, np.int64)
    for k, bodies in enumerate(levels):
        level[bodies] = k

    if np.any((row_bodies < 0).all(axis=1)):
        raise ValueError("block_structure: a constraint row acts on no body (both are the ground)")
    # A row is carried by its body of the later level (of the higher index on a tie).
    key = np.where(row_bodies >= 0, level[np.maximum(row_bodies, 0)] * (num_bodies + 1) + row_bodies, -1)
    carrier = row_bodies[np.arange(row_bodies.shape[0]), np.argmax(key, axis=1)]
    node = np.concatenate([body_unknowns, carrier])

    # Blocks: consecutive levels merged up to block_size unknowns.
    size = np.bincount(level[node], minlength=len(levels))
    blocks, current, filled = [], [], 0
    for k in range(len(levels)):
        if current and filled + size[k] > block_size:
            blocks.append(current)
            current, filled = [], 0
        current.append(k)
        filled += size[k]
    blocks.append(current)
    block_of_level = np.empty(len(levels), np.int64)
    for b, ks in enumerate(blocks):
        block_of_level[ks] = b
    block = block_of_level[level[node]]
    order = [np.flatnonzero(block == b) for b in range(len(blocks))]

    colour = _distance2_colouring(adjacent, np.concatenate(levels))
    seeds, seed_col, offset = [], np.empty(n, np.int64), 0
    for start, width in zip(np.cumsum((0,) + leaves[:-1]), leaves):
        nodes = node[start : start + width]
        local = np.zeros(width, np.int64)  # position of an unknown among its body's in this leaf
        count = np.zeros(num_bodies, np.int64)
        for k, b in enumerate(nodes):
            local[k] = count[b]
            count[b] += 1
        per_body = int(count.max()) if width else 0
        slot = colour[nodes] * per_body + local
        s = np.zeros((width, (colour.max() + 1) * per_body))
        s[np.arange(width), slot] = 1.0
        seeds.append(s)
        seed_col[start : start + width] = offset + slot
        offset += s.shape[1]
    return _assemble(n, leaves, order, seed_col, seeds, lambda r, c: adjacent[node[r], node[c]])


def _assemble(n, leaves, order, seed_col, seeds, couples) -> Sparsity:
    """The blocks' index (K, B) of the unknowns in ``order`` (one array per block)."""
    K, B = len(order), max(len(o) for o in order)
    index = np.full((K, B), n, np.int64)
    for b, o in enumerate(order):
        index[b, : len(o)] = o
    return Sparsity(n, tuple(leaves), tuple(seeds), index, seed_col, couples)


def _levels(adjacent: np.ndarray, grounded: np.ndarray) -> list[np.ndarray]:
    """Breadth-first levels of each connected part in turn: from its grounded bodies, or from
    a pseudo-peripheral body (the last reached from its first body)."""
    seen = np.zeros(adjacent.shape[0], bool)
    levels: list[np.ndarray] = []
    for first in range(adjacent.shape[0]):
        if seen[first]:
            continue
        part = _bfs(adjacent, np.array([first]))
        part_set = np.concatenate(part)
        seen[part_set] = True
        roots = part_set[grounded[part_set]]
        if roots.size == 0:
            roots = part[-1][:1]
        levels.extend(_bfs(adjacent, np.sort(roots)))
    return levels


def _bfs(adjacent: np.ndarray, roots: np.ndarray) -> list[np.ndarray]:
    reached = np.zeros(adjacent.shape[0], bool)
    reached[roots] = True
    frontier, out = roots, []
    while frontier.size:
        out.append(frontier)
        nxt = adjacent[frontier].any(axis=0) & ~reached
        reached |= nxt
        frontier = np.flatnonzero(nxt)
    return out


def _distance2_colouring(adjacent: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Greedy colours, distinct for bodies one or two couplings apart (``adjacent`` holds its
    diagonal, so the rows of a body's neighbours mark every body within two couplings: the
    neighbours' rows only, where the square of ``adjacent`` took 7 s at 1024 bodies)."""
    colour = np.full(adjacent.shape[0], -1, np.int64)
    for v in order:
        used = set(colour[adjacent[adjacent[v]].any(axis=0)].tolist())
        c = 0
        while c in used:
            c += 1
        colour[v] = c
    return colour


def _block_diagonal(mats: Sequence[np.ndarray]) -> np.ndarray:
    out = np.zeros((sum(m.shape[0] for m in mats), sum(m.shape[1] for m in mats)))
    r = c = 0
    for m in mats:
        out[r : r + m.shape[0], c : c + m.shape[1]] = m
        r, c = r + m.shape[0], c + m.shape[1]
    return out


def _positions(index: np.ndarray, n: int) -> np.ndarray:
    """Where each unknown sits in the flattened blocks."""
    pos = np.empty(n, np.int64)
    flat = index.reshape(-1)
    real = flat < n
    pos[flat[real]] = np.flatnonzero(real)
    return pos
