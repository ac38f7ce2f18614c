"""Small array helpers shared by the groups: hat/vee, quaternion algebra, rotation blocks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import coefficients as c


_LEVI_CIVITA = np.zeros((3, 3, 3))
_LEVI_CIVITA[0, 1, 2] = _LEVI_CIVITA[1, 2, 0] = _LEVI_CIVITA[2, 0, 1] = 1.0
_LEVI_CIVITA[0, 2, 1] = _LEVI_CIVITA[2, 1, 0] = _LEVI_CIVITA[1, 0, 2] = -1.0


def cross(a: Float[Array, "*b 3"], b: Float[Array, "*b 3"]) -> Float[Array, "*b 3"]:
    """``a x b``; same values as ``jnp.cross``, cheaper to compile and run on small arrays.

    The value is the component formula (element-wise, fuses with its neighbours); the
    derivative rule is ``da x b + a x db`` as ``sum_jk eps_ijk u_j v_k``, a product-and-sum whose
    transpose is again one. ``jnp.cross``'s component slices transpose to one pad kernel each
    in reverse mode, which made gradients through a time step several times dearer on CPU.
    """
    return _cross(jnp.asarray(a), jnp.asarray(b))


@jax.custom_jvp
def _cross(a, b):
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def _cross_sum(a, b):
    eps = jnp.asarray(_LEVI_CIVITA, jnp.result_type(a, b))
    return jnp.sum(eps * a[..., None, :, None] * b[..., None, None, :], axis=(-1, -2))


@_cross.defjvp
def _cross_jvp(primals, tangents):
    (a, b), (da, db) = primals, tangents
    return _cross(a, b), _cross_sum(da, b) + _cross_sum(a, db)


def hat(w: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
    """Skew matrix with ``hat(w) @ x == cross(w, x)``."""
    w = jnp.asarray(w)
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    o = jnp.zeros_like(x)
    return jnp.stack([o, -z, y, z, o, -x, -y, x, o], axis=-1).reshape(w.shape[:-1] + (3, 3))


def vee(m: Float[Array, "*b 3 3"]) -> Float[Array, "*b 3"]:
    """Inverse of ``hat`` (of the skew part of ``m``)."""
    return 0.5 * jnp.stack(
        [m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]],
        axis=-1,
    )


# Small products as broadcast-multiply-sum: XLA fuses these with their neighbours, where a
# ``dot`` per 3x3 or 6x6 product is a kernel of its own on CPU (a step is launch-bound). The one
# set of helpers every module uses for the per-body products of its hot loop.
def mv(m: Float[Array, "*b i j"], v: Float[Array, "*b j"]) -> Float[Array, "*b i"]:
    """``m v`` for stacks of small matrices."""
    return jnp.sum(m * v[..., None, :], axis=-1)


def mtv(m: Float[Array, "*b j i"], v: Float[Array, "*b j"]) -> Float[Array, "*b i"]:
    """``m^T v`` for stacks of small matrices."""
    return jnp.sum(m * v[..., :, None], axis=-2)


def mm(a: Float[Array, "*b i j"], b: Float[Array, "*b j k"]) -> Float[Array, "*b i k"]:
    """``a b`` for stacks of small matrices."""
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


def matvec(m: Array, v: Array) -> Array:
    return jnp.einsum("...ij,...j->...i", m, v)


def matmul(a: Array, b: Array) -> Array:
    return jnp.einsum("...ij,...jk->...ik", a, b)


def transpose(m: Array) -> Array:
    return jnp.swapaxes(m, -1, -2)


def eye_like(w: Array, n: int = 3) -> Array:
    return jnp.broadcast_to(jnp.eye(n, dtype=w.dtype), w.shape[:-1] + (n, n))


def sqnorm(w: Array) -> Array:
    return jnp.sum(w * w, axis=-1)


def _poly3(w: Array, a: Array, b: Array, sign_a: float = 1.0) -> Array:
    """``I + a hat(w) + b hat(w)^2`` with scalar (batched) coefficients.

    Written with ``hat(w)^2 = w w^T - |w|^2 I``: broadcasts that XLA fuses, no batched matmul.
    """
    t = sqnorm(w)
    eye = jnp.eye(3, dtype=w.dtype)
    return (
        (1 - b * t)[..., None, None] * eye
        + (sign_a * a)[..., None, None] * hat(w)
        + b[..., None, None] * (w[..., :, None] * w[..., None, :])
    )


def so3_exp_matrix(w: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
    """``exp(hat(w)) = I + sinc W + cosc W^2``."""
    return _poly3(w, *c.so3_exp_coefficients(sqnorm(w)))


def so3_left_jacobian(w: Array) -> Array:
    """``J_l(w) = I + cosc hat(w) + k1 hat(w)^2`` (= the right-trivialised dexp)."""
    t = sqnorm(w)
    return _poly3(w, c.cosc(t), c.k1(t))


def so3_left_jacobian_inv(w: Array) -> Array:
    t = sqnorm(w)
    return _poly3(w, jnp.full_like(t, 0.5), c.k2(t), sign_a=-1.0)


def so3_right_jacobian(w: Array) -> Array:
    """``J_r(w) = J_l(-w)``: body angular velocity = ``J_r(w) w_dot`` for ``R = exp(w)``."""
    t = sqnorm(w)
    return _poly3(w, c.cosc(t), c.k1(t), sign_a=-1.0)


def so3_right_jacobian_inv(w: Array) -> Array:
    t = sqnorm(w)
    return _poly3(w, jnp.full_like(t, 0.5), c.k2(t))


def se3_right_jacobian_block(v: Array, w: Array, inverse: bool) -> Array:
    """Upper-right block of the SE(3) right Jacobian (or its inverse), translation-first.

    With ``V = hat(v)``, ``W = hat(w)`` and ``A = W V + V W`` (an anticommutator, not the
    bracket that Holzinger, Gerstmayr & Schöberl print in eq. 17, corrected):

    * ``J_r``:     ``-cosc V + k1 A + (w.v) (-k4 W + k5 W^2)``
    * ``J_r^-1``:  ``V/2 + k2 A + (w.v) k3 W^2``
    """
    t = sqnorm(w)
    V, W = hat(v), hat(w)
    eye = jnp.eye(3, dtype=w.dtype)
    wv = jnp.sum(w * v, axis=-1)[..., None, None]
    # W V + V W = v w^T + w v^T - 2 (w.v) I  and  W^2 = w w^T - |w|^2 I: fused broadcasts.
    A = v[..., :, None] * w[..., None, :] + w[..., :, None] * v[..., None, :] - 2 * wv * eye
    WW = w[..., :, None] * w[..., None, :] - t[..., None, None] * eye
    s = lambda x: x[..., None, None]  # noqa: E731
    if inverse:
        return 0.5 * V + s(c.k2(t)) * A + wv * s(c.k3(t)) * WW
    return -s(c.cosc(t)) * V + s(c.k1(t)) * A + wv * (-s(c.k4(t)) * W + s(c.k5(t)) * WW)


def block2(a: Array, b: Array, cc: Array, d: Array) -> Array:
    """The 6x6 matrix ``[[a, b], [cc, d]]`` from 3x3 blocks."""
    top = jnp.concatenate([a, b], axis=-1)
    bottom = jnp.concatenate([cc, d], axis=-1)
    return jnp.concatenate([top, bottom], axis=-2)


# --- quaternions (scalar first) ---------------------------------------------------------------


def qmul(p: Float[Array, "*b 4"], q: Float[Array, "*b 4"]) -> Float[Array, "*b 4"]:
    """Hamilton product."""
    pw, pv = p[..., :1], p[..., 1:]
    qw, qv = q[..., :1], q[..., 1:]
    w = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
    v = pw * qv + qw * pv + cross(pv, qv)
    return jnp.concatenate([w, v], axis=-1)


def qconj(q: Array) -> Array:
    return jnp.concatenate([q[..., :1], -q[..., 1:]], axis=-1)


def qexp(w: Float[Array, "*b 3"]) -> Float[Array, "*b 4"]:
    """Unit quaternion of the rotation by angle ``|w|`` about ``w``."""
    cos_h, sinc_h = c.quaternion_exp_coefficients(sqnorm(w))
    return jnp.concatenate([cos_h[..., None], sinc_h[..., None] * w], axis=-1)


def qlog(q: Float[Array, "*b 4"]) -> Float[Array, "*b 3"]:
    """Rotation vector with angle in ``[0, pi]`` (q and -q give the same result)."""
    q = jnp.where(q[..., :1] < 0, -q, q)
    w, v = q[..., 0], q[..., 1:]
    s2 = sqnorm(v)
    # 2 atan2(s, w) / s, with a series in (s/w)^2 near s = 0 (there w ~ 1).
    small = s2 < 1e-6
    s = jnp.sqrt(jnp.where(small, 1.0, s2))
    w_safe = jnp.where(small, w, 1.0)
    x = s2 / (w_safe * w_safe)
    series = (2.0 / w_safe) * (1 - x / 3 + x * x / 5 - x * x * x / 7)
    closed = 2.0 * jnp.arctan2(s, w) / s
    return jnp.where(small, series, closed)[..., None] * v


def quat_to_matrix(q: Float[Array, "*b 4"]) -> Float[Array, "*b 3 3"]:
    w, v = q[..., 0], q[..., 1:]
    eye = eye_like(v)
    return (
        (w * w - sqnorm(v))[..., None, None] * eye
        + 2 * v[..., :, None] * v[..., None, :]
        + 2 * w[..., None, None] * hat(v)
    )


def matrix_to_quat(m: Float[Array, "*b 3 3"]) -> Float[Array, "*b 4"]:
    """Shepperd's method: the largest of ``4 w^2, 4 x^2, 4 y^2, 4 z^2`` sets the branch.

    All four branches are evaluated on clipped (safe) radicands, so gradients stay finite; the
    chosen branch always has a radicand >= 1.
    """
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    tr = m00 + m11 + m22
    d21 = m[..., 2, 1] - m[..., 1, 2]
    d02 = m[..., 0, 2] - m[..., 2, 0]
    d10 = m[..., 1, 0] - m[..., 0, 1]
    s21 = m[..., 2, 1] + m[..., 1, 2]
    s02 = m[..., 0, 2] + m[..., 2, 0]
    s10 = m[..., 1, 0] + m[..., 0, 1]
    radicands = jnp.stack([1 + tr, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1)
    k = jnp.argmax(radicands, axis=-1)
    r = jnp.sqrt(jnp.maximum(radicands, 0.25))  # = 2 |component| on the chosen branch
    candidates = jnp.stack(
        [
            jnp.stack([r[..., 0], d21 / r[..., 0], d02 / r[..., 0], d10 / r[..., 0]], -1),
            jnp.stack([d21 / r[..., 1], r[..., 1], s10 / r[..., 1], s02 / r[..., 1]], -1),
            jnp.stack([d02 / r[..., 2], s10 / r[..., 2], r[..., 2], s21 / r[..., 2]], -1),
            jnp.stack([d10 / r[..., 3], s02 / r[..., 3], s21 / r[..., 3], r[..., 3]], -1),
        ],
        axis=-2,
    )
    q = 0.5 * jnp.take_along_axis(candidates, k[..., None, None], axis=-2)[..., 0, :]
    q = jnp.where(q[..., :1] < 0, -q, q)
    return q / jnp.linalg.norm(q, axis=-1, keepdims=True)


def quat_act(q: Array, p: Array) -> Array:
    """Rotate points ``p`` by the unit quaternion ``q``."""
    w, v = q[..., :1], q[..., 1:]
    t = 2 * cross(v, p)
    return p + w * t + cross(v, t)
