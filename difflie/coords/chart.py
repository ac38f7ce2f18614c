"""Absolute rotation coordinates ("charts") and their local-global transition (LGT) maps.

A chart ``alpha`` maps coordinates ``theta`` to a rotation ``R`` (body to world). A body's
absolute coordinates are ``q = (r, theta)``: the world position ``r`` of its frame first, then
``theta`` (translation first, like the tangents ``X = (v, x)``); rotation-only models use
``q = theta``. The LGT map (Müller, §6.1) is defined by

    alpha(lgt(q, X)) = alpha(q) psi(X),

the absolute coordinates after the local increment ``X`` of the group ``G`` with local chart
``psi``. Its derivative at ``X = 0`` is ``H(q)^-1``, where ``omega_body = H(q) theta_dot``.
Coordinates that are not unique (angles, sign of a quaternion) are chosen on the branch nearest
the coordinates before the step, so trajectories stay continuous.
"""

from __future__ import annotations

import abc
from typing import ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie import ops as _ops
from ..numerics import linear
from .local import LocalCoordinates


class AbstractChart(eqx.Module):
    """Coordinates ``theta`` (``dim`` numbers) of a rotation; every method takes batch dims."""

    dim: ClassVar[int]

    # -- what every chart defines ---------------------------------------------------------------

    @abc.abstractmethod
    def to_rotation(self, theta: Float[Array, "*b dim"]) -> Float[Array, "*b 3 3"]:
        """``R = alpha(theta)``, body to world."""

    @abc.abstractmethod
    def from_quaternion(
        self, quat: Float[Array, "*b 4"], reference: Float[Array, "*b dim"] | None = None
    ) -> Float[Array, "*b dim"]:
        """Coordinates of the unit quaternion ``quat``, on the branch nearest ``reference``."""

    # -- defaults, overridden where a closed form is cheaper or better conditioned --------------

    def to_quaternion(self, theta: Float[Array, "*b dim"]) -> Float[Array, "*b 4"]:
        """Unit quaternion (scalar first, ``w >= 0`` unless the chart stores one)."""
        return _ops.matrix_to_quat(self.to_rotation(theta))

    def from_rotation(
        self, R: Float[Array, "*b 3 3"], reference: Float[Array, "*b dim"] | None = None
    ) -> Float[Array, "*b dim"]:
        """Coordinates of ``R``; with ``reference``, the branch nearest to it."""
        return self.from_quaternion(_ops.matrix_to_quat(jnp.asarray(R)), reference)

    def compose(self, theta: Float[Array, "*b dim"], dquat: Float[Array, "*b 4"]) -> Float[Array, "*b dim"]:
        """``alpha^-1(alpha(theta) R(dquat))``: the rotation part ``tau_R`` of the LGT."""
        return self.from_quaternion(_ops.qmul(self.to_quaternion(theta), dquat), reference=theta)

    def compose_increment(self, theta: Float[Array, "*b dim"], dquat_m1: Float[Array, "*b 4"]) -> Array:
        """``compose`` with the increment given as ``dquat - (1, 0, 0, 0)`` (see
        ``LocalCoordinates.rotation_increment_minus_identity``)."""
        identity = jnp.zeros_like(dquat_m1).at[..., 0].set(1.0)
        return self.compose(theta, dquat_m1 + identity)

    def H(self, theta: Float[Array, "*b dim"]) -> Float[Array, "*b 3 dim"]:
        """Kinematic matrix: ``omega_body = H(theta) theta_dot`` (``vee(R^T dR)`` by autodiff)."""

        def one(th):
            dR = jax.jacfwd(self.to_rotation)(th)  # (3, 3, dim)
            RtdR = jnp.einsum("ki,kjd->ijd", self.to_rotation(th), dR)
            return _ops.vee(jnp.moveaxis(RtdR, -1, 0)).T

        return _vectorize(one, theta)

    def H_inverse(self, theta: Float[Array, "*b dim"]) -> Float[Array, "*b dim 3"]:
        """``theta_dot = H_inverse(theta) omega_body`` (a right inverse for redundant charts)."""
        return linear.inv(self.H(theta))

    # -- LGT maps -------------------------------------------------------------------------------

    def split(self, q: Float[Array, "*b n"], group="SO3xR3") -> tuple[Array | None, Array]:
        """``(r, theta)`` of absolute coordinates ``q`` (``r`` is ``None`` for SO(3))."""
        local = LocalCoordinates(group)
        if q.shape[-1] != self.dim + 3 * local.has_translation:
            raise ValueError(
                f"{type(self).__name__} with group {local.group} expects q with last axis "
                f"{self.dim + 3 * local.has_translation}; got shape {q.shape}"
            )
        if not local.has_translation:
            return None, q
        return q[..., :3], q[..., 3:]

    def rotation(self, q: Float[Array, "*b n"], group="SO3xR3") -> Float[Array, "*b 3 3"]:
        """Body-to-world rotation of absolute coordinates ``q``."""
        return self.to_rotation(self.split(q, group)[1])

    def lgt(
        self,
        q: Float[Array, "*b n"],
        X: Float[Array, "*b d"],
        group="SO3xR3",
        psi: Literal["exp", "cay"] = "exp",
    ) -> Float[Array, "*b n"]:
        """The LGT map ``tau(q, X)``: ``alpha(tau(q, X)) = alpha(q) psi(X)`` in ``group``.

        SO(3)xR3: ``r' = r + v`` (world velocity ``r_dot`` is the translation tangent; the
        pairing that matches the group law; Müller's eq. (80) instead rotates an increment resolved
        in the body frame at ``t_k``, which gives the same trajectories). SE(3):
        ``r' = r + R(theta) dr(X)`` with ``dr = J_l(x) v`` (exp) or ``(I + cay(c)) v`` (cay).
        """
        local = LocalCoordinates(group, psi)
        q, X = jnp.asarray(q), jnp.asarray(X)
        if X.shape[-1] != local.tangent_dim:
            raise ValueError(f"lgt in {local.group} expects X with last axis {local.tangent_dim}; got {X.shape}")
        r, theta = self.split(q, local.group)
        _, x = local.split(X)
        theta1 = self.compose_increment(theta, local.rotation_increment_minus_identity(x))
        if r is None:
            return theta1
        dr = local.translation_increment(X)
        if local.group == "SE3":
            dr = _ops.matvec(self.to_rotation(theta), dr)
        return jnp.concatenate([r + dr, theta1], axis=-1)

    def lgt_inverse(
        self,
        q0: Float[Array, "*b n"],
        q1: Float[Array, "*b n"],
        group="SO3xR3",
        psi: Literal["exp", "cay"] = "exp",
    ) -> Float[Array, "*b d"]:
        """``X`` with ``lgt(q0, X) = q1`` (the inverse LGT), rotation below pi."""
        local = LocalCoordinates(group, psi)
        r0, theta0 = self.split(jnp.asarray(q0), local.group)
        r1, theta1 = self.split(jnp.asarray(q1), local.group)
        dq = _ops.qmul(_ops.qconj(self.to_quaternion(theta0)), self.to_quaternion(theta1))
        dq = jnp.where(dq[..., :1] < 0, -dq, dq)
        x = local.rotation_log(dq)
        if r0 is None:
            return x
        dr = r1 - r0
        if local.group == "SE3":
            dr = _ops.matvec(_ops.transpose(self.to_rotation(theta0)), dr)
        return jnp.concatenate([local.translation_increment_inverse(x, dr), x], axis=-1)


def _vectorize(fn, x: Array) -> Array:
    """Apply ``fn`` (one element, last axis of ``x``) over the leading batch dims of ``x``."""
    batch = x.shape[:-1]
    flat = x.reshape((-1, x.shape[-1]))
    out = jax.vmap(fn)(flat)
    return out.reshape(batch + out.shape[1:])


def nearest_angle(angle: Array, reference: Array) -> Array:
    """``angle + 2 pi k`` closest to ``reference``."""
    two_pi = 2 * jnp.pi
    return angle + two_pi * jnp.round((reference - angle) / two_pi)


def sign_nearest(quat: Float[Array, "*b 4"], reference: Float[Array, "*b 4"] | None) -> Array:
    """``quat`` or ``-quat``: the one nearest ``reference`` (``w >= 0`` without reference)."""
    if reference is None:
        return jnp.where(quat[..., :1] < 0, -quat, quat)
    return jnp.where(jnp.sum(quat * reference, axis=-1, keepdims=True) < 0, -quat, quat)
