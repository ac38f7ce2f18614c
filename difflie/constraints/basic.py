"""The basic geometric constraints of Kissel, Taves & Negrut (DP1, DP2, D, CD) and the angle driver.

With ``A_i`` the rotation (body to world) and ``r_i`` the body-frame origin of body ``i``,
``a_i = A_i abar_i`` and ``d_ij = r_j + A_j sbar_j^Q - r_i - A_i sbar_i^P``:

    DP1:   a_i . a_j         - f(t) = 0
    DP2:   a_i . d_ij        - f(t) = 0
    D:     d_ij . d_ij       - f(t) = 0      (f = squared distance)
    CD:    c . d_ij          - f(t) = 0      (c a fixed world axis)
    Angle: (a_i . c_j) cos theta(t) - (a_i . b_j) sin theta(t) = 0

The angle row drives the angle between ``a_i`` and ``b_j`` in the plane of ``b_j``, ``c_j``
(``a_i . b_j = cos theta``, ``a_i . c_j = sin theta``) without the rank loss of a DP1 driver
``cos theta(t)`` at ``theta = 0, pi``. Body index ``-1`` is the ground (``r = 0``, ``A = I``).

Each kind is stacked: one module holds all rows of that kind and evaluates them with one
``jax.vmap``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ..lie.ops import mv

GROUND = -1


class Driver(eqx.Module):
    """A time function ``f(t)`` (or ``f(t, params)`` when ``params`` is given).

    ``fn`` is static (a Python callable); ``params`` is a pytree of arrays that may be traced.
    """

    fn: Callable = eqx.field(static=True)
    params: Any = None

    def __call__(self, t):
        return self.fn(t) if self.params is None else self.fn(t, self.params)


def as_driver(f) -> Driver | eqx.Module:
    """Wrap a callable ``f(t)`` as a pytree-safe ``Driver`` (modules pass through)."""
    if isinstance(f, eqx.Module):
        return f
    if callable(f):
        return Driver(f)
    raise ValueError(f"a driver must be callable t -> f(t), got {type(f).__name__}")


class BasicConstraint(eqx.Module):
    """One row before stacking: its kind, the two bodies, its vectors and ``f``.

    ``f`` is a number (scleronomic) or a callable / module of ``t`` (rheonomic driver); for the
    angle kind, ``f`` is the driven angle ``theta(t)``.
    """

    kind: str = eqx.field(static=True)
    body_i: int = eqx.field(static=True)
    body_j: int = eqx.field(static=True)
    vectors: tuple[Array, ...]
    f: Any
    name: str = eqx.field(static=True, default="")


VECTOR_FIELDS = {  # the vector entries of each basic constraint, in file order
    "DP1": ("a_bar_i", "a_bar_j"),
    "DP2": ("a_bar_i", "s_bar_p_i", "s_bar_q_j"),
    "D": ("s_bar_p_i", "s_bar_q_j"),
    "CD": ("c", "s_bar_p_i", "s_bar_q_j"),
    "angle": ("a_bar_i", "b_bar_j", "c_bar_j"),
    "dp1_swap": ("a_bar_i", "b_bar_j", "c_bar_j"),
}
DRIVEN_ANGLE = ("angle", "dp1_swap")  # kinds whose f is an angle theta(t)
KINDS = tuple(VECTOR_FIELDS)


def _vec(x, what: str) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(float)
    if x.shape != (3,):
        raise ValueError(f"{what}: expected a 3-vector, got shape {x.shape}")
    return x


def _make(kind, body_i, body_j, vectors, f, name) -> BasicConstraint:
    label = name or kind
    for b, side in ((body_i, "body_i"), (body_j, "body_j")):
        if not isinstance(b, int) or b < GROUND:
            raise ValueError(f"constraint {label!r}: {side} must be a body index >= 0 or GROUND (-1), got {b!r}")
    if body_i == body_j:
        raise ValueError(f"constraint {label!r}: body_i and body_j are the same body ({body_i})")
    vecs = tuple(_vec(v, f"constraint {label!r}: {n}") for v, n in zip(vectors, VECTOR_FIELDS[kind]))
    # Constants given as Python numbers (joints' unit axes) take the dtype of the array inputs.
    arrays = [v for v, given in zip(vecs, vectors) if hasattr(given, "dtype")]
    dtype = jnp.result_type(*arrays) if arrays else vecs[0].dtype
    vecs = tuple(v.astype(dtype) for v in vecs)
    if not callable(f):
        f = jnp.asarray(f)
        if f.shape != ():
            raise ValueError(f"constraint {label!r}: f must be a scalar or a callable of t")
    else:
        f = as_driver(f)
    return BasicConstraint(kind, body_i, body_j, vecs, f, name)


def dp1(body_i: int, a_bar_i, body_j: int, a_bar_j, f=0.0, name: str = "") -> BasicConstraint:
    """``(A_i a_bar_i) . (A_j a_bar_j) = f(t)``."""
    return _make("DP1", body_i, body_j, (a_bar_i, a_bar_j), f, name)


def dp2(body_i: int, a_bar_i, s_bar_p_i, body_j: int, s_bar_q_j, f=0.0, name: str = "") -> BasicConstraint:
    """``(A_i a_bar_i) . d_ij = f(t)``."""
    return _make("DP2", body_i, body_j, (a_bar_i, s_bar_p_i, s_bar_q_j), f, name)


def d(body_i: int, s_bar_p_i, body_j: int, s_bar_q_j, f, name: str = "") -> BasicConstraint:
    """``d_ij . d_ij = f(t)`` (``f`` is the squared distance, > 0)."""
    return _make("D", body_i, body_j, (s_bar_p_i, s_bar_q_j), f, name)


def cd(c, body_i: int, s_bar_p_i, body_j: int, s_bar_q_j, f=0.0, name: str = "") -> BasicConstraint:
    """``c . d_ij = f(t)`` for a fixed world axis ``c``."""
    return _make("CD", body_i, body_j, (c, s_bar_p_i, s_bar_q_j), f, name)


def angle(body_i: int, a_bar_i, body_j: int, b_bar_j, c_bar_j, theta, name: str = "") -> BasicConstraint:
    """Drive the angle of ``a_i`` from ``b_j`` towards ``c_j`` to ``theta(t)`` (rank-safe)."""
    return _make("angle", body_i, body_j, (a_bar_i, b_bar_j, c_bar_j), theta, name)


def dp1_swap(body_i: int, a_bar_i, body_j: int, b_bar_j, c_bar_j, theta, name: str = "") -> BasicConstraint:
    """The switched DP1 driver of the paper's public codes (C1/C2): ``a_i . b_j = cos theta``
    while ``|cos theta| <= 0.9``, else the alternate ``a_i . c_j = sin theta`` (kept for
    reproducing their iteration counts)."""
    return _make("dp1_swap", body_i, body_j, (a_bar_i, b_bar_j, c_bar_j), theta, name)


def _dot(a, b):
    return jnp.sum(a * b, axis=-1)


class _Stack(eqx.Module):
    """All rows of one kind: body indices (k,) (static: the selections below are constants of
    the compiled program) and vectors (k, nv, 3)."""

    kind: ClassVar[str]
    body_i: tuple[int, ...] = eqx.field(static=True)
    body_j: tuple[int, ...] = eqx.field(static=True)
    vectors: Float[Array, "k nv 3"]

    def __call__(self, r_ext: Float[Array, "nb1 3"], R_ext: Float[Array, "nb1 3 3"], theta=None):
        # Few bodies: picked by constant one-hot products, not gathers, whose transposes (reverse
        # mode) stay dense products instead of slow scatters. Many: gathers, linear in the bodies.
        nb1, dtype = r_ext.shape[0], r_ext.dtype
        i, j = np.asarray(self.body_i) % nb1, np.asarray(self.body_j) % nb1
        if nb1 * i.shape[0] <= _ONE_HOT_MAX:
            eye = np.eye(nb1)
            Si, Sj = jnp.asarray(eye[i], dtype), jnp.asarray(eye[j], dtype)
            ri, rj = _select(Si, r_ext), _select(Sj, r_ext)
            Ri, Rj = _select(Si, R_ext), _select(Sj, R_ext)
        else:
            ri, rj, Ri, Rj = r_ext[i], r_ext[j], R_ext[i], R_ext[j]
        if theta is None:
            return jax.vmap(self.row)(ri, Ri, rj, Rj, self.vectors)
        return jax.vmap(self.row)(ri, Ri, rj, Rj, self.vectors, theta)


# Largest (rows x bodies) picked by one-hot products; gathers beyond (measured per
# generalized-alpha step: an 8-body chain, 24 x 8, 10 % faster by one-hot products; a 16-body
# chain, 48 x 16, 3.7x faster by gathers).
_ONE_HOT_MAX = 256


def _select(onehot: Float[Array, "k nb1"], x: Float[Array, "nb1 ..."]) -> Float[Array, "k ..."]:
    """Rows ``x[b]`` picked by one-hot weights, as a fusible broadcast-and-sum."""
    w = onehot.reshape(onehot.shape + (1,) * (x.ndim - 1))
    return jnp.sum(w * x[None], axis=1)


def _dij(ri, Ri, sp, rj, Rj, sq):
    return rj + mv(Rj, sq) - ri - mv(Ri, sp)


class DP1Stack(_Stack):
    kind = "DP1"

    @staticmethod
    def row(ri, Ri, rj, Rj, v):
        return _dot(mv(Ri, v[0]), mv(Rj, v[1]))


class DP2Stack(_Stack):
    kind = "DP2"

    @staticmethod
    def row(ri, Ri, rj, Rj, v):
        return _dot(mv(Ri, v[0]), _dij(ri, Ri, v[1], rj, Rj, v[2]))


class DStack(_Stack):
    kind = "D"

    @staticmethod
    def row(ri, Ri, rj, Rj, v):
        dij = _dij(ri, Ri, v[0], rj, Rj, v[1])
        return _dot(dij, dij)


class CDStack(_Stack):
    kind = "CD"

    @staticmethod
    def row(ri, Ri, rj, Rj, v):
        return _dot(v[0], _dij(ri, Ri, v[1], rj, Rj, v[2]))


class AngleStack(_Stack):
    kind = "angle"

    @staticmethod
    def row(ri, Ri, rj, Rj, v, theta):
        a = mv(Ri, v[0])
        return _dot(a, mv(Rj, v[2])) * jnp.cos(theta) - _dot(a, mv(Rj, v[1])) * jnp.sin(theta)


class SwapStack(_Stack):
    kind = "dp1_swap"

    @staticmethod
    def row(ri, Ri, rj, Rj, v, theta):
        a = mv(Ri, v[0])
        primary = _dot(a, mv(Rj, v[1])) - jnp.cos(theta)
        alternate = _dot(a, mv(Rj, v[2])) - jnp.sin(theta)
        return jnp.where(jnp.abs(jnp.cos(theta)) > 0.9, alternate, primary)


STACKS: dict[str, type[_Stack]] = {
    s.kind: s for s in (DP1Stack, DP2Stack, DStack, CDStack, AngleStack, SwapStack)
}
