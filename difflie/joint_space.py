"""Joint space of a robot: joint coordinates and joint rates read off the absolute coordinates.

A 1-DOF joint ``k`` moves body ``c = child[k]`` relative to body ``p = parent[k]`` (``-1``: the
ground, at the identity pose). With body-frame origins ``o = r - R com`` (the link frames of the
file), the joint has the point ``s_p`` and the unit axis ``a`` in the parent's frame, the point
``s_c`` in the child's, and the relative rotation ``R_p^T R_c = C`` at ``q = q_ref``:

    revolute:   R_p^T R_c C^T = Rot(a, q - q_ref),
                q - q_ref = atan2((a x u) . M u, u . M u)   with M = R_p^T R_c C^T, u perpendicular to a
    prismatic:  (o_c + R_c s_c) - (o_p + R_p s_p) = (q - q_ref) R_p a

and the rates, with world angular velocities ``w = R omega`` and point velocities ``v(P)``:

    revolute:   q_dot = (R_p a) . (w_c - w_p)
    prismatic:  q_dot = (w_p x R_p a) . d + (R_p a) . (v_c(P_c) - v_p(P_p)),   d = P_c - P_p

Revolute angles are continuous along the saves (unwrapped) and on the branch nearest the initial
joint positions at the first save.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .lie import cross
from .lie.ops import mv


class JointSpace(eqx.Module):
    """The movable (1-DOF) joints of a robot, in file order, and where the model came from.

    ``parent``/``child`` are body indices (ground: -1), ``prismatic`` the kind of each joint;
    ``parent_point``, ``axis``, ``normal`` (a unit vector perpendicular to ``axis``) are in the
    parent's body frame, ``child_point`` in the child's (both from the body-frame origin);
    ``relative_rotation`` is ``R_p^T R_c`` at ``q = reference``; ``initial`` holds the loaded
    joint positions. ``base`` is the body index of a floating base (``-1``: fixed base).
    ``links`` maps every link of the file to ``(name, body index, pose in that body's frame as
    (x, y, z, qw, qx, qy, qz))`` (merged links included; ground: -1) and ``meshes`` lists
    ``(link name, mesh file, pose in the link frame)`` for plots.
    """

    names: tuple[str, ...] = eqx.field(static=True)
    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    prismatic: tuple[bool, ...] = eqx.field(static=True)
    parent_point: Float[Array, "nj 3"]
    child_point: Float[Array, "nj 3"]
    axis: Float[Array, "nj 3"]
    normal: Float[Array, "nj 3"]
    relative_rotation: Float[Array, "nj 3 3"]
    reference: Float[Array, " nj"]
    initial: Float[Array, " nj"]
    base: int = eqx.field(static=True, default=-1)
    links: tuple = eqx.field(static=True, default=())
    meshes: tuple = eqx.field(static=True, default=())

    @property
    def num_joints(self) -> int:
        return len(self.names)


def _joint_space(model) -> JointSpace:
    js = getattr(model, "joints", None)
    if not isinstance(js, JointSpace):
        raise ValueError(
            "joint_coordinates: the model has no joint-space description; load the robot from a "
            "URDF or MJCF file with difflie.load_model"
        )
    return js


def _extended(x: Array, fill: Array) -> Array:
    """Append the ground's row ``fill`` after the bodies (axis ``-1 - fill.ndim``)."""
    pad = jnp.broadcast_to(fill.astype(x.dtype), x.shape[: -1 - fill.ndim] + (1,) + fill.shape)
    return jnp.concatenate([x, pad], axis=-1 - fill.ndim)


def _poses(model, states):
    """Origins and rotations of bodies and ground (index nb), world velocities of origins and
    world angular velocities (``None`` when ``states`` has no velocities)."""
    r, R = jnp.asarray(states.position), jnp.asarray(states.rotation)
    com = model.bodies.com.astype(r.dtype)
    o = r - mv(R, com)
    o_ext = _extended(o, jnp.zeros(3))
    R_ext = _extended(R, jnp.eye(3))
    if getattr(states, "velocity", None) is None:
        return o_ext, R_ext, None, None
    w = mv(R, jnp.asarray(states.angular_velocity))
    v_o = jnp.asarray(states.velocity) - cross(w, mv(R, com))
    return o_ext, R_ext, _extended(v_o, jnp.zeros(3)), _extended(w, jnp.zeros(3))


def _indices(js: JointSpace, nb: int):
    par = np.asarray(js.parent)
    return np.where(par < 0, nb, par), np.asarray(js.child)


def _unwrap(theta: Array, target: Array) -> Array:
    """Continuous along the leading (save) axis; the first row within pi of ``target``."""
    if theta.ndim > 1:
        theta = jnp.unwrap(theta, axis=0)
    first = theta if theta.ndim == 1 else theta[0]
    return theta + 2 * jnp.pi * jnp.round((target - first) / (2 * jnp.pi))


def joint_coordinates(model, solution) -> Float[Array, "*n nj"]:
    """Joint positions ``(n_saves, n_joints)`` (rad or m) in the order of ``model.joint_names``.

    ``solution`` is anything with ``position`` and ``rotation`` of the bodies: a
    :class:`~difflie.Solution`, a :class:`~difflie.BodyState` or a kinematics solution, with a
    leading save axis or without (one state: ``(n_joints,)``).
    """
    js = _joint_space(model)
    nb = model.num_bodies
    o, R, _, _ = _poses(model, solution)
    p, c = _indices(js, nb)
    dtype = o.dtype
    Rp, Rc = R[..., p, :, :], R[..., c, :, :]
    # revolute: M = R_p^T R_c C^T = Rot(a, theta)
    M = jnp.einsum("...kji,...kjl,kml->...kim", Rp, Rc, js.relative_rotation.astype(dtype))
    u, a = js.normal.astype(dtype), js.axis.astype(dtype)
    Mu = mv(M, u)
    theta = jnp.arctan2(jnp.sum(cross(a, u) * Mu, axis=-1), jnp.sum(u * Mu, axis=-1))
    ref = js.reference.astype(dtype)
    theta = _unwrap(theta, js.initial.astype(dtype) - ref)
    # prismatic: displacement of the child's joint point along the parent's axis
    d = (o[..., c, :] + mv(Rc, js.child_point.astype(dtype))) - (o[..., p, :] + mv(Rp, js.parent_point.astype(dtype)))
    slide = jnp.sum(mv(Rp, a) * d, axis=-1)
    return ref + jnp.where(np.asarray(js.prismatic), slide, theta)


def joint_velocities(model, solution) -> Float[Array, "*n nj"]:
    """Joint rates ``(n_saves, n_joints)`` (rad/s or m/s) in the order of ``model.joint_names``,
    from ``position``, ``rotation``, ``velocity`` (world COM) and ``angular_velocity`` (body
    axes) of ``solution`` (see :func:`joint_coordinates`)."""
    js = _joint_space(model)
    nb = model.num_bodies
    o, R, v, w = _poses(model, solution)
    if v is None:
        raise ValueError("joint_velocities: the solution has no velocities")
    p, c = _indices(js, nb)
    dtype = o.dtype
    Rp, Rc = R[..., p, :, :], R[..., c, :, :]
    a = mv(Rp, js.axis.astype(dtype))
    revolute = jnp.sum(a * (w[..., c, :] - w[..., p, :]), axis=-1)
    sp, sc = mv(Rp, js.parent_point.astype(dtype)), mv(Rc, js.child_point.astype(dtype))
    d = (o[..., c, :] + sc) - (o[..., p, :] + sp)
    vp = v[..., p, :] + cross(w[..., p, :], sp)
    vc = v[..., c, :] + cross(w[..., c, :], sc)
    slide = jnp.sum(cross(w[..., p, :], a) * d, axis=-1) + jnp.sum(a * (vc - vp), axis=-1)
    return jnp.where(np.asarray(js.prismatic), slide, revolute)


__all__ = ["JointSpace", "joint_coordinates", "joint_velocities"]
