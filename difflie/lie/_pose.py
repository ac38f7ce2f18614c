"""Storage and the operations shared by the two groups of rigid poses (SE3, SO3xR3)."""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from . import ops as _ops
from ._base import (
    AbstractLieGroup, _default_dtype, _uniform_quaternion, _uniform_translation, check_rotation_matrix, check_transform,
    check_translation,
)  # fmt: skip


class AbstractPose(AbstractLieGroup):
    """A pose ``x_world = R x_body + r``: rotation matrix and translation.

    SE(3) and SO(3)xR3 hold the same data and act on points the same way; they differ in the
    group law and so in exp, log, the tangent operators and the meaning of velocities.
    """

    rotation: Float[Array, "*b 3 3"]
    translation: Float[Array, "*b 3"]

    tangent_dim: ClassVar[int] = 6
    field_shapes: ClassVar[dict[str, tuple[int, ...]]] = {"rotation": (3, 3), "translation": (3,)}
    matrix_dim: ClassVar[int] = 4

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.translation.shape[:-1]

    @classmethod
    def identity(cls, batch_shape: tuple[int, ...] = (), dtype=None):
        dtype = _default_dtype(dtype)
        shape = tuple(batch_shape)
        return cls(
            jnp.broadcast_to(jnp.eye(3, dtype=dtype), shape + (3, 3)), jnp.zeros(shape + (3,), dtype)
        )

    @classmethod
    def from_rotation_translation(cls, rotation: Array, translation: Array):
        """From a rotation matrix and a translation, broadcast together; checked where concrete
        (as ``from_matrix``)."""
        check_rotation_matrix(rotation, f"{cls.__name__}.from_rotation_translation")
        check_translation(translation, f"{cls.__name__}.from_rotation_translation")
        rotation, translation = jnp.asarray(rotation), jnp.asarray(translation)
        shape = jnp.broadcast_shapes(rotation.shape[:-2], translation.shape[:-1])
        return cls(jnp.broadcast_to(rotation, shape + (3, 3)), jnp.broadcast_to(translation, shape + (3,)))

    @classmethod
    def from_matrix(cls, m: Float[Array, "*b 4 4"]):
        """From a 4x4 homogeneous transform, checked where concrete (as ``SO3.from_matrix``)."""
        check_transform(m, f"{cls.__name__}.from_matrix")
        m = jnp.asarray(m)
        return cls(m[..., :3, :3], m[..., :3, 3])

    @classmethod
    def sample_uniform(cls, key: Array, batch_shape: tuple[int, ...] = (), dtype=None):
        dtype = _default_dtype(dtype)
        k1, k2 = jax.random.split(key)
        q = _uniform_quaternion(k1, tuple(batch_shape), dtype)
        return cls(_ops.quat_to_matrix(q), _uniform_translation(k2, tuple(batch_shape), dtype))

    def act(self, points: Float[Array, "*b 3"]) -> Float[Array, "*b 3"]:
        return _ops.matvec(self.rotation, points) + self.translation

    def as_matrix(self) -> Float[Array, "*b 4 4"]:
        """The 4x4 homogeneous transform of the pose."""
        top = jnp.concatenate([self.rotation, self.translation[..., None]], axis=-1)
        bottom = jnp.broadcast_to(
            jnp.array([0.0, 0.0, 0.0, 1.0], dtype=self.translation.dtype), top.shape[:-2] + (1, 4)
        )
        return jnp.concatenate([top, bottom], axis=-2)
