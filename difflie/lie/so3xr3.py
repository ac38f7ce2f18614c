"""SO(3) x R^3, the direct product: rotation and translation decoupled."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from . import ops as _ops
from ._pose import AbstractPose


class SO3xR3(AbstractPose):
    """Pose ``(R, r)`` with product ``(R1 R2, r1 + r2)``.

    Tangent ``xi = (v, w)`` (translation first): ``v`` is the world-frame translation rate
    ``r_dot`` and ``w`` the body angular velocity (the "mixed" velocity of Müller, §5.1).
    ``exp(v, w) = (exp(w), v)``; ``dexp = diag(I, J_r(w))``; ``Ad_g = diag(I, R)``.
    ``as_matrix`` gives the homogeneous transform of the pose; note that the product of two such
    matrices is the SE(3) product, not this group's.
    """

    @classmethod
    def exp(cls, xi: Float[Array, "*b 6"]) -> SO3xR3:
        xi = jnp.asarray(xi)
        return cls(_ops.so3_exp_matrix(xi[..., 3:]), xi[..., :3])

    @staticmethod
    def dexp(xi: Float[Array, "*b 6"]) -> Float[Array, "*b 6 6"]:
        j = _ops.so3_right_jacobian(jnp.asarray(xi)[..., 3:])
        z = jnp.zeros_like(j)
        return _ops.block2(_ops.eye_like(j[..., 0]), z, z, j)

    @staticmethod
    def dexpinv(xi: Float[Array, "*b 6"]) -> Float[Array, "*b 6 6"]:
        j = _ops.so3_right_jacobian_inv(jnp.asarray(xi)[..., 3:])
        z = jnp.zeros_like(j)
        return _ops.block2(_ops.eye_like(j[..., 0]), z, z, j)

    @staticmethod
    def ad(xi: Float[Array, "*b 6"]) -> Float[Array, "*b 6 6"]:
        W = _ops.hat(jnp.asarray(xi)[..., 3:])
        z = jnp.zeros_like(W)
        return _ops.block2(z, z, z, W)

    def log(self) -> Float[Array, "*b 6"]:
        w = _ops.qlog(_ops.matrix_to_quat(self.rotation))
        return jnp.concatenate([self.translation, w], axis=-1)

    def compose(self, other: SO3xR3) -> SO3xR3:
        return SO3xR3(_ops.matmul(self.rotation, other.rotation), self.translation + other.translation)

    def inverse(self) -> SO3xR3:
        return SO3xR3(_ops.transpose(self.rotation), -self.translation)

    def adjoint(self) -> Float[Array, "*b 6 6"]:
        R = self.rotation
        z = jnp.zeros_like(R)
        return _ops.block2(_ops.eye_like(R[..., 0]), z, z, R)

    def as_se3(self):
        from .se3 import SE3

        return SE3(self.rotation, self.translation)
