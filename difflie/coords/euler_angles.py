"""Euler and Cardan (Tait-Bryan) angles, any of the twelve axis sequences."""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie import ops as _ops
from .chart import AbstractChart, nearest_angle


_AXES = {"x": 0, "y": 1, "z": 2}
SEQUENCES = ("xyz", "xzy", "yxz", "yzx", "zxy", "zyx", "xyx", "xzx", "yxy", "yzy", "zxz", "zyz")


def _axis_rotation(axis: int, angle: Array) -> Array:
    """``R_axis(angle)``, batched over ``angle``."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    one, zero = jnp.ones_like(angle), jnp.zeros_like(angle)
    i, j = (axis + 1) % 3, (axis + 2) % 3
    rows = [[None] * 3 for _ in range(3)]
    rows[axis][axis], rows[axis][i], rows[axis][j] = one, zero, zero
    rows[i][axis], rows[i][i], rows[i][j] = zero, c, -s
    rows[j][axis], rows[j][i], rows[j][j] = zero, s, c
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def _axis_angle(axis: int, M: Array) -> Array:
    """Angle of ``M``, read as a rotation about ``axis``."""
    i, j = (axis + 1) % 3, (axis + 2) % 3
    return jnp.arctan2(M[..., j, i] - M[..., i, j], M[..., i, i] + M[..., j, j])


def _safe_norm(a: Array, b: Array) -> Array:
    """``sqrt(a^2 + b^2)`` with a finite (zero) gradient at the origin."""
    n2 = a * a + b * b
    positive = n2 > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, n2, 1.0)), 0.0)


def _safe_atan2(y: Array, x: Array, degenerate: Array, fallback: Array) -> Array:
    """``atan2(y, x)``, or ``fallback`` where ``degenerate`` (no NaN gradient at (0, 0))."""
    return jnp.where(degenerate, fallback, jnp.arctan2(jnp.where(degenerate, 0.0, y), jnp.where(degenerate, 1.0, x)))


class EulerAngles(AbstractChart):
    """Intrinsic angles ``theta`` with ``R = R_a(theta_0) R_b(theta_1) R_c(theta_2)``, ``seq = "abc"``.

    Cardan/Tait-Bryan sequences (``"xyz"``, ``"zyx"``, ...) are singular (gimbal lock) at
    ``theta_1 = +-pi/2``, proper Euler sequences (``"zxz"``, ...) at ``theta_1 = 0, pi``: there
    ``H`` (``omega_body = H theta_dot``, columns ``R_c^T R_b^T e_a``, ``R_c^T e_b``, ``e_c``) loses
    rank. Extraction reads the middle angle and the first one from ``R`` and then the last one from
    the remainder ``R_b^T R_a^T R``, so ``R`` is reproduced to round-off even next to the lock; of
    the two solutions (and their ``2 pi`` shifts) it returns the one nearest ``reference``.
    """

    seq: str = eqx.field(static=True)
    dim: ClassVar[int] = 3

    def __init__(self, seq: str = "xyz"):
        if not isinstance(seq, str) or seq.lower() not in SEQUENCES:
            raise ValueError(f"EulerAngles: seq must be one of {SEQUENCES}; got {seq!r}")
        self.seq = seq.lower()

    @property
    def axes(self) -> tuple[int, int, int]:
        return tuple(_AXES[a] for a in self.seq)

    @property
    def proper(self) -> bool:
        """Proper Euler sequence (first and last axes equal)."""
        return self.seq[0] == self.seq[2]

    def to_rotation(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        theta = jnp.asarray(theta)
        a, b, c = self.axes
        Ra, Rb, Rc = (_axis_rotation(ax, theta[..., n]) for n, ax in enumerate((a, b, c)))
        return _ops.matmul(_ops.matmul(Ra, Rb), Rc)

    def to_quaternion(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 4"]:
        theta = jnp.asarray(theta)
        out = None
        for n, ax in enumerate(self.axes):
            half = 0.5 * theta[..., n]
            zero = jnp.zeros_like(half)
            vec = [zero, zero, zero]
            vec[ax] = jnp.sin(half)
            q = jnp.stack([jnp.cos(half)] + vec, axis=-1)
            out = q if out is None else _ops.qmul(out, q)
        return out

    def from_quaternion(self, quat, reference=None):
        return self.from_rotation(_ops.quat_to_matrix(jnp.asarray(quat)), reference)

    def compose(self, theta, dquat):
        return self.from_rotation(_ops.matmul(self.to_rotation(theta), _ops.quat_to_matrix(dquat)), reference=theta)

    def from_rotation(self, R, reference=None):
        R = jnp.asarray(R)
        i, j, k3 = self.axes
        k = 3 - i - j  # the axis not in {i, j}
        eps = 1.0 if (j - i) % 3 == 1 else -1.0  # sign of the permutation (i, j, k)
        if self.proper:
            c_mid = R[..., i, i]
            s_mid = _safe_norm(R[..., i, j], R[..., i, k])
            y, x = R[..., j, i], -eps * R[..., k, i]
        else:
            s_mid = eps * R[..., i, k3]
            c_mid = _safe_norm(R[..., i, i], R[..., i, j])
            y, x = -eps * R[..., j, k3], R[..., k3, k3]
        middle = jnp.arctan2(s_mid, c_mid)
        # At the lock the first angle is free: keep the reference's (or zero) there.
        degenerate = x * x + y * y < jnp.finfo(R.dtype).eps ** 2
        first_ref = jnp.zeros_like(x) if reference is None else jnp.asarray(reference)[..., 0]
        first = _safe_atan2(y, x, degenerate, first_ref)
        candidates = [(first, middle)]
        # The other solution: (first + pi, pi - middle) for Cardan, (first + pi, -middle) for Euler.
        candidates.append((first + jnp.pi, (-middle) if self.proper else (jnp.pi - middle)))
        solutions = []
        for f, m in candidates:
            rest = _ops.matmul(
                _ops.transpose(_ops.matmul(_axis_rotation(i, f), _axis_rotation(j, m))), R
            )
            solutions.append(jnp.stack([f, m, _axis_angle(k3, rest)], axis=-1))
        if reference is None:
            return _wrap(solutions[0])
        reference = jnp.asarray(reference)
        unwrapped = [nearest_angle(s, reference) for s in solutions]
        d0 = _ops.sqnorm(unwrapped[0] - reference)
        d1 = _ops.sqnorm(unwrapped[1] - reference)
        return jnp.where((d0 <= d1)[..., None], unwrapped[0], unwrapped[1])

    def H(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        theta = jnp.asarray(theta)
        a, b, c = self.axes
        eye = _ops.eye_like(theta)
        RcT = _ops.transpose(_axis_rotation(c, theta[..., 2]))
        RbT = _ops.transpose(_axis_rotation(b, theta[..., 1]))
        col0 = _ops.matvec(_ops.matmul(RcT, RbT), eye[..., a])
        col1 = _ops.matvec(RcT, eye[..., b])
        return jnp.stack([col0, col1, eye[..., c]], axis=-1)


def _wrap(angles: Array) -> Array:
    """Angles in ``(-pi, pi]``."""
    return nearest_angle(angles, jnp.zeros_like(angles))
