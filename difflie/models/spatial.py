"""Constrained spatial models of Holzinger, Arnold & Gerstmayr 2024: heavy top on a spherical
joint, IFToMM slider-crank, PD-controlled Puma 560.

Every body frame sits at the body's centre of mass (``com = 0``), so the bodies' COM positions
and rotations are the absolute coordinates and the joints are index-3 position constraints
(``difflie.constraints``). Physical parameters are keyword arguments that may be traced.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..body import RigidBody
from ..constraints import GROUND, ConstraintSet, prismatic, revolute, spherical, universal
from ..forces import AbstractForce
from ..model import Model
from ..xla import concrete
from ._checks import check_finite, check_positive, check_shapes


def _arr(x, dtype=None):
    return jnp.asarray(x, dtype=dtype)


def _dtype(*xs):
    return jnp.result_type(*(jnp.asarray(x) for x in xs), float)


# ------------------------------------------------------------------------------------------------
# Heavy top


def heavy_top_spherical(
    *,
    mass: ArrayLike = 15.0,
    inertia: ArrayLike = ((0.234375, 0.0, 0.0), (0.0, 0.46875, 0.0), (0.0, 0.0, 0.234375)),
    com: ArrayLike = (0.0, 1.0, 0.0),
    omega0: ArrayLike = (0.0, 150.0, -4.61538),
    R0: ArrayLike | None = None,
    gravity: ArrayLike = (0.0, 0.0, -9.81),
) -> Model:
    """Heavy top as a free body held at the fixed point by a spherical joint (Holzinger, Arnold &
    Gerstmayr 2024, §4.1.2).

    The body frame is at the COM; ``com`` is the COM seen from the fixed point (the world
    origin) in body axes, so the joint ties the body point ``-com`` to the ground origin.
    ``inertia`` is about the COM, ``omega0`` the body angular velocity; the COM velocity
    ``R0 (omega0 x com)`` is consistent with the joint. Defaults: Brüls, Cardona & Arnold
    (2012): ``m = 15``, ``J = diag(0.234375, 0.46875, 0.234375)``,
    ``X = (0, 1, 0)``, ``omega0 = (0, 150, -4.61538)``, ``R0 = I``. Shapes as ``heavy_top``'s.
    """
    check_shapes("heavy_top_spherical", mass=(mass, ()), inertia=(inertia, (3, 3)), com=(com, (3,)),
                 omega0=(omega0, (3,)), R0=(R0, (3, 3)), gravity=(gravity, (3,)))  # fmt: skip
    dtype = _dtype(mass, inertia)
    R0 = jnp.eye(3, dtype=dtype) if R0 is None else _arr(R0, dtype)
    com, omega0 = _arr(com, dtype), _arr(omega0, dtype)
    check_finite("heavy_top_spherical", omega0=omega0)  # before v0 = R0 (omega0 x com) turns it into NaN
    body = RigidBody(_arr(mass, dtype), _arr(inertia, dtype), names=("top",))
    joint = spherical(0, -com, GROUND, jnp.zeros(3, dtype), name="pivot")
    return Model(
        body,
        r0=(R0 @ com)[None],
        R0=R0[None],
        v0=(R0 @ jnp.cross(omega0, com))[None],
        omega0=omega0[None],
        gravity=_arr(gravity, dtype),
        constraints=ConstraintSet(joint, 1),
    )


# ------------------------------------------------------------------------------------------------
# Spatial slider-crank


def spatial_slider_crank(
    *,
    crank_mass: ArrayLike = 0.12,
    crank_inertia: ArrayLike = (1e-4, 1e-4, 1e-5),
    rod_mass: ArrayLike = 0.5,
    rod_inertia: ArrayLike = (4e-4, 4e-3, 4e-3),
    slider_mass: ArrayLike = 2.0,
    slider_inertia: ArrayLike = (1e-4, 1e-4, 1e-4),
    crank_pivot: ArrayLike = (0.0, 0.1, 0.12),
    crank_length: ArrayLike = 0.08,
    rod_length: ArrayLike = 0.3,
    crank_speed: ArrayLike = 6.0,
    gravity: ArrayLike = (0.0, 0.0, -9.81),
) -> Model:
    """IFToMM spatial slider-crank (Holzinger, Arnold & Gerstmayr 2024, §4.3).

    The contents of the paper's Table 8 were not available to us; the data are those of the IFToMM
    benchmark as encoded in Exudyn's ``sliderCrank3Dbenchmark.py``.

    Bodies ``crank``, ``rod``, ``slider`` (frames at the COMs). The crank (a bar along its body
    z, inertia ``crank_inertia`` principal in body axes, about x the spin axis) turns about the
    world x-axis through ``crank_pivot`` A (revolute); it starts at angle 0 pointing up (+z),
    so B = A + (0, 0, crank_length). The rod (body x along the rod from B to C, inertia
    ``rod_inertia`` = (axial, transverse, transverse)) meets the crank at B (spherical) and the
    slider at C (universal joint whose slider arm is the world x-axis and whose rod arm is
    perpendicular to the rod and to x). The slider moves along the world x-axis (prismatic),
    starting at C = (s0, 0, 0) with ``s0 = sqrt(L^2 - A_y^2 - B_z^2)`` = 0.2 m.
    Initial velocities are consistent: crank spin ``crank_speed`` = 6 rad/s about x;
    ``s_dot0`` = 0.24 m/s, rod COM (0.12, -0.24, 0) m/s and rod spin (1.92, -0.96, 0.48) rad/s
    (world) for the defaults. The slider inertia (Exudyn's choice) does not
    matter: it cannot rotate.
    """
    check_positive("spatial_slider_crank", crank_length=crank_length, rod_length=rod_length)
    dtype = _dtype(crank_mass, rod_mass, slider_mass)
    A = _arr(crank_pivot, dtype)
    lc, L = _arr(crank_length, dtype), _arr(rod_length, dtype)
    ex, ez = jnp.eye(3, dtype=dtype)[0], jnp.eye(3, dtype=dtype)[2]
    B = A + lc * ez
    reach, length = concrete(jnp.hypot(B[1], B[2])), concrete(L)  # the distance from B to the slider's line (the world x-axis)
    if reach is not None and length is not None and not length > reach:
        raise ValueError(f"spatial_slider_crank: rod_length {float(length)} cannot reach the slider's line (the world x-axis) from "
                         f"the crank's end B: it must exceed {float(reach):.6g}")  # fmt: skip
    s0 = jnp.sqrt(L**2 - B[1] ** 2 - B[2] ** 2)
    C = s0 * ex
    # Rod frame: x along the rod, y along the universal joint's rod arm (perpendicular to x_world).
    d = C - B
    xr = d / L
    yr = jnp.cross(d, ex)
    yr = yr / jnp.linalg.norm(yr)
    R_rod = jnp.stack([xr, yr, jnp.cross(xr, yr)], axis=-1)
    eye = jnp.eye(3, dtype=dtype)
    R0 = jnp.stack([eye, R_rod, eye])
    r0 = jnp.stack([A + 0.5 * lc * ez, 0.5 * (B + C), C])
    # Consistent velocities: v_B = w_c x (B - A); s_dot from d.(v_C - v_B) = 0; rod spin
    # w = alpha ex + beta yr (universal joint) with w x d = v_C - v_B.
    w_c = _arr(crank_speed, dtype) * ex
    v_B = jnp.cross(w_c, B - A)
    s_dot = jnp.dot(d, v_B) / d[0]
    dv = s_dot * ex - v_B
    basis = jnp.stack([jnp.cross(ex, d), jnp.cross(yr, d)], axis=-1)
    coef = jnp.linalg.solve(basis.T @ basis, basis.T @ dv)
    w_rod = coef[0] * ex + coef[1] * yr
    v0 = jnp.stack([jnp.cross(w_c, r0[0] - A), v_B + jnp.cross(w_rod, r0[1] - B), s_dot * ex])
    omega0 = jnp.stack([w_c, R_rod.T @ w_rod, jnp.zeros(3, dtype)])

    bodies = RigidBody(
        jnp.stack([_arr(crank_mass, dtype), _arr(rod_mass, dtype), _arr(slider_mass, dtype)]),
        jnp.stack([jnp.diag(_arr(j, dtype)) for j in (crank_inertia, rod_inertia, slider_inertia)]),
        names=("crank", "rod", "slider"),
    )
    half = 0.5 * L * ex
    ey = eye[1]
    joints = (
        revolute(GROUND, A, ex, 0, -0.5 * lc * ez, ex, name="A")
        + spherical(0, 0.5 * lc * ez, 1, -half, name="B")
        + universal(1, half, ey, 2, jnp.zeros(3, dtype), ex, name="C")
        + prismatic(GROUND, jnp.zeros(3, dtype), ex, 2, jnp.zeros(3, dtype), ex, ey, ez, name="D")
    )
    return Model(
        bodies,
        r0=r0,
        R0=R0,
        v0=v0,
        omega0=omega0,
        gravity=_arr(gravity, dtype),
        constraints=ConstraintSet(joints, 3),
        body_names=("crank", "rod", "slider"),
    )


# ------------------------------------------------------------------------------------------------
# Puma 560


# Standard DH (d, a, alpha) of the Puma 560 and link data (Corke; Exudyn's ManipulatorPuma560):
# mass, COM in the DH link frame, principal inertia about the COM in the link frame.
PUMA560_DH = np.array(
    [
        [0.0, 0.0, np.pi / 2],
        [0.0, 0.4318, 0.0],
        [0.15005, 0.0203, -np.pi / 2],
        [0.4318, 0.0, np.pi / 2],
        [0.0, 0.0, -np.pi / 2],
        [0.0, 0.0, 0.0],
    ]
)
PUMA560_MASS = np.array([20.0, 17.4, 4.8, 0.82, 0.34, 0.09])
PUMA560_COM = np.array(
    [
        [0.0, 0.0, 0.0],
        [-0.3638, 0.006, 0.2275],
        [-0.0203, -0.0141, 0.070],
        [0.0, 0.019, 0.0],
        [0.0, 0.0, 0.0],
        [0.0, 0.0, 0.032],
    ]
)
PUMA560_INERTIA = np.array(
    [
        [0.35, 0.35, 0.35],
        [0.13, 0.524, 0.539],
        [0.0735, 0.086, 0.0125],
        [1.8e-3, 1.3e-3, 1.8e-3],
        [3e-4, 4e-4, 3e-4],
        [1.5e-4, 1.5e-4, 4e-5],
    ]
)
PUMA560_Q_INIT = np.deg2rad([0.0, 22.5, 90.0, 0.0, 22.5, 0.0])
PUMA560_Q_GOAL = np.deg2rad([-120.0, 60.0, -200.0, 90.0, 90.0, 45.0])


def _rz(theta):
    c, s = jnp.cos(theta), jnp.sin(theta)
    z, o = jnp.zeros_like(c), jnp.ones_like(c)
    return jnp.stack([jnp.stack([c, -s, z]), jnp.stack([s, c, z]), jnp.stack([z, z, o])])


def _rx(alpha):
    c, s = jnp.cos(alpha), jnp.sin(alpha)
    z, o = jnp.zeros_like(c), jnp.ones_like(c)
    return jnp.stack([jnp.stack([o, z, z]), jnp.stack([z, c, -s]), jnp.stack([z, s, c])])


def bang_bang(t, q0, q1, duration):
    """Constant-acceleration point-to-point profile: ``(q(t), q_dot(t))``.

    Accelerate with ``4 (q1 - q0) / T^2`` for ``T/2``, decelerate for ``T/2``, then rest at q1
    (Exudyn's ``ProfileConstantAcceleration``).
    """
    T = duration
    acc = 4.0 * (q1 - q0) / T**2
    first = t <= 0.5 * T
    tc = jnp.clip(t, 0.0, T)
    q = jnp.where(first, q0 + 0.5 * acc * tc**2, q1 - 0.5 * acc * (T - tc) ** 2)
    qd = jnp.where(first, acc * tc, acc * (T - tc))
    return q, qd


class JointPD(AbstractForce):
    """PD torques along revolute joints (torsional spring-dampers with moving set points).

    Joint ``k`` turns ``child[k]`` relative to ``parent[k]`` (-1: ground) about the parent's
    DH axis ``z``; with standard DH, ``R_parent^T R_child = Rz(q) Rx(alpha)``. The torque
    ``P (q_ref - q) + D (q_dot_ref - q_dot)`` acts on the child and its reaction on the parent;
    the angle error is wrapped to ``(-pi, pi]``. The set point follows ``bang_bang``.
    """

    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    alpha: Float[Array, " nj"]
    stiffness: Float[Array, " nj"]
    damping: Float[Array, " nj"]
    q_init: Float[Array, " nj"]
    q_goal: Float[Array, " nj"]
    duration: Float[Array, ""]

    def reference(self, t):
        return bang_bang(t, self.q_init, self.q_goal, self.duration)

    def __call__(self, t, r, R, rdot, omega):
        nb = r.shape[0]
        par, chi = np.asarray(self.parent), np.asarray(self.child)
        R_ext = jnp.concatenate([R, jnp.eye(3, dtype=R.dtype)[None]])
        w_ext = jnp.concatenate([jnp.einsum("bij,bj->bi", R, omega), jnp.zeros((1, 3), R.dtype)])
        p = np.where(par < 0, nb, par)
        Rp, Rc = R_ext[p], R_ext[chi]
        q_ref, qd_ref = self.reference(t)
        # Rz(q) = Rp^T Rc Rx(alpha)^T; the error angle is that of Rz(-q_ref) Rz(q).
        Q = jnp.einsum("kji,kjl,kml->kim", Rp, Rc, jnp.moveaxis(_rx(self.alpha), -1, 0))
        c, s = jnp.cos(q_ref), jnp.sin(q_ref)
        err = -jnp.arctan2(c * Q[:, 1, 0] - s * Q[:, 0, 0], c * Q[:, 0, 0] + s * Q[:, 1, 0])
        axis = Rp[:, :, 2]
        qd = jnp.sum(axis * (w_ext[chi] - w_ext[p]), axis=-1)
        torque = self.stiffness * err + self.damping * (qd_ref - qd)
        tw = torque[:, None] * axis  # world torque on the child
        tau = jnp.zeros((nb + 1, 3), r.dtype)
        tau = tau.at[chi].add(jnp.einsum("kji,kj->ki", Rc, tw))
        tau = tau.at[p].add(-jnp.einsum("kji,kj->ki", Rp, tw))
        return jnp.zeros_like(r), tau[:nb]


def puma560_forward_kinematics(q, dh=PUMA560_DH):
    """DH frames ``(origins (6, 3), rotations (6, 3, 3))`` of the six links at joint angles ``q``."""
    dh = jnp.asarray(dh)
    q = jnp.asarray(q)
    R = jnp.eye(3, dtype=q.dtype)
    o = jnp.zeros(3, q.dtype)
    origins, rotations = [], []
    for k in range(6):  # model construction only: a 6-link chain, not traced per step
        d, a, alpha = dh[k]
        Rz = _rz(q[k])
        o = o + R @ (d * jnp.eye(3, dtype=q.dtype)[2] + Rz @ (a * jnp.eye(3, dtype=q.dtype)[0]))
        R = R @ Rz @ _rx(alpha)
        origins.append(o)
        rotations.append(R)
    return jnp.stack(origins), jnp.stack(rotations)


def puma560_joint_angles(R: Float[Array, "6 3 3"], dh=PUMA560_DH) -> Float[Array, " 6"]:
    """Joint angles in ``(-pi, pi]`` from the link rotations (standard DH)."""
    Rp = jnp.concatenate([jnp.eye(3, dtype=R.dtype)[None], R[:-1]])
    Q = jnp.einsum("kji,kjl,kml->kim", Rp, R, jnp.moveaxis(_rx(jnp.asarray(dh)[:, 2]), -1, 0))
    return jnp.arctan2(Q[:, 1, 0], Q[:, 0, 0])


def puma560(
    *,
    mass: ArrayLike = PUMA560_MASS,
    com: ArrayLike = PUMA560_COM,
    inertia: ArrayLike = PUMA560_INERTIA,
    q_init: ArrayLike = PUMA560_Q_INIT,
    q_goal: ArrayLike = PUMA560_Q_GOAL,
    duration: ArrayLike = 1.0,
    stiffness: ArrayLike = (4e4, 4e4, 4e4, 100.0, 100.0, 10.0),
    damping: ArrayLike = (400.0, 400.0, 100.0, 1.0, 1.0, 0.1),
    gravity: ArrayLike = (0.0, 0.0, -9.81),
) -> Model:
    """PD-controlled Puma 560 point-to-point motion in absolute coordinates (Holzinger, Arnold &
    Gerstmayr 2024, §4.4).

    Six links, frames at the COMs with the axes of their standard-DH link frames, joined by
    six revolute joints (30 constraints, 36 coordinates). Data: standard DH and link masses,
    COMs and inertias of Corke's Puma 560 (= Exudyn's ``ManipulatorPuma560``); the paper's
    Tables 9 and 10 are missing. Our choices, where the sources leave gaps:

    - link 1 has Corke's zero mass and ``diag(0, 0.35, 0)``; it only spins about its y axis
      (the base axis) and its COM stays on that axis, so we use Exudyn's 20 kg and
      ``diag(0.35, 0.35, 0.35)``, which leave the motion unchanged but give a valid body;
    - Corke's link-3 inertia (0.066, 0.086, 0.0125) violates the triangle inequality; we
      raise ``I_xx`` to 0.0735 (the smallest round value that makes it physical);
    - PD gains are Exudyn's "assumed" values (stiffness, damping above), acting as torsional
      spring-dampers whose set points follow a constant-acceleration profile
      (``bang_bang``) from ``q_init`` (45) to ``q_goal`` (45) in ``duration`` = 1 s
      (the paper's profile durations are unknown); no gravity compensation.

    The robot starts at rest at ``q_init``.
    """
    dtype = _dtype(mass, inertia)
    q_init, q_goal = _arr(q_init, dtype), _arr(q_goal, dtype)
    dh = jnp.asarray(PUMA560_DH, dtype)
    origins, R0 = puma560_forward_kinematics(q_init, dh)
    com = _arr(com, dtype)
    r0 = origins + jnp.einsum("bij,bj->bi", R0, com)
    bodies = RigidBody(
        _arr(mass, dtype),
        jnp.einsum("bi,ij->bij", _arr(inertia, dtype), jnp.eye(3, dtype=dtype)),
        names=tuple(f"link{k + 1}" for k in range(6)),
    )
    # Joint k (axis z of DH frame k-1 through its origin): in the parent (link k-1, or the
    # world) at -com_{k-1} (its frame origin) along z; in link k at the point where frame k-1's
    # origin sits, Rx(alpha)^T Rz(q)^T (-d z) - a x, minus com_k, along (0, sin alpha, cos alpha).
    e = jnp.eye(3, dtype=dtype)
    joints = []
    for k in range(6):  # construction only: one revolute joint per link
        d, a, alpha = dh[k]
        origin_prev_in_k = -(a * e[0]) - _rx(alpha).T @ (d * e[2])
        axis_k = jnp.stack([jnp.zeros((), dtype), jnp.sin(alpha), jnp.cos(alpha)])
        parent = GROUND if k == 0 else k - 1
        s_parent = jnp.zeros(3, dtype) if k == 0 else -com[k - 1]
        joints += revolute(parent, s_parent, e[2], k, origin_prev_in_k - com[k], axis_k, name=f"joint{k + 1}")
    pd = JointPD(
        parent=(-1, 0, 1, 2, 3, 4),
        child=(0, 1, 2, 3, 4, 5),
        alpha=dh[:, 2],
        stiffness=jnp.broadcast_to(_arr(stiffness, dtype), (6,)),
        damping=jnp.broadcast_to(_arr(damping, dtype), (6,)),
        q_init=q_init,
        q_goal=q_goal,
        duration=_arr(duration, dtype),
    )
    return Model(
        bodies,
        r0=r0,
        R0=R0,
        gravity=_arr(gravity, dtype),
        forces=(pd,),
        constraints=ConstraintSet(joints, 6),
    )
