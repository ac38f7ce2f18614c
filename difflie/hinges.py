"""Two or three hinges about one point: a body with several joints, as MJCF writes them.

MuJoCo applies the joints of one body in order, each about its axis in the body's frame as the
joints before it left it. Hinges about one point thus turn the body relative to its parent by

    M = R_p^T R_c C^T = Rot(a1, q1) Rot(a2, q2) Rot(a3, q3)

with ``C = R_p^T R_c`` at the reference (``q = q_ref``) and the axes ``a_k`` in the parent's
frame there; a pair of hinges has no middle one (``q2 = 0``). This is a spherical joint (three
hinges) or a spherical joint whose two axes keep their angle (two hinges: a universal joint)
read in joint coordinates, the Euler angles of Davenport's generalisation (Shuster & Markley,
2003, J. Astronaut. Sci. 51(2)):

    y = a1 . M a3 = A cos q2 + B sin q2 + D,   A = a1.a3 - D,  B = a1 . (a2 x a3),  D = (a1.a2)(a2.a3)

gives ``q2`` (the root nearer the given one: ``M`` fixes the triple up to that branch), then
``q1`` turns ``Rot(a2, q2) a3`` into ``M a3`` about ``a1`` and ``-q3`` turns ``Rot(a2, -q2) a1``
into ``M^T a1`` about ``a3``. The first axis is fixed in the parent (world ``e1 = R_p a1``), the
last in the child (``e3 = R_c C^T a3``), and the middle one keeps its angles to both, which fixes
it without the angles (two cones, ``e1.e2 = a1.a2``, ``e2.e3 = a2.a3``, on the side ``sign``):

    e2 = alpha e1 + beta e3 + gamma e1 x e3.

The relative angular velocity is ``w_c - w_p = [e1 e2 e3] q_dot``, so ``q_dot_k = d_k . (w_c - w_p)``
with the dual basis ``d_1 = e2 x e3 / det``, ``d_2 = e3 x e1 / det``, ``d_3 = e1 x e2 / det``; a
joint torque ``u_k`` is the couple ``u_k d_k`` on the child (and ``-u_k d_k`` on the parent),
which delivers the power ``u . q_dot``. A pair uses ``e2 = e1 x e3 / |e1 x e3|`` (any vector
outside the plane of ``e1`` and ``e3`` gives the same dual vectors of ``e1`` and ``e3``). All of
this is singular where the axes become coplanar (gimbal lock), as joint coordinates are.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .lie import cross
from .lie.ops import mtv, mv


def _dot(a, b):
    return jnp.sum(a * b, axis=-1)


def _safe_sqrt(x):
    """``sqrt(max(x, 0))`` with a finite derivative at 0 (gimbal lock)."""
    return jnp.sqrt(jnp.maximum(x, jnp.finfo(jnp.result_type(x)).tiny))


def _unit(v):
    return v / _safe_sqrt(_dot(v, v))[..., None]


def rotate(axis: Float[Array, "*b 3"], angle: Float[Array, "*b"], v: Float[Array, "*b 3"]) -> Float[Array, "*b 3"]:
    """``Rot(axis, angle) v`` (Rodrigues; ``axis`` a unit vector)."""
    c, s = jnp.cos(angle)[..., None], jnp.sin(angle)[..., None]
    return v * c + cross(axis, v) * s + axis * (_dot(axis, v)[..., None] * (1 - c))


def turn(axis: Float[Array, "*b 3"], u: Float[Array, "*b 3"], v: Float[Array, "*b 3"]) -> Float[Array, "*b"]:
    """The angle about the unit ``axis`` from ``u`` to ``v`` (their parts across the axis)."""
    return jnp.arctan2(_dot(axis, cross(u, v)), _dot(u, v) - _dot(axis, u) * _dot(axis, v))


class HingeGroups(eqx.Module):
    """Which joints share a body with other hinges, and the frames to read them.

    Per joint (in the model's joint order): ``slot`` (static) 0, 1 or 2 for the first, middle
    and last hinge of its body (a pair: 0 and 2; a joint alone: 0), ``middle`` (static) the index
    of its group's middle joint (-1: none), ``grouped`` (static) whether it shares its body;
    ``axes`` ``(a1, a2, a3)`` of its group in the parent's frame at the reference (a pair's
    ``a2``: ``a1 x a3``, unit), ``last`` the last axis in the child's frame and ``sign`` the side
    of the middle axis (``sign(e2 . e1 x e3)``, from the joint positions the model starts at).
    """

    slot: tuple[int, ...] = eqx.field(static=True)
    middle: tuple[int, ...] = eqx.field(static=True)
    grouped: tuple[bool, ...] = eqx.field(static=True)
    axes: Float[Array, "nj 3 3"]
    last: Float[Array, "nj 3"]
    sign: Float[Array, " nj"]

    def world_axes(self, Rp: Float[Array, "*n nj 3 3"], Rc: Float[Array, "*n nj 3 3"]) -> tuple[Array, Array, Array]:
        """``(e1, e2, e3)`` of every joint's group in world axes."""
        dtype = Rp.dtype
        a = self.axes.astype(dtype)
        e1 = mv(Rp, a[:, 0])
        e3 = mv(Rc, self.last.astype(dtype))
        c = _dot(e1, e3)
        det = 1.0 - c * c
        c12, c23 = _dot(a[:, 0], a[:, 1]), _dot(a[:, 1], a[:, 2])
        alpha = (c12 - c * c23) / det
        beta = (c23 - c * c12) / det
        p = alpha[..., None] * e1 + beta[..., None] * e3
        gamma = self.sign.astype(dtype) * _safe_sqrt((1.0 - _dot(p, p)) / det)
        n = cross(e1, e3)
        e2 = jnp.where(np.asarray(self.middle)[:, None] >= 0, p + gamma[..., None] * n, _unit(n))
        return e1, e2, e3

    def directions(self, Rp, Rc, axis: Float[Array, "*n nj 3"]) -> Float[Array, "*n nj 3"]:
        """Each joint's dual vector ``d_k`` (``q_dot = d_k . (w_c - w_p)``; its torque's couple
        ``u d_k``); ``axis`` (world) for a joint alone on its body."""
        e1, e2, e3 = self.world_axes(Rp, Rc)
        det = _dot(e1, cross(e2, e3))[..., None]
        duals = jnp.stack([cross(e2, e3), cross(e3, e1), cross(e1, e2)], axis=-2) / det[..., None]
        slot = np.asarray(self.slot)
        d = duals[..., np.arange(slot.size), slot, :]
        return jnp.where(np.asarray(self.grouped)[:, None], d, axis)

    def angles(self, M: Float[Array, "*n nj 3 3"], near: Float[Array, " nj"]) -> Float[Array, "*n nj"]:
        """Each grouped joint's angle ``q - q_ref`` from its group's ``M`` (see the module
        docstring); ``near``: ``q - q_ref`` of the middle hinges' branch (the joints' own
        entries; others are ignored)."""
        dtype = M.dtype
        a = self.axes.astype(dtype)
        a1, a2, a3 = a[:, 0], a[:, 1], a[:, 2]
        has_middle = np.asarray(self.middle) >= 0
        c12, c23 = _dot(a1, a2), _dot(a2, a3)
        D = c12 * c23
        A, B = _dot(a1, a3) - D, _dot(a1, cross(a2, a3))
        rho = _safe_sqrt(A * A + B * B)
        z = (_dot(a1, mv(M, a3)) - D) / rho
        half = jnp.arctan2(_safe_sqrt(1.0 - z * z), z)
        phi = jnp.arctan2(B, A)
        target = near.astype(dtype)[np.where(has_middle, np.asarray(self.middle), 0)]
        gap = lambda q: jnp.abs(jnp.remainder(q - target + jnp.pi, 2 * jnp.pi) - jnp.pi)  # noqa: E731
        q2 = jnp.where(gap(phi + half) <= gap(phi - half), phi + half, phi - half)
        q2 = jnp.where(has_middle, q2, 0.0)
        q1 = turn(a1, rotate(a2, q2, a3), mv(M, a3))
        q3 = -turn(a3, rotate(a2, -q2, a1), mtv(M, a1))
        slot = np.asarray(self.slot)
        return jnp.where(slot == 0, q1, jnp.where(slot == 1, q2, q3))

    def signs(self, q: Float[Array, " nj"]) -> Float[Array, " nj"]:
        """``sign`` at the joint positions ``q - q_ref`` (the middle hinges' entries):
        ``sign(a2 . a1 x Rot(a2, q2) a3)``, the side of the middle axis there."""
        a = self.axes.astype(q.dtype)
        middle = np.asarray(self.middle)
        q2 = jnp.where(middle >= 0, q[np.where(middle >= 0, middle, 0)], 0.0)
        s = _dot(a[:, 1], cross(a[:, 0], rotate(a[:, 1], q2, a[:, 2])))
        return jnp.where(s < 0, -1.0, 1.0).astype(q.dtype)


__all__ = ["HingeGroups", "rotate", "turn"]
