"""Lie-group generalized-alpha (Brüls, Cardona & Arnold 2012; Holzinger, Arnold & Gerstmayr 2024) driving an absolute-coordinate model through the LGT.

Per step, for the local increment ``X`` (one row per body, in the local group of the model's
velocity: SO(3) for rotation-only models, SO(3)xR3 for ``velocity="mixed"``, SE(3) for
``"body"``) and the algorithmic acceleration ``a``:

    q1 = lgt(q0, X),   X = h V0 + h^2 (1/2 - beta) a0 + h^2 beta a1,
    V1 = V0 + h (1 - gamma) a0 + h gamma a1,
    (1 - alpha_m) a1 + alpha_m a0 = (1 - alpha_f) Vdot1 + alpha_f Vdot0,
    Vdot1 = f(t1, q1, V1),

solved for ``X`` by Newton on ``s (Vdot1 - f(t1, lgt(q0, X), V1))`` with ``s = beta h^2``
(iteration matrix ``jax.jacfwd`` of that residual, O(1) for every ``h``). The configuration
never leaves the chart's coordinates and never passes through ``H(q)^-1``, so the step is
singularity-free; it equals generalized-alpha on the group ``R q0 psi(X)`` for every chart.
Gradients come from the implicit-function theorem (``difflie.numerics.newton.newton_solve``).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..numerics.newton import Newton, newton_solve, no_grad
from ..results import RESULTS, BodyState
from ..solvers.base import AbstractSolver, StepStats
from ..solvers.generalized_alpha import alpha_coefficients, alpha_increment, alpha_rates
from .absolute_model import AbsoluteModel


class LGTAlphaState(eqx.Module):
    """``q`` (absolute coordinates), ``V``, ``Vdot = f(t, q, V)`` and the algorithmic ``a``."""

    q: Float[Array, "nb n"]
    V: Float[Array, "nb d"]
    acceleration: Float[Array, "nb d"]
    algorithmic_acceleration: Float[Array, "nb d"]


class LGTGeneralizedAlpha(AbstractSolver):
    """Generalized-alpha through the LGT for an ``AbsoluteModel``; second order.

    **Arguments:**

    - `rho_inf`: spectral radius at infinity in ``[0, 1]`` (0.9 by default). Unlike the index-3
      ``difflie.GeneralizedAlpha``, whose multipliers need ``rho_inf < 1``, an ODE takes
      ``rho_inf = 1`` (the trapezoidal rule).
    - `rtol`, `atol`: Newton stops when the correction satisfies
      ``|dX| <= atol + rtol |X|`` (max norms). ``None``: ``1e-12``/``1e-14`` in float64,
      ``1e-5``/``1e-6`` in float32.
    - `max_iterations`: beyond it the step reports ``RESULTS.newton_failed``.

    The local group follows the model (``"mixed"`` velocity: SO(3)xR3 with the world velocity
    as translation tangent; ``"body"``: SE(3) with the body twist), exp local coordinates.
    """

    rho_inf: float = 0.9
    rtol: float | None = eqx.field(static=True, default=None)
    atol: float | None = eqx.field(static=True, default=None)
    max_iterations: int = eqx.field(static=True, default=20)

    order: ClassVar[int] = 2

    def __check_init__(self):
        if isinstance(self.rho_inf, (int, float)) and not 0.0 <= self.rho_inf <= 1.0:
            raise ValueError(f"LGTGeneralizedAlpha: rho_inf must lie in [0, 1], got {self.rho_inf}")
        if self.max_iterations < 1:
            raise ValueError("LGTGeneralizedAlpha: max_iterations must be >= 1")

    @staticmethod
    def group(model: AbsoluteModel) -> str:
        """The local group whose left-trivialised velocity is the model's ``V``."""
        if not isinstance(model, AbsoluteModel):
            raise ValueError(f"LGTGeneralizedAlpha integrates an AbsoluteModel, got {type(model).__name__}")
        if model.rotation_only:
            return "SO3"
        return "SO3xR3" if model.velocity == "mixed" else "SE3"

    def init(self, model, t0, dt0):
        """``a0 = Vdot0 = f(t0, q0, V0)``."""
        del dt0
        self.group(model)
        q0, V0 = model.q0, model.V0
        vdot0 = model.acceleration(jnp.asarray(t0, q0.dtype), q0, V0, model.args)
        return LGTAlphaState(q0, V0, vdot0, vdot0), None

    def _unpack(self, h, y0: LGTAlphaState):
        """``X -> (a1, V1, Vdot1)`` from the Newmark and alpha relations."""
        V0, a0, vdot0 = y0.V, y0.algorithmic_acceleration, y0.acceleration

        def unpack(X):
            return alpha_rates(self.rho_inf, h, V0, a0, vdot0, X)

        # Predictor: Vdot1 = Vdot0.
        X_pred = alpha_increment(self.rho_inf, h, V0, a0, vdot0, vdot0)
        beta = alpha_coefficients(self.rho_inf)[3]
        return unpack, X_pred, beta * h**2

    def step(self, model, t0, t1, y0: LGTAlphaState, solver_state):
        group = self.group(model)
        dtype = y0.q.dtype
        t1 = jnp.asarray(t1, dtype)
        h = t1 - jnp.asarray(t0, dtype)
        f64 = jnp.finfo(dtype).bits == 64
        rtol = self.rtol if self.rtol is not None else (1e-12 if f64 else 1e-5)
        atol = self.atol if self.atol is not None else (1e-14 if f64 else 1e-6)

        def residual(X, args):
            model, t1, h, y0 = args
            unpack, _, s = self._unpack(h, y0)
            _, V1, vdot1 = unpack(X)
            q1 = model.chart.lgt(y0.q, X, group, "exp")
            return s * (vdot1 - model.acceleration(t1, q1, V1, model.args))

        # Full Newton from the predictor, stopping on the correction (max-norm); derivatives of
        # X by the implicit-function theorem (difflie.numerics.newton).
        _, X_pred, _ = self._unpack(jax.lax.stop_gradient(h), no_grad(y0))
        newton = Newton(tol=atol, rtol=rtol, norm="max", max_iterations=self.max_iterations)
        sol = newton_solve(residual, X_pred, (model, t1, h, y0), newton)
        X = sol.value

        unpack, _, _ = self._unpack(h, y0)
        a1, V1, vdot1 = unpack(X)
        q1 = model.chart.lgt(y0.q, X, group, "exp")
        # Vdot1 from the model at the new state: equal to the alpha relation's at convergence.
        y1 = LGTAlphaState(q1, V1, vdot1, a1)
        finite = jnp.all(jnp.isfinite(q1)) & jnp.all(jnp.isfinite(V1))
        result = RESULTS.where(finite, sol.result, RESULTS.nonfinite)
        iterations = sol.num_steps
        stats = StepStats(evaluations=iterations + 1, newton_iterations=iterations, residual=sol.correction_norm)
        return y1, None, solver_state, stats, result

    def observe(self, model, y: LGTAlphaState) -> BodyState:
        return model.body_state(y.q, y.V)
