"""The scalar coefficient functions of the SO(3)/SE(3) closed forms.

Each coefficient is an even function of the rotation angle ``theta``, so it is evaluated from
``t = theta**2`` (which is smooth at the identity). Below a threshold a Taylor polynomial in
``t`` is used, above it the closed form; both branches are evaluated on safe inputs (the
"double where"), so values *and* derivatives are finite at ``theta = 0``.

``alpha``, ``beta`` and ``gamma = alpha/beta`` are the coefficients of Müller, singularity-free Lie
group integration in absolute coordinates (§5.1, eq. 36); the other names are ours:

* ``sinc = sin(theta)/theta``                      (alpha)
* ``cosc = (1 - cos(theta))/theta**2``             (beta/2)
* ``k1 = (theta - sin(theta))/theta**3``
* ``k2 = (1 - (theta/2) cot(theta/2))/theta**2``
* ``k3 = (1/beta + gamma - 2)/theta**4``           (SE(3) dexp^-1)
* ``k4 = (sinc - 2 cosc)/theta**2``                (SE(3) dexp)
* ``k5 = (cosc - 3 k1)/theta**2``                  (SE(3) dexp)
* ``half_sinc_half = sin(theta/2)/theta``          (quaternion exp)
* ``cos_half = cos(theta/2)``
"""

from __future__ import annotations

from fractions import Fraction
from math import factorial

import jax.numpy as jnp
from jaxtyping import Array, Float


def poly(coefficients: tuple[float, ...], t: Array) -> Array:
    out = jnp.zeros_like(t) + coefficients[-1]
    for c in coefficients[-2::-1]:
        out = out * t + c
    return out


def _threshold(t: Array, float64: float) -> float:
    # float32 uses the series up to theta = 1 (truncation < 1e-9 relative there).
    return float64 if t.dtype == jnp.float64 else 1.0


def _series_or_closed(t: Array, series: tuple[float, ...], closed, threshold: float) -> Array:
    """``series(t)`` for ``sqrt(t) < threshold``, else ``closed(t)``, NaN-free in both passes."""
    t = jnp.asarray(t)
    thr = _threshold(t, threshold)
    small = t < thr * thr
    t_safe = jnp.where(small, jnp.asarray(4.0 * thr * thr, t.dtype), t)
    return jnp.where(small, poly(series, t), closed(t_safe))


def _frac(values) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


# Taylor coefficients in t = theta**2, through theta**10 (checked against 50-digit arithmetic).
SINC = _frac(Fraction((-1) ** k, factorial(2 * k + 1)) for k in range(6))
COSC = _frac(Fraction((-1) ** k, factorial(2 * k + 2)) for k in range(6))
_K1 = _frac(Fraction((-1) ** k, factorial(2 * k + 3)) for k in range(6))
# k2 = sum_n (-1)^n B_{2n+2} / (2n+2)! t^n, from the Bernoulli numbers B_2 .. B_24: through
# theta**22, so that RKMK's increment (``difflie.solvers.rkmk``) can use it up to theta = 1 (the
# terms fall by ~1/40 each; 12 reach float64 rounding there).
_B2N = (Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
        Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798),
        Fraction(-174611, 330), Fraction(854513, 138), Fraction(-236364091, 2730))  # fmt: skip
K2 = _frac((-1) ** n * b / factorial(2 * n + 2) for n, b in enumerate(_B2N))
_K3 = _frac(
    [Fraction(1, 360), Fraction(1, 7560), Fraction(1, 201600), Fraction(1, 5987520),
     Fraction(691, 130767436800), Fraction(1, 6227020800)]
)
_K4 = _frac(
    [Fraction(-1, 12), Fraction(1, 180), Fraction(-1, 6720), Fraction(1, 453600),
     Fraction(-1, 47900160), Fraction(1, 7264857600)]
)
_K5 = _frac(
    [Fraction(-1, 60), Fraction(1, 1260), Fraction(-1, 60480), Fraction(1, 4989600),
     Fraction(-1, 622702080), Fraction(1, 108972864000)]
)
_HALF_SINC_HALF = _frac(Fraction((-1) ** k, 2 * 4**k * factorial(2 * k + 1)) for k in range(6))
_COS_HALF = _frac(Fraction((-1) ** k, 4**k * factorial(2 * k)) for k in range(6))


def cosc(t: Float[Array, "*b"]) -> Float[Array, "*b"]:
    return _series_or_closed(t, COSC, lambda s: (1 - jnp.cos(jnp.sqrt(s))) / s, 0.3)


def k1(t: Float[Array, "*b"]) -> Float[Array, "*b"]:
    def closed(s):
        th = jnp.sqrt(s)
        return (th - jnp.sin(th)) / (s * th)

    return _series_or_closed(t, _K1, closed, 0.3)


def _gamma(s: Array) -> Array:
    th = jnp.sqrt(s)
    return 0.5 * th / jnp.tan(0.5 * th)


def k2(t: Float[Array, "*b"]) -> Float[Array, "*b"]:
    return _series_or_closed(t, K2, lambda s: (1 - _gamma(s)) / s, 0.3)


def k3(t: Float[Array, "*b"]) -> Float[Array, "*b"]:
    def closed(s):
        th = jnp.sqrt(s)
        beta = (jnp.sin(0.5 * th) / (0.5 * th)) ** 2
        return (1 / beta + _gamma(s) - 2) / (s * s)

    return _series_or_closed(t, _K3, closed, 0.5)


def k4(t: Float[Array, "*b"]) -> Float[Array, "*b"]:
    def closed(s):
        th = jnp.sqrt(s)
        return (jnp.sin(th) / th - 2 * (1 - jnp.cos(th)) / s) / s

    return _series_or_closed(t, _K4, closed, 0.3)


def k5(t: Float[Array, "*b"]) -> Float[Array, "*b"]:
    def closed(s):
        th = jnp.sqrt(s)
        return ((1 - jnp.cos(th)) / s - 3 * (th - jnp.sin(th)) / (s * th)) / s

    return _series_or_closed(t, _K5, closed, 0.5)


def half_sinc_half(t: Float[Array, "*b"]) -> Float[Array, "*b"]:
    return _series_or_closed(t, _HALF_SINC_HALF, lambda s: jnp.sin(0.5 * jnp.sqrt(s)) / jnp.sqrt(s), 0.3)


def cos_half(t: Float[Array, "*b"]) -> Float[Array, "*b"]:
    return _series_or_closed(t, _COS_HALF, lambda s: jnp.cos(0.5 * jnp.sqrt(s)), 0.3)


_SO3_EXP_SWITCH = 0.3  # angle below which the exponential's coefficients use their series


def so3_exp_series(t: Float[Array, "*b"]) -> Array:
    """Where ``so3_exp_coefficients`` takes its Taylor series (below angle 0.3; 1 in float32)."""
    t = jnp.asarray(t)
    return t < _threshold(t, _SO3_EXP_SWITCH) ** 2


def so3_exp_coefficients(t: Float[Array, "*b"]) -> tuple[Array, Array]:
    """``(sinc, cosc)``, the coefficients of ``exp(hat(w)) = I + sinc W + cosc W^2``, from one
    square root, sine and cosine (the exponential is in the hot loop of every integrator)."""
    t = jnp.asarray(t)
    small = so3_exp_series(t)
    s = jnp.where(small, jnp.asarray(4.0 * _threshold(t, _SO3_EXP_SWITCH) ** 2, t.dtype), t)
    theta = jnp.sqrt(s)
    sinc_ = jnp.where(small, poly(SINC, t), jnp.sin(theta) / theta)
    cosc_ = jnp.where(small, poly(COSC, t), (1 - jnp.cos(theta)) / s)
    return sinc_, cosc_


def quaternion_exp_coefficients(t: Float[Array, "*b"]) -> tuple[Array, Array]:
    """``(cos(theta/2), sin(theta/2)/theta)`` from one square root, sine and cosine."""
    t = jnp.asarray(t)
    thr = _threshold(t, 0.3)
    small = t < thr * thr
    theta = jnp.sqrt(jnp.where(small, jnp.asarray(4.0 * thr * thr, t.dtype), t))
    half = 0.5 * theta
    cos_h = jnp.where(small, poly(_COS_HALF, t), jnp.cos(half))
    sinc_h = jnp.where(small, poly(_HALF_SINC_HALF, t), jnp.sin(half) / theta)
    return cos_h, sinc_h
