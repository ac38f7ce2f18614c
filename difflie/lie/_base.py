"""The interface every matrix Lie group in ``difflie.lie`` implements."""

from __future__ import annotations

import abc
import dataclasses
import functools
from typing import ClassVar, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ..xla import eager


G = TypeVar("G", bound="AbstractLieGroup")

# The maps that run as one compiled program when called outside a trace (``difflie.xla.eager``).
_EAGER = ("exp", "log", "compose", "inverse", "act", "adjoint", "dexp", "dexpinv", "ad", "as_matrix", "as_quaternion")


def _tangents(fun, cls, name: str, position: int):
    """``fun`` (``exp``, ``dexp``, ``dexpinv``, ``ad`` of the group ``cls``: its argument at
    ``position`` is a tangent vector) with the tangent's last axis checked, naming the map; other
    maps as they are."""
    dim = getattr(cls, "tangent_dim", None)
    if name not in ("exp", "dexp", "dexpinv", "ad") or dim is None:
        return fun

    @functools.wraps(fun)
    def checked(*args):
        shape = jnp.shape(args[position])
        if not shape or shape[-1] != dim:
            raise ValueError(f"{cls.__name__}.{name}: expected tangent vectors of shape (..., {dim}), got shape {shape}")
        return fun(*args)

    return checked


def _checked_act(fun):
    """``act`` with the points' last axis checked, naming the group."""

    @functools.wraps(fun)
    def checked(self, points, *args):
        shape = jnp.shape(points)
        if shape[-1:] != (3,):
            raise ValueError(f"{type(self).__name__}.act: expected points of shape (..., 3), got shape {shape}")
        return fun(self, points, *args)

    return checked


def _checked_compose(fun):
    """``compose`` with the other element checked to be of the same group, naming both."""

    @functools.wraps(fun)
    def checked(self, other, *args):
        if not isinstance(other, type(self)):
            raise TypeError(f"{type(self).__name__}.compose: expected another {type(self).__name__}, got {type(other).__name__}")
        return fun(self, other, *args)

    return checked


_CHECKED = {"act": _checked_act, "compose": _checked_compose}


class _EagerMethod:
    """A method that runs as one compiled program when called outside a trace
    (``difflie.xla.eager``). A descriptor that binds with ``functools.partial``: equinox turns a
    bound method into a ``BoundMethod`` module on every attribute access (30-100 us a call)."""

    def __init__(self, fun):
        self.fun = eager(fun, static_argnums=())
        functools.update_wrapper(self, fun)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self.fun, obj)

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)


class AbstractLieGroup(eqx.Module):
    """A Lie group element, possibly batched over leading dimensions.

    Conventions: body-frame (left-trivialised) velocities, ``g_dot = g hat(V)``;
    ``dexp(xi)`` is the matrix ``T`` with ``exp(xi)^-1 d/dt exp(xi) = hat(T xi_dot)`` (the right
    Jacobian) and ``dexpinv(xi)`` its inverse; 6-dimensional tangents are translation first.
    """

    tangent_dim: ClassVar[int]
    matrix_dim: ClassVar[int]
    # The trailing shape of each array field (the leading ones are the batch).
    field_shapes: ClassVar[dict[str, tuple[int, ...]]]

    def __check_init__(self):
        for name, tail in self.field_shapes.items():
            shape = getattr(getattr(self, name), "shape", None)
            if shape is not None and tuple(shape[len(shape) - len(tail) :]) != tail:
                dims = ", ".join(map(str, tail))
                raise ValueError(f"{type(self).__name__}: {name} must have shape (..., {dims}), got {tuple(shape)}")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in _EAGER:
            member = cls.__dict__.get(name)
            if isinstance(member, classmethod):  # the class is a static argument
                setattr(cls, name, classmethod(_tangents(eager(member.__func__, static_argnums=(0,)), cls, name, 1)))
            elif isinstance(member, staticmethod):
                setattr(cls, name, staticmethod(_tangents(eager(member.__func__, static_argnums=()), cls, name, 0)))
            elif callable(member) and not getattr(member, "__isabstractmethod__", False):
                setattr(cls, name, _EagerMethod(_CHECKED.get(name, lambda f: f)(member)))

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
        """Inverse of ``dexp``: ``xi_dot = dexpinv(xi) V``."""

    @staticmethod
    @abc.abstractmethod
    def ad(xi: Float[Array, "*b d"]) -> Float[Array, "*b d d"]:
        """Matrix of the Lie bracket: ``[xi, eta] = ad(xi) eta``."""

    # -- element operations ---------------------------------------------------------------------

    @abc.abstractmethod
    def log(self) -> Float[Array, "*b d"]:
        """Inverse of ``exp``, with rotation angle in ``[0, pi]``."""

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

    def __matmul__(self, other):
        """``g @ h`` is the product ``compose``; ``g @ points`` (an array (..., 3)) is
        ``act``, body coordinates to world coordinates."""
        if isinstance(other, type(self)):
            return self.compose(other)
        if isinstance(other, (jax.Array, np.ndarray)):
            return self.act(other)
        return NotImplemented

    @_EagerMethod
    def interpolate(self: G, other: G, alpha: Float[ArrayLike, "*b"]) -> G:
        """The geodesic ``self exp(alpha log(self^-1 other))``: ``self`` at ``alpha = 0``,
        ``other`` at 1 (slerp for rotations, a screw motion on SE(3), rotation and translation
        apart on SO(3)xR3)."""
        alpha = jnp.asarray(alpha)
        return self.rplus(alpha[..., None] * other.rminus(self))

    def __repr__(self) -> str:
        """The values (the shapes where they are traced, or more than 100 numbers)."""
        fields = {f.name: _concrete(getattr(self, f.name)) for f in dataclasses.fields(self)}
        if any(a is None or a.size > 100 for a in fields.values()):
            return super().__repr__()
        options = dict(precision=6, suppress_small=True, separator=", ")
        return f"{type(self).__name__}(" + ", ".join(
            f"{k}={np.array2string(a, prefix=f'{type(self).__name__}({k}=', **options)}" for k, a in fields.items()
        ) + ")"

    @property
    @abc.abstractmethod
    def batch_shape(self) -> tuple[int, ...]:
        """Leading batch dimensions."""

    @_EagerMethod
    def rminus(self: G, other: G) -> Float[Array, "*b d"]:
        """``log(other^-1 self)``: the body-frame tangent that takes ``other`` to ``self``."""
        return other.inverse().compose(self).log()

    @_EagerMethod
    def rplus(self: G, xi: Float[Array, "*b d"]) -> G:
        """``self exp(xi)``: a right (body-frame) increment."""
        return self.compose(type(self).exp(xi))


def _uniform_quaternion(key: Array, batch_shape: tuple[int, ...], dtype) -> Array:
    q = jax.random.normal(key, batch_shape + (4,), dtype=dtype)
    return q / jnp.linalg.norm(q, axis=-1, keepdims=True)


def _uniform_translation(key: Array, batch_shape: tuple[int, ...], dtype) -> Array:
    return jax.random.uniform(key, batch_shape + (3,), dtype=dtype, minval=-1.0, maxval=1.0)


def _concrete(x) -> np.ndarray | None:
    """``x`` as a numpy array when it is known now; None for a traced value (left unchecked:
    the fast path inside ``jit``)."""
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _tolerance(a: np.ndarray) -> float:
    eps = np.finfo(a.dtype).eps if np.issubdtype(a.dtype, np.floating) else np.finfo(float).eps
    return max(1e-6, 1000 * float(eps))


def check_rotation_matrix(m, where: str) -> None:
    """Raise ``ValueError`` unless the concrete ``m`` (..., 3, 3) is a rotation to its dtype's
    precision (``R^T R = I``, ``det R = +1``); traced values pass unchecked."""
    a = _concrete(m)
    if a is None:
        return
    if a.shape[-2:] != (3, 3):
        raise ValueError(f"{where}: expected (..., 3, 3) matrices, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{where}: not a rotation matrix (non-finite entries)")
    x = a.astype(np.float64)
    err = float(np.abs(np.swapaxes(x, -1, -2) @ x - np.eye(3)).max(initial=0.0))
    if err > _tolerance(a):
        raise ValueError(f"{where}: not a rotation matrix (R^T R - I up to {err:.2e})")
    if np.any(np.linalg.det(x) < 0):
        raise ValueError(f"{where}: not a rotation matrix (a reflection, det R = -1)")


def check_transform(m, where: str) -> None:
    """``check_rotation_matrix`` for the rotation block of a concrete 4x4 homogeneous transform,
    whose last row must be ``(0, 0, 0, 1)`` to the same tolerance (a transform from ``expm`` or
    ``inv`` carries rounding there); traced values pass unchecked."""
    a = _concrete(m)
    if a is None:
        return
    if a.shape[-2:] != (4, 4):
        raise ValueError(f"{where}: expected (..., 4, 4) matrices, got shape {a.shape}")
    last = a[..., 3, :].astype(np.float64) - np.array([0.0, 0.0, 0.0, 1.0])
    if not np.all(np.abs(last) <= _tolerance(a)):
        err = float(np.max(np.where(np.isnan(last), np.inf, np.abs(last))))
        raise ValueError(f"{where}: not a homogeneous transform (last row must be 0, 0, 0, 1; off by {err:.2e})")
    check_translation(a[..., :3, 3], where)
    check_rotation_matrix(a[..., :3, :3], where)


def check_translation(r, where: str) -> None:
    """Raise ``ValueError`` unless ``r`` is (..., 3) (any value) and, where concrete, finite."""
    shape = jnp.shape(r)
    if shape[-1:] != (3,):
        raise ValueError(f"{where}: expected (..., 3) translations, got shape {shape}")
    a = _concrete(r)
    if a is not None and not np.all(np.isfinite(a)):
        raise ValueError(f"{where}: non-finite translation")


def check_unit_quaternion(q, where: str) -> None:
    """Raise ``ValueError`` unless the concrete ``q`` (..., 4) has unit norm to its dtype's
    precision; traced values pass unchecked."""
    a = _concrete(q)
    if a is None:
        return
    if a.shape[-1:] != (4,):
        raise ValueError(f"{where}: expected (..., 4) quaternions, got shape {a.shape}")
    norm = np.linalg.norm(a.astype(np.float64), axis=-1)
    if not np.all(np.abs(norm - 1) <= _tolerance(a)):
        worst = norm.flat[np.argmax(np.where(np.isfinite(norm), np.abs(norm - 1), np.inf))]
        raise ValueError(f"{where}: not a unit quaternion (norm {worst:.6g})")


def _default_dtype(dtype):
    return jnp.zeros((), dtype=dtype).dtype if dtype is not None else jnp.zeros(()).dtype

