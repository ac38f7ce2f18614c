"""``ConstraintSet``: all position-level constraints of a model, as one stack of rows.

``residual(t, r, R)`` returns ``Phi (m,)`` in the order the constraints were given; ``r`` are
the world positions of the body-frame origins (nb, 3) and ``R`` the rotations (nb, 3, 3). Every
kind is the bilinear row ``u . e - f`` of ``basic.FORMS``, so the rows of all kinds are one
stack of vectors (m, 5, 3) with constant coefficients, evaluated by one row kernel per group of
kinds (``_GROUPS``: at most three in a program, whatever kinds the model uses). Only the (few)
distinct driver functions are visited one by one, since each is a different Python function of
``t``.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..lie.ops import mv
from .basic import DRIVEN_ANGLE, FORMS, GROUND, KINDS, SLOTS, BasicConstraint, angle_weights


class ConstraintSet(eqx.Module):
    """Basic constraints between ``num_bodies`` bodies and the ground (index -1), as one stack.

    ``vectors (m, 5, 3)`` holds each row's vectors in the slots ``basic.SLOTS`` (zero where its
    kind has none); ``row_kinds``, ``body_i``, ``body_j`` are static, so the coefficients of
    ``basic.FORMS`` and the body selections are constants of a compiled program.
    """

    vectors: Float[Array, "m 5 3"]
    offset: Float[Array, " m"]
    drivers: tuple
    thetas: tuple
    body_i: tuple[int, ...] = eqx.field(static=True)
    body_j: tuple[int, ...] = eqx.field(static=True)
    row_kinds: tuple[str, ...] = eqx.field(static=True)
    driver_rows: tuple[int, ...] = eqx.field(static=True)
    angle_rows: tuple[int, ...] = eqx.field(static=True)  # rows of a driven angle, one theta each
    names: tuple[str, ...] = eqx.field(static=True)
    num_bodies: int = eqx.field(static=True)

    def __init__(self, constraints: Sequence[BasicConstraint], num_bodies: int):
        constraints = list(_flatten(constraints))
        if not constraints:
            raise ValueError("ConstraintSet: no constraints given (use constraints=None for a free model)")
        for k, c in enumerate(constraints):
            if not isinstance(c, BasicConstraint):
                raise ValueError(f"ConstraintSet: entry {k} is a {type(c).__name__}, not a BasicConstraint")
            for b, side in ((c.body_i, "body_i"), (c.body_j, "body_j")):
                if b >= num_bodies:
                    raise ValueError(
                        f"ConstraintSet: constraint {k} ({c.name or c.kind}) {side} = {b} but the model has "
                        f"{num_bodies} bodies (indices 0..{num_bodies - 1}, ground = {GROUND})"
                    )
        self.num_bodies = num_bodies
        self.body_i = tuple(int(c.body_i) for c in constraints)
        self.body_j = tuple(int(c.body_j) for c in constraints)
        self.row_kinds = tuple(c.kind for c in constraints)
        self.names = tuple(c.name or f"{c.kind}_{k}" for k, c in enumerate(constraints))
        dtype = jnp.result_type(*(v for c in constraints for v in c.vectors))
        slots = []
        for c in constraints:
            given = dict(zip(FORMS[c.kind].slots, c.vectors))
            slots.append(jnp.stack([given.get(slot, jnp.zeros(3, dtype)).astype(dtype) for slot in SLOTS]))
        self.vectors = jnp.stack(slots)
        self.offset = jnp.stack(
            [
                jnp.zeros((), dtype) if (callable(c.f) or c.kind in DRIVEN_ANGLE) else jnp.asarray(c.f, dtype)
                for c in constraints
            ]
        )
        self.driver_rows = tuple(k for k, c in enumerate(constraints) if callable(c.f) and c.kind not in DRIVEN_ANGLE)
        self.drivers = tuple(constraints[k].f for k in self.driver_rows)
        self.angle_rows = tuple(k for k, c in enumerate(constraints) if c.kind in DRIVEN_ANGLE)
        self.thetas = tuple(
            constraints[k].f if callable(constraints[k].f) else _Const(jnp.asarray(constraints[k].f, dtype))
            for k in self.angle_rows
        )

    def take(self, rows: Sequence[int]) -> ConstraintSet:
        """The set of the given rows only, in the given order (names, drivers and angles kept)."""
        return ConstraintSet([self._basic(int(k)) for k in rows], self.num_bodies)

    def _basic(self, k: int) -> BasicConstraint:
        """Row ``k`` as the ``BasicConstraint`` it was built from."""
        kind = self.row_kinds[k]
        vectors = tuple(self.vectors[k, SLOTS.index(slot)] for slot in FORMS[kind].slots)
        if k in self.driver_rows:
            f = self.drivers[self.driver_rows.index(k)]
        elif k in self.angle_rows:
            theta = self.thetas[self.angle_rows.index(k)]
            f = theta.value if isinstance(theta, _Const) else theta
        else:
            f = self.offset[k]
        return BasicConstraint(kind, self.body_i[k], self.body_j[k], vectors, f, self.names[k])

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds present, in ``basic.KINDS`` order."""
        return tuple(k for k in KINDS if k in self.row_kinds)

    @property
    def row_bodies(self) -> tuple[tuple[int, int], ...]:
        """``(body_i, body_j)`` of each row."""
        return tuple(zip(self.body_i, self.body_j))

    @property
    def driven_rows(self) -> tuple[int, ...]:
        """The rows that depend on time: drivers, and joint angles given as functions."""
        angles = (k for k, theta in zip(self.angle_rows, self.thetas) if not isinstance(theta, _Const))
        return tuple(sorted((*self.driver_rows, *angles)))

    def undefined_drivers(self, t: float) -> tuple[str, ...]:
        """The driven rows whose function of time is NaN or Inf at ``t`` (concrete; a driver
        outside its domain): what a Newton residual that is not finite may come from."""
        return tuple(self.names[k] for k in self.driven_rows if not np.all(np.isfinite(np.asarray(self._basic(k).f(t)))))

    @property
    def driven(self) -> bool:
        """Whether a row depends on time: a driver, or a joint angle given as a function."""
        return bool(self.driven_rows)

    @property
    def num_constraints(self) -> int:
        return len(self.names)

    def f(self, t) -> Float[Array, " m"]:
        """Right-hand sides ``f(t)`` of all non-angle rows (zero for angle rows)."""
        out = self.offset
        if self.drivers:
            values = jnp.stack([jnp.asarray(drv(t), out.dtype) for drv in self.drivers])
            out = out + _place(self.driver_rows, self.num_constraints, values)
        return out

    def residual(self, t, r: Float[Array, "nb 3"], R: Float[Array, "nb 3 3"]) -> Float[Array, " m"]:
        """``Phi(t, r, R)`` (m,) in the order the constraints were given."""
        r = jnp.asarray(r)
        R = jnp.asarray(R)
        if r.shape != (self.num_bodies, 3) or R.shape != (self.num_bodies, 3, 3):
            raise ValueError(
                f"ConstraintSet.residual: expected r ({self.num_bodies}, 3) and R ({self.num_bodies}, 3, 3), "
                f"got {r.shape} and {R.shape}"
            )
        dtype = jnp.result_type(r, R)
        m = self.num_constraints
        f = self.f(t).astype(dtype)
        v = self.vectors.astype(dtype)
        q = v[:, 2]
        if self.angle_rows:
            theta = jnp.stack([jnp.asarray(th(t), dtype) for th in self.thetas])
            swap = np.asarray([self.row_kinds[k] == "dp1_swap" for k in self.angle_rows])
            w_q, w_b2, f_theta = angle_weights(swap, theta)
            rows = self.angle_rows
            q = (1.0 + _place(rows, m, w_q - 1.0))[:, None] * q + _place(rows, m, w_b2)[:, None] * v[:, 3]
            f = f + _place(rows, m, f_theta)
        r_ext = jnp.concatenate([r, jnp.zeros((1, 3), dtype)])  # the ground is the last body
        R_ext = jnp.concatenate([R, jnp.eye(3, dtype=dtype)[None]])
        values, order = [], []
        for group in _GROUPS:
            rows = np.asarray([k for k, kind in enumerate(self.row_kinds) if kind in group], np.int64)
            if rows.size:
                values.append(self._rows(rows, r_ext, R_ext, v[rows], q[rows]))
                order.append(rows)
        values = jnp.concatenate(values) if len(values) > 1 else values[0]
        order = np.concatenate(order)
        if (order != np.arange(m)).any():  # back to the given order
            values = _permute(np.argsort(order), values)
        return values - f

    def _rows(self, rows: np.ndarray, r_ext, R_ext, v: Float[Array, "k 5 3"], q: Float[Array, "k 3"]) -> Float[Array, " k"]:
        """``u . e`` of some rows (``basic.RowForm``): only the terms their kinds use."""
        k, nb1 = rows.size, r_ext.shape[0]
        i, j = np.asarray(self.body_i)[rows] % nb1, np.asarray(self.body_j)[rows] % nb1
        if nb1 * k <= _ONE_HOT_MAX:  # constant one-hot products: they fuse, and transpose to products
            eye = np.eye(nb1)
            Si, Sj = jnp.asarray(eye[i], r_ext.dtype), jnp.asarray(eye[j], r_ext.dtype)
            ri, rj, Ri, Rj = _select(Si, r_ext), _select(Sj, r_ext), _select(Si, R_ext), _select(Sj, R_ext)
        else:  # slices or gathers, linear in the bodies
            ri, rj, Ri, Rj = _take_rows(r_ext, i), _take_rows(r_ext, j), _take_rows(R_ext, i), _take_rows(R_ext, j)
        forms = [FORMS[self.row_kinds[r]] for r in rows]
        used = {slot for form in forms for slot in form.slots}
        kappa, sigma = np.asarray([f.kappa for f in forms]), np.asarray([f.sigma for f in forms])
        e = mv(Rj, q)
        if "s_bar_p" in used:  # rows with a point on body i
            e = e - mv(Ri, v[:, 1])
        if sigma.any():
            e = e + _scale(sigma, rj - ri)
        u = _scale(kappa, e) if kappa.any() else 0.0
        if "c" in used:
            u = u + v[:, 4]
        if "a_bar" in used:  # rows with an axis on body i
            u = u + mv(Ri, v[:, 0])
        return jnp.sum(u * e, axis=-1)


# The row kernel runs once for each group of kinds present, and computes only the terms of its
# group. One kernel for all rows compiled 1-2.7 s faster than a kernel per kind, but its steps
# ran 15-50 % slower (four link, slider crank, double pendulum, Puma 560 under generalized-alpha):
# the step's derivatives (forward over reverse) then carry every term for every row. These three
# groups run as fast as a kernel per kind (slider crank: 0.111 against 0.120 s for 1000 steps)
# and compile 1 s faster there (5.9 against 6.9 s). Measured 2026-11-26.
_GROUPS = (("DP1", "angle", "dp1_swap"), ("CD",), ("DP2", "D"))


def _permute(perm: np.ndarray, x: Float[Array, " m"]) -> Float[Array, " m"]:
    """``x[perm]``: a product with a constant permutation matrix for few rows (fuses, unlike a
    gather), slices or a gather for many (linear in the rows; ``_take_rows``)."""
    if perm.size <= _SMALL:
        return jnp.sum(jnp.asarray(np.eye(perm.size)[perm], x.dtype) * x, axis=1)
    return _take_rows(x, perm)


_SMALL = 64


# Largest (rows x bodies) picked by one-hot products; gathers beyond (measured per
# generalized-alpha step: an 8-body chain, 24 x 8, 10 % faster by one-hot products; a 16-body
# chain, 48 x 16, 3.7x faster by gathers).
_ONE_HOT_MAX = 256


# Most slices ``_take_rows`` puts together (a gather beyond), and the longest period of a run.
_MAX_SLICES = 12
_MAX_PERIOD = 6


def _take_rows(x: Float[Array, "n ..."], index: np.ndarray) -> Float[Array, "k ..."]:
    """``x[index]`` for a constant ``index``: as a few strided slices when ``index`` repeats
    each entry of a few periodic runs (the bodies of the rows of a chain's, a tree's or a row of
    loops' joints, each body repeated for its rows; the rows of such joints put back in order),
    else a gather. A gather's transpose (in ``G^T lambda``) is a scatter-add, which XLA runs on
    a CPU as a loop over the rows, one more loop per derivative pass of the iteration matrix (a
    spider of 64 bodies: four loops of 192 iterations per build); a slice's is a pad."""
    plan = _slice_plan(np.asarray(index))
    if plan is None:
        return x[index]
    repeat, runs = plan
    parts = []
    for base, steps, count in runs:  # one strided slice per position in the period, interleaved
        cols = [
            jax.lax.slice_in_dim(x, b, b + step * (count - 1) + 1, step) if step
            else jnp.broadcast_to(jax.lax.slice_in_dim(x, b, b + 1), (count,) + x.shape[1:])
            for b, step in zip(base, steps)
        ]  # fmt: skip
        parts.append(cols[0] if len(cols) == 1 else jnp.stack(cols, axis=1).reshape((-1,) + x.shape[1:]))
    out = parts[0] if len(parts) == 1 else jnp.concatenate(parts)
    if repeat > 1:
        out = jnp.broadcast_to(out[:, None], (out.shape[0], repeat) + out.shape[1:]).reshape((-1,) + out.shape[1:])
    return out


def _slice_plan(index: np.ndarray) -> tuple[int, list[tuple[tuple[int, ...], tuple[int, ...], int]]] | None:
    """``(repeat, runs)``: ``index`` is each entry of the runs' concatenation repeated
    ``repeat`` times; a run ``(base, steps, count)`` is the ``count`` blocks ``base + b steps``
    (``b = 0, ..., count - 1``, ``steps >= 0``, a period ``len(base)`` of up to
    ``_MAX_PERIOD``). Greedy: the run of most blocks (entries per slice) first, the shortest
    period on a tie; ``None`` beyond ``_MAX_SLICES`` slices."""
    if index.size == 0:
        return None
    change = np.flatnonzero(np.diff(index)) + 1
    repeat = int(np.gcd.reduce(np.diff(np.concatenate([[0], change, [index.size]]))))
    u = index[::repeat]
    runs, slices, k = [], 0, 0
    while k < u.size:
        best = ((int(u[k]),), (1,), 1)
        for period in range(1, _MAX_PERIOD + 1):
            if k + 2 * period > u.size:
                break
            base, steps = u[k : k + period], u[k + period : k + 2 * period] - u[k : k + period]
            count = 1
            while (steps >= 0).all() and k + (count + 1) * period <= u.size and np.array_equal(
                u[k + count * period : k + (count + 1) * period], base + count * steps
            ):
                count += 1
            if count > best[2]:
                best = (tuple(int(v) for v in base), tuple(int(v) for v in steps), count)
        runs.append(best)
        slices += len(best[0])
        if slices > _MAX_SLICES:
            return None
        k += best[2] * len(best[0])
    return repeat, runs


def _select(onehot: Float[Array, "m nb1"], x: Float[Array, "nb1 ..."]) -> Float[Array, "m ..."]:
    """Rows ``x[b]`` picked by one-hot weights, as a fusible broadcast-and-sum."""
    w = onehot.reshape(onehot.shape + (1,) * (x.ndim - 1))
    return jnp.sum(w * x[None], axis=1)


def _place(rows: tuple[int, ...], m: int, values: Float[Array, " k"]) -> Float[Array, " m"]:
    """``values`` at ``rows`` of an (m,) vector of zeros: a product with a constant 0/1 matrix
    (fuses, and its transpose is a product too)."""
    place = np.zeros((m, len(rows)))
    place[np.asarray(rows), np.arange(len(rows))] = 1.0
    return jnp.sum(jnp.asarray(place, values.dtype) * values, axis=1)


def _scale(c: np.ndarray, x: Float[Array, "m 3"]) -> Float[Array, "m 3"]:
    """``c[:, None] x`` for constant per-row coefficients (no product where all are one)."""
    return x if (c == 1.0).all() else jnp.asarray(c, x.dtype)[:, None] * x


class _Const(eqx.Module):
    value: Array

    def __call__(self, t):
        return self.value


def _flatten(items):
    for c in items:
        if isinstance(c, (list, tuple)):
            yield from _flatten(c)
        else:
            yield c
