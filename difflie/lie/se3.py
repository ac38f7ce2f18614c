"""SE(3), the semidirect product: rigid motions with screw-motion exponential."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from . import ops as _ops
from ._pose import AbstractPose


class SE3(AbstractPose):
    """Rigid motion ``(R, r)`` with product ``(R1 R2, r1 + R1 r2)``.

    Tangent ``xi = (v, w)`` (translation first) is the body twist: ``R^T r_dot`` and the body
    angular velocity. ``exp(v, w) = (exp(w), J_l(w) v)``. ``dexp``/``dexpinv`` are the right
    Jacobian and its inverse, ``[[J_r(w), Q], [0, J_r(w)]]`` with the closed-form blocks of
    Müller, §5.3 and Holzinger, Gerstmayr & Schöberl, eqs. 13-17 (with the bracket of their eq. 17
    corrected to an anticommutator).
    """

    @classmethod
    def exp(cls, xi: Float[Array, "*b 6"]) -> SE3:
        xi = jnp.asarray(xi)
        v, w = xi[..., :3], xi[..., 3:]
        return cls(_ops.so3_exp_matrix(w), _ops.matvec(_ops.so3_left_jacobian(w), v))

    @staticmethod
    def dexp(xi: Float[Array, "*b 6"]) -> Float[Array, "*b 6 6"]:
        xi = jnp.asarray(xi)
        v, w = xi[..., :3], xi[..., 3:]
        j = _ops.so3_right_jacobian(w)
        return _ops.block2(j, _ops.se3_right_jacobian_block(v, w, inverse=False), jnp.zeros_like(j), j)

    @staticmethod
    def dexpinv(xi: Float[Array, "*b 6"]) -> Float[Array, "*b 6 6"]:
        xi = jnp.asarray(xi)
        v, w = xi[..., :3], xi[..., 3:]
        j = _ops.so3_right_jacobian_inv(w)
        return _ops.block2(j, _ops.se3_right_jacobian_block(v, w, inverse=True), jnp.zeros_like(j), j)

    @staticmethod
    def ad(xi: Float[Array, "*b 6"]) -> Float[Array, "*b 6 6"]:
        xi = jnp.asarray(xi)
        V, W = _ops.hat(xi[..., :3]), _ops.hat(xi[..., 3:])
        return _ops.block2(W, V, jnp.zeros_like(W), W)

    def log(self) -> Float[Array, "*b 6"]:
        w = _ops.qlog(_ops.matrix_to_quat(self.rotation))
        v = _ops.matvec(_ops.so3_left_jacobian_inv(w), self.translation)
        return jnp.concatenate([v, w], axis=-1)

    def compose(self, other: SE3) -> SE3:
        return SE3(
            _ops.matmul(self.rotation, other.rotation),
            self.translation + _ops.matvec(self.rotation, other.translation),
        )

    def inverse(self) -> SE3:
        rt = _ops.transpose(self.rotation)
        return SE3(rt, -_ops.matvec(rt, self.translation))

    def adjoint(self) -> Float[Array, "*b 6 6"]:
        R = self.rotation
        return _ops.block2(R, _ops.matmul(_ops.hat(self.translation), R), jnp.zeros_like(R), R)

    def as_so3xr3(self):
        from .so3xr3 import SO3xR3

        return SO3xR3(self.rotation, self.translation)

    def as_dual_quaternion(self):
        from .dual_quaternion import UnitDualQuaternion

        return UnitDualQuaternion.from_rotation_translation(self.rotation, self.translation)
