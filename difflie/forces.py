"""Force elements: applied wrenches and linear spring-dampers, stacked by type.

Every element is called as ``element(t, r, R, rdot, omega) -> (f, tau)`` with the state of all
``nb`` bodies (COM position ``r`` (nb, 3), body-to-world ``R`` (nb, 3, 3), COM world velocity
``rdot`` (nb, 3), body angular velocity ``omega`` (nb, 3)) and returns the world force at the
COM ``f`` (nb, 3) and the torque about the COM in body axes ``tau`` (nb, 3). Gravity is a field
of :class:`difflie.model.Model`, not an element.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .lie import cross
from .lie.ops import mtv, mv


class AbstractForce(eqx.Module):
    """A force element acting on the bodies of a model."""

    def __call__(self, t, r, R, rdot, omega) -> tuple[Float[Array, "nb 3"], Float[Array, "nb 3"]]:
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

    def _point(self, idx: tuple[int, ...], s: Array, r, R, rdot, omega):
        """World position and velocity of the spring ends on bodies ``idx`` (ground: -1)."""
        nb = r.shape[0]
        i = np.asarray(idx)
        if np.any((i < -1) | (i >= nb)):
            raise ValueError(f"SpringDamper: body index out of range for {nb} bodies: {idx}")
        ground = jnp.asarray(i < 0)[:, None]
        j = np.where(i < 0, 0, i)
        Rs = mv(R[j], s)
        p = jnp.where(ground, s, r[j] + Rs)
        v = jnp.where(ground, 0.0, rdot[j] + mv(R[j], cross(omega[j], s)))
        return p, v, np.where(i < 0, nb, i)  # index nb is dropped by the scatter

    def __call__(self, t, r, R, rdot, omega):
        dtype = r.dtype
        sa, sb = self.point_a.astype(dtype), self.point_b.astype(dtype)
        pa, va, ia = self._point(self.body_a, sa, r, R, rdot, omega)
        pb, vb, ib = self._point(self.body_b, sb, r, R, rdot, omega)
        d = pb - pa
        l2 = jnp.sum(d * d, axis=-1)
        positive = l2 > 0
        length = jnp.sqrt(jnp.where(positive, l2, 1.0))
        n = jnp.where(positive[:, None], d / length[:, None], 0.0)
        length = jnp.where(positive, length, 0.0)
        ldot = jnp.sum(n * (vb - va), axis=-1)
        fmag = self.stiffness * (length - self.rest_length) + self.damping * ldot
        F = fmag[:, None] * n  # on a
        f = jnp.zeros_like(r).at[ia].add(F, mode="drop").at[ib].add(-F, mode="drop")
        ja, jb = np.where(ia < r.shape[0], ia, 0), np.where(ib < r.shape[0], ib, 0)
        ta = cross(sa, mtv(R[ja], F))
        tb = cross(sb, mtv(R[jb], -F))
        tau = jnp.zeros_like(r).at[ia].add(ta, mode="drop").at[ib].add(tb, mode="drop")
        return f, tau


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


def gravity_forces(mass: Array, gravity: Array, like: Array) -> tuple[Array, Array]:
    """``(m g, 0)`` per body."""
    f = mass[:, None] * gravity[None, :]
    return f.astype(like.dtype), jnp.zeros_like(like)
