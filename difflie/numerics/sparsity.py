"""The structure of a multibody step's iteration matrix: groups of unknowns along a forest,
eliminated from its leaves, and the Jacobian from compressed forward-mode derivatives.

The unknowns of an implicit step belong to bodies: each body's own (its increments or
accelerations) and the multipliers of the constraint rows it carries. Residual row ``k`` is the
equation of unknown ``k`` (the system is square and paired index by index). Two unknowns couple
only where their bodies are the same or act on each other through a constraint row or a force
element, so the iteration matrix is sparse.

**Levels.** Bodies are numbered by breadth-first levels from the ground (each connected part in
turn; a part not tied to the ground from a pseudo-peripheral body, as in reverse Cuthill-McKee,
George & Liu 1981); a body acts only on bodies of its own and the adjacent levels.

**Carriers.** A body carries the rows of its tree joint (its joint to the first body it hangs
from, one level nearer the ground) and of its joints to the ground; a row that closes a loop is
carried by its body nearer the ground.

**Groups** (``_forest``). From the deepest level up, bodies of a level that act on each other
join one group, and all bodies of the level above that a group acts on join one group, its
parent: the groups' couplings form a forest. In a tree every body is a group of its own (with
its tree joint's rows); a loop closure merges the bodies around it. A group that is its
parent's only child is merged into it up to ``block_size`` unknowns, and a leaf that has
siblings up to 32 (a level one group narrower).

**Elimination** (``difflie.numerics.linear.factor_blocks``), from the leaves: a group's Schur
complement ``S = D - sum over its children of up S_c^{-1} down`` is all its parent receives,
so the fill stays in the parent's block (Baraff 1996 for trees). The groups are laid out by
depth, ``K`` levels of ``W`` groups of up to ``B`` unknowns, and factored by one ``lax.scan``
over the levels with a stack of ``W`` inverses in each: ``O(K W B^3)``, linear in the bodies
for chains and trees of any width. Eliminating a group before its parent needs its block to
be invertible: its own rows independent on its own coordinates with its children eliminated,
which the carriers give (a tree joint holds its child; a rod between two spherical joints that
carried both would be singular alone: the rod's spin is free and both joints hold its axial
position).

**Compression** (Curtis, Powell & Reid 1974). Unknowns whose bodies are three or more couplings
apart never share a row, so one forward-mode derivative gives the columns of all of them. Bodies
are coloured greedily at distance two; a seed is a colour and a position among a body's
unknowns, and the Jacobian costs ``colours x (unknowns per body)`` derivative passes instead of
one per unknown. A hub's rows hold every neighbour's unknowns, so colouring through them would
give each neighbour its own colour (a hub with 64 arms: 65 colours, 390 passes); the rows of a
body with more than eight neighbours come by reverse mode instead, one pass per row, and the
colouring ignores them (Coleman & Verma 1998; the same hub: 27 forward and 9 reverse passes).

The structure is built with NumPy when a step is traced, from the static topology of the model
(``difflie.Model.coupling``, ``difflie.Model.row_bodies``).

**Why this method** (measured: ``benchmarks/RESULTS.md``, Scaling). A dense ``jacfwd`` and LU
cost ``O(n^3)``: 36 ms for the matrix of a 64-body chain against 0.6 ms here. JAX has no
sparse direct solver that runs under ``jit``, ``vmap`` and ``grad`` on CPU
(``jax.experimental.sparse.linalg.spsolve`` is cuSolver on GPU and a host callback elsewhere).
A Schur complement on the mass blocks leaves ``G M^-1 G^T`` to factor, whose pattern is the
joints' adjacency: the joints at a hub form a clique. Whole levels as blocks of a
block-tridiagonal matrix (the method here until 2026-11-27) handle loops alike but cost the cube
of a level's width: a hub with 64 arms of four bodies took 9.2 ms per step, 0.2 ms in groups.
One ``lax.scan`` over the levels keeps the compiled program's size independent of the number
of bodies.
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

    ``index (K, W, B)``: the unknowns of each group, ``W`` groups to a level (padding: ``n``);
    ``parent (K, W)``: the slot of each group's parent group in the level above (``W``: a root
    or a pad); ``seeds``: one 0/1 matrix ``(n_leaf, s_leaf)`` per leaf of the unknowns;
    ``seed_col (n,)``: the compressed column of each unknown; ``couples(r, c)``: whether
    unknowns ``r`` and ``c`` (arrays) share a row; ``hub_rows``: the unknowns whose rows are
    taken by reverse-mode derivatives (a hub's: module docstring). ``reads (3, K, W, B, B)``:
    where the diagonal, down and up blocks read the flattened Jacobian parts, built on first use
    (a caller that takes the dense path of one block never needs it: 3 n^2 entries).
    """

    n: int
    leaves: tuple[int, ...]
    seeds: tuple[np.ndarray, ...]
    index: np.ndarray
    parent: np.ndarray
    seed_col: np.ndarray
    couples: Callable[[np.ndarray, np.ndarray], np.ndarray]
    hub_rows: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))

    @functools.cached_property
    def reads(self) -> np.ndarray:
        """Flat gather indices into ``[J S, 0, J[hub_rows]]`` (``n x s``, one zero, ``h x n``)
        of the diagonal, down and up blocks; a pad, or a pair of unknowns that share no row,
        reads the zero (entry ``n s``). One index array in the program, where a row index, a
        column index and a mask were three (at 1024 bodies the spider's program held 170 MB of
        such constants)."""
        n, index, s = self.n, self.index, self.num_seeds
        above = np.concatenate([np.full((1,) + index.shape[1:], n), index[:-1]])
        above = np.concatenate([above, np.full(above[:, :1].shape, n)], axis=1)  # slot W: none
        parents = above[np.arange(index.shape[0])[:, None], self.parent]
        safe_col = np.append(self.seed_col, 0)
        hub = np.full(n + 1, -1)
        hub[self.hub_rows] = np.arange(self.hub_rows.size)
        reads = []
        for rows, cols in ((index, index), (index, parents), (parents, index)):
            r = np.broadcast_to(rows[..., :, None], rows.shape + rows.shape[-1:])
            c = np.broadcast_to(cols[..., None, :], r.shape)
            read = (r < n) & (c < n)
            read &= self.couples(np.minimum(r, n - 1), np.minimum(c, n - 1))
            entry = np.where(hub[r] >= 0, n * s + 1 + hub[r] * n + np.minimum(c, n - 1), np.minimum(r, n - 1) * s + safe_col[c])
            reads.append(np.where(read, entry, n * s))
        size = n * s + 1 + self.hub_rows.size * n
        reads = np.stack(reads).astype(np.int32 if size < 2**31 else np.int64)
        return reads[:, :, 0] if self.narrow else reads

    @property
    def num_levels(self) -> int:
        return self.index.shape[0]

    @property
    def width(self) -> int:
        """The most groups in a level."""
        return self.index.shape[1]

    @property
    def block_size(self) -> int:
        """The most unknowns in a group."""
        return self.index.shape[2]

    @property
    def narrow(self) -> bool:
        """One group to every level (a path of groups): the arrays of ``difflie.numerics.linear``
        then have no group axis, ``(K, B)`` and ``(K, B, B)``."""
        return self.index.shape[1] == 1

    @property
    def is_dense(self) -> bool:
        """One group: the dense matrix."""
        return self.index.shape[:2] == (1, 1)

    @property
    def num_seeds(self) -> int:
        return sum(s.shape[1] for s in self.seeds)

    def zero_factors(self, dtype) -> linear.BlockFactors:
        """Factors of this structure's shape, all zero (a kept matrix not built yet)."""
        zero = jnp.zeros(self._index.shape + self._index.shape[-1:], dtype)
        return linear.BlockFactors(zero, zero, zero)

    # -- vectors ------------------------------------------------------------------------------

    @property
    def _index(self) -> np.ndarray:
        return self.index[:, 0] if self.narrow else self.index

    def to_blocks(self, b: Float[Array, " n"]) -> Float[Array, "K *W B"]:
        return jnp.concatenate([b, jnp.zeros((1,), b.dtype)])[self._index]

    def from_blocks(self, xb: Float[Array, "K *W B"]) -> Float[Array, " n"]:
        return xb.reshape(-1)[_positions(self.index, self.n)]

    # -- matrices -----------------------------------------------------------------------------

    def blocks(self, compressed: Float[Array, "n s"], hub_rows: Float[Array, "h n"] | None = None) -> linear.Blocks:
        """Diagonal, down and up blocks from the compressed Jacobian ``J S`` and the rows
        ``J[self.hub_rows]``."""
        dtype = compressed.dtype
        flat = [compressed.reshape(-1), jnp.zeros((1,), dtype)] + ([] if hub_rows is None else [hub_rows.reshape(-1)])
        parts = jnp.concatenate(flat)[self.reads]
        pad = (self._index == self.n)[..., None] & np.eye(self.block_size, dtype=bool)
        return linear.Blocks(parts[0] + jnp.asarray(pad, dtype), parts[1], parts[2])

    def factor(self, m: linear.Blocks) -> linear.BlockFactors:
        return linear.factor_blocks(m, self.parent)

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
        rows = None
        if self.hub_rows.size:
            rows = self._rows(jax.vjp(lambda *p: f(p), *parts)[1], value.dtype)
        return value, self.factor(self.blocks(jnp.concatenate(columns, axis=1), rows))

    def _rows(self, pullback: Callable, dtype) -> Float[Array, "h n"]:
        """``J[hub_rows]``, one reverse pass per row, from ``pullback`` (of ``J^T``)."""
        unit = np.zeros((self.hub_rows.size, self.n))
        unit[np.arange(self.hub_rows.size), self.hub_rows] = 1.0
        return jnp.concatenate(jax.tree.leaves(jax.vmap(pullback)(jnp.asarray(unit, dtype))), axis=-1)

    def solve(self, factors: linear.BlockFactors, b: Float[Array, " n"], indexed: bool | None = False) -> Float[Array, " n"]:
        """``A^{-1} b`` with the factors of ``A``; ``indexed``: the form of the block solve
        (``linear.solve_blocks``; ``None``: by batch, for Newton's solves)."""
        return self.from_blocks(linear.solve_blocks(factors, self.to_blocks(b), self.parent, indexed))

    def tangent_solve(self, g: Callable[[Array], Array], y: Float[Array, " n"]) -> Float[Array, " n"]:
        """``J^{-1} y`` for the linear map ``g`` of this structure (``difflie.numerics.newton.implicit_derivatives``)."""
        seeds = jnp.asarray(_block_diagonal(self.seeds), y.dtype)
        compressed = jax.vmap(g, in_axes=1, out_axes=1)(seeds)
        rows = self._rows(jax.linear_transpose(g, y), y.dtype) if self.hub_rows.size else None
        return self.solve(self.factor(self.blocks(compressed, rows)), y)


def dense(leaves: Sequence[int]) -> Sparsity:
    """One block holding every unknown: the plain dense matrix."""
    leaves = tuple(int(k) for k in leaves)
    n = sum(leaves)
    return Sparsity(
        n, leaves, tuple(np.eye(k) for k in leaves), np.arange(n)[None, None], np.ones((1, 1), np.int64),
        np.arange(n), lambda r, c: np.ones(r.shape, bool),
    )  # fmt: skip


# A step of at most this many unknowns whose iteration matrix is kept (modified Newton) is one
# dense matrix whatever the block size: a dense LU and its solves are fewer kernels than the
# blocks' elimination. Modified Newton, one core, interleaved runs (2026-11-27): dense / blocks
# 0.72-0.83 for the four link, the slider cranks and a four-bar ladder loop (30-36 unknowns),
# 0.85-0.98 for chains and trees of 2-4 bodies, 0.90 (generalized-alpha) and 1.03 (backward
# Euler) for a revolute chain of 4 (44); 1.05-1.38 for a chain of 8 (72). A matrix built at
# every iteration (full Newton) stays in blocks: its dense build takes a derivative per unknown
# where the blocks' colouring takes a few (a chain of 4: 34 -> 56 us per step dense).
DENSE_STEP_LIMIT = 48


def step_block_size(unknowns: int, block_size: int | None, kept: bool) -> int | None:
    """The block size of a solver's step: ``None`` (dense) up to ``DENSE_STEP_LIMIT`` unknowns
    where the iteration matrix is ``kept`` across iterations and steps."""
    return None if kept and unknowns <= DENSE_STEP_LIMIT else block_size


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
    (in order, summing to ``n_b + m``); ``block_size``: groups along a path of the forest are
    merged up to this many unknowns (``None``: one dense block)."""
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
    carrier = _carriers(row_bodies, level)
    node = np.concatenate([body_unknowns, carrier])

    group, parent = _forest(adjacent, levels, level, np.bincount(node, minlength=num_bodies), block_size)
    index, parent_slot = _layout(group[node], parent)

    hub = adjacent.sum(axis=1) - 1 > _HUB_DEGREE
    colour = _distance2_colouring(adjacent, np.concatenate(levels), ~hub)
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
    return Sparsity(n, leaves, tuple(seeds), index, parent_slot, seed_col, lambda r, c: adjacent[node[r], node[c]],
                    np.flatnonzero(hub[node]))  # fmt: skip


# A body with more neighbours than this is a hub: its rows come by reverse-mode derivatives.
_HUB_DEGREE = 8
# A leaf group joins its parent, when the parent has other children, up to this many unknowns
# (a level one group narrower; the Gauss-Jordan inverses' limit, ``linear._GAUSS_JORDAN_MAX``).
_LEAF_MERGE = 32


def _carriers(row_bodies: np.ndarray, level: np.ndarray) -> np.ndarray:
    """The body that carries each constraint row (whose group its multiplier joins).

    A body's joint to the body it hangs from (its first body one level nearer the ground with
    which it shares a row: its tree joint) and its joints to the ground are its own; any other
    row (one that closes a loop) is carried by its body nearer the ground. Eliminating from the
    leaves, a body then meets its tree joint's rows, which are independent on its own
    coordinates; a body that carried two joints of a loop (a rod between two spherical joints)
    would meet a singular block. A tree joint goes with its child, not its parent: a hub with
    many arms keeps a block of its own size."""
    nb = level.shape[0]
    i, j = row_bodies[:, 0], row_bodies[:, 1]
    both = (i >= 0) & (j >= 0)
    up = np.full(nb, nb)  # each body's tree partner (nb: none)
    for a, b in ((i, j), (j, i)):
        hangs = both & (level[np.maximum(b, 0)] == level[np.maximum(a, 0)] - 1)
        np.minimum.at(up, a[hangs], b[hangs])
    own_i = (j < 0) | (both & (up[np.maximum(i, 0)] == j))
    own_j = (i < 0) | (both & (up[np.maximum(j, 0)] == i))
    nearer = np.where(level[np.maximum(i, 0)] <= level[np.maximum(j, 0)], i, j)
    return np.where(own_i, i, np.where(own_j, j, nearer))


def _forest(adjacent: np.ndarray, levels: list[np.ndarray], level: np.ndarray, unknowns: np.ndarray, block_size: int):
    """Bodies in groups whose couplings form a forest: ``(group of each body, parent group of
    each group (-1: a root))``, groups numbered ``0 .. g-1``; ``levels``: the bodies of each
    level, ``level``: the level of each body.

    From the deepest level up, bodies of a level that act on each other join one group, and
    the bodies of the level above that a group acts on join one group (its parent): in a tree
    every body is a group, a loop closure merges the bodies around it level by level. Then a
    group that is its parent's only child is merged into it while the two hold at most
    ``block_size`` unknowns (a chain of small bodies in fewer, larger blocks), and a leaf whose
    parent has other children up to ``_LEAF_MERGE`` (a ladder's rung joins its rails: one
    group to a level, no stack of two)."""
    nb = adjacent.shape[0]
    root = np.arange(nb)

    def find(b):
        while root[b] != b:
            root[b] = root[root[b]]
            b = root[b]
        return b

    def union(bodies):
        r = [find(b) for b in bodies]
        for other in r[1:]:
            root[other] = r[0]

    for k in range(len(levels) - 1, -1, -1):
        bodies = levels[k]
        for i, b in enumerate(bodies):
            union([b, *bodies[i + 1 :][adjacent[b, bodies[i + 1 :]]]])
        if k == 0:
            break
        above = level == k - 1
        members: dict[int, list[int]] = {}
        for b in bodies:
            members.setdefault(find(b), []).append(b)
        for group_bodies in members.values():
            touched = np.flatnonzero(adjacent[group_bodies].any(axis=0) & above)
            if touched.size > 1:
                union(touched)
    group = np.array([find(b) for b in range(nb)])
    reps, group = np.unique(group, return_inverse=True)
    parent = np.full(reps.size, -1)
    for g, rep in enumerate(reps):
        bodies = np.flatnonzero(group == g)
        touched = adjacent[bodies].any(axis=0) & (level == level[rep] - 1)
        if touched.any():
            parent[g] = group[np.flatnonzero(touched)[0]]
    # Merge only children into their parents, and leaves into parents of several children
    # (a narrower level), deepest first.
    size = np.bincount(group, weights=unknowns, minlength=reps.size).astype(np.int64)
    children = np.bincount(parent[parent >= 0], minlength=reps.size)
    into = np.arange(reps.size)
    for g in np.argsort(-level[reps], kind="stable"):
        p = parent[g]
        if p < 0:
            continue
        only = children[p] == 1 and size[g] + size[p] <= block_size
        leaf = children[g] == 0 and children[p] > 1 and size[g] + size[p] <= _LEAF_MERGE
        if only or leaf:
            into[g] = p
            size[p] += size[g]
            children[p] += children[g] - 1
            parent[parent == g] = p
    for g in np.argsort(level[reps], kind="stable"):  # shallowest first: a target is final
        into[g] = into[into[g]]
    kept, into = np.unique(into, return_inverse=True)
    new_parent = np.full(kept.size, -1)
    for g, p in enumerate(parent):
        if p >= 0 and into[p] != into[g]:
            new_parent[into[g]] = into[p]
    return into[group], new_parent


def _layout(group_of: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``index (K, W, B)`` of the unknowns (group ``group_of[i]`` of unknown ``i``) by depth in
    the forest, and each group's parent slot ``(K, W)`` in the level above (``W``: none)."""
    n, groups = group_of.shape[0], parent.shape[0]
    depth = np.full(groups, -1)
    depth[parent < 0] = 0
    while (depth < 0).any():
        ready = (depth < 0) & (depth[np.maximum(parent, 0)] >= 0)
        depth[ready] = depth[parent[ready]] + 1
    slot = np.empty(groups, np.int64)
    by_level = []
    for k in range(depth.max() + 1):
        at = np.flatnonzero(depth == k)
        if k:
            at = at[np.argsort(slot[parent[at]], kind="stable")]  # siblings side by side
        slot[at] = np.arange(at.size)
        by_level.append(at)
    K, W = len(by_level), max(at.size for at in by_level)
    members = np.split(np.argsort(group_of, kind="stable"), np.cumsum(np.bincount(group_of, minlength=groups))[:-1])
    B = max(m.size for m in members)
    index = np.full((K, W, B), n, np.int64)
    parent_slot = np.full((K, W), W, np.int64)
    for k, at in enumerate(by_level):
        for g in at:
            index[k, slot[g], : members[g].size] = members[g]
            if parent[g] >= 0:
                parent_slot[k, slot[g]] = slot[parent[g]]
    return index, parent_slot


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


def _distance2_colouring(adjacent: np.ndarray, order: np.ndarray, through: np.ndarray) -> np.ndarray:
    """Greedy colours, distinct for bodies that share a row of a body in ``through`` (one
    coupling apart, or two by way of such a body). ``adjacent`` holds its diagonal, so the rows
    of a body's neighbours mark every body within two couplings: the neighbours' rows only,
    where the square of ``adjacent`` took 7 s at 1024 bodies."""
    colour = np.full(adjacent.shape[0], -1, np.int64)
    for v in order:
        used = set(colour[adjacent[adjacent[v] & through].any(axis=0)].tolist())
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
