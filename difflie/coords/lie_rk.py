"""Algorithm A (Müller, §6.2): Munthe-Kaas Runge-Kutta driving an absolute-coordinate
model through the LGT map.

Per step, from ``X = 0`` at ``q_k``, with an explicit tableau ``(a, b, c)``:

    X_i = h sum_j a_ij KX_j,   V_i = V_k + h sum_j a_ij KV_j,   q_i = lgt(q_k, X_i),
    KV_i = f(t_k + c_i h, q_i, V_i),   KX_i = dpsi^-1_{-X_i}(V_i),
    q_{k+1} = lgt(q_k, h sum_i b_i KX_i),   V_{k+1} = V_k + h sum_i b_i KV_i.

The model (``f`` in absolute coordinates) is unchanged; the integration is singularity-free
whatever the chart, and with the same tableau the rotations equal those of RKMK on the group.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..results import RESULTS, BodyState
from ..solvers.base import AbstractSolver, StepStats
from ..solvers.tableaux import RK4, ButcherTableau as Tableau
from .absolute_model import AbsoluteModel, group_velocity
from .local import LocalCoordinates




class LGTRungeKutta(AbstractSolver):
    """RKMK through the LGT map for an ``AbsoluteModel`` (Müller, §6.2).

    **Arguments:**

    - `tableau`: an explicit tableau (``Tableau``, a ``difflie.solvers.tableaux`` entry,
      a ``diffrax`` tableau, or a solver that holds one). Default: classical RK4.
    - `method_order`: the tableau's order (reported as ``order``); taken from a solver's
      ``order`` attribute (e.g. ``difflie.solvers.rkmk.RKMK4()``) when not given.
    - `group`: local group, ``"SO3xR3"`` or ``"SE3"`` (rotation-only models use SO(3)).
    - `psi`: ``"exp"`` or ``"cay"`` local coordinates.

    State ``y = (q, V)``; the error estimate (embedded tableaux) is ``(dX, dV)`` in local
    coordinates. Every step restarts from ``X = 0``, so FSAL stages are not reused.
    """

    tableau: Tableau = RK4
    method_order: int = eqx.field(static=True, default=4)
    group: str = eqx.field(static=True, default="SO3xR3")
    psi: str = eqx.field(static=True, default="exp")

    def __init__(self, tableau: Any = RK4, method_order: int | None = None, group="SO3xR3", psi: str = "exp"):
        self.tableau = Tableau.convert(tableau)
        if method_order is None:
            method_order = getattr(tableau, "order", None)
            if method_order is None and tableau is RK4:
                method_order = 4
            if not isinstance(method_order, int):
                raise ValueError("LGTRungeKutta: give method_order for this tableau")
        self.method_order = int(method_order)
        local = LocalCoordinates(group, psi)  # validates
        self.group, self.psi = local.group, local.psi

    @property
    def order(self) -> int:  # type: ignore[override]
        return self.method_order

    @property
    def adaptive(self) -> bool:  # type: ignore[override]
        return self.tableau.b_error is not None

    def _check(self, model) -> LocalCoordinates:
        if not isinstance(model, AbsoluteModel):
            raise ValueError(f"LGTRungeKutta integrates an AbsoluteModel, got {type(model).__name__}")
        return LocalCoordinates(model.group(self.group), self.psi)

    def init(self, model, t0, dt0):
        self._check(model)
        return (model.q0, model.V0), None

    def step(self, model, t0, t1, y0, solver_state):
        local = self._check(model)
        chart, tab = model.chart, self.tableau
        q0, V0 = y0
        h = t1 - t0
        zero_X = jnp.zeros(V0.shape[:-1] + (local.tangent_dim,), V0.dtype)
        KX, KV = [], []
        for ci, row in zip(tab.c, tab.a):
            Xi = _combine(h, row, KX, zero_X)
            Vi = V0 + _combine(h, row, KV, jnp.zeros_like(V0))
            qi = chart.lgt(q0, Xi, local.group, local.psi) if any(a != 0.0 for a in row) else q0
            KV.append(model.acceleration(t0 + ci * h, qi, Vi, model.args))
            KX.append(local.kinematics(Xi, group_velocity(local, model.rotation(qi), Vi, model.velocity)))
        X1 = _combine(h, tab.b, KX, zero_X)
        V1 = V0 + _combine(h, tab.b, KV, jnp.zeros_like(V0))
        q1 = chart.lgt(q0, X1, local.group, local.psi)
        y_error = None
        if tab.b_error is not None:
            y_error = (_combine(h, tab.b_error, KX, zero_X), _combine(h, tab.b_error, KV, jnp.zeros_like(V0)))
        finite = jnp.all(jnp.isfinite(q1)) & jnp.all(jnp.isfinite(V1))
        result = RESULTS.where(finite, RESULTS.successful, RESULTS.nonfinite)
        stats = StepStats(evaluations=jnp.asarray(len(tab.b)), newton_iterations=jnp.asarray(0))
        return (q1, V1), y_error, solver_state, stats, result

    def error_norm(self, y0, y1, y_error, rtol, atol):
        """RMS of the local error ``(dX, dV)`` scaled by ``atol + rtol max(|y0|, |y1|)``.

        Translations scale with the positions, rotations with 1, velocities with themselves.
        """
        (q0, V0), (q1, V1) = y0, y1
        eX, eV = y_error
        sr = atol + rtol * jnp.ones_like(eX[..., -3:])
        parts = [eX[..., -3:] / sr]
        if eX.shape[-1] == 6:
            parts.append(eX[..., :3] / (atol + rtol * jnp.maximum(jnp.abs(q0[..., :3]), jnp.abs(q1[..., :3]))))
        parts.append(eV / (atol + rtol * jnp.maximum(jnp.abs(V0), jnp.abs(V1))))
        return jnp.sqrt(jnp.mean(jnp.concatenate(parts, axis=-1) ** 2))

    def observe(self, model, y) -> BodyState:
        return model.body_state(*y)


def _combine(h, coefficients, ks, zero):
    """``h sum_j c_j k_j`` over the non-zero coefficients (``zero`` if there are none)."""
    terms = [c * k for c, k in zip(coefficients, ks) if c != 0.0]
    return h * sum(terms[1:], terms[0]) if terms else zero


def integrate(
    model: AbsoluteModel, solver: LGTRungeKutta, t0: Float[Array, ""], dt: Float[Array, ""], n_steps: int
) -> tuple[Array, Array, Array]:
    """Fixed-step run: ``(ts, q, V)`` at the ``n_steps + 1`` grid times (``lax.scan``).

    Raises (via ``eqx.error_if``) if a step produced a non-finite state.
    """
    dtype = jnp.result_type(model.q0)
    t0, dt = jnp.asarray(t0, dtype), jnp.asarray(dt, dtype)

    def body(y, k):
        ta = t0 + k * dt
        y1, _, _, _, result = solver.step(model, ta, ta + dt, y, None)
        return y1, (y1, result)

    y0, _ = solver.init(model, t0, dt)
    _, ((q, V), results) = jax.lax.scan(body, y0, jnp.arange(n_steps, dtype=dtype))
    q = eqx.error_if(q, jnp.any(results != RESULTS.successful), "LGT integration: non-finite state")
    ts = t0 + dt * jnp.arange(n_steps + 1, dtype=dtype)
    return ts, jnp.concatenate([y0[0][None], q]), jnp.concatenate([y0[1][None], V])
