"""Butcher tableaux of the explicit Runge-Kutta methods (exact rationals, checked in tests)."""

from __future__ import annotations

from fractions import Fraction as F
from math import sqrt
from typing import Any

import equinox as eqx


class ButcherTableau(eqx.Module):
    """``c``, strictly lower-triangular ``a`` (row ``i`` has ``i`` entries), weights ``b`` and,
    for embedded pairs, ``b_error = b - b_hat`` (the error estimate is ``h sum b_error_i k_i``).

    Checked on construction: consistent sizes, ``c_i = sum_j a_ij`` and ``sum_i b_i = 1``.
    ``fsal`` (first same as last) is detected, not declared: the last stage is evaluated at the
    step's end point (``c_s = 1``, last row of ``a`` equal to ``b``, ``b_s = 0``), so it is the
    next step's first stage. The one tableau class of difflie: the RKMK solvers and
    ``difflie.coords.LGTRungeKutta`` both take it (``convert`` reads a ``diffrax``
    tableau or a solver holding one).
    """

    c: tuple[float, ...] = eqx.field(static=True)
    a: tuple[tuple[float, ...], ...] = eqx.field(static=True)
    b: tuple[float, ...] = eqx.field(static=True)
    b_error: tuple[float, ...] | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        s = len(self.b)
        if len(self.c) != s or len(self.a) != s or any(len(row) != i for i, row in enumerate(self.a)):
            raise ValueError(f"ButcherTableau: inconsistent sizes c={len(self.c)}, b={s}, a rows={[len(r) for r in self.a]}")
        if self.b_error is not None and len(self.b_error) != s:
            raise ValueError(f"ButcherTableau: b_error has {len(self.b_error)} entries for {s} stages")
        for i, (ci, row) in enumerate(zip(self.c, self.a)):
            if abs(sum(row) - ci) > 1e-12:
                raise ValueError(f"ButcherTableau: row {i} of a sums to {sum(row)}, but c[{i}] = {ci}")
        if abs(sum(self.b) - 1.0) > 1e-12:
            raise ValueError(f"ButcherTableau: the weights b sum to {sum(self.b)}, not 1")

    @property
    def stages(self) -> int:
        return len(self.b)

    @property
    def fsal(self) -> bool:
        s = self.stages
        return (
            s > 1
            and self.c[-1] == 1.0
            and self.b[-1] == 0.0
            and all(abs(x - y) <= 1e-15 for x, y in zip(self.a[-1], self.b[:-1]))
        )

    @classmethod
    def convert(cls, tableau: Any) -> ButcherTableau:
        """From a ``ButcherTableau``, a ``diffrax`` tableau (``a_lower, b_sol, b_error, c``),
        anything with ``c, a, b[, b_error]``, or a solver holding one (``.tableau``)."""
        if isinstance(tableau, cls):
            return tableau
        inner = getattr(tableau, "tableau", None)
        if inner is not None and not hasattr(tableau, "b") and not hasattr(tableau, "b_sol"):
            return cls.convert(inner)
        if hasattr(tableau, "a_lower"):  # diffrax.ButcherTableau
            c = (0.0,) + _t(*tableau.c)
            a = ((),) + tuple(_t(*row) for row in tableau.a_lower)
            be = None if tableau.b_error is None else _t(*tableau.b_error)
            return cls(c, a, _t(*tableau.b_sol), be)
        if all(hasattr(tableau, k) for k in ("a", "b", "c")):
            be = getattr(tableau, "b_error", None)
            return cls(_t(*tableau.c), tuple(_t(*row) for row in tableau.a), _t(*tableau.b), None if be is None else _t(*be))
        raise ValueError(f"not a Runge-Kutta tableau (or a solver holding one): {tableau!r}")


def _t(*xs) -> tuple[float, ...]:
    return tuple(float(x) for x in xs)


def _tableau(c, a, b, b_hat=None) -> ButcherTableau:
    b_error = None if b_hat is None else _t(*(x - y for x, y in zip(b, b_hat)))
    return ButcherTableau(_t(*c), tuple(_t(*row) for row in a), _t(*b), b_error)


EULER = _tableau((0,), ((),), (1,))

# Heun's method with explicit Euler embedded: order 2(1).
HEUN = _tableau((0, 1), ((), (1,)), (F(1, 2), F(1, 2)), (1, 0))

RK4 = _tableau(
    (0, F(1, 2), F(1, 2), 1),
    ((), (F(1, 2),), (0, F(1, 2)), (0, 0, 1)),
    (F(1, 6), F(1, 3), F(1, 3), F(1, 6)),
)

# Bogacki-Shampine 3(2) (Bogacki & Shampine 1989), as used by Holzinger, Arnold & Gerstmayr (2024).
BOSH3 = _tableau(
    (0, F(1, 2), F(3, 4), 1),
    ((), (F(1, 2),), (0, F(3, 4)), (F(2, 9), F(1, 3), F(4, 9))),
    (F(2, 9), F(1, 3), F(4, 9), 0),
    (F(7, 24), F(1, 4), F(1, 3), F(1, 8)),
)

# Dormand-Prince 5(4) (Hairer, Norsett, Wanner I, p. 178).
_DOPRI5_B = (F(35, 384), 0, F(500, 1113), F(125, 192), F(-2187, 6784), F(11, 84), 0)
DOPRI5 = _tableau(
    (0, F(1, 5), F(3, 10), F(4, 5), F(8, 9), 1, 1),
    (
        (),
        (F(1, 5),),
        (F(3, 40), F(9, 40)),
        (F(44, 45), F(-56, 15), F(32, 9)),
        (F(19372, 6561), F(-25360, 2187), F(64448, 6561), F(-212, 729)),
        (F(9017, 3168), F(-355, 33), F(46732, 5247), F(49, 176), F(-5103, 18656)),
        _DOPRI5_B[:6],
    ),
    _DOPRI5_B,
    (F(5179, 57600), 0, F(7571, 16695), F(393, 640), F(-92097, 339200), F(187, 2100), F(1, 40)),
)

# Butcher's 7-stage order-6 method (1964), as used by Holzinger, Arnold & Gerstmayr (2024).
_S5 = sqrt(5.0)
RK67 = _tableau(
    (0, 0.5 - _S5 / 10, 0.5 + _S5 / 10, 0.5 - _S5 / 10, 0.5 + _S5 / 10, 0.5 - _S5 / 10, 1),
    (
        (),
        (0.5 - _S5 / 10,),
        (-_S5 / 10, 0.5 + _S5 / 5),
        (7 * _S5 / 20 - 0.75, _S5 / 4 - 0.25, 1.5 - 7 * _S5 / 10),
        (1 / 12 - _S5 / 60, 0, 1 / 6, 7 * _S5 / 60 + 0.25),
        (_S5 / 60 + 1 / 12, 0, 0.75 - 5 * _S5 / 12, 1 / 6, -0.5 + 3 * _S5 / 10),
        (1 / 6, 0, -55 / 12 + 25 * _S5 / 12, -7 * _S5 / 12 - 25 / 12, 5 - 2 * _S5, 2.5 + _S5 / 2),
    ),
    (F(1, 12), 0, 0, 0, F(5, 12), F(5, 12), F(1, 12)),
)
