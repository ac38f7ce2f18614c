"""Force elements: applied wrenches, linear and rotational spring-dampers, stacked by type.

Every element is called as ``element(t, r, R, rdot, omega) -> (f, tau)`` with the state of all
``nb`` bodies (COM position ``r`` (nb, 3), body-to-world ``R`` (nb, 3, 3), COM world velocity
``rdot`` (nb, 3), body angular velocity ``omega`` (nb, 3)) and returns the world force at the
COM ``f`` (nb, 3) and the torque about the COM in body axes ``tau`` (nb, 3). An element whose
wrench depends on the accelerations as well (``accelerated``: the joints' rotor inertias,
``JointInertia``) gives it through ``inertial``. Gravity is a field of ``difflie.model.Model``,
not an element.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .hinges import HingeGroups
from .lie import SO3, cross, hat
from .lie.ops import mm, mtv, mv


class AbstractForce(eqx.Module):
    """A force element acting on the bodies of a model.

    ``coupling()`` names the pairs of bodies (ground: -1) whose wrenches depend on each other's
    state (static): the implicit solvers order and compress their iteration matrices by it
    (``difflie.numerics.sparsity``). ``None``, the default, means any body may depend on
    any other, and the iteration matrix is then treated as dense.
    """

    # True for an element whose wrench depends on the bodies' accelerations (``inertial``): the
    # rotor inertias of joints. ``Model.newton_euler`` adds it where accelerations are unknowns
    # (the implicit solvers); the explicit ones, which need ``M`` block-diagonal, and the
    # variational ones, which take forces as wrenches of the state, refuse it.
    accelerated: ClassVar[bool] = False

    def __call__(self, t, r, R, rdot, omega) -> tuple[Float[Array, "nb 3"], Float[Array, "nb 3"]]:
        raise NotImplementedError

    def coupling(self) -> tuple[tuple[int, int], ...] | None:
        return None

    def inertial(self, t, r, R, rdot, omega, acceleration, angular_acceleration) -> tuple[Array, Array]:
        """The wrench of an ``accelerated`` element, with the world COM accelerations and the
        body angular accelerations."""
        raise NotImplementedError

    def kinetic_energy(self, r, R, rdot, omega) -> Float[Array, ""]:
        """The kinetic energy an ``accelerated`` element adds (its inertia's)."""
        raise NotImplementedError


class Wrench(AbstractForce):
    """Constant force (world axes, at the COM) and torque (body axes or world axes) per body."""

    force: Float[Array, "nb 3"]
    torque: Float[Array, "nb 3"]
    torque_in_body_frame: bool = eqx.field(static=True, default=True)

    def __init__(self, force: ArrayLike, torque: ArrayLike, torque_in_body_frame: bool = True):
        self.force = jnp.asarray(force)
        self.torque = jnp.asarray(torque)
        self.torque_in_body_frame = torque_in_body_frame
        if self.force.shape[-1:] != (3,) or self.torque.shape[-1:] != (3,) or self.force.ndim != 2:
            raise ValueError(f"Wrench: force and torque must be (nb, 3); got {self.force.shape}, {self.torque.shape}")

    def coupling(self):
        return ()

    def __call__(self, t, r, R, rdot, omega):
        f = jnp.broadcast_to(self.force, r.shape).astype(r.dtype)
        tau = jnp.broadcast_to(self.torque, r.shape).astype(r.dtype)
        return f, tau if self.torque_in_body_frame else mtv(R, tau)


class AppliedWrench(AbstractForce):
    """User wrench ``fn(t, r, R, rdot, omega) -> (f_world (nb, 3), tau_body (nb, 3))``.

    ``fn`` may be a function or an ``eqx.Module`` (whose arrays are then traced parameters).
    """

    fn: Callable

    def __call__(self, t, r, R, rdot, omega):
        f, tau = self.fn(t, r, R, rdot, omega)
        return jnp.broadcast_to(f, r.shape), jnp.broadcast_to(tau, r.shape)


class SpringDamper(AbstractForce):
    """Linear spring-dampers between point ``a`` of body ``body_a`` and point ``b`` of ``body_b``.

    ``f = (k (l - l0) + c l_dot) n`` on ``a`` and ``-f`` on ``b``, with ``l = |p_b - p_a|``,
    ``n = (p_b - p_a) / l``. Points are in body axes relative to the body's COM; body index
    ``-1`` is the ground, whose point is given in world coordinates. Arrays have a leading
    axis (ns,) over springs; body indices are static.
    """

    body_a: tuple[int, ...] = eqx.field(static=True)
    body_b: tuple[int, ...] = eqx.field(static=True)
    point_a: Float[Array, "ns 3"]
    point_b: Float[Array, "ns 3"]
    stiffness: Float[Array, " ns"]
    damping: Float[Array, " ns"]
    rest_length: Float[Array, " ns"]

    def __init__(self, body_a, point_a, body_b, point_b, stiffness, damping=0.0, rest_length=0.0):
        self.body_a = tuple(int(i) for i in np.atleast_1d(body_a))
        self.body_b = tuple(int(i) for i in np.atleast_1d(body_b))
        ns = len(self.body_a)
        if len(self.body_b) != ns:
            raise ValueError("SpringDamper: body_a and body_b must have the same length")
        self.point_a = jnp.broadcast_to(jnp.asarray(point_a), (ns, 3))
        self.point_b = jnp.broadcast_to(jnp.asarray(point_b), (ns, 3))
        self.stiffness = jnp.broadcast_to(jnp.asarray(stiffness), (ns,))
        self.damping = jnp.broadcast_to(jnp.asarray(damping), (ns,))
        self.rest_length = jnp.broadcast_to(jnp.asarray(rest_length), (ns,))

    def coupling(self):
        return tuple(zip(self.body_a, self.body_b))

    def __call__(self, t, r, R, rdot, omega):
        segment = _Segments(self.body_a, self.point_a, self.body_b, self.point_b, r, R, rdot, omega, "SpringDamper")
        fmag = self.stiffness * (segment.length - self.rest_length) + self.damping * segment.rate
        return segment.wrench(-fmag[:, None] * segment.direction, r, R)


class _Segments:
    """Straight segments from point ``a`` of body ``body_a`` to point ``b`` of ``body_b`` (body
    axes from the COM; the ground, ``-1``: world points): their lengths ``l``, unit directions
    ``n`` (from ``a`` to ``b``; zero where ``l = 0``), rates ``l_dot = n . (v_b - v_a)``, and the
    wrench of forces ``F`` on their ``b`` ends and ``-F`` on their ``a`` ends."""

    def __init__(self, body_a, point_a, body_b, point_b, r, R, rdot, omega, what: str):
        self.sa, self.sb = point_a.astype(r.dtype), point_b.astype(r.dtype)
        pa, va, self.ia = _points(body_a, self.sa, r, R, rdot, omega, what)
        pb, vb, self.ib = _points(body_b, self.sb, r, R, rdot, omega, what)
        d = pb - pa
        l2 = jnp.sum(d * d, axis=-1)
        positive = l2 > 0
        length = jnp.sqrt(jnp.where(positive, l2, 1.0))
        self.direction = jnp.where(positive[:, None], d / length[:, None], 0.0)
        self.length = jnp.where(positive, length, 0.0)
        self.rate = jnp.sum(self.direction * (vb - va), axis=-1)

    def wrench(self, F: Float[Array, "ns 3"], r, R) -> tuple[Array, Array]:
        nb = r.shape[0]
        f = jnp.zeros_like(r).at[self.ib].add(F, mode="drop").at[self.ia].add(-F, mode="drop")
        ja, jb = np.where(self.ia < nb, self.ia, 0), np.where(self.ib < nb, self.ib, 0)
        tau = (jnp.zeros_like(r).at[self.ib].add(cross(self.sb, mtv(R[jb], F)), mode="drop")
               .at[self.ia].add(cross(self.sa, mtv(R[ja], -F)), mode="drop"))  # fmt: skip
        return f, tau


def _points(idx: tuple[int, ...], s: Array, r, R, rdot, omega, what: str):
    """World positions and velocities of points ``s`` of bodies ``idx`` (ground: -1, ``s`` in
    world), and the rows they scatter to (the ground's, ``nb``, is dropped)."""
    nb = r.shape[0]
    i = np.asarray(idx)
    if np.any((i < -1) | (i >= nb)):
        raise ValueError(f"{what}: body index out of range for {nb} bodies: {idx}")
    ground = jnp.asarray(i < 0)[:, None]
    j = np.where(i < 0, 0, i)
    p = jnp.where(ground, s, r[j] + mv(R[j], s))
    v = jnp.where(ground, 0.0, rdot[j] + mv(R[j], cross(omega[j], s)))
    return p, v, np.where(i < 0, nb, i)


class SpatialTendons(AbstractForce):
    """Tendons along paths of points on bodies (MJCF ``<tendon><spatial>`` through sites, with
    pulleys), as MuJoCo applies their forces. Segment ``s`` runs from point ``a`` of ``body_a``
    to point ``b`` of ``body_b`` (``SpringDamper``'s conventions) and belongs to tendon
    ``tendon[s]``, counted with ``weight[s]`` (``1 / divisor`` of the pulley its branch hangs
    from): a tendon's length and rate are ``L = sum w_s l_s`` and ``L_dot = sum w_s l_dot_s``,
    ``law(t, L, L_dot) -> f (nt,)`` its force (``difflie.joint_laws.TendonSpring``,
    ``JointLimits`` and ``JointFriction`` of the length, or their ``JointLaws``), and each segment
    pulls its ends with ``f w_s n_s`` on ``b`` and its opposite on ``a``: the generalized forces
    ``f dL/dq``, which deliver the power ``f L_dot``. A tendon's force depends on all of its
    bodies, so they are coupled."""

    body_a: tuple[int, ...] = eqx.field(static=True)
    body_b: tuple[int, ...] = eqx.field(static=True)
    tendon: tuple[int, ...] = eqx.field(static=True)
    point_a: Float[Array, "ns 3"]
    point_b: Float[Array, "ns 3"]
    weight: Float[Array, " ns"]
    law: Callable

    def coupling(self):
        pairs = []
        for k in sorted(set(self.tendon)):
            bodies = sorted({b for s, t in enumerate(self.tendon) if t == k for b in (self.body_a[s], self.body_b[s])})
            pairs += itertools.combinations(bodies, 2)
        return tuple(dict.fromkeys(pairs))

    def __call__(self, t, r, R, rdot, omega):
        segment = _Segments(self.body_a, self.point_a, self.body_b, self.point_b, r, R, rdot, omega, "SpatialTendons")
        w, k = self.weight.astype(r.dtype), np.asarray(self.tendon)
        nt = int(k.max()) + 1
        length = jax.ops.segment_sum(w * segment.length, k, nt)
        rate = jax.ops.segment_sum(w * segment.rate, k, nt)
        f = self.law(t, length, rate)
        return segment.wrench((f[k] * w)[:, None] * segment.direction, r, R)


class CartesianSpringDamper(AbstractForce):
    """Bearings: body point ``s`` (body axes, from the COM) tied to the world point ``p_ground``
    by springs and dampers along the world axes, ``f = -K (p - p_ground) - C p_dot`` with
    diagonal ``K``, ``C`` (ns, 3). Body indices are static; arrays have a leading axis (ns,)."""

    body: tuple[int, ...] = eqx.field(static=True)
    point: Float[Array, "ns 3"]
    ground_point: Float[Array, "ns 3"]
    stiffness: Float[Array, "ns 3"]
    damping: Float[Array, "ns 3"]

    def __init__(self, body, point, ground_point, stiffness, damping=0.0):
        self.body = tuple(int(i) for i in np.atleast_1d(body))
        ns = len(self.body)
        self.point = jnp.broadcast_to(jnp.asarray(point), (ns, 3))
        self.ground_point = jnp.broadcast_to(jnp.asarray(ground_point), (ns, 3))
        self.stiffness = jnp.broadcast_to(jnp.asarray(stiffness), (ns, 3))
        self.damping = jnp.broadcast_to(jnp.asarray(damping), (ns, 3))

    def coupling(self):
        return ()

    def __call__(self, t, r, R, rdot, omega):
        i = np.asarray(self.body)
        if np.any((i < 0) | (i >= r.shape[0])):
            raise ValueError(f"CartesianSpringDamper: body index out of range for {r.shape[0]} bodies: {self.body}")
        s = self.point.astype(r.dtype)
        Ri = R[i]
        p = r[i] + mv(Ri, s)
        v = rdot[i] + mv(Ri, cross(omega[i], s))
        F = -self.stiffness * (p - self.ground_point) - self.damping * v
        f = jnp.zeros_like(r).at[i].add(F)
        tau = jnp.zeros_like(r).at[i].add(cross(s, mtv(Ri, F)))
        return f, tau


class DeadLoad(AbstractForce):
    """Constant world forces ``F`` (nb, 3) at body-fixed points ``s`` (nb, 3; body axes, from
    the COM): a load whose direction stays put as the body turns, ``f = F`` and
    ``tau = s x R^T F``. A robot file's gravity compensation (MJCF ``gravcomp``: ``-c m g`` at
    each link's COM, summed over the links of a body) is one."""

    force: Float[Array, "nb 3"]
    point: Float[Array, "nb 3"]

    def __init__(self, force: ArrayLike, point: ArrayLike):
        self.force = jnp.asarray(force)
        self.point = jnp.broadcast_to(jnp.asarray(point), self.force.shape)
        if self.force.ndim != 2 or self.force.shape[-1] != 3:
            raise ValueError(f"DeadLoad: force and point must be (nb, 3), got {self.force.shape}")

    def coupling(self):
        return ()

    def __call__(self, t, r, R, rdot, omega):
        F = self.force.astype(r.dtype)
        return F, cross(self.point.astype(r.dtype), mtv(R, F))


class JointTorques(eqx.Module):
    """A joint-torque signal ``t -> u (nj, ...)``: constants plus a few functions of ``t``.

    ``constant`` (nj, ...) is a pytree leaf (traceable, differentiable): a number per 1-DOF
    joint, a 3-vector per ball joint; ``functions[k]`` (a ``Driver`` or an ``eqx.Module``, whose
    arrays are leaves too) adds its value to joint ``index[k]``. Only the distinct user
    functions are visited one by one.
    """

    constant: Float[Array, "nj ..."]
    functions: tuple
    index: tuple[int, ...] = eqx.field(static=True)

    def __call__(self, t) -> Float[Array, "nj ..."]:
        out = self.constant
        if self.functions:
            values = jnp.stack([jnp.asarray(fn(t), out.dtype).reshape(out.shape[1:]) for fn in self.functions])
            out = out.at[np.asarray(self.index)].add(values)
        return out


class JointForce(AbstractForce):
    """Actuation and viscous damping along 1-DOF joints: ``u_k = torque(t)_k - c_k q_dot_k``.

    Joint ``k`` moves body ``child[k]`` relative to ``parent[k]`` (-1: ground) about (revolute)
    or along (prismatic) the unit ``axis[k]``, fixed in the parent's body axes (world axes for
    the ground). With ``a = R_p axis`` (world), the joint rate is

        revolute:   q_dot = a . (w_c - w_p)                      (world angular velocities)
        prismatic:  q_dot = a . (v_c(P) - v_p(P))                 (velocities of both bodies at P)

    where ``P`` is the joint point on the child (``point[k]``, body axes, from the child's COM).
    Hinges that share a body (``hinges``, ``difflie.hinges.HingeGroups``) use the dual vector
    ``d_k`` of their group's axes in place of ``a``: ``q_dot = d_k . (w_c - w_p)``, couple ``u d_k``.
    A revolute joint applies the couple ``u a`` to the child and ``-u a`` to the parent; a
    prismatic one the force ``u a`` at ``P`` on the child and ``-u a`` at ``P`` on the parent.
    Both pairs have zero resultant and moment, and deliver the power ``u q_dot`` (so
    damping dissipates ``c q_dot^2``). ``torque`` is ``None``, an array (nj,) or a callable
    ``t -> (nj,)`` such as ``JointTorques``; ``damping`` (nj,) is an array. Body indices
    and joint kinds are static.
    """

    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    prismatic: tuple[bool, ...] = eqx.field(static=True)
    axis: Float[Array, "nj 3"]
    point: Float[Array, "nj 3"]
    damping: Float[Array, " nj"]
    torque: Any = None
    hinges: HingeGroups | None = None

    def __init__(self, parent, child, axis, point=0.0, damping=0.0, torque=None, prismatic=False, hinges=None):
        self.parent = tuple(int(i) for i in np.atleast_1d(parent))
        self.child = tuple(int(i) for i in np.atleast_1d(child))
        nj = len(self.child)
        if len(self.parent) != nj:
            raise ValueError(f"JointForce: {len(self.parent)} parents for {nj} children")
        if any(c < 0 for c in self.child) or any(p < -1 for p in self.parent):
            raise ValueError(f"JointForce: child indices must be >= 0 and parents >= -1; got {self.parent}, {self.child}")
        self.prismatic = tuple(bool(b) for b in np.broadcast_to(np.asarray(prismatic, bool), (nj,)))
        axis = jnp.broadcast_to(jnp.asarray(axis), (nj, 3))
        self.axis = axis / jnp.linalg.norm(axis, axis=-1, keepdims=True)
        self.point = jnp.broadcast_to(jnp.asarray(point, self.axis.dtype), (nj, 3))
        self.damping = jnp.broadcast_to(jnp.asarray(damping, self.axis.dtype), (nj,))
        self.torque = torque
        self.hinges = hinges

    def coupling(self) -> tuple[tuple[int, int], ...]:
        """The (parent, child) body pairs this element couples (ground: -1)."""
        return tuple(zip(self.parent, self.child))

    def _kinematics(self, r, R, rdot, omega):
        """Parent rows ``p`` (ground: ``nb``), child rows, rotations with the ground's appended,
        world axis ``a``, child lever ``s = P - r_c``, parent lever ``P - r_p`` and ``q_dot``."""
        nb = r.shape[0]
        par, chi = np.asarray(self.parent), np.asarray(self.child)
        if np.any(chi >= nb) or np.any(par >= nb):
            raise ValueError(f"JointForce: body index out of range for {nb} bodies: {self.parent}, {self.child}")
        p = _parent_rows(self.parent, nb)
        dtype = r.dtype
        R_ext = jnp.concatenate([R, jnp.eye(3, dtype=dtype)[None]])
        w_ext = jnp.concatenate([mv(R, omega), jnp.zeros((1, 3), dtype)])  # world angular velocities
        r_ext = jnp.concatenate([r, jnp.zeros((1, 3), dtype)])
        v_ext = jnp.concatenate([rdot, jnp.zeros((1, 3), dtype)])
        a = mv(R_ext[p], self.axis.astype(dtype))
        if self.hinges is not None:
            a = self.hinges.directions(R_ext[p], R[chi], a)
        s = mv(R[chi], self.point.astype(dtype))
        lever_p = r[chi] + s - r_ext[p]
        rate_rev = jnp.sum(a * (w_ext[chi] - w_ext[p]), axis=-1)
        v_c = rdot[chi] + cross(w_ext[chi], s)
        v_p = v_ext[p] + cross(w_ext[p], lever_p)
        rate_pri = jnp.sum(a * (v_c - v_p), axis=-1)
        qdot = jnp.where(np.asarray(self.prismatic), rate_pri, rate_rev)
        return p, chi, R_ext, a, s, lever_p, qdot

    def joint_rates(self, r, R, rdot, omega) -> Float[Array, " nj"]:
        """``q_dot`` of every joint (rad/s or m/s)."""
        return self._kinematics(r, R, rdot, omega)[-1]

    def __call__(self, t, r, R, rdot, omega):
        def own(qdot):
            u = -self.damping.astype(r.dtype) * qdot
            if self.torque is None:
                return u
            return u + jnp.broadcast_to(jnp.asarray(self.torque(t) if callable(self.torque) else self.torque, r.dtype), u.shape)

        return self.apply(own, r, R, rdot, omega)

    def apply(self, law: Callable[[Array], Array], r, R, rdot, omega) -> tuple[Float[Array, "nb 3"], Float[Array, "nb 3"]]:
        """The wrenches of the joint torques (forces) ``u = law(q_dot)`` of the joint rates:
        this element's own (``__call__``), or another law on its joints (``JointFeedback``)."""
        p, chi, R_ext, a, s, lever_p, qdot = self._kinematics(r, R, rdot, omega)
        return self._wrenches(r, R, (R_ext, a, s, lever_p), law(qdot))

    def _wrenches(self, r, R, geometry, u) -> tuple[Float[Array, "nb 3"], Float[Array, "nb 3"]]:
        """The wrenches of joint torques (forces) ``u`` at the joints' ``geometry = (R_ext, a,
        s, lever_p)`` (``_kinematics``)."""
        nb, dtype = r.shape[0], r.dtype
        p, chi = _parent_rows(self.parent, nb), np.asarray(self.child)
        R_ext, a, s, lever_p = geometry
        u = jnp.asarray(u, dtype)
        pri = np.asarray(self.prismatic)[:, None]
        T = jnp.where(pri, 0.0, u[:, None] * a)  # couple on the child (world)
        tau_c, tau_p = mtv(R[chi], T), -mtv(R_ext[p], T)
        f = jnp.zeros((nb + 1, 3), dtype)
        if pri.any():  # without a sliding joint no force: a scatter of zeros that XLA would fold at the batch's size
            F = jnp.where(pri, u[:, None] * a, 0.0)  # force on the child at P (world)
            f = f.at[chi].add(F).at[p].add(-F)
            tau_c, tau_p = tau_c + mtv(R[chi], cross(s, F)), tau_p - mtv(R_ext[p], cross(lever_p, F))
        tau = jnp.zeros((nb + 1, 3), dtype).at[chi].add(tau_c).at[p].add(tau_p)
        return f[:nb], tau[:nb]


class JointInertia(AbstractForce):
    """Rotor inertias of 1-DOF joints (MuJoCo's ``armature``) and of fixed tendons (a tendon's
    ``armature``, along its rate): the kinetic energy ``sum_k I_k (c_k . q_dot)^2 / 2`` over the
    rows ``c_k`` of ``coefficients`` (``None``: one unit row per joint, ``I_k q_dot_k^2 / 2``),
    so the joints take the torques ``u = -C^T (I (C q_ddot))`` (``C^T I C`` added to the
    joint-space mass matrix; the diagonal ``I_k`` for joints).

    ``joints`` holds the joints' geometry (a ``JointForce``, whose own torque and damping are not
    used); ``q_ddot = d/dt q_dot`` along the motion, by a forward derivative of
    ``joints.joint_rates``. It is a force that depends on the accelerations: the implicit
    solvers take it in their Newton-Euler rows (``Model.newton_euler``), and with it the
    coupling of each joint's two bodies in the iteration matrix, and of all the bodies of a
    tendon's joints (``groups``, static: the nonzero entries of each row of ``coefficients`` when
    it is made).
    """

    joints: JointForce
    inertia: Float[Array, " n"]
    coefficients: Float[Array, "n nj"] | None
    groups: tuple[tuple[int, ...], ...] = eqx.field(static=True)

    accelerated: ClassVar[bool] = True

    def __init__(self, joints: JointForce, inertia, coefficients=None):
        self.joints, self.inertia, self.coefficients = joints, inertia, coefficients
        self.groups = () if coefficients is None else nonzero_columns(coefficients)

    def coupling(self) -> tuple[tuple[int, int], ...]:
        return self.joints.coupling() + joint_group_pairs(self.joints.parent, self.joints.child, self.groups)

    def __call__(self, t, r, R, rdot, omega):
        return jnp.zeros_like(r), jnp.zeros_like(r)

    def inertial(self, t, r, R, rdot, omega, acceleration, angular_acceleration):
        tangents = (rdot, mm(R, hat(omega)), acceleration, angular_acceleration)

        def kinematics(*state):
            *_, R_ext, a, s, lever_p, qdot = self.joints._kinematics(*state)
            return (R_ext, a, s, lever_p), qdot

        (geometry, _), (_, qddot) = jax.jvp(kinematics, (r, R, rdot, omega), tangents)
        inertia = self.inertia.astype(r.dtype)
        if self.coefficients is None:
            return self.joints._wrenches(r, R, geometry, -inertia * qddot)
        C = self.coefficients.astype(r.dtype)
        return self.joints._wrenches(r, R, geometry, -C.T @ (inertia * (C @ qddot)))

    def kinetic_energy(self, r, R, rdot, omega):
        rates = self.joints.joint_rates(r, R, rdot, omega)
        if self.coefficients is not None:
            rates = self.coefficients.astype(r.dtype) @ rates
        return 0.5 * jnp.sum(self.inertia.astype(r.dtype) * rates**2)


def nonzero_columns(matrix) -> tuple[tuple[int, ...], ...]:
    """The columns of the nonzero entries of each row of a (concrete) matrix: the joints that
    each row of joint coefficients moves."""
    return tuple(tuple(int(k) for k in np.flatnonzero(row)) for row in np.asarray(matrix) != 0)


def joint_group_pairs(parent: tuple[int, ...], child: tuple[int, ...], groups) -> tuple[tuple[int, int], ...]:
    """Every two bodies (not the ground) of the joints of each group: the body pairs that a law
    or inertia tying those joints together couples (joint ``k`` moves ``child[k]`` relative to
    ``parent[k]``)."""
    pairs = []
    for group in groups:
        bodies = sorted({b for k in group for b in (parent[k], child[k]) if b >= 0})
        pairs += itertools.combinations(bodies, 2)
    return tuple(pairs)


class BallSpring(AbstractForce):
    """Linear springs of ball joints (MJCF ``stiffness`` of a ``type="ball"`` joint, as MuJoCo
    applies it). Ball ``k`` turns body ``child[k]`` relative to ``parent[k]`` (-1: ground) by
    ``M = C^T R_p^T R_c`` from its reference (``C``: ``relative_rotation``); at rest ``M = S``
    (``rest``). The child takes the torque ``-k_k log(S^T M)`` in its own axes (the rotation
    vector from rest: ``|tau| = k angle``), the parent the opposite couple. ``stiffness`` (n,)
    is a leaf."""

    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    relative_rotation: Float[Array, "n 3 3"]
    rest: Float[Array, "n 3 3"]
    stiffness: Float[Array, " n"]

    def coupling(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.parent, self.child))

    def __call__(self, t, r, R, rdot, omega):
        dtype = r.dtype
        Rp, Rc = _parent_rotations(self.parent, R), R[np.asarray(self.child)]
        M = mm(jnp.swapaxes(mm(Rp, self.relative_rotation.astype(dtype)), -1, -2), Rc)
        v = SO3(mm(jnp.swapaxes(self.rest.astype(dtype), -1, -2), M)).log()
        return jnp.zeros_like(r), _couples(self.parent, self.child, R, Rp, -self.stiffness.astype(dtype)[:, None] * v)


class RotationalSpringDamper(AbstractForce):
    """Rotational spring-dampers between two bodies (a torsional bushing): element ``k`` turns
    body ``child[k]`` relative to ``parent[k]`` (-1: ground) by ``M = R_p^T R_c``, at rest
    ``M = S`` (``rest``, default the identity), and gives the child the couple

        tau = -k phi - c omega_rel,    phi = log(S^T M),

    in the child's axes (``phi`` the rotation vector from rest; ``omega_rel`` the child's angular
    velocity relative to the parent, in its axes), and the parent the opposite couple. The spring
    has the potential ``k |phi|^2 / 2`` (``dexp(phi)^T phi = phi``), the damper dissipates
    ``c |omega_rel|^2``; for small angles about one principal axis of inertia ``J`` of a body on
    the ground it rings at ``sqrt(k / J - (c / 2J)^2)`` with decay rate ``c / 2J``.
    ``stiffness``, ``damping`` (n,) and ``rest`` (n, 3, 3) are leaves; body indices are static.
    """

    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    stiffness: Float[Array, " n"]
    damping: Float[Array, " n"]
    rest: Float[Array, "n 3 3"]

    def __init__(self, parent, child, stiffness, damping=0.0, rest=None):
        self.parent = tuple(int(i) for i in np.atleast_1d(parent))
        self.child = tuple(int(i) for i in np.atleast_1d(child))
        n = len(self.child)
        if len(self.parent) != n or any(c < 0 for c in self.child) or any(p < -1 for p in self.parent):
            raise ValueError(f"RotationalSpringDamper: one parent (>= -1) per child (>= 0); got {self.parent}, {self.child}")
        self.stiffness = jnp.broadcast_to(jnp.asarray(stiffness), (n,))
        self.damping = jnp.broadcast_to(jnp.asarray(damping), (n,))
        self.rest = jnp.broadcast_to(jnp.eye(3) if rest is None else jnp.asarray(rest), (n, 3, 3))

    def coupling(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.parent, self.child))

    def __call__(self, t, r, R, rdot, omega):
        dtype = r.dtype
        Rp, Rc = _parent_rotations(self.parent, R), R[np.asarray(self.child)]
        phi = SO3(mm(jnp.swapaxes(mm(Rp, self.rest.astype(dtype)), -1, -2), Rc)).log()
        omega_rel = _relative_angular_velocity(self.parent, self.child, R, omega)
        tau = -self.stiffness.astype(dtype)[:, None] * phi - self.damping.astype(dtype)[:, None] * omega_rel
        return jnp.zeros_like(r), _couples(self.parent, self.child, R, Rp, tau)


class BallTorque(AbstractForce):
    """Torques on ball joints: ``torque(t)`` (n, 3), ball ``k``'s in the axes of its child body
    ``child[k]`` (the generalized forces of MuJoCo's three degrees of freedom of a ball joint),
    on the child, and the opposite couple on ``parent[k]`` (-1: ground). ``torque`` is a
    callable ``t -> (n, 3)`` such as ``JointTorques``."""

    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    torque: Any

    def coupling(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.parent, self.child))

    def __call__(self, t, r, R, rdot, omega):
        tau_c = jnp.broadcast_to(jnp.asarray(self.torque(t), r.dtype), (len(self.child), 3))
        return jnp.zeros_like(r), _couples(self.parent, self.child, R, _parent_rotations(self.parent, R), tau_c)


def _parent_rows(parent: tuple[int, ...], nb: int) -> np.ndarray:
    """Row of each parent in arrays with the ground appended as row ``nb`` (for -1)."""
    par = np.asarray(parent)
    return np.where(par < 0, nb, par)


def _parent_rotations(parent: tuple[int, ...], R: Float[Array, "nb 3 3"]) -> Float[Array, "n 3 3"]:
    """``R`` of each parent, the identity for the ground (-1)."""
    return jnp.concatenate([R, jnp.eye(3, dtype=R.dtype)[None]])[_parent_rows(parent, R.shape[0])]


def _relative_angular_velocity(parent, child, R, omega) -> Float[Array, "n 3"]:
    """``omega_c - R_c^T w_p``: each child's angular velocity relative to its parent (-1: the
    ground, at rest), in the child's axes (``omega``: body axes, ``w_p`` the parent's in world)."""
    chi = np.asarray(child)
    w_p = jnp.concatenate([mv(R, omega), jnp.zeros((1, 3), R.dtype)])[_parent_rows(parent, R.shape[0])]
    return omega[chi] - mtv(R[chi], w_p)


def _couples(parent, child, R, Rp: Float[Array, "n 3 3"], tau_c: Float[Array, "n 3"]) -> Float[Array, "nb 3"]:
    """Body-axes torques of the couples ``tau_c`` (each in its child's axes) on ``child`` and
    their opposites on ``parent`` (-1: ground, which takes none); ``Rp``: the parents'
    rotations (``_parent_rotations``)."""
    nb, chi = R.shape[0], np.asarray(child)
    tau_p = -mtv(Rp, mv(R[chi], tau_c))
    return jnp.zeros((nb + 1, 3), R.dtype).at[chi].add(tau_c).at[_parent_rows(parent, nb)].add(tau_p)[:nb]


def gravity_forces(mass: Array, gravity: Array, like: Array) -> tuple[Array, Array]:
    """``(m g, 0)`` per body."""
    f = mass[:, None] * gravity[None, :]
    return f.astype(like.dtype), jnp.zeros_like(like)
