"""Joints and drivers from one world-frame point and axis, as Exudyn or Simscape users give them.

The joints of ``joints`` take each body's own copy of the joint's point
and axis, in body axes and measured from the body-frame origin. These helpers take them once, in
world axes, in the model's initial configuration, and convert: with body ``i``'s frame at
``o_i = r_i - R_i c_i`` (COM ``r_i``, COM offset ``c_i`` in body axes) and rotation ``R_i``
(body to world),

    s_i = R_i^T (p - o_i),     a_i = R_i^T a

(the ground, ``GROUND = -1``, has ``o = 0`` and ``R = I``). A joint written this way holds in the
initial configuration by construction. Build a model without constraints, place its bodies,
write the joints against it and ``connect`` them::

    free = dl.Model(bodies, r0=r0, R0=R0)
    model = connect(free, [revolute_at(free, GROUND, 0, point=(0, 0, 0), axis=(1, 0, 0)),
                           spherical_at(free, 0, 1, point=(0, 0, -1))])
"""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..xla import concrete
from ..lie.ops import mtv
from ..model import Model
from .basic import GROUND, BasicConstraint, angle, dp2
from .constraint_set import ConstraintSet, _flatten
from .joints import cylindrical, fixed, joint_name, perpendicular_pair, prismatic, revolute, spherical, universal


def _frame(model: Model, body: int) -> tuple[Float[Array, "3"], Float[Array, "3 3"]]:
    """Initial origin ``o`` and rotation ``R`` of the body frame (world, ground: 0 and I)."""
    if not isinstance(body, int) or not GROUND <= body < model.num_bodies:
        raise ValueError(
            f"body index {body!r}: the model has bodies 0..{model.num_bodies - 1} and the ground {GROUND}"
        )
    dtype = model.r0.dtype
    if body == GROUND:
        return jnp.zeros(3, dtype), jnp.eye(3, dtype=dtype)
    R = model.R0[body]
    return model.r0[body] - R @ model.bodies.com[body], R


def local_point(model: Model, body: int, point: ArrayLike) -> Float[Array, "3"]:
    """``R^T (p - o)``: the world point ``p`` in the axes of ``body``, from its frame origin."""
    o, R = _frame(model, body)
    return mtv(R, jnp.asarray(point, o.dtype) - o)


def local_vector(model: Model, body: int, vector: ArrayLike) -> Float[Array, "3"]:
    """``R^T a``: the world direction ``a`` in the axes of ``body``."""
    _, R = _frame(model, body)
    return mtv(R, jnp.asarray(vector, R.dtype))


def _both(model, body_i, body_j, point):
    return local_point(model, body_i, point), local_point(model, body_j, point)


def _given(where: str, name: str, **values: ArrayLike) -> None:
    """The world points and axes (``axis...``) given to the joint builder ``where``, checked
    where they are concrete: three finite numbers each, an axis of nonzero length."""
    label = f"{where} {name!r}" if name else where
    for what, x in values.items():
        a = concrete(x)
        if a is not None and (a.shape != (3,) or a.dtype.kind not in "biuf" or not np.all(np.isfinite(a))):
            raise ValueError(f"{label}: {what} must be three finite numbers (world coordinates), got {a.tolist()}")
        if a is not None and what.startswith("axis") and not np.linalg.norm(a) > 0:
            raise ValueError(f"{label}: {what} needs a nonzero length, got {a.tolist()}")


def spherical_at(model: Model, body_i: int, body_j: int, point: ArrayLike, name: str = "") -> list[BasicConstraint]:
    """Ball joint at the world point ``point`` (3 rows)."""
    _given("spherical_at", name, point=point)
    s_i, s_j = _both(model, body_i, body_j, point)
    return spherical(body_i, s_i, body_j, s_j, name)


def revolute_at(
    model: Model, body_i: int, body_j: int, point: ArrayLike, axis: ArrayLike, name: str = ""
) -> list[BasicConstraint]:
    """Hinge through the world point ``point`` about the world direction ``axis`` (5 rows)."""
    _given("revolute_at", name, point=point, axis=axis)
    s_i, s_j = _both(model, body_i, body_j, point)
    a_i, a_j = local_vector(model, body_i, axis), local_vector(model, body_j, axis)
    return revolute(body_i, s_i, a_i, body_j, s_j, a_j, name)


def cylindrical_at(
    model: Model, body_i: int, body_j: int, point: ArrayLike, axis: ArrayLike, name: str = ""
) -> list[BasicConstraint]:
    """Slide along and turn about the world line through ``point`` along ``axis`` (4 rows)."""
    _given("cylindrical_at", name, point=point, axis=axis)
    s_i, s_j = _both(model, body_i, body_j, point)
    a_i, a_j = local_vector(model, body_i, axis), local_vector(model, body_j, axis)
    return cylindrical(body_i, s_i, a_i, body_j, s_j, a_j, name)


def prismatic_at(
    model: Model, body_i: int, body_j: int, point: ArrayLike, axis: ArrayLike, name: str = ""
) -> list[BasicConstraint]:
    """Slide along the world line through ``point`` along ``axis``, no relative rotation (5 rows).

    The spin is locked by two world directions ``u``, ``w`` perpendicular to the axis and to
    each other, ``u`` on body i and ``w`` on body j (a DP1 row ``u . w = 0``).
    """
    _given("prismatic_at", name, point=point, axis=axis)
    s_i, s_j = _both(model, body_i, body_j, point)
    a_i, a_j = local_vector(model, body_i, axis), local_vector(model, body_j, axis)
    u, w = perpendicular_pair(jnp.asarray(axis, model.r0.dtype))
    return prismatic(body_i, s_i, a_i, body_j, s_j, a_j, local_vector(model, body_i, u), local_vector(model, body_j, w), name)


def universal_at(
    model: Model, body_i: int, body_j: int, point: ArrayLike, axis_i: ArrayLike, axis_j: ArrayLike, name: str = ""
) -> list[BasicConstraint]:
    """Cardan joint at ``point``: body i turns about the world direction ``axis_i``, body j about
    ``axis_j`` (perpendicular to ``axis_i``), both fixed to the cross (4 rows)."""
    _given("universal_at", name, point=point, axis_i=axis_i, axis_j=axis_j)
    a_i = jnp.asarray(axis_i, model.r0.dtype)
    a_j = jnp.asarray(axis_j, model.r0.dtype)
    cosine = concrete(jnp.abs(a_i @ a_j) / (jnp.linalg.norm(a_i) * jnp.linalg.norm(a_j)))
    if cosine is not None and cosine > 1e-6:
        raise ValueError(f"universal_at {name!r}: axis_i and axis_j must be perpendicular (cosine {float(cosine):.2e})")
    s_i, s_j = _both(model, body_i, body_j, point)
    return universal(body_i, s_i, local_vector(model, body_i, a_i), body_j, s_j, local_vector(model, body_j, a_j), name)


def fixed_at(model: Model, body_i: int, body_j: int, point: ArrayLike, name: str = "") -> list[BasicConstraint]:
    """Weld body j to body i at ``point``, keeping their initial relative rotation ``R_i^T R_j``
    (6 rows)."""
    _given("fixed_at", name, point=point)
    s_i, s_j = _both(model, body_i, body_j, point)
    (_, R_i), (_, R_j) = _frame(model, body_i), _frame(model, body_j)
    return fixed(body_i, s_i, body_j, s_j, R_i.T @ R_j, name)


def rotation_driver_at(model: Model, body_i: int, body_j: int, axis: ArrayLike, theta, name: str = "") -> BasicConstraint:
    """Turn body j relative to body i about the world ``axis`` by ``theta(t)`` from the initial
    configuration (a callable of ``t``, or a number; 1 rank-safe angle row, add it to a revolute).

    With ``u`` a unit vector perpendicular to the axis ``n``, the row holds ``u`` on body i and
    ``u``, ``u x n`` on body j: ``u_i . u_j = cos theta`` and ``u_i . (u x n)_j = sin theta``
    for a right-handed turn by ``theta`` about ``n``.
    """
    _given("rotation_driver_at", name, axis=axis)
    n = jnp.asarray(axis, model.r0.dtype)
    n = n / jnp.linalg.norm(n)
    u, _ = perpendicular_pair(n)
    u_i, u_j = local_vector(model, body_i, u), local_vector(model, body_j, u)
    return angle(body_i, u_i, body_j, u_j, local_vector(model, body_j, jnp.cross(u, n)), theta, name=name)


def translation_driver_at(
    model: Model, body_i: int, body_j: int, point: ArrayLike, axis: ArrayLike, x, name: str = ""
) -> BasicConstraint:
    """Move body j relative to body i along the world ``axis`` (fixed in body i) by ``x(t)``
    from the initial configuration: the DP2 row ``a_i . (Q_j - P_i) = x(t)`` with ``P_i`` and
    ``Q_j`` the two bodies' copies of ``point`` (1 row, add it to a prismatic)."""
    _given("translation_driver_at", name, point=point, axis=axis)
    a = jnp.asarray(axis, model.r0.dtype)
    s_i, s_j = _both(model, body_i, body_j, point)
    return dp2(body_i, local_vector(model, body_i, a / jnp.linalg.norm(a)), s_i, body_j, s_j, f=x, name=name)


def _check_names(joints: list) -> None:
    """Refuse a joint name given twice: the joints' rows, and their ``joint_reactions``, would
    merge. Two entries clash when they hold rows of one name, or when both are joints (lists of
    rows) of one name; a single row (a driver) may share its joint's name."""
    rows: dict[str, int] = {}  # row name -> the entry of joints that holds it
    groups: dict[str, int] = {}  # joint name -> the entry (a list of rows) that has it

    def refuse(first, k, name, row=""):
        which = f"joints[{k}] has two rows named {row!r}" if first == k else f"joints[{first}] and joints[{k}] are both named {name!r}"
        raise ValueError(f"connect: {which}; give each joint a name of its own (the constraint rows and joint_reactions are named after them)")

    for k, entry in enumerate(joints):
        names = [n for n in (getattr(c, "name", "") for c in _flatten([entry])) if n]
        for n in names:
            if n in rows:
                refuse(rows[n], k, joint_name(n), n)
            rows[n] = k
        if isinstance(entry, (list, tuple)):
            for g in dict.fromkeys(map(joint_name, names)):
                if g in groups:
                    refuse(groups[g], k, g)
                groups[g] = k


def connect(model: Model, joints: Sequence, *, t0: float = 0.0, assemble: bool = True, redundant: str = "error") -> Model:
    """``model`` with the constraints ``joints`` (rows or lists of rows), assembled at ``t0``.

    Assembly is the model loader's: the configuration is moved onto the constraints (with a
    warning stating the residual when it exceeds ``1e-6``) and the velocities are projected onto
    the velocity constraints (with a warning when they change by more than ``1e-6``); a
    configuration that cannot be assembled, or dependent constraint rows (a planar loop of
    revolute joints), raise ``ValueError``; with ``redundant="remove"`` the dependent rows are
    removed instead, with a warning naming them (``difflie.io.remove_dependent_rows``:
    refused where they depend on the others only at this configuration). Where the initial state is traced (``connect``
    inside ``jax.vmap`` over initial poses, or ``jax.jit``), nothing is checked or moved here:
    the implicit solvers assemble the same way at the start of ``simulate``.
    """
    from ..io.assembly import consistent_initial_state
    from ..xla import concrete

    if model.constraints is not None:
        raise ValueError("connect: the model has constraints already; pass all joints in one call")
    joints = list(joints)
    _check_names(joints)
    model = eqx.tree_at(lambda m: m.constraints, model, ConstraintSet(joints, model.num_bodies), is_leaf=lambda x: x is None)
    traced = any(concrete(x) is None for x in (model.r0, model.R0, model.v0, model.omega0))
    return consistent_initial_state(model, t0, label="connect", redundant=redundant) if assemble and not traced else model
