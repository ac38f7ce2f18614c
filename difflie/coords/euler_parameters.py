"""Euler parameters: the unit quaternion ``(e0, e1, e2, e3)`` as absolute rotation coordinates."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie import ops as _ops
from .chart import AbstractChart, sign_nearest


class EulerParameters(AbstractChart):
    """Unit quaternion ``Q = (p0, p)``, scalar first (Müller, §5.2).

    ``R(Q) = I + 2 (p0 hat(p) + hat(p)^2)``; ``omega_body = 2 G(Q) Q_dot`` with
    ``G = [-p, p0 I - hat(p)]``, and the right inverse ``Q_dot = G^T omega / 2``. The LGT is the
    quaternion product ``Q' = Q (x) psi(x)`` (Müller, eq. (76), corrected), evaluated as
    ``Q + Q (x) (psi(x) - 1)``; it keeps ``|Q| = 1`` to round-off with no renormalisation.
    """

    dim: ClassVar[int] = 4

    def to_rotation(self, theta: Float[Array, "*b 4"]) -> Float[Array, "*b 3 3"]:
        return _ops.quat_to_matrix(jnp.asarray(theta))

    def to_quaternion(self, theta: Float[Array, "*b 4"]) -> Float[Array, "*b 4"]:
        return jnp.asarray(theta)

    def from_quaternion(self, quat, reference=None):
        return sign_nearest(jnp.asarray(quat), reference)

    def compose(self, theta, dquat):
        return _ops.qmul(jnp.asarray(theta), dquat)

    def compose_increment(self, theta, dquat_m1):
        # Q (x) dQ = Q + Q (x) (dQ - 1): one rounding per component at the final addition.
        theta = jnp.asarray(theta)
        return theta + _ops.qmul(theta, dquat_m1)

    def H(self, theta: Float[Array, "*b 4"]) -> Float[Array, "*b 3 4"]:
        return 2.0 * _G(jnp.asarray(theta))

    def H_inverse(self, theta: Float[Array, "*b 4"]) -> Float[Array, "*b 4 3"]:
        return 0.5 * _ops.transpose(_G(jnp.asarray(theta)))


def _G(quat: Array) -> Array:
    p0, p = quat[..., 0], quat[..., 1:]
    right = p0[..., None, None] * _ops.eye_like(p) - _ops.hat(p)
    return jnp.concatenate([-p[..., :, None], right], axis=-1)
