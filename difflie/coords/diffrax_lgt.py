"""Algorithm B (Müller, §6.3): geometrically consistent evaluation with any diffrax one-step
solver.

A legacy model ``y = (q, V)``, ``dy/dt = (H(q)^-1 V, f(t, q, V))`` written for a vector-space
solver, is integrated by solving in every step the local system

    X_dot = dpsi^-1_{-X}(V),   V_dot = f(t, lgt(q_k, X), V),   X(t_k) = 0,

with the wrapped diffrax solver, and updating ``q_{k+1} = lgt(q_k, X_{k+1})``. Only ``V_dot`` of
the user's vector field is used: its ``q_dot`` (singular where the chart is) is replaced by the
local kinematics of the chosen group, so the same term runs singularity-free. The local error
estimate is ``(dX, dV)``; ``dX`` is laid into the slots of ``q`` (translation, then the first
three rotation coordinates; zeros in the rest) so that diffrax's controllers measure the step
error in local coordinates. One-step solvers only: nothing is carried between steps.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import diffrax
import equinox as eqx
import jax.numpy as jnp

from .absolute_model import group_velocity
from .chart import AbstractChart
from .local import LocalCoordinates


class LGTSolver(diffrax.AbstractAdaptiveSolver):
    """Wrap a diffrax solver so that it integrates absolute coordinates through the LGT map.

    **Arguments:**

    - `solver`: a one-step diffrax solver, e.g. ``diffrax.Tsit5()`` or ``diffrax.Dopri5()``.
    - `chart`: the rotation coordinates of ``q``.
    - `group`: ``"SO3"`` (``q = theta``, ``V = omega``), ``"SO3xR3"`` or ``"SE3"``
      (``q = (r, theta)``, ``V = (v, omega)``) per body, rows stacked: ``q`` of shape ``(nb, n)``.
    - `psi`: ``"exp"`` or ``"cay"``.
    - `velocity`: the model's ``v``: ``"mixed"`` (``r_dot``) or ``"body"`` (``R^T r_dot``).

    Use with ``diffrax.diffeqsolve(diffrax.ODETerm(vf), LGTSolver(...), ..., y0=(q0, V0))`` where
    ``vf(t, (q, V), args) -> (q_dot, V_dot)``.
    """

    solver: diffrax.AbstractSolver
    chart: AbstractChart
    group: str = eqx.field(static=True, default="SO3xR3")
    psi: str = eqx.field(static=True, default="exp")
    velocity: str = eqx.field(static=True, default="mixed")

    term_structure: ClassVar = diffrax.ODETerm
    interpolation_cls: ClassVar = diffrax.LocalLinearInterpolation

    def __init__(
        self,
        solver: diffrax.AbstractSolver,
        chart: AbstractChart,
        group="SO3xR3",
        psi: Literal["exp", "cay"] = "exp",
        velocity: Literal["mixed", "body"] = "mixed",
    ):
        if not isinstance(solver, diffrax.AbstractSolver):
            raise ValueError(f"LGTSolver: solver must be a diffrax solver, got {type(solver).__name__}")
        if not isinstance(chart, AbstractChart):
            raise ValueError(f"LGTSolver: chart must be an AbstractChart, got {type(chart).__name__}")
        if velocity not in ("mixed", "body"):
            raise ValueError(f"LGTSolver: velocity must be 'mixed' or 'body', got {velocity!r}")
        local = LocalCoordinates(group, psi)
        self.solver, self.chart = solver, chart
        self.group, self.psi, self.velocity = local.group, local.psi, velocity

    def order(self, terms):
        return self.solver.order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        del terms, t0, t1, args
        self._check(y0)
        return None

    def _check(self, y0) -> LocalCoordinates:
        local = LocalCoordinates(self.group, self.psi)
        if not (isinstance(y0, tuple) and len(y0) == 2):
            raise ValueError("LGTSolver: y0 must be the pair (q, V)")
        q, V = y0
        n = self.chart.dim + 3 * local.has_translation
        if jnp.shape(q)[-1] != n or jnp.shape(V)[-1] != local.tangent_dim or jnp.shape(q)[:-1] != jnp.shape(V)[:-1]:
            raise ValueError(
                f"LGTSolver: {type(self.chart).__name__} in {local.group} needs q (..., {n}) and "
                f"V (..., {local.tangent_dim}); got {jnp.shape(q)} and {jnp.shape(V)}"
            )
        return local

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        del solver_state, made_jump
        local = self._check(y0)
        chart = self.chart
        q0, V0 = y0

        def local_field(t, z, args):
            X, V = z
            q = chart.lgt(q0, X, local.group, local.psi)
            _, V_dot = terms.vf(t, (q, V), args)
            R = chart.rotation(q, local.group)
            return local.kinematics(X, group_velocity(local, R, V, self.velocity)), V_dot

        inner = diffrax.ODETerm(local_field)
        z0 = (jnp.zeros(V0.shape[:-1] + (local.tangent_dim,), V0.dtype), V0)
        state = self.solver.init(inner, t0, t1, z0, args)
        (X1, V1), z_error, _, _, result = self.solver.step(inner, t0, t1, z0, args, state, False)
        q1 = chart.lgt(q0, X1, local.group, local.psi)
        y1 = (q1, V1)
        y_error = None
        if z_error is not None:
            dX, dV = z_error
            pad = jnp.zeros(dX.shape[:-1] + (q1.shape[-1] - dX.shape[-1],), dX.dtype)
            y_error = (jnp.concatenate([dX, pad], axis=-1), dV)
        return y1, y_error, dict(y0=y0, y1=y1), None, result

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)
