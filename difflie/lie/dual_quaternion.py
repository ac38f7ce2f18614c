"""Unit dual quaternions, the double cover of SE(3)."""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from . import ops as _ops
from ._base import (
    AbstractLieGroup, _default_dtype, _uniform_quaternion, _uniform_translation, check_rotation_matrix, check_transform,
    check_translation, check_unit_quaternion,
)  # fmt: skip
from .se3 import SE3


def _pure(v: Array) -> Array:
    return jnp.concatenate([jnp.zeros_like(v[..., :1]), v], axis=-1)


class UnitDualQuaternion(AbstractLieGroup):
    """``real + eps dual`` with ``dual = (0, r)/2 * real`` (Xu & Halse, §2.4).

    The pose is ``x_world = R(real) x_body + r``. Tangents, ``exp``, ``dexp``, ``dexpinv`` and
    ``adjoint`` are those of ``SE3`` (translation-first body twists), so
    ``UnitDualQuaternion.exp(xi)`` is the rigid motion ``SE3.exp(xi)``; ``p`` and ``-p`` are the
    same motion and ``log`` returns the rotation angle in ``[0, pi]`` for both.
    """

    real: Float[Array, "*b 4"]
    dual: Float[Array, "*b 4"]

    tangent_dim: ClassVar[int] = 6
    field_shapes: ClassVar[dict[str, tuple[int, ...]]] = {"real": (4,), "dual": (4,)}
    matrix_dim: ClassVar[int] = 4

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.real.shape[:-1]

    @classmethod
    def identity(cls, batch_shape: tuple[int, ...] = (), dtype=None) -> UnitDualQuaternion:
        dtype = _default_dtype(dtype)
        e = jnp.broadcast_to(jnp.array([1.0, 0.0, 0.0, 0.0], dtype=dtype), tuple(batch_shape) + (4,))
        return cls(e, jnp.zeros_like(e))

    @classmethod
    def from_quaternion_translation(cls, q: Array, r: Array) -> UnitDualQuaternion:
        """From a unit quaternion and a translation, checked where concrete (as
        ``UnitQuaternion.from_wxyz``)."""
        check_unit_quaternion(q, "UnitDualQuaternion.from_quaternion_translation")
        check_translation(r, "UnitDualQuaternion.from_quaternion_translation")
        q, r = jnp.broadcast_arrays(jnp.asarray(q), _pure(jnp.asarray(r)))
        return cls(q, 0.5 * _ops.qmul(r, q))

    @classmethod
    def from_rotation_translation(cls, rotation: Array, translation: Array) -> UnitDualQuaternion:
        """From a rotation matrix and a translation, checked where concrete (as ``from_matrix``)."""
        check_rotation_matrix(rotation, "UnitDualQuaternion.from_rotation_translation")
        return cls.from_quaternion_translation(_ops.matrix_to_quat(jnp.asarray(rotation)), translation)

    @classmethod
    def exp(cls, xi: Float[Array, "*b 6"]) -> UnitDualQuaternion:
        xi = jnp.asarray(xi)
        v, w = xi[..., :3], xi[..., 3:]
        return cls.from_quaternion_translation(_ops.qexp(w), _ops.matvec(_ops.so3_left_jacobian(w), v))

    @classmethod
    def from_matrix(cls, m: Float[Array, "*b 4 4"]) -> UnitDualQuaternion:
        """From a 4x4 homogeneous transform, checked where concrete (as ``SO3.from_matrix``)."""
        check_transform(m, "UnitDualQuaternion.from_matrix")
        m = jnp.asarray(m)
        return cls.from_rotation_translation(m[..., :3, :3], m[..., :3, 3])

    @classmethod
    def sample_uniform(cls, key: Array, batch_shape: tuple[int, ...] = (), dtype=None) -> UnitDualQuaternion:
        dtype = _default_dtype(dtype)
        k1, k2 = jax.random.split(key)
        q = _uniform_quaternion(k1, tuple(batch_shape), dtype)
        return cls.from_quaternion_translation(q, _uniform_translation(k2, tuple(batch_shape), dtype))

    dexp = staticmethod(SE3.dexp)
    dexpinv = staticmethod(SE3.dexpinv)
    ad = staticmethod(SE3.ad)

    @property
    def translation(self) -> Float[Array, "*b 3"]:
        """``r = 2 dual * conj(real)`` (vector part)."""
        return 2.0 * _ops.qmul(self.dual, _ops.qconj(self.real))[..., 1:]

    @property
    def rotation(self) -> Float[Array, "*b 3 3"]:
        return _ops.quat_to_matrix(self.real)

    def log(self) -> Float[Array, "*b 6"]:
        w = _ops.qlog(self.real)
        v = _ops.matvec(_ops.so3_left_jacobian_inv(w), self.translation)
        return jnp.concatenate([v, w], axis=-1)

    def compose(self, other: UnitDualQuaternion) -> UnitDualQuaternion:
        return UnitDualQuaternion(
            _ops.qmul(self.real, other.real),
            _ops.qmul(self.real, other.dual) + _ops.qmul(self.dual, other.real),
        )

    def inverse(self) -> UnitDualQuaternion:
        return UnitDualQuaternion(_ops.qconj(self.real), _ops.qconj(self.dual))

    def act(self, points: Float[Array, "*b 3"]) -> Float[Array, "*b 3"]:
        return _ops.quat_act(self.real, points) + self.translation

    def adjoint(self) -> Float[Array, "*b 6 6"]:
        return self.as_se3().adjoint()

    def as_matrix(self) -> Float[Array, "*b 4 4"]:
        return self.as_se3().as_matrix()

    def as_se3(self) -> SE3:
        return SE3(self.rotation, self.translation)

    def normalize(self) -> UnitDualQuaternion:
        """Project onto the unit set: ``|real| = 1`` and ``real . dual = 0``."""
        n = jnp.linalg.norm(self.real, axis=-1, keepdims=True)
        real, dual = self.real / n, self.dual / n
        dual = dual - jnp.sum(real * dual, axis=-1, keepdims=True) * real
        return UnitDualQuaternion(real, dual)
