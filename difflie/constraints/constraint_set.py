"""``ConstraintSet``: all position-level constraints of a model, stacked by kind.

``residual(t, r, R)`` returns ``Phi (m,)`` in the order the constraints were given; ``r`` are
the world positions of the body-frame origins (nb, 3) and ``R`` the rotations (nb, 3, 3). Each
kind is evaluated with one ``vmap`` over its rows; only the (few) distinct driver functions are
visited one by one, since each is a different Python function of ``t``.
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .basic import DRIVEN_ANGLE, GROUND, KINDS, STACKS, BasicConstraint, _Stack


class ConstraintSet(eqx.Module):
    """Stacked basic constraints between ``num_bodies`` bodies and the ground (index -1)."""

    stacks: tuple[_Stack, ...]
    offset: Float[Array, " m"]
    drivers: tuple
    thetas: tuple
    order: tuple[int, ...] = eqx.field(static=True)  # stacked position of each user row
    driver_rows: tuple[int, ...] = eqx.field(static=True)
    names: tuple[str, ...] = eqx.field(static=True)
    kinds: tuple[str, ...] = eqx.field(static=True)
    row_bodies: tuple[tuple[int, int], ...] = eqx.field(static=True)  # (body_i, body_j) per row
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
        self.row_bodies = tuple((int(c.body_i), int(c.body_j)) for c in constraints)
        self.names = tuple(c.name or f"{c.kind}_{k}" for k, c in enumerate(constraints))
        kinds, stacks, stacked_rows = [], [], []
        for kind in KINDS:
            rows = [k for k, c in enumerate(constraints) if c.kind == kind]
            if not rows:
                continue
            kinds.append(kind)
            stacked_rows.extend(rows)
            stacks.append(
                STACKS[kind](
                    body_i=tuple(int(constraints[k].body_i) for k in rows),
                    body_j=tuple(int(constraints[k].body_j) for k in rows),
                    vectors=jnp.stack([jnp.stack(constraints[k].vectors) for k in rows]),
                )
            )
        self.kinds = tuple(kinds)
        self.stacks = tuple(stacks)
        order = np.empty(len(constraints), dtype=np.int64)
        order[np.asarray(stacked_rows)] = np.arange(len(constraints))
        self.order = tuple(int(k) for k in order)
        dtype = self.stacks[0].vectors.dtype
        self.offset = jnp.stack(
            [
                jnp.zeros((), dtype) if (callable(c.f) or c.kind in DRIVEN_ANGLE) else jnp.asarray(c.f, dtype)
                for c in constraints
            ]
        )
        self.driver_rows = tuple(k for k, c in enumerate(constraints) if callable(c.f) and c.kind not in DRIVEN_ANGLE)
        self.drivers = tuple(constraints[k].f for k in self.driver_rows)
        self.thetas = tuple(
            constraints[k].f if callable(constraints[k].f) else _Const(jnp.asarray(constraints[k].f, dtype))
            for k in stacked_rows
            if constraints[k].kind in DRIVEN_ANGLE
        )

    @property
    def driven(self) -> bool:
        """Whether a row depends on time: a driver, or a joint angle given as a function."""
        return bool(self.drivers) or not all(isinstance(theta, _Const) for theta in self.thetas)

    @property
    def num_constraints(self) -> int:
        return len(self.names)

    def f(self, t) -> Float[Array, " m"]:
        """Right-hand sides ``f(t)`` of all non-angle rows (zero for angle rows)."""
        out = self.offset
        if self.drivers:
            values = jnp.stack([jnp.asarray(drv(t), out.dtype) for drv in self.drivers])
            place = np.zeros((self.num_constraints, len(self.drivers)))
            place[np.asarray(self.driver_rows), np.arange(len(self.drivers))] = 1.0
            out = out + jnp.sum(jnp.asarray(place, out.dtype) * values, axis=1)
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
        r_ext = jnp.concatenate([r, jnp.zeros((1, 3), dtype)])
        R_ext = jnp.concatenate([R, jnp.eye(3, dtype=dtype)[None]])
        values = []
        n_theta = 0
        for stack in self.stacks:  # one vmapped kernel per kind (at most six)
            if stack.kind in DRIVEN_ANGLE:
                k = len(stack.body_i)
                theta = jnp.stack([jnp.asarray(th(t), dtype) for th in self.thetas[n_theta : n_theta + k]])
                n_theta += k
                values.append(stack(r_ext, R_ext, theta))
            else:
                values.append(stack(r_ext, R_ext))
        values = jnp.concatenate(values)
        if self.num_constraints <= _SMALL:  # a constant permutation matrix: fuses, unlike a gather
            perm = np.eye(self.num_constraints)[np.asarray(self.order)]
            stacked = jnp.sum(jnp.asarray(perm, dtype) * values, axis=1)
        else:  # O(m) instead of O(m^2)
            stacked = values[np.asarray(self.order)]
        return stacked - self.f(t).astype(dtype)


# Up to this many rows, permutations are products with constant 0/1 matrices (fast for small
# systems on CPU); beyond, gathers (cost linear in the number of rows).
_SMALL = 64


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
