"""Implicit (backward) Euler for the index-3 DAE of constrained rigid bodies (Kissel, Taves &
Negrut, §3).

Formulations rA (Lie-group: ``A_{n+1} = A_n exp(h hat(omega_{n+1}))``), rp (Euler parameters
with a normalisation constraint) and re (ZXZ Euler angles). With coordinates ``q = (r, rot)``,
rates ``v = (r_dot, rot_rate)`` and the unknowns ``x = (a, lambda)`` of a step ``h``:

    v1 = v0 + h a,     q1 = chart(q0, h v1)          (r1 = r0 + h r_dot1, A1 = A0 exp(h omega1))
    [ E(t1, q1, v1, a) + Psi_q(t1, q1)^T lambda ]
    [ Psi(t1, q1) / h^2                         ] = 0,

where ``E`` are the Newton-Euler rows projected on the rates and ``Psi`` the model's constraint
rows, pinned points included, plus the normalisation rows for rp (both from
``difflie.dae``, as every implicit solver reads them). The residual is written once; the
Newton matrix is its ``jax.jacfwd`` (no hand-derived stiffness); the constraint rows carry the
paper's ``1/h^2`` scaling so the matrix is O(1). Newton stops when ``||delta||_2 < tol`` with
``tol = tol_constant / h^2`` by default (the paper's ``Theta h^2 = 1e-11``), or when the
correction, measured as the position change it makes, is at the positions' rounding (the only
test in float32; in float64 it decides only for large mechanisms,
``BackwardEuler._stopping_test``); reaching
``max_iterations`` is reported as ``RESULTS.newton_failed``. Gradients of a step come from the
implicit-function theorem (``difflie.numerics.newton.newton_solve``).

``init`` starts from ``difflie.dae.consistent_state``: the configuration assembled, the
velocities projected, consistent accelerations and multipliers.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float

from .. import dae
from ..constraints import jacobians as jac
from ..constraints.formulations import AbstractFormulation, get_formulation
from ..numerics import sparsity
from ..numerics.newton import (
    IterationMatrix,
    Newton,
    NewtonSolution,
    implicit_derivatives,
    linear_system,
    newton_iterate,
    newton_solve,
    no_grad,
)
from ..results import RESULTS, BodyState
from .base import AbstractSolver, StepStats
from .predictor import History


# Newton stops at position changes of this many ulps (``_stopping_test``).
_ROUNDING_ULPS = 16


class BackwardEulerState(eqx.Module):
    """``(r, rot)`` configuration, rates, last accelerations and multipliers."""

    position: Float[Array, "nb 3"]  # world COM
    rot: Array  # formulation attitude: A (nb, 3, 3), p (nb, 4) or (eps, vec F) (nb, 12)
    velocity: Float[Array, "nb 3"]  # world COM velocity
    rate: Float[Array, "nb d"]  # omega_bar (rA), p_dot (rp), eps_dot (re)
    acceleration: Float[Array, " n"]  # [r_ddot, rate_dot] flattened
    multipliers: Float[Array, " m"]


class BackwardEulerSolverState(eqx.Module):
    """Carried between steps besides the state: the recent solutions that start Newton, and the
    kept iteration matrix (``matrix_reuse > 1``; its age is ``matrix.cost.solves``)."""

    history: History | None
    matrix: IterationMatrix | None


class BackwardEuler(AbstractSolver):
    """First-order implicit Euler on the index-3 DAE, formulation ``"rA"``, ``"rp"`` or ``"re"``.

    ``tol``: Newton tolerance on ``||delta||_2`` (accelerations and multipliers); default
    ``tol_constant / h^2`` in float64, a test at the positions' rounding in float32.
    ``max_iterations``: Newton iteration limit per step (beyond it, ``RESULTS.newton_failed``).
    ``newton="modified"`` factors the iteration matrix once per step (the paper's codes),
    ``"full"`` re-evaluates it every iteration. ``extrapolation``:
    degree of the polynomial through the last steps' accelerations and multipliers that starts
    Newton (``difflie.solvers.predictor``); ``0`` starts from the last values, as the paper's
    codes do. ``matrix_reuse``: modified Newton keeps one iteration matrix (its factors) for
    up to this many steps; ``1`` builds a new one every step, as the paper's codes. It is rebuilt
    sooner when the step size or (re) the chart changes, and, with ``rebuild_cost``, when the
    last step took more iterations than the matrix's average cost per step, its build counted
    as ``rebuild_cost`` iterations (the renewal rule of ``difflie.numerics.newton.MatrixCost``;
    ``None``: no such rebuild). A step that does not converge on a kept matrix is solved again
    on a fresh one. The converged step meets the same tolerance either way, and derivatives (implicit
    function theorem) use the exact Jacobian at the solution, not the kept matrix. A body that
    spins fast makes a matrix a step old a poor one: the heavy top of Holzinger, Arnold &
    Gerstmayr (2024) at h = 1e-3 takes 8.4 iterations per step on kept matrices and 2 with
    ``matrix_reuse=1``, 1.4x faster there (``benchmarks/history``, 2026-11-27).
    ``block_size``: the iteration matrix is built from compressed derivatives in blocks along
    the mechanism's topology (a body and its joint's rows; the bodies around a loop) and
    eliminated from the leaves of that tree (``difflie.numerics.sparsity``); a body that is
    its parent's only child joins its parent's block up to this many unknowns. ``None``: one
    dense matrix, as for a step of at most ``sparsity.DENSE_STEP_LIMIT`` (48) unknowns on a
    kept matrix (modified Newton), where it is faster. The default keeps a body to a block:
    larger blocks were slower on chains, trees and loops (``benchmarks/RESULTS.md``, Scaling).
    """

    formulation: str = eqx.field(static=True, default="rA")
    tol: float | None = None
    tol_constant: float = 1e-11
    max_iterations: int = eqx.field(static=True, default=20)
    newton: Literal["full", "modified"] = eqx.field(static=True, default="modified")
    extrapolation: int = eqx.field(static=True, default=3)
    matrix_reuse: int = eqx.field(static=True, default=30)
    rebuild_cost: float | None = eqx.field(static=True, default=20.0)
    block_size: int | None = eqx.field(static=True, default=16)

    order: ClassVar[int] = 1

    def __check_init__(self):
        get_formulation(self.formulation)  # raises ValueError on an unknown name
        if self.newton not in ("full", "modified"):
            raise ValueError(f"BackwardEuler.newton must be 'full' or 'modified', got {self.newton!r}")
        if not isinstance(self.max_iterations, int) or self.max_iterations < 1:
            raise ValueError(f"BackwardEuler.max_iterations must be an integer >= 1, got {self.max_iterations!r}")
        if not isinstance(self.extrapolation, int) or self.extrapolation < 0:
            raise ValueError(f"BackwardEuler.extrapolation must be an integer >= 0, got {self.extrapolation!r}")
        if not isinstance(self.matrix_reuse, int) or self.matrix_reuse < 1:
            raise ValueError(f"BackwardEuler.matrix_reuse must be an integer >= 1, got {self.matrix_reuse!r}")
        if self.rebuild_cost is not None and not self.rebuild_cost >= 0:
            raise ValueError(f"BackwardEuler.rebuild_cost must be None or >= 0, got {self.rebuild_cost!r}")

    @property
    def form(self) -> AbstractFormulation:
        return get_formulation(self.formulation)

    def structure(self, model) -> sparsity.Sparsity:
        """The iteration matrix's blocks: unknowns ``[a (all r, all rot), lambda]``
        (``difflie.constraints.jacobians.structure``)."""
        block_size = sparsity.step_block_size(jac.num_unknowns(model, self.form), self.block_size, self._keeps_matrix)
        return jac.structure(model, self.form, block_size)

    def _stopping_test(self, h, y0: BackwardEulerState, x0) -> tuple[Array, tuple[Array, Array]]:
        """``(tol, floor)``: Newton stops when ``||delta||_2 < tol`` or when the rounding test
        ``floor = (w, ulps)`` holds, ``||w * delta||_2 < ulps``.

        Float64, or a given ``tol``: ``tol_constant / h^2`` (or ``tol``) on the plain correction.
        That can be out of reach: a correction ``da`` moves the positions by ``h^2 da``, and
        their rounding, ``eps L`` with ``L = max(1, |r|)``, makes ``da`` noisy at ``eps L / h^2``
        (about 0.2 m/s^2 in float32 at h = 1e-3), the multipliers more (a 256-body chain in
        float64 at h = 1e-3: ``|d lambda|`` stalls at 1e-5 to 4e-5 against ``tol`` = 1e-5, with
        ``|da|`` at 1e-7). So the rounding test measures the correction of the accelerations as
        the position change it makes, relative to ``L``, against ``_ROUNDING_ULPS`` ulps (the
        multipliers follow the accelerations); below float64 it is the only test."""
        scale = jax.lax.stop_gradient(h**2 / jnp.maximum(1.0, jnp.max(jnp.abs(y0.position))))
        acc, lam = x0
        weights = jnp.concatenate([jnp.full_like(acc, scale), jnp.zeros_like(lam)])
        floor = (weights, _ROUNDING_ULPS * jnp.finfo(h.dtype).eps)
        if self.tol is not None:
            return jnp.asarray(self.tol, h.dtype), floor
        if jnp.finfo(h.dtype).bits >= 64:
            return self.tol_constant / h**2, floor
        return jnp.asarray(0.0, h.dtype), floor

    def init(self, model: Any, t0, dt0) -> tuple[BackwardEulerState, BackwardEulerSolverState]:
        r, rot, rdot, rate, acc, lam = dae.consistent_state(model, self.form, t0, self.block_size)
        y0 = BackwardEulerState(r, rot, rdot, rate, acc, lam)
        sol = jnp.concatenate([acc, lam])
        history = History.start(self.extrapolation, jnp.asarray(t0, r.dtype), sol) if self.extrapolation else None
        matrix = None
        if self._keeps_matrix:  # the first step builds its matrix
            st = self.structure(model)
            matrix = IterationMatrix.start(st.zero_factors(r.dtype), r.dtype)
        return y0, BackwardEulerSolverState(history, matrix)

    @property
    def _keeps_matrix(self) -> bool:
        return self.newton == "modified" and self.matrix_reuse > 1

    def _solve(self, model, t1, h, y0, x0, state: BackwardEulerSolverState):
        """Newton on the step residual: ``(solution, iterations, newton_iterate's result)``
        (the last ``None`` without a kept matrix); the solution's ``num_steps`` counts its last
        attempt, ``iterations`` also those of a failed attempt on a kept matrix."""
        tol, floor = self._stopping_test(h, y0, x0)
        st = self.structure(model)
        newton = Newton(tol=tol, max_iterations=self.max_iterations, modified=self.newton == "modified")
        args = (model, t1, h, y0)

        def residual(x, a):
            return self.residual(a[0], a[1], a[2], a[3], x)

        if not self._keeps_matrix:
            sol = newton_solve(residual, x0, args, newton, floor=floor, structure=st)
            return sol, sol.num_steps, None

        # Modified Newton without derivatives, on the kept matrix unless it is stale (a step
        # that does not converge on it is solved again from x0 on a fresh one); derivatives
        # attached once after it by the implicit-function theorem.
        args_ng, x0_ng = no_grad((args, x0))
        kept = state.matrix.for_step(h, self.rebuild_cost, self.matrix_reuse)

        def flat_residual(x):
            return ravel_pytree(residual(x, args_ng))[0]

        system = linear_system(flat_residual, x0_ng, st)
        out = newton_iterate(flat_residual, x0_ng, system, newton, floor=floor, kept=kept)
        value = implicit_derivatives(residual, out.value, args, st)
        sol = NewtonSolution(value, out.num_steps, out.result, out.correction_norm)  # the last attempt
        return sol, out.iterations, out

    def residual(self, model, t1, h, y0: BackwardEulerState, x) -> Float[Array, " k"]:
        """The step residual in the unknowns ``x = (a, lambda)`` (written once; two arrays, so
        that the iteration matrix takes the multipliers' columns through ``G^T lambda`` only)."""
        form = self.form
        acc, lam = x
        nb = y0.position.shape[0]
        v1 = jac.join(y0.velocity, y0.rate) + h * acc
        rdot1, rate1 = jac.split(form, v1, nb)
        r1, rot1 = jac.chart(form, y0.position, y0.rot, h * v1)
        psi, reaction = jac.psi_and_reaction(model, form, t1, r1, rot1, lam)
        dyn = dae.dynamics_residual(model, form, t1, r1, rot1, rdot1, rate1, acc) + reaction
        return jnp.concatenate([dyn, psi / h**2])

    def step(self, model, t0, t1, y0: BackwardEulerState, solver_state):
        form = self.form
        h = jnp.asarray(t1 - t0, y0.position.dtype)
        t1 = jnp.asarray(t1, h.dtype)
        history = solver_state.history
        n = y0.acceleration.shape[0]
        guess = None if history is None else history.guess(t1)
        x0 = (y0.acceleration, y0.multipliers) if guess is None else (guess[:n], guess[n:])
        sol, iterations, out = self._solve(model, t1, h, y0, x0, solver_state)
        nb = y0.position.shape[0]
        acc, lam = sol.value
        v1 = jac.join(y0.velocity, y0.rate) + h * acc
        rdot1, rate1 = jac.split(form, v1, nb)
        r1, rot1 = jac.chart(form, y0.position, y0.rot, h * v1)
        rddot1, rate_dot1 = jac.split(form, acc, nb)
        rot1_chart, rate1, rate_dot1 = form.reframe(rot1, rate1, rate_dot1)
        y1 = BackwardEulerState(r1, rot1_chart, rdot1, rate1, jac.join(rddot1, rate_dot1), lam)
        rechart = jnp.any(rot1_chart != rot1)  # (re) older values and matrices do not apply
        if history is not None:
            x1 = jnp.concatenate([y1.acceleration, lam])
            history = jax.lax.stop_gradient(history.push(t1, x1, rechart))  # only starts Newton
        matrix = solver_state.matrix
        if out is not None:
            matrix = jax.lax.stop_gradient(matrix.after(out, h, self.rebuild_cost, keep=~rechart))
        state1 = BackwardEulerSolverState(history, matrix)
        finite = jnp.all(jnp.isfinite(acc)) & jnp.all(jnp.isfinite(lam))
        result = RESULTS.where(finite, sol.result, RESULTS.nonfinite)
        stats = StepStats(evaluations=iterations, newton_iterations=iterations, residual=sol.correction_norm)
        return y1, None, state1, stats, result

    def observe(self, model, y: BackwardEulerState) -> BodyState:
        form = self.form
        return BodyState(
            position=y.position,
            rotation=form.rotation(y.rot),
            velocity=y.velocity,
            angular_velocity=form.omega(y.rot, y.rate),
        )
