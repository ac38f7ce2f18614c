"""SO(3), stored as a rotation matrix."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float

from . import ops as _ops
from ._base import AbstractLieGroup, _default_dtype, _uniform_quaternion, check_rotation_matrix, check_unit_quaternion


class SO3(AbstractLieGroup):
    """Rotation ``R`` (body to world), tangent = body angular velocity / rotation vector.

    ``exp(w) = I + sinc(t) W + cosc(t) W^2`` with ``W = hat(w)``, ``t = |w|^2``;
    ``dexp(w) = I - cosc W + k1 W^2`` (right Jacobian), ``dexpinv(w) = I + W/2 + k2 W^2``.
    """

    matrix: Float[Array, "*b 3 3"]

    tangent_dim: ClassVar[int] = 3
    field_shapes: ClassVar[dict[str, tuple[int, ...]]] = {"matrix": (3, 3)}
    matrix_dim: ClassVar[int] = 3

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.matrix.shape[:-2]

    @classmethod
    def identity(cls, batch_shape: tuple[int, ...] = (), dtype=None) -> SO3:
        dtype = _default_dtype(dtype)
        return cls(jnp.broadcast_to(jnp.eye(3, dtype=dtype), tuple(batch_shape) + (3, 3)))

    @classmethod
    def exp(cls, xi: Float[Array, "*b 3"]) -> SO3:
        return cls(_ops.so3_exp_matrix(jnp.asarray(xi)))

    @classmethod
    def from_matrix(cls, m: Float[Array, "*b 3 3"]) -> SO3:
        """A rotation matrix; a concrete one is checked (``ValueError`` for a reflection, a
        scaled or a non-orthogonal matrix), a traced one taken as is."""
        check_rotation_matrix(m, "SO3.from_matrix")
        return cls(jnp.asarray(m))

    @classmethod
    def from_quaternion(cls, q: Float[Array, "*b 4"]) -> SO3:
        """From a unit quaternion ``(w, x, y, z)``, checked where concrete (as
        ``UnitQuaternion.from_wxyz``: the matrix of a non-unit one is not a rotation)."""
        check_unit_quaternion(q, "SO3.from_quaternion")
        return cls(_ops.quat_to_matrix(jnp.asarray(q)))

    @classmethod
    def sample_uniform(cls, key: Array, batch_shape: tuple[int, ...] = (), dtype=None) -> SO3:
        return cls.from_quaternion(_uniform_quaternion(key, tuple(batch_shape), _default_dtype(dtype)))

    @staticmethod
    def dexp(xi: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        return _ops.so3_right_jacobian(jnp.asarray(xi))

    @staticmethod
    def dexpinv(xi: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        return _ops.so3_right_jacobian_inv(jnp.asarray(xi))

    @staticmethod
    def ad(xi: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        return _ops.hat(jnp.asarray(xi))

    def log(self) -> Float[Array, "*b 3"]:
        # Through the quaternion: well conditioned at 0 and at pi.
        return _ops.qlog(_ops.matrix_to_quat(self.matrix))

    def compose(self, other: SO3) -> SO3:
        return SO3(_ops.matmul(self.matrix, other.matrix))

    def inverse(self) -> SO3:
        return SO3(_ops.transpose(self.matrix))

    def act(self, points: Float[Array, "*b 3"]) -> Float[Array, "*b 3"]:
        return _ops.matvec(self.matrix, points)

    def adjoint(self) -> Float[Array, "*b 3 3"]:
        return self.matrix

    def as_matrix(self) -> Float[Array, "*b 3 3"]:
        return self.matrix

    def as_quaternion(self):
        from .quaternion import UnitQuaternion

        return UnitQuaternion(_ops.matrix_to_quat(self.matrix))
