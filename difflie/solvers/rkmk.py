"""Explicit Runge-Kutta-Munthe-Kaas (RKMK) solvers from Butcher tableaux.

On a step ``[t0, t0 + h]`` the pose is ``g(t) = g0 exp(q(t))`` with ``q(t0) = 0`` and

    q' = dexpinv(q) xi(g, v, t),   v' = a(g, v, t),

where ``xi`` is the group velocity (``g' = g hat(xi)``) and ``a`` the acceleration of the
velocity coordinates (``difflie.eom.vector_field``). Stage ``i`` sits at
``q_i = h sum_j a_ij kq_j``, ``g_i = g0 exp(q_i)``, ``v_i = v0 + h sum_j a_ij kv_j`` with
``kq_i = dexpinv(q_i) xi_i`` and ``kv_i = a_i``; then ``g1 = g0 exp(h sum b_i kq_i)`` and
``v1 = v0 + h sum b_i kv_i`` (Holzinger, Arnold & Gerstmayr 2024, Algorithm 3). ``dexpinv(q) = I + ad_q/2 + ad_q^2/12 - ...``;
dropping it (``correction=False``) or truncating it early lowers the order to 2.
"""

from __future__ import annotations

from math import factorial
from typing import ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .. import eom
from ..lie import SO3xR3, cross
from ..lie.coefficients import COSC, K2, SINC, poly, so3_exp_coefficients, so3_exp_series
from ..lie.ops import hat, mv
from ..results import RESULTS, BodyState
from .base import AbstractSolver, StepStats
from .tableaux import BOSH3, DOPRI5, EULER, HEUN, RK4, RK67 as RK67_TABLEAU, ButcherTableau


# Bernoulli numbers B_k / k! of dexpinv's series, k = 0..8 (with B_1 = +1/2 in this convention).
_BERNOULLI = (1.0, 0.5, 1 / 6, 0.0, -1 / 30, 0.0, 1 / 42, 0.0, -1 / 30)
_SERIES = tuple(b / factorial(k) for k, b in enumerate(_BERNOULLI))
# Taylor series of the coefficients' derivatives d/dt^2, from theirs in ``difflie.lie.coefficients``.
_DSINC, _DCOSC, _DK2 = (tuple(n * c for n, c in enumerate(s))[1:] for s in (SINC, COSC, K2))


def _increment_scalars(t2: Array):
    """The Taylor masks, ``1/t^2``, ``phi`` and the coefficients ``a``, ``b``, ``k2`` at
    ``t^2 = |w|^2``.

    ``a = sin t / t`` and ``b = (1 - cos t) / t^2`` are the group exponential's
    (``difflie.lie.coefficients.so3_exp_coefficients``, series below its threshold),
    ``phi = (t/2) cot(t/2) = a / (2 b)`` and ``k2 = (1 - phi) / t^2``, by its series below
    ``t^2 < 1`` (``1 - phi`` cancels). ``1/t^2`` is taken of a safe ``t^2`` on the series branch.
    """
    a, b = so3_exp_coefficients(t2)
    small = so3_exp_series(t2)
    series = t2 < 1.0
    r2 = 1 / jnp.where(small, 1.0, t2)
    phi = 0.5 * a / b
    k2 = jnp.where(series, poly(K2, t2), (1 - phi) * r2)
    return small, series, r2, phi, a, b, k2


def _exp_parts(w: Array, t2: Array, a: Array, b: Array) -> tuple[Array, Array, Array]:
    """``E = I + a W + b W^2``, ``W = hat(w)`` and ``W^2 = w w^T - t^2 I``."""
    eye = jnp.eye(3, dtype=w.dtype)
    W = hat(w)
    WW = w[..., :, None] * w[..., None, :] - t2[..., None, None] * eye
    return eye + a[..., None, None] * W + b[..., None, None] * WW, W, WW


@jax.custom_jvp
def _so3_increment(w: Array) -> tuple[Array, Array]:
    """``exp(hat(w)) = I + a W + b W^2`` and the ``dexpinv`` coefficient ``k2(|w|)``.

    Same values as ``difflie.lie.SO3.exp`` and its ``dexpinv``, from one ``sin``/``cos`` in
    a few fused element-wise kernels (the RKMK stage loop is dominated by kernel count on CPU).
    The derivative rule below multiplies by precomputed scalars only: its transpose, in
    reverse mode, has no divisions (each was one more kernel per stage).
    """
    t2 = jnp.sum(w * w, axis=-1)
    *_, a, b, k2 = _increment_scalars(t2)
    return _exp_parts(w, t2, a, b)[0], k2


@_so3_increment.defjvp
def _so3_increment_jvp(primals, tangents):
    """``d/dt2`` of the coefficients from their own values (no new division):
    ``a' = (cos t - a) / (2 t^2)`` with ``cos t = 1 - t^2 b``, ``b' = (a/2 - b) / t^2``,
    ``k2' = (1/8 - k2 - phi k2 / 2) / t^2`` (``phi' = phi k2 / 2 - 1/8``), with their Taylor
    series on the small branch."""
    (w,), (dw,) = primals, tangents
    t2 = jnp.sum(w * w, axis=-1)
    small, series, r2, phi, a, b, k2 = _increment_scalars(t2)
    da = jnp.where(small, poly(_DSINC, t2), 0.5 * (1 - t2 * b - a) * r2)
    db = jnp.where(small, poly(_DCOSC, t2), (0.5 * a - b) * r2)
    dk2 = jnp.where(series, poly(_DK2, t2), (0.125 - k2 - 0.5 * phi * k2) * r2)
    E, W, WW = _exp_parts(w, t2, a, b)
    dt2 = 2 * jnp.sum(w * dw, axis=-1)
    dWW = w[..., :, None] * dw[..., None, :] + dw[..., :, None] * w[..., None, :]
    dWW = dWW - dt2[..., None, None] * jnp.eye(3, dtype=w.dtype)
    dE = (
        (da * dt2)[..., None, None] * W
        + a[..., None, None] * hat(dw)
        + (db * dt2)[..., None, None] * WW
        + b[..., None, None] * dWW
    )
    return (E, k2), (dE, dk2 * dt2)


class AbstractRKMK(AbstractSolver):
    """Generic explicit RKMK stepper; subclasses fix the tableau.

    ``velocity``: the velocity coordinates and group (``difflie.eom``): ``"so3xr3"`` (world
    velocity of the body-frame origin and body angular velocity, on SO(3)xR3), ``"se3"`` (the
    body twist, on SE(3)) or ``"ulvc"`` (the unified local velocity coordinates of Holzinger,
    Gerstmayr & Schöberl, on SE(3), with the model's ``ulvc_lengths``).
    ``correction=False`` replaces ``dexpinv(q)`` by the identity (the "plain exp update", order
    2 at best); ``dexpinv_order=k`` truncates its series after ``ad_q^k`` (``None``: closed
    form). Both exist as negative controls and for experiments.
    """

    tableau: ClassVar[ButcherTableau]
    velocity: Literal["so3xr3", "se3", "ulvc"] = eqx.field(static=True, default="so3xr3")
    correction: bool = eqx.field(static=True, default=True)
    dexpinv_order: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.velocity not in eom.VELOCITIES:
            raise ValueError(f"velocity must be one of {eom.VELOCITIES}, got {self.velocity!r}")
        if self.dexpinv_order is not None and not 0 <= self.dexpinv_order < len(_SERIES):
            raise ValueError(f"dexpinv_order must be in [0, {len(_SERIES) - 1}] or None")

    # -- pieces ------------------------------------------------------------------------------

    def _dexpinv(self, G, q: Array, xi: Array, k2: Array | None = None) -> Array:
        if not self.correction:
            return xi
        if self.dexpinv_order is not None:
            ad = G.ad(q)
            out, term = xi, xi
            for k in range(1, self.dexpinv_order + 1):
                term = mv(ad, term)
                if _SERIES[k] != 0.0:
                    out = out + _SERIES[k] * term
            return out
        if G is SO3xR3:  # identity on the translation, J_r^-1 on the rotation, by cross products
            w, x = q[..., 3:], xi[..., 3:]
            k2 = (_so3_increment(w)[1] if k2 is None else k2)[..., None]
            wx = cross(w, x)
            return jnp.concatenate([xi[..., :3], x + 0.5 * wx + k2 * cross(w, wx)], axis=-1)
        return mv(G.dexpinv(q), xi)

    @staticmethod
    def _update(G, g0, q: Array):
        """``(g0 exp(q), k2)``; SO(3)xR3 through ``_so3_increment`` (k2 reused by dexpinv)."""
        if G is SO3xR3:
            E, k2 = _so3_increment(q[..., 3:])
            R = jnp.sum(g0.rotation[..., :, :, None] * E[..., None, :, :], axis=-2)
            return SO3xR3(R, g0.translation + q[..., :3]), k2
        return g0.compose(G.exp(q)), None

    def check_model(self, model) -> None:
        if getattr(model, "constraints", None) is not None:
            pinned = " or write the body about its fixed point with Model(fixed_origin=True)" if model.num_bodies == 1 else ""
            raise ValueError(f"explicit RKMK solvers take models without algebraic constraints; this model has constraints "
                             f"(use an implicit solver: GeneralizedAlpha(), BackwardEuler(){pinned})")  # fmt: skip

    # -- AbstractSolver ----------------------------------------------------------------------

    def init(self, model, t0, dt0):
        self.check_model(model)
        cache = eom.prepare(model, self.velocity)
        y0 = eom.initial_state(model, self.velocity)
        first = eom.vector_field(model, cache, t0, *y0) if self.tableau.fsal else None
        return y0, (cache, first)

    def step(self, model, t0, t1, y0, solver_state):
        cache, first = solver_state
        tab = self.tableau
        G = eom.group(self.velocity)
        g0, v0 = y0
        h = t1 - t0
        kq, kv = [], []
        for i in range(tab.stages):
            if i == 0:
                xi, a = first if first is not None else eom.vector_field(model, cache, t0, g0, v0)
                kq.append(xi)
                kv.append(a)
                continue
            row = tab.a[i]
            q = h * sum(c * k for c, k in zip(row, kq) if c != 0.0)
            v = v0 + h * sum(c * k for c, k in zip(row, kv) if c != 0.0)
            g, k2 = self._update(G, g0, q)
            xi, a = eom.vector_field(model, cache, t0 + tab.c[i] * h, g, v)
            kq.append(self._dexpinv(G, q, xi, k2))
            kv.append(a)
        q1 = h * sum(b * k for b, k in zip(tab.b, kq) if b != 0.0)
        v1 = v0 + h * sum(b * k for b, k in zip(tab.b, kv) if b != 0.0)
        g1, _ = self._update(G, g0, q1)
        if tab.fsal:
            # The last stage sat at q = q1, v = v1: it is the next step's first evaluation.
            last = (xi, a)
        else:
            last = None
        y_error = None
        if tab.b_error is not None:
            y_error = (
                h * sum(e * k for e, k in zip(tab.b_error, kq) if e != 0.0),
                h * sum(e * k for e, k in zip(tab.b_error, kv) if e != 0.0),
            )
        finite = jnp.all(jnp.isfinite(v1)) & jnp.all(jnp.isfinite(q1))
        result = RESULTS.where(finite, RESULTS.successful, RESULTS.nonfinite)
        evaluations = tab.stages - 1 if tab.fsal else tab.stages
        stats = StepStats(jnp.asarray(evaluations), jnp.asarray(0))
        return (g1, v1), y_error, (cache, last), stats, result

    def observe(self, model, y) -> BodyState:
        return BodyState(*eom.observe(model, self.velocity, *y))

    def error_norm(self, y0, y1, y_error, rtol, atol):
        """RMS of the tangent error ``(e_q, e_v)`` scaled by ``atol + rtol max(|y0|, |y1|)``.

        Translations scale with the origin positions, rotations with 1 (rotation-matrix
        entries are of order one), velocities with the velocity coordinates.
        """
        (g0, v0), (g1, v1) = y0, y1
        eq, ev = y_error
        sx = atol + rtol * jnp.maximum(jnp.abs(g0.translation), jnp.abs(g1.translation))
        sr = atol + rtol * jnp.ones_like(sx)
        sv = atol + rtol * jnp.maximum(jnp.abs(v0), jnp.abs(v1))
        ratios = jnp.concatenate([eq[..., :3] / sx, eq[..., 3:] / sr, ev / sv], axis=-1)
        return jnp.sqrt(jnp.mean(ratios**2))


class Euler(AbstractRKMK):
    """Lie-Euler: ``g1 = g0 exp(h xi0)``; order 1."""

    tableau = EULER
    order = 1


class Heun(AbstractRKMK):
    """Heun's method in RKMK form with Lie-Euler embedded; order 2(1), adaptive."""

    tableau = HEUN
    order = 2
    adaptive = True


class RKMK4(AbstractRKMK):
    """Classical Runge-Kutta 4 in RKMK form (RK44 of Holzinger, Arnold & Gerstmayr 2024; Holzinger, Gerstmayr & Schöberl, eqs. 82-87); order 4."""

    tableau = RK4
    order = 4


class Bosh3(AbstractRKMK):
    """Bogacki-Shampine 3(2) in RKMK form, FSAL; adaptive."""

    tableau = BOSH3
    order = 3
    adaptive = True


class Dopri5(AbstractRKMK):
    """Dormand-Prince 5(4) in RKMK form, FSAL, error estimated on the tangent increment."""

    tableau = DOPRI5
    order = 5
    adaptive = True


class RK67(AbstractRKMK):
    """Butcher's 7-stage order-6 method in RKMK form (as used by Holzinger, Arnold & Gerstmayr 2024)."""

    tableau = RK67_TABLEAU
    order = 6
