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

Every kind is one bilinear row ``u . e - f`` (``FORMS``); ``ConstraintSet`` stacks the rows of
all kinds and evaluates them with one kernel per group of kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

GROUND = -1


class Driver(eqx.Module):
    """A time function ``f(t)`` (or ``f(t, params)`` when ``params`` is given); further
    arguments pass through, ``f(t, *args)`` (a joint-feedback law ``f(t, q, qd)``).

    ``fn`` is static (a Python callable); ``params`` is a pytree of arrays that may be traced.
    """

    fn: Callable = eqx.field(static=True)
    params: Any = None

    def __call__(self, t, *args):
        return self.fn(t, *args) if self.params is None else self.fn(t, *args, self.params)


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


class RowForm(NamedTuple):
    """Where a kind's vectors go among the row slots ``SLOTS``, and its two coefficients in

        e = A_j q_bar - A_i s_bar_p + sigma (r_j - r_i),    u = A_i a_bar + kappa e + c,
        Phi = u . e - f

    (a slot a kind does not use holds zeros): DP1 ``e = b_j``, ``u = a_i``; DP2 ``e = d_ij``,
    ``u = a_i``; D ``u = e = d_ij``; CD ``e = d_ij``, ``u = c``; the angle rows as DP1."""

    slots: tuple[str, ...]
    kappa: float
    sigma: float


# The row slots: a_bar and s_bar_p (body i), q_bar and b2_bar (body j), c (world). A driven
# angle turns ``q_bar`` into ``w_q q_bar + w_b2 b2_bar`` (``angle_weights``).
SLOTS = ("a_bar", "s_bar_p", "q_bar", "b2_bar", "c")
FORMS: dict[str, RowForm] = {
    "DP1": RowForm(("a_bar", "q_bar"), 0.0, 0.0),
    "DP2": RowForm(("a_bar", "s_bar_p", "q_bar"), 0.0, 1.0),
    "D": RowForm(("s_bar_p", "q_bar"), 1.0, 1.0),
    "CD": RowForm(("c", "s_bar_p", "q_bar"), 0.0, 1.0),
    "angle": RowForm(("a_bar", "q_bar", "b2_bar"), 0.0, 0.0),
    "dp1_swap": RowForm(("a_bar", "q_bar", "b2_bar"), 0.0, 0.0),
}
assert all(len(FORMS[k].slots) == len(VECTOR_FIELDS[k]) for k in KINDS)


def angle_weights(swap: np.ndarray, theta: Float[Array, " k"]) -> tuple[Array, Array, Array]:
    """``(w_q, w_b2, f)`` of driven-angle rows (``swap``: which are ``dp1_swap`` rows).

    The axis on body j, ``w_q q_bar + w_b2 b2_bar`` with ``q_bar = b_bar_j``, ``b2_bar = c_bar_j``:
    angle ``c_bar cos theta - b_bar sin theta``, ``f = 0``; switched DP1 ``b_bar``, ``f = cos
    theta`` while ``|cos theta| <= 0.9``, else ``c_bar``, ``f = sin theta``.
    """
    c, s = jnp.cos(theta), jnp.sin(theta)
    alternate = jnp.abs(c) > 0.9
    one, zero = jnp.ones_like(c), jnp.zeros_like(c)
    w_q = jnp.where(swap, jnp.where(alternate, zero, one), -s)
    w_b2 = jnp.where(swap, jnp.where(alternate, one, zero), c)
    f = jnp.where(swap, jnp.where(alternate, s, c), zero)
    return w_q, w_b2, f
