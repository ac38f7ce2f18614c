"""Unit quaternions Sp(1), scalar first ``(w, x, y, z)``, as a group of rotations."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float

from . import ops as _ops
from ._base import AbstractLieGroup, _default_dtype, _uniform_quaternion, check_rotation_matrix, check_unit_quaternion
from .so3 import SO3


class UnitQuaternion(AbstractLieGroup):
    """Unit quaternion with the tangent conventions of ``SO3``.

    ``exp(w) = (cos(|w|/2), sin(|w|/2) w/|w|)`` is the rotation by angle ``|w|`` about ``w``
    (the same element as ``SO3.exp(w)``); ``log`` returns the angle in ``[0, pi]`` for both
    ``q`` and ``-q``. ``dexp``/``dexpinv`` equal those of SO(3) (same Lie algebra).
    """

    wxyz: Float[Array, "*b 4"]

    tangent_dim: ClassVar[int] = 3
    field_shapes: ClassVar[dict[str, tuple[int, ...]]] = {"wxyz": (4,)}
    matrix_dim: ClassVar[int] = 3

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.wxyz.shape[:-1]

    @classmethod
    def identity(cls, batch_shape: tuple[int, ...] = (), dtype=None) -> UnitQuaternion:
        e = jnp.array([1.0, 0.0, 0.0, 0.0], dtype=_default_dtype(dtype))
        return cls(jnp.broadcast_to(e, tuple(batch_shape) + (4,)))

    @classmethod
    def exp(cls, xi: Float[Array, "*b 3"]) -> UnitQuaternion:
        return cls(_ops.qexp(jnp.asarray(xi)))

    @classmethod
    def from_matrix(cls, m: Float[Array, "*b 3 3"]) -> UnitQuaternion:
        """From a rotation matrix, checked where concrete (as ``SO3.from_matrix``)."""
        check_rotation_matrix(m, "UnitQuaternion.from_matrix")
        return cls(_ops.matrix_to_quat(jnp.asarray(m)))

    @classmethod
    def from_wxyz(cls, q: Float[Array, "*b 4"]) -> UnitQuaternion:
        """The checked constructor: ``ValueError`` for a concrete ``q`` whose norm is not 1
        (``UnitQuaternion(q)`` takes any ``q`` as is, and ``log`` of a non-unit one is wrong;
        ``normalize`` projects)."""
        check_unit_quaternion(q, "UnitQuaternion.from_wxyz")
        return cls(jnp.asarray(q))

    @classmethod
    def sample_uniform(cls, key: Array, batch_shape: tuple[int, ...] = (), dtype=None) -> UnitQuaternion:
        return cls(_uniform_quaternion(key, tuple(batch_shape), _default_dtype(dtype)))

    dexp = staticmethod(SO3.dexp)
    dexpinv = staticmethod(SO3.dexpinv)
    ad = staticmethod(SO3.ad)

    def log(self) -> Float[Array, "*b 3"]:
        return _ops.qlog(self.wxyz)

    def compose(self, other: UnitQuaternion) -> UnitQuaternion:
        return UnitQuaternion(_ops.qmul(self.wxyz, other.wxyz))

    def inverse(self) -> UnitQuaternion:
        return UnitQuaternion(_ops.qconj(self.wxyz))

    def act(self, points: Float[Array, "*b 3"]) -> Float[Array, "*b 3"]:
        return _ops.quat_act(self.wxyz, points)

    def adjoint(self) -> Float[Array, "*b 3 3"]:
        return self.as_matrix()

    def as_matrix(self) -> Float[Array, "*b 3 3"]:
        return _ops.quat_to_matrix(self.wxyz)

    def as_so3(self) -> SO3:
        return SO3(self.as_matrix())

    def normalize(self) -> UnitQuaternion:
        return UnitQuaternion(self.wxyz / jnp.linalg.norm(self.wxyz, axis=-1, keepdims=True))
