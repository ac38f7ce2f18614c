"""Laws of the joint state: the torques (forces) that springs, limits, friction and tendons
apply at a robot's joints, as functions ``law(t, q, qd) -> (nj,)`` of its joint coordinates
and rates that a ``difflie.joint_space.JointFeedback`` applies at the joints (equal and
opposite on each joint's two bodies), and the limits and friction of ball joints
(``BallLimits``, ``BallFriction``: forces).
``difflie.load_model`` builds them from a robot file's joint ``stiffness``, ``range``,
``frictionloss`` and fixed tendons, with the softness of MuJoCo's constraints (Todorov 2014)
where MuJoCo makes a limit or friction a soft constraint; every array is a pytree leaf (to
differentiate, to identify).

A law says which joints it couples (``coupled_joints``): groups of joints whose torques may
depend on each other's coordinates and rates, ``()`` when each joint's torque reads its own
state only, ``None`` (or no such method: any law of the user's) for all of them. The implicit
solvers' iteration matrices follow the bodies these couplings join
(``JointFeedback.coupling``); a coupling left out there would give a wrong matrix (Newton
slowed to linear convergence, gradients through the implicit function theorem off).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .forces import AbstractForce, _couples, _parent_rotations, _relative_angular_velocity, nonzero_columns
from .lie import SO3
from .lie.ops import mm, mv


class JointSpring(eqx.Module):
    """Linear joint springs ``u = -stiffness (q - rest)`` (MJCF joint ``stiffness`` about
    ``springref``), a ``JointFeedback`` law; both arrays ``(nj,)`` are leaves."""

    stiffness: Float[Array, " nj"]
    rest: Float[Array, " nj"]

    def __call__(self, t, q, qd):
        return -self.stiffness.astype(q.dtype) * (q - self.rest.astype(q.dtype))

    def coupled_joints(self) -> tuple:
        return ()


class JointPD(eqx.Module):
    """A joint-space PD controller ``u = kp (target - q) - kd q_dot``, a ``JointFeedback`` law
    (``load_model(..., joint_feedback=JointPD(kp, kd, target))``); each joint reads its own
    state, so the step keeps its block structure. Gains and target (scalars or ``(nj,)``) are
    leaves: to differentiate, to tune by gradient."""

    kp: Float[Array, "*nj"]
    kd: Float[Array, "*nj"]
    target: Float[Array, "*nj"]

    def __call__(self, t, q, qd):
        dtype = q.dtype
        return self.kp.astype(dtype) * (self.target.astype(dtype) - q) - self.kd.astype(dtype) * qd

    def coupled_joints(self) -> tuple:
        return ()


class JointLimits(eqx.Module):
    """Joint limits as one-sided spring-dampers, a ``JointFeedback`` law. Beyond a limit,
    ``p = q - upper > 0`` or ``p = q - lower < 0``, the joint torque (force) is

        u = -stiffness p - damping min(|p| / width, 1) q_dot,

    kept pushing the joint back into its range (``u <= 0`` above ``upper``, ``u >= 0`` below
    ``lower``: a joint that leaves its limit is not pulled back to it), and zero within the
    range. The damping grows over the first ``width`` of the penetration, so the torque is
    continuous where the joint reaches its limit (a jump of ``damping q_dot`` there leaves an
    implicit step that ends near the limit without a root). The five arrays are ``(nj,)``
    leaves; ``has_lower`` and ``has_upper`` (static) say which limits a joint has (the values
    of the others are not read). A revolute joint's angle is read on the branch nearest the
    middle of its range (``revolute``, static), so a range narrower than ``2 pi`` holds
    whatever turn the angle was read on. ``load_model(..., joint_limits=True)`` sets the
    stiffness and damping from the file's ``solreflimit`` (time constant ``tc``, damping ratio
    ``zeta``; MuJoCo's default 0.02 s, 1) at the joint's inertia ``I`` at the reference pose
    (``1 / dof_invweight0``): ``stiffness = I / (tc zeta)^2``, ``damping = 2 I / tc``, so a
    joint on its limit rings at ``1 / (tc zeta)`` rad/s with damping ratio ``zeta``: MuJoCo's
    soft limit (Todorov 2014, its reference acceleration ``-b q_dot - k p``) as a force;
    ``width`` is the width of its ``solimplimit`` (0.001 by default), over which MuJoCo's
    impedance grows."""

    lower: Float[Array, " nj"]
    upper: Float[Array, " nj"]
    stiffness: Float[Array, " nj"]
    damping: Float[Array, " nj"]
    width: Float[Array, " nj"]
    revolute: tuple[bool, ...] = eqx.field(static=True)
    has_lower: tuple[bool, ...] = eqx.field(static=True)
    has_upper: tuple[bool, ...] = eqx.field(static=True)

    def __call__(self, t, q, qd):
        dtype = q.dtype
        lo, hi = self.lower.astype(dtype), self.upper.astype(dtype)
        has_lower, has_upper = np.asarray(self.has_lower), np.asarray(self.has_upper)
        turns = np.asarray(self.revolute) & has_lower & has_upper
        mid = 0.5 * (lo + hi)
        q = jnp.where(turns, mid + jnp.remainder(q - mid + jnp.pi, 2 * jnp.pi) - jnp.pi, q)
        above, below = has_upper & (q > hi), has_lower & (q < lo)
        p = jnp.where(above, q - hi, jnp.where(below, q - lo, 0.0))
        ramp = jnp.minimum(jnp.abs(p) / self.width.astype(dtype), 1.0)
        u = -self.stiffness.astype(dtype) * p - self.damping.astype(dtype) * ramp * qd
        return jnp.where(above, jnp.minimum(u, 0.0), jnp.where(below, jnp.maximum(u, 0.0), 0.0))

    def coupled_joints(self) -> tuple:
        return ()


class BallLimits(AbstractForce):
    """Limits of ball joints (MJCF ``range`` of a limited ball: the largest angle of its
    rotation from the reference) as the ``JointLimits`` law of that angle. Ball ``k`` turns
    body ``child[k]`` relative to ``parent[k]`` (-1: ground) by ``M = C^T R_p^T R_c`` from its
    reference (``C``: ``relative_rotation``); with ``phi = log M``, the angle ``theta = |phi|``
    has the rate ``theta_dot = phi . omega_rel / theta`` (``omega_rel``, the child's angular
    velocity relative to the parent in the child's axes, in which ``phi`` is the same vector),
    and the child takes the couple ``u phi / theta`` (the parent the opposite one), which
    delivers the power ``u theta_dot``. ``limits`` gives the law per unit inertia (its
    stiffness and damping in 1/s^2 and 1/s), scaled by the inertia about the axis ``e = phi /
    theta``, ``u = limits(t, theta, theta_dot) / (e . W e)`` with ``W`` the ball's block of the
    inverse mass matrix at the reference pose (``inverse_inertia``, in the child's axes): a
    hinge's ``1 / dof_invweight0`` about whichever axis the ball turns."""

    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    relative_rotation: Float[Array, "n 3 3"]
    inverse_inertia: Float[Array, "n 3 3"]
    limits: JointLimits

    def coupling(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.parent, self.child))

    def __call__(self, t, r, R, rdot, omega):
        dtype = r.dtype
        chi = np.asarray(self.child)
        Rp, Rc = _parent_rotations(self.parent, R), R[chi]
        phi = SO3(mm(jnp.swapaxes(mm(Rp, self.relative_rotation.astype(dtype)), -1, -2), Rc)).log()
        square = jnp.sum(phi * phi, axis=-1)
        turned = square > jnp.finfo(dtype).tiny  # no axis at the reference itself
        theta = jnp.where(turned, jnp.sqrt(jnp.where(turned, square, 1.0)), 0.0)
        axis = jnp.where(turned[:, None], phi / jnp.where(turned, theta, 1.0)[:, None], 0.0)
        omega_rel = _relative_angular_velocity(self.parent, self.child, R, omega)
        inverse = jnp.sum(axis * mv(self.inverse_inertia.astype(dtype), axis), axis=-1)  # e . W e
        u = self.limits(t, theta, jnp.sum(axis * omega_rel, axis=-1)) / jnp.where(turned, inverse, 1.0)
        return jnp.zeros_like(r), _couples(self.parent, self.child, R, Rp, u[:, None] * axis)


class BallFriction(AbstractForce):
    """Dry friction of ball joints (MJCF ``frictionloss`` of a ball's three degrees of freedom):
    ``JointFriction``'s law on each component of ``omega_rel``, the child's angular velocity
    relative to its parent in the child's axes (MuJoCo's velocity of a ball joint),

        u_k = -clip(damping_k omega_rel_k, -friction_k, friction_k),

    the couple ``u`` (child's axes) on the child and its opposite on the parent (-1: ground),
    which delivers the power ``u . omega_rel`` (never positive). ``friction`` and ``damping``
    are ``(n, 3)`` leaves, per ball and axis."""

    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    friction: Float[Array, "n 3"]
    damping: Float[Array, "n 3"]

    def coupling(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.parent, self.child))

    def __call__(self, t, r, R, rdot, omega):
        dtype = r.dtype
        omega_rel = _relative_angular_velocity(self.parent, self.child, R, omega)
        friction = self.friction.astype(dtype)
        u = -jnp.clip(self.damping.astype(dtype) * omega_rel, -friction, friction)
        return jnp.zeros_like(r), _couples(self.parent, self.child, R, _parent_rotations(self.parent, R), u)


class JointFriction(eqx.Module):
    """Dry friction of joints (MJCF ``frictionloss``; URDF ``<dynamics friction>``), a
    ``JointFeedback`` law: a stiff damper that saturates at the friction torque (force),

        u = -clip(damping q_dot, -friction, friction),

    so a joint loaded below its friction creeps at ``load / damping`` and one loaded above it
    slides against ``friction``. Both arrays are ``(nj,)`` leaves (zero friction: none).
    ``load_model(..., joint_friction=True)`` takes ``damping`` from the joint's
    ``solreffriction`` and ``solimpfriction`` so that a joint creeps as fast as under MuJoCo's
    soft friction (Todorov 2014), whose acceleration ``(1 - d) a0 - d b q_dot`` (``a0``: without
    friction; ``b = 2 / (d_max tc)``) comes to rest at ``q_dot = -(1 - d) a0 / (d b)``:
    ``damping = I b d / (1 - d)`` at the joint's inertia ``I`` at the reference pose. It
    reaches that creep within ``I / damping`` (1 ms by default) where MuJoCo's acceleration
    takes it at once."""

    friction: Float[Array, " nj"]
    damping: Float[Array, " nj"]

    def __call__(self, t, q, qd):
        friction = self.friction.astype(qd.dtype)
        return -jnp.clip(self.damping.astype(qd.dtype) * qd, -friction, friction)

    def coupled_joints(self) -> tuple:
        return ()


class Tendons(eqx.Module):
    """Fixed tendons (MJCF ``<tendon><fixed>``), a ``JointFeedback`` law: a tendon's length is a
    linear combination of joint coordinates, ``L = A q + offset`` (``coefficients`` ``A`` (nt,
    nj); ``offset``: the locked joints' share), ``law(t, L, L_dot) -> f (nt,)`` its force (a
    ``TendonSpring``, ``JointLimits`` and ``JointFriction`` of the length, or their
    ``JointLaws``), and the joints take the torques (forces) ``A^T f``, which deliver the power
    ``f . L_dot``. ``joints`` (static) holds the joints of each tendon, the nonzero entries of
    its row of ``A`` when the tendons are made."""

    coefficients: Float[Array, "nt nj"]
    offset: Float[Array, " nt"]
    law: Callable
    joints: tuple[tuple[int, ...], ...] = eqx.field(static=True)

    def __init__(self, coefficients, offset, law):
        self.coefficients, self.offset, self.law = coefficients, offset, law
        self.joints = nonzero_columns(coefficients)

    def __call__(self, t, q, qd):
        A = self.coefficients.astype(q.dtype)
        return A.T @ self.law(t, A @ q + self.offset.astype(q.dtype), A @ qd)

    def coupled_joints(self) -> tuple[tuple[int, ...], ...]:
        """The joints of each tendon; of all tendons together where the law couples tendons."""
        if coupled_joints(self.law) == ():
            return self.joints
        return (tuple(sorted({k for g in self.joints for k in g})),)


class TendonSpring(eqx.Module):
    """A tendon's spring and damper as MuJoCo applies them, a law of its length ``L`` and rate:
    ``f = -stiffness (L - clip(L, lower, upper)) - damping L_dot`` (a spring about the rest
    length ``lower = upper``, or idle within a dead band between them). Arrays ``(nt,)``,
    leaves."""

    stiffness: Float[Array, " nt"]
    damping: Float[Array, " nt"]
    lower: Float[Array, " nt"]
    upper: Float[Array, " nt"]

    def __call__(self, t, length, rate):
        dtype = length.dtype
        stretch = length - jnp.clip(length, self.lower.astype(dtype), self.upper.astype(dtype))
        return -self.stiffness.astype(dtype) * stretch - self.damping.astype(dtype) * rate

    def coupled_joints(self) -> tuple:
        return ()


class JointCouplings(eqx.Module):
    """Couplings of joint coordinates (MJCF ``<equality><joint>``, URDF ``<mimic>``), held as
    softly as MuJoCo holds them, a ``JointFeedback`` law. Coupling ``k`` makes joint ``f =
    follower[k]`` follow joint ``l = leader[k]`` (``-1``: none, a constant) by the polynomial
    ``p`` of ``polynomial[k]`` (MuJoCo's ``polycoef``; a URDF mimic's ``offset`` and
    ``multiplier`` are its first two), from the reference positions ``(q_f0, q_l0)`` =
    ``reference[k]``:

        e = (q_f - q_f0) - p(q_l - q_l0),    e_dot = q_dot_f - p'(q_l - q_l0) q_dot_l,

        F = -I d / (1 - d) (k d e + b e_dot),

    on the follower, and ``-p' F`` on the leader (the two deliver the power ``F e_dot``).
    ``d = d(|e|)`` is MuJoCo's impedance (``impedance[k]``: its ``solimp``, ``d0``, ``d_max``,
    width, midpoint, power), ``k = 1 / (d_max tc zeta)^2`` and ``b = 2 / (d_max tc)`` per unit
    inertia from the ``solref`` ``(tc, zeta)`` (or, negative, ``k = -tc / d_max^2``, ``b = -zeta
    / d_max``: MuJoCo's direct stiffness and damping), and ``I`` the inertia MuJoCo gives the
    constraint (``1 / efc_diagA`` at the reference pose); ``stiffness = I k`` and ``damping = I
    b``. MuJoCo makes the coupling's error accelerate as ``(1 - d) a0 + d a_ref`` (``a0``: free
    of it; ``a_ref = -b e_dot - k d e``; Todorov 2014); this force gives the same error under a
    steady load and the same creep, and settles its transients faster (no added inertia along
    the coupling). All arrays are leaves."""

    reference: Float[Array, "n 2"]
    polynomial: Float[Array, "n 5"]
    stiffness: Float[Array, " n"]
    damping: Float[Array, " n"]
    impedance: Float[Array, "n 5"]
    follower: tuple[int, ...] = eqx.field(static=True)
    leader: tuple[int, ...] = eqx.field(static=True)

    def __call__(self, t, q, qd):
        dtype, nj = q.dtype, q.shape[0]
        f, l = np.asarray(self.follower), np.asarray(self.leader)
        led = l >= 0
        P_f = jnp.asarray(np.eye(nj)[f], dtype)  # (n, nj) one-hot rows; the leaders' zero where none
        P_l = jnp.asarray(np.eye(nj)[np.maximum(l, 0)] * led[:, None], dtype)
        ref, c = self.reference.astype(dtype), self.polynomial.astype(dtype)
        x = jnp.where(led, P_l @ q - ref[:, 1], 0.0)
        powers = x[:, None] ** np.arange(5)  # 1, x, ..., x^4
        slope = jnp.sum(c[:, 1:] * np.arange(1, 5) * powers[:, :4], axis=1)
        e = P_f @ q - ref[:, 0] - jnp.sum(c * powers, axis=1)
        e_dot = P_f @ qd - slope * (P_l @ qd)
        d = impedance(jnp.abs(e), self.impedance.astype(dtype))
        F = -d / (1.0 - d) * (self.stiffness.astype(dtype) * d * e + self.damping.astype(dtype) * e_dot)
        return P_f.T @ F - P_l.T @ (slope * F)

    def coupled_joints(self) -> tuple[tuple[int, ...], ...]:
        return tuple((f, l) for f, l in zip(self.follower, self.leader) if l >= 0)


def impedance(x: Float[Array, " n"], solimp: Float[Array, "n 5"]) -> Float[Array, " n"]:
    """MuJoCo's impedance ``d(x)`` of a constraint violated by ``x >= 0`` (``solimp``: ``d0``,
    ``d_max``, width, midpoint, power): ``d0 + y (d_max - d0)``, where ``y`` rises from 0 to 1
    over the width along two power curves that meet at the midpoint; ``(d0 + d_max) / 2`` where
    ``d0 = d_max`` or the width is zero."""
    d0, dmax, width, mid, power = (solimp[:, k] for k in range(5))
    flat = (d0 == dmax) | (width <= 0)
    r = jnp.clip(x / jnp.where(flat, 1.0, width), 0.0, 1.0)
    mid = jnp.clip(mid, 1e-4, 1.0 - 1e-4)
    low = r <= mid
    base = jnp.where(low, r, 1.0 - r)  # the distance from the curve's end, in [0, 1]
    curve = jnp.where(base > 0, jnp.where(base > 0, base, 1.0) ** power, 0.0) / jnp.where(low, mid, 1.0 - mid) ** (power - 1)
    y = jnp.where(low, curve, 1.0 - curve)
    return jnp.where(flat, 0.5 * (d0 + dmax), d0 + y * (dmax - d0))


class Actuators(eqx.Module):
    """MuJoCo's actuators on hinges, slides and tendons (MJCF ``<actuator>``: ``motor``,
    ``position``, ``velocity``, and ``general`` ones of fixed or affine gain and bias without
    activation dynamics), a ``JointFeedback`` law. Actuator ``k`` acts along the row ``m_k`` of
    ``moment`` (its gear ``g`` times the unit row of its joint, or times its tendon's
    coefficients; ``offset``: ``g`` times a tendon's locked joints' share): its length ``L = m_k
    . q + offset_k`` and velocity ``V = m_k . q_dot``, its control ``u = controls(t)[k]``
    (clipped to ``ctrl_range`` where ``ctrl_limited``), its force

        F = (a0 + a1 L + a2 V) u + (b0 + b1 L + b2 V)      (``gain``, ``bias``)

    (clipped to ``force_range`` where ``force_limited``; the actuators on a tendon whose
    ``actuatorfrcrange`` their sum leaves, ``tendon[k]`` (static; -1: none) into
    ``tendon_range``, are scaled by one factor to its bound, as MuJoCo scales them), and the
    joints take ``m_k F``; their sums are clipped to ``joint_range`` where ``joint_limited``
    (MJCF ``actuatorfrcrange``). A
    position servo has the gain ``kp`` and the bias ``(0, -kp, -kv)``, a velocity servo ``kv`` and
    ``(0, 0, -kv)``, a motor 1 and none. ``controls`` is a signal ``t -> (nu,)`` in the order of
    ``names`` (a ``difflie.forces.JointTorques``: its constants are leaves, to optimise a control
    by gradient), or with ``select`` (static) the entries ``select`` of a longer one (one
    function for all a file's actuators, some of them on spatial tendons); the other arrays are
    leaves too. Over the lengths of spatial tendons instead of joint coordinates, it is part of
    a ``difflie.forces.SpatialTendons`` law. ``joints`` (static): the joints each actuator
    moves, the nonzero entries of its row of ``moment`` when the actuators are made."""

    controls: Callable
    moment: Float[Array, "nu nj"]
    offset: Float[Array, " nu"]
    gain: Float[Array, "nu 3"]
    bias: Float[Array, "nu 3"]
    ctrl_range: Float[Array, "nu 2"]
    force_range: Float[Array, "nu 2"]
    joint_range: Float[Array, "nj 2"]
    tendon_range: Float[Array, "ntl 2"]
    ctrl_limited: tuple[bool, ...] = eqx.field(static=True)
    force_limited: tuple[bool, ...] = eqx.field(static=True)
    joint_limited: tuple[bool, ...] = eqx.field(static=True)
    names: tuple[str, ...] = eqx.field(static=True)
    tendon: tuple[int, ...] = eqx.field(static=True)
    select: tuple[int, ...] | None = eqx.field(static=True)
    joints: tuple[tuple[int, ...], ...] = eqx.field(static=True)

    def __init__(self, controls, moment, offset, gain, bias, ctrl_range, force_range, joint_range, tendon_range=None, *,
                 ctrl_limited, force_limited, joint_limited, names, tendon=None, select=None):  # fmt: skip
        self.controls, self.moment, self.offset, self.gain, self.bias = controls, moment, offset, gain, bias
        self.ctrl_range, self.force_range, self.joint_range = ctrl_range, force_range, joint_range
        self.tendon_range = jnp.zeros((0, 2)) if tendon_range is None else tendon_range
        self.ctrl_limited, self.force_limited, self.joint_limited = tuple(ctrl_limited), tuple(force_limited), tuple(joint_limited)
        self.names = tuple(names)
        self.tendon = tuple(int(k) for k in (tendon if tendon is not None else [-1] * len(self.names)))
        self.select = None if select is None else tuple(int(k) for k in select)
        self.joints = nonzero_columns(moment)

    def __call__(self, t, q, qd):
        dtype = q.dtype
        M = self.moment.astype(dtype)
        L, V = M @ q + self.offset.astype(dtype), M @ qd
        u = jnp.asarray(self.controls(t), dtype)
        u = _clip(u if self.select is None else u[np.asarray(self.select)], self.ctrl_range.astype(dtype), self.ctrl_limited)
        a, b = self.gain.astype(dtype), self.bias.astype(dtype)
        F = (a[:, 0] + a[:, 1] * L + a[:, 2] * V) * u + b[:, 0] + b[:, 1] * L + b[:, 2] * V
        F = _clip(F, self.force_range.astype(dtype), self.force_limited)
        if max(self.tendon, default=-1) >= 0:  # a tendon's actuators scaled into its range
            k = np.asarray(self.tendon)
            on = jnp.asarray(k >= 0)
            total = jax.ops.segment_sum(jnp.where(on, F, 0.0), np.where(k >= 0, k, 0), self.tendon_range.shape[0])
            bounds = self.tendon_range.astype(dtype)
            held = jnp.clip(total, bounds[:, 0], bounds[:, 1])
            scale = jnp.where(held == total, 1.0, held / jnp.where(total == 0, 1.0, total))
            F = jnp.where(on, F * scale[np.where(k >= 0, k, 0)], F)
        return _clip(M.T @ F, self.joint_range.astype(dtype), self.joint_limited)

    def coupled_joints(self) -> tuple[tuple[int, ...], ...]:
        """The joints of each actuator (a tendon's couple)."""
        return tuple(g for g in self.joints if len(g) > 1)


def _clip(x: Float[Array, " n"], bounds: Float[Array, "n 2"], limited: tuple[bool, ...]) -> Float[Array, " n"]:
    """``x`` clipped to ``bounds`` where ``limited`` (static)."""
    if not any(limited):
        return x
    return jnp.where(np.asarray(limited), jnp.clip(x, bounds[:, 0], bounds[:, 1]), x)


class JointLaws(eqx.Module):
    """The sum of ``JointFeedback`` laws ``(t, q, qd) -> (nj,)``: one element reads the joint
    state once for all of them (a controller, springs, limits, friction, tendons)."""

    laws: tuple

    def __call__(self, t, q, qd):
        return sum(law(t, q, qd) for law in self.laws)

    def coupled_joints(self) -> tuple[tuple[int, ...], ...] | None:
        groups = [coupled_joints(law) for law in self.laws]
        return None if any(g is None for g in groups) else tuple(g for gs in groups for g in gs)


def coupled_joints(law) -> tuple[tuple[int, ...], ...] | None:
    """The groups of joints ``law`` couples (module docstring): its ``coupled_joints()``,
    ``None`` (all joints) for a law that does not say."""
    method = getattr(law, "coupled_joints", None)
    return None if method is None else method()


__all__ = ["Actuators", "BallFriction", "BallLimits", "JointCouplings", "JointFriction", "JointLaws", "JointLimits", "JointPD", "JointSpring", "TendonSpring", "Tendons", "coupled_joints", "impedance"]
