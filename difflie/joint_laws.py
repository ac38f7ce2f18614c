"""Laws of the joint state: the torques (forces) that springs, limits, friction and tendons
apply at a robot's joints, as functions ``law(t, q, qd) -> (nj,)`` of its joint coordinates
and rates that a ``difflie.joint_space.JointFeedback`` applies at the joints (equal and
opposite on each joint's two bodies), and the limits of ball joints (``BallLimits``, a force).
``difflie.load_model`` builds them from a robot file's joint ``stiffness``, ``range``,
``frictionloss`` and fixed tendons, with the softness of MuJoCo's constraints (Todorov 2014)
where MuJoCo makes a limit or friction a soft constraint; every array is a pytree leaf (to
differentiate, to identify).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .forces import AbstractForce, _couples, _parent_rotations, _parent_rows
from .lie import SO3
from .lie.ops import mm, mtv, mv


class JointSpring(eqx.Module):
    """Linear joint springs ``u = -stiffness (q - rest)`` (MJCF joint ``stiffness`` about
    ``springref``), a ``JointFeedback`` law; both arrays ``(nj,)`` are leaves."""

    stiffness: Float[Array, " nj"]
    rest: Float[Array, " nj"]

    def __call__(self, t, q, qd):
        return -self.stiffness.astype(q.dtype) * (q - self.rest.astype(q.dtype))


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
        w_p = jnp.concatenate([mv(R, omega), jnp.zeros((1, 3), dtype)])[_parent_rows(self.parent, R.shape[0])]
        omega_rel = omega[chi] - mtv(Rc, w_p)
        inverse = jnp.sum(axis * mv(self.inverse_inertia.astype(dtype), axis), axis=-1)  # e . W e
        u = self.limits(t, theta, jnp.sum(axis * omega_rel, axis=-1)) / jnp.where(turned, inverse, 1.0)
        return jnp.zeros_like(r), _couples(self.parent, self.child, R, Rp, u[:, None] * axis)


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


class Tendons(eqx.Module):
    """Fixed tendons (MJCF ``<tendon><fixed>``), a ``JointFeedback`` law: a tendon's length is a
    linear combination of joint coordinates, ``L = A q + offset`` (``coefficients`` ``A`` (nt,
    nj); ``offset``: the locked joints' share), ``law(t, L, L_dot) -> f (nt,)`` its force (a
    ``TendonSpring``, ``JointLimits`` and ``JointFriction`` of the length, or their
    ``JointLaws``), and the joints take the torques (forces) ``A^T f``, which deliver the power
    ``f . L_dot``."""

    coefficients: Float[Array, "nt nj"]
    offset: Float[Array, " nt"]
    law: Callable

    def __call__(self, t, q, qd):
        A = self.coefficients.astype(q.dtype)
        return A.T @ self.law(t, A @ q + self.offset.astype(q.dtype), A @ qd)


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


class JointLaws(eqx.Module):
    """The sum of ``JointFeedback`` laws ``(t, q, qd) -> (nj,)``: one element reads the joint
    state once for all of them (a controller, springs, limits, friction, tendons)."""

    laws: tuple

    def __call__(self, t, q, qd):
        return sum(law(t, q, qd) for law in self.laws)


__all__ = ["BallLimits", "JointFriction", "JointLaws", "JointLimits", "JointSpring", "TendonSpring", "Tendons"]
