"""Equations of motion of free (or pivoted) rigid bodies on a Lie group, for explicit solvers.

The configuration is the pose ``(R, x)`` of the body frame (``x`` = its origin, the COM ``c``
away from the centre of mass in body axes). Three velocity coordinates, the explicit solver's
choice (``RKMK4(velocity=...)``, ``VELOCITIES``):

* ``"so3xr3"``: ``(u, Omega)``, world velocity of the origin and body angular velocity; group
  ``SO3xR3``, whose tangent is exactly this pair.
* ``"se3"``: the body twist ``V = (U, Omega)``, ``U = R^T u``; group ``SE3``.
* ``"ulvc"``: the unified local velocity coordinates ``w = D V`` of Holzinger, Gerstmayr &
  Schöberl (hexahedral projection points with half-sides ``l``); group SE3, group velocity
  ``D^-1 w``.

Newton-Euler about the origin, body axes, translation first (``ad*`` the coadjoint):

    M V_dot = W - ad*_V (M V),   M = [[m I, -m hat(c)], [m hat(c), J_O]],
    ad*_V (p, h) = (Omega x p, Omega x h + U x p),

with ``M`` of ``RigidBody.spatial_inertia`` and ``W`` the applied wrench about the origin. The
right-hand side is not written out here: it is minus ``Model.newton_euler``'s rows (the one
statement of the dynamics, about the COM, which the implicit solvers use as they are) at
``V_dot = 0``, projected on the origin's twist by virtual work (``about_origin``). Measured
against the former written-out form in the same process: RKMK4 heavy top, torque-free body,
Dopri5 and a batch of 256 tops within 2 %. A body with a fixed origin keeps ``U = 0`` and obeys
``J_O Omega_dot = tau_O - Omega x J_O Omega``; that is encoded in its inverse mass matrix
``blockdiag(0, J_O^-1)``.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .lie import SE3, SO3xR3
from .lie.ops import cross, hat, mtv, mv
from .numerics import linear


# -- mass properties ---------------------------------------------------------------------------


def inverse_mass(model) -> Float[Array, "nb 6 6"]:
    """Inverse spatial inertia; ``blockdiag(0, J_O^-1)`` for bodies with a fixed origin."""
    M = model.bodies.spatial_inertia()
    free = linear.inv(M)
    pinned_rot = linear.inv(model.bodies.inertia_about_origin())
    z = jnp.zeros_like(pinned_rot)
    pinned = jnp.concatenate(
        [jnp.concatenate([z, z], axis=-1), jnp.concatenate([z, pinned_rot], axis=-1)], axis=-2
    )
    fixed = np.asarray(model.fixed_origin)
    if fixed.all():
        return pinned
    if not fixed.any():
        return free
    return jnp.where(jnp.asarray(fixed)[:, None, None], pinned, free)


# -- unified local velocity coordinates (Holzinger, Gerstmayr & Schöberl; general half-sides l) ---


def ulvc_matrix(lengths: Float[Array, "*b 3"]) -> Float[Array, "*b 6 6"]:
    """``D`` with ``w = D (U, Omega)``: rows ``[b_i^T, (y_i x b_i)^T]`` of the hexahedron.

    Points ``y_i`` are the face centres ``(0, -+l2, 0), (0, 0, -+l3), (-+l1, 0, 0)`` and the
    directions ``+-e_1/sqrt2, +-e_2/sqrt2, +-e_3/sqrt2`` (Holzinger, Gerstmayr & Schöberl, eq. 54).
    """
    l1, l2, l3 = lengths[..., 0], lengths[..., 1], lengths[..., 2]
    o, z = jnp.ones_like(l1), jnp.zeros_like(l1)
    rows = [
        [o, z, z, z, z, l2],
        [-o, z, z, z, z, l2],
        [z, o, z, l3, z, z],
        [z, -o, z, l3, z, z],
        [z, z, o, z, l1, z],
        [z, z, -o, z, l1, z],
    ]
    D = jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)
    return D / jnp.sqrt(jnp.asarray(2.0, D.dtype))


def ulvc_matrix_inverse(lengths: Float[Array, "*b 3"]) -> Float[Array, "*b 6 6"]:
    """Closed-form ``D^-1`` of the matrix of Holzinger, Gerstmayr & Schöberl, eq. 54."""
    l1, l2, l3 = lengths[..., 0], lengths[..., 1], lengths[..., 2]
    o, z = jnp.ones_like(l1), jnp.zeros_like(l1)
    rows = [
        [o, -o, z, z, z, z],
        [z, z, o, -o, z, z],
        [z, z, z, z, o, -o],
        [z, z, 1 / l3, 1 / l3, z, z],
        [z, z, z, z, 1 / l1, 1 / l1],
        [1 / l2, 1 / l2, z, z, z, z],
    ]
    Di = jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)
    return Di / jnp.sqrt(jnp.asarray(2.0, Di.dtype))


def ulvc_field(y: Float[Array, "*b 3"], lengths: Float[Array, "*b 3"]) -> Float[Array, "*b 3 6"]:
    """``N(y) = [I, -hat(y)] D^-1``: body-frame velocity of body point ``y`` is ``N(y) w``."""
    Iy = jnp.concatenate([jnp.broadcast_to(jnp.eye(3, dtype=y.dtype), y.shape[:-1] + (3, 3)), -hat(y)], -1)
    return Iy @ ulvc_matrix_inverse(lengths)


def ulvc_mass_matrix(model) -> Float[Array, "nb 6 6"]:
    """``Mbar = D^-T M D^-1`` (constant)."""
    Di = ulvc_matrix_inverse(model.ulvc_lengths)
    return jnp.swapaxes(Di, -1, -2) @ model.bodies.spatial_inertia() @ Di


# -- the vector field --------------------------------------------------------------------------


VELOCITIES = ("so3xr3", "se3", "ulvc")


def group(velocity: str) -> type[SO3xR3] | type[SE3]:
    """The Lie group the configuration is integrated on."""
    return SO3xR3 if velocity == "so3xr3" else SE3


class Cache(eqx.Module):
    """Per-simulation constants: inverse mass matrices and the ULVC matrices, for the velocity
    coordinates ``velocity``."""

    Minv: Float[Array, "nb 6 6"]
    D: Float[Array, "nb 6 6"] | None
    Dinv: Float[Array, "nb 6 6"] | None
    JOinv: Float[Array, "nb 3 3"]  # inverse inertia about the origin (bodies with a fixed origin)
    velocity: str = eqx.field(static=True)


def prepare(model, velocity: str) -> Cache:
    if velocity not in VELOCITIES:
        raise ValueError(f"velocity coordinates must be one of {VELOCITIES}, got {velocity!r}")
    JOinv = linear.inv(model.bodies.inertia_about_origin())
    if velocity != "ulvc":
        return Cache(inverse_mass(model), None, None, JOinv, velocity)
    D, Di = ulvc_matrix(model.ulvc_lengths), ulvc_matrix_inverse(model.ulvc_lengths)
    # Mbar^-1 = D M^-1 D^T (the pinned form included).
    return Cache(D @ inverse_mass(model) @ jnp.swapaxes(D, -1, -2), D, Di, JOinv, velocity)


def _pivoted_field(model, cache: Cache, t, pose, vel: Array) -> tuple[Array, Array]:
    """All bodies turn about fixed origins: ``J_O Omega_dot = -(rotational rows at Omega_dot = 0)``
    (the general equations with ``U = 0``)."""
    Omega = vel[..., 3:]
    torque = _origin_rows(model, pose, jnp.zeros_like(Omega), Omega, t)[..., 3:]
    return vel, jnp.concatenate([jnp.zeros_like(Omega), mv(cache.JOinv, torque)], axis=-1)


def _origin_velocity_body(velocity: str, R: Array, vel: Array) -> tuple[Array, Array]:
    """Body twist ``(U, Omega)`` of the origin from the velocity coordinates."""
    if velocity == "so3xr3":
        return mtv(R, vel[..., :3]), vel[..., 3:]
    return vel[..., :3], vel[..., 3:]


def _twist_of(cache: Cache, vel: Array) -> Array:
    return mv(cache.Dinv, vel) if cache.velocity == "ulvc" else vel


def about_origin(R: Array, c: Array, force: Array, torque: Array) -> Array:
    """A world force at the COM and a body torque about it as the body wrench about the origin
    (translation first): ``(R^T f, tau + c x R^T f)``, the virtual work on ``(dU, dOmega)``."""
    force_b = mtv(R, force)
    return jnp.concatenate([force_b, torque + cross(c, force_b)], axis=-1)


def _origin_rows(model, pose, U: Array, Omega: Array, t) -> Array:
    """``W - ad*_V (M V)``: minus ``Model.newton_euler``'s rows at ``V_dot = 0`` (the COM's
    acceleration then ``R (Omega x v_c)``, ``v_c = U + Omega x c``) projected on the origin's
    twist, ``(R^T lin, ang + c x R^T lin)``."""
    R, c = pose.rotation, model.bodies.com
    vc = U + cross(Omega, c)
    lin, ang = model.newton_euler(t, pose.translation + mv(R, c), R, mv(R, vc), Omega, mv(R, cross(Omega, vc)), None)
    return -about_origin(R, c, lin, ang)


def vector_field(model, cache: Cache, t, pose, vel: Array) -> tuple[Array, Array]:
    """``(xi, vel_dot)``: the group velocity (``pose_dot = pose hat(xi)``) and the acceleration."""
    if cache.velocity != "ulvc" and all(model.fixed_origin):
        return _pivoted_field(model, cache, t, pose, vel)
    V = _twist_of(cache, vel)
    U, Omega = _origin_velocity_body(cache.velocity, pose.rotation, V)
    rhs = _origin_rows(model, pose, U, Omega, t)
    if cache.velocity == "ulvc":
        # Mbar w_dot = Q - Gamma(w) w, with Q - Gamma w = D^-T (W - ad*_V M V).
        return V, mv(cache.Minv, mtv(cache.Dinv, rhs))
    Vdot = mv(cache.Minv, rhs)
    if cache.velocity == "se3":
        return vel, Vdot
    # u = R U:  u_dot = R (U_dot + Omega x U).
    udot = mv(pose.rotation, Vdot[..., :3] + cross(Omega, U))
    return vel, jnp.concatenate([udot, Vdot[..., 3:]], axis=-1)


def initial_state(model, velocity: str) -> tuple[SO3xR3 | SE3, Array]:
    """``(pose0, vel0)`` from ``Model.initial_state`` (COM-based; a pinned origin at rest)."""
    c = model.bodies.com
    r0, R0, v0, Omega0 = model.initial_state()
    x0 = r0 - mv(R0, c)
    u0 = v0 - mv(R0, cross(Omega0, c))  # zero for a pinned body: its v0 is R0 (Omega0 x c)
    pose = group(velocity)(R0, x0)
    if velocity == "so3xr3":
        return pose, jnp.concatenate([u0, Omega0], axis=-1)
    V0 = jnp.concatenate([mtv(R0, u0), Omega0], axis=-1)
    if velocity == "se3":
        return pose, V0
    return pose, mv(ulvc_matrix(model.ulvc_lengths), V0)


def observe(model, velocity: str, pose, vel: Array) -> tuple[Array, Array, Array, Array]:
    """World COM position, body-to-world rotation, world COM velocity, body angular velocity."""
    R, c = pose.rotation, model.bodies.com
    if velocity == "ulvc":
        vel = mv(ulvc_matrix_inverse(model.ulvc_lengths), vel)
    U, Omega = _origin_velocity_body(velocity, R, vel)
    return pose.translation + mv(R, c), R, mv(R, U + cross(Omega, c)), Omega


def kinetic_energy(model, state) -> Float[Array, ""]:
    """``sum_i m |v|^2 / 2 + Omega^T J Omega / 2`` (COM velocity, inertia about the COM)."""
    b = model.bodies
    w = state.angular_velocity
    return 0.5 * jnp.sum(b.mass * jnp.sum(state.velocity**2, -1)) + 0.5 * jnp.sum(w * mv(b.inertia, w))


def angular_momentum(model, state) -> Float[Array, "3"]:
    """World angular momentum about the world origin: ``sum r x m v + R J Omega``."""
    b = model.bodies
    spin = mv(state.rotation, mv(b.inertia, state.angular_velocity))
    orbital = cross(state.position, b.mass[:, None] * state.velocity)
    return jnp.sum(spin + orbital, axis=0)
