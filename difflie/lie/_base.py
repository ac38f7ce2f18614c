"""The interface every matrix Lie group in :mod:`difflie.lie` implements."""

from __future__ import annotations

import abc
from typing import ClassVar, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


G = TypeVar("G", bound="AbstractLieGroup")


class AbstractLieGroup(eqx.Module):
    """A Lie group element, possibly batched over leading dimensions.

    Conventions: body-frame (left-trivialised) velocities, ``g_dot = g hat(V)``;
    ``dexp(xi)`` is the matrix ``T`` with ``exp(xi)^-1 d/dt exp(xi) = hat(T xi_dot)`` (the right
    Jacobian) and ``dexpinv(xi)`` its inverse; 6-dimensional tangents are translation first.
    """

    tangent_dim: ClassVar[int]
    matrix_dim: ClassVar[int]

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    @abc.abstractmethod
    def identity(cls: type[G], batch_shape: tuple[int, ...] = (), dtype=None) -> G:
        """The identity element, broadcast to ``batch_shape``."""

    @classmethod
    @abc.abstractmethod
    def exp(cls: type[G], xi: Float[Array, "*b d"]) -> G:
        """Exponential map from the tangent space at the identity."""

    @classmethod
    @abc.abstractmethod
    def from_matrix(cls: type[G], m: Array) -> G:
        """Element from its matrix (3x3 rotation or 4x4 homogeneous transform)."""

    @classmethod
    @abc.abstractmethod
    def sample_uniform(cls: type[G], key: Array, batch_shape: tuple[int, ...] = (), dtype=None) -> G:
        """Random elements: Haar-uniform rotation, translation uniform in ``[-1, 1]^3``."""

    # -- tangent operators (static in the element) ---------------------------------------------

    @staticmethod
    @abc.abstractmethod
    def dexp(xi: Float[Array, "*b d"]) -> Float[Array, "*b d d"]:
        """Right Jacobian ``T(xi)``: body velocity ``= T(xi) xi_dot`` along ``exp(xi(t))``."""

    @staticmethod
    @abc.abstractmethod
    def dexpinv(xi: Float[Array, "*b d"]) -> Float[Array, "*b d d"]:
        """Inverse of :meth:`dexp`: ``xi_dot = dexpinv(xi) V``."""

    @staticmethod
    @abc.abstractmethod
    def ad(xi: Float[Array, "*b d"]) -> Float[Array, "*b d d"]:
        """Matrix of the Lie bracket: ``[xi, eta] = ad(xi) eta``."""

    # -- element operations ---------------------------------------------------------------------

    @abc.abstractmethod
    def log(self) -> Float[Array, "*b d"]:
        """Inverse of :meth:`exp`, with rotation angle in ``[0, pi]``."""

    @abc.abstractmethod
    def compose(self: G, other: G) -> G:
        """Group product ``self * other``."""

    @abc.abstractmethod
    def inverse(self: G) -> G:
        """Group inverse."""

    @abc.abstractmethod
    def act(self, points: Float[Array, "*b 3"]) -> Float[Array, "*b 3"]:
        """Apply the element to points in R^3 (body coordinates to world coordinates)."""

    @abc.abstractmethod
    def adjoint(self) -> Float[Array, "*b d d"]:
        """``Ad_g``, with ``g exp(xi) g^-1 = exp(Ad_g xi)``."""

    @abc.abstractmethod
    def as_matrix(self) -> Array:
        """Rotation matrix (rotation groups) or 4x4 homogeneous transform (rigid motions)."""

    # -- shared ---------------------------------------------------------------------------------

    def __matmul__(self: G, other: G) -> G:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self.compose(other)

    @property
    @abc.abstractmethod
    def batch_shape(self) -> tuple[int, ...]:
        """Leading batch dimensions."""

    def rminus(self: G, other: G) -> Float[Array, "*b d"]:
        """``log(other^-1 self)``: the body-frame tangent that takes ``other`` to ``self``."""
        return other.inverse().compose(self).log()

    def rplus(self: G, xi: Float[Array, "*b d"]) -> G:
        """``self exp(xi)``: a right (body-frame) increment."""
        return self.compose(type(self).exp(xi))


def _uniform_quaternion(key: Array, batch_shape: tuple[int, ...], dtype) -> Array:
    q = jax.random.normal(key, batch_shape + (4,), dtype=dtype)
    return q / jnp.linalg.norm(q, axis=-1, keepdims=True)


def _uniform_translation(key: Array, batch_shape: tuple[int, ...], dtype) -> Array:
    return jax.random.uniform(key, batch_shape + (3,), dtype=dtype, minval=-1.0, maxval=1.0)


def _default_dtype(dtype):
    return jnp.zeros((), dtype=dtype).dtype if dtype is not None else jnp.zeros(()).dtype

