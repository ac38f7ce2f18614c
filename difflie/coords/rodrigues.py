"""The Rodrigues (Gibbs) vector ``c = tan(phi/2) n`` as absolute rotation coordinates."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie import ops as _ops
from .chart import AbstractChart


def _dot(a: Array, b: Array) -> Array:
    return jnp.sum(a * b, axis=-1, keepdims=True)


class Rodrigues(AbstractChart):
    """Gibbs vector: ``R = cay(hat(c)) = I + sigma (hat(c) + hat(c)^2)``, ``sigma = 2/(1+|c|^2)``.

    Fully algebraic; singular at rotation angle pi. ``omega_body = sigma (I - hat(c)) c_dot`` and
    ``c_dot = (I + hat(c) + c c^T) omega / 2`` (Müller, §5.1). The LGT composes Gibbs
    vectors through ``(1, c)`` quaternions: ``c' = (d + d0 c + c x d) / (d0 - c.d)`` for the
    increment quaternion ``(d0, d)``.
    """

    dim: ClassVar[int] = 3

    def to_rotation(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        c = jnp.asarray(theta)
        C = _ops.hat(c)
        sigma = (2.0 / (1.0 + _ops.sqnorm(c)))[..., None, None]
        return _ops.eye_like(c) + sigma * (C + _ops.matmul(C, C))

    def to_quaternion(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 4"]:
        c = jnp.asarray(theta)
        return jnp.concatenate([jnp.ones_like(c[..., :1]), c], axis=-1) / jnp.sqrt(1.0 + _dot(c, c))

    def from_quaternion(self, quat, reference=None):
        del reference  # unique
        quat = jnp.asarray(quat)
        return quat[..., 1:] / quat[..., :1]

    def compose(self, theta, dquat):
        c = jnp.asarray(theta)
        d0, d = dquat[..., :1], dquat[..., 1:]
        return (d + d0 * c + jnp.cross(c, d)) / (d0 - _dot(c, d))

    def H(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        c = jnp.asarray(theta)
        sigma = (2.0 / (1.0 + _ops.sqnorm(c)))[..., None, None]
        return sigma * (_ops.eye_like(c) - _ops.hat(c))

    def H_inverse(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        c = jnp.asarray(theta)
        return 0.5 * (_ops.eye_like(c) + _ops.hat(c) + c[..., :, None] * c[..., None, :])
