"""Lie-group generalized-alpha (index 3) on R3 x SO(3).

Brüls, Cardona & Arnold (2012), as evaluated by Holzinger, Arnold & Gerstmayr (2024, §5). Each body carries its centre of
mass ``x`` (world), its rotation ``R`` (body to world), the velocity ``v = (u, omega)`` (world COM
velocity, body angular velocity), the acceleration ``vdot`` and the algorithmic acceleration ``a``.
A step solves for the Lie-algebra increment ``dq = (dx, dpsi)`` per body and the multipliers:

    x1 = x0 + dx,   R1 = R0 exp(dpsi),
    dq = h v0 + h^2 (1/2 - beta) a0 + h^2 beta a1,   v1 = v0 + h (1 - gamma) a0 + h gamma a1,
    (1 - alpha_m) a1 + alpha_m a0 = (1 - alpha_f) vdot1 + alpha_f vdot0,
    M vdot1 - g(x1, R1, v1, t1) + B(x1, R1)^T lambda1 = 0,   Phi(t1, x1, R1) = 0,

with ``M vdot - g`` the Newton-Euler rows of ``difflie.Model.newton_euler``, ``Phi`` the
model's constraint rows (``difflie.Model.constraint_residual``, pinned points included) and
``B`` their right-trivialised Jacobian. The initial state is the consistent one of
``difflie.dae.consistent_state`` in rotation-matrix coordinates (rA), whose rates are this
solver's velocities. The dynamic rows are scaled by ``s = beta h^2`` and the multipliers by ``1/s``
(Bottasso), so the iteration matrix ``dF/d(dq, s lambda)`` — taken by ``jax.jacfwd`` of the one
residual, so it contains ``T_exp``, the tangent stiffness and the constraint Hessian exactly — is
O(1) for every ``h``; it is built and factored by blocks along the mechanism's topology
(``difflie.numerics.sparsity``). Gradients of a step come from the implicit-function theorem
(``difflie.numerics.newton.implicit_derivatives``), never from the Newton iterations.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .. import dae
from ..constraints.formulations import get_formulation
from ..lie import hat
from ..lie.ops import mm, mv
from ..lie.ops import so3_exp_matrix
from ..numerics import sparsity
from ..numerics.newton import IterationMatrix, Newton, implicit_derivatives, newton_iterate, no_grad
from ..results import RESULTS, BodyState
from .base import AbstractSolver, StepStats
from .predictor import History


def alpha_coefficients(rho_inf: float | Array) -> tuple[Any, Any, Any, Any]:
    """``(alpha_m, alpha_f, gamma, beta)`` of Chung-Hulbert for spectral radius ``rho_inf``.

    ``alpha_m = (2 rho - 1)/(rho + 1)``, ``alpha_f = rho/(rho + 1)``,
    ``gamma = 1/2 + alpha_f - alpha_m``, ``beta = (gamma + 1/2)^2 / 4``.
    """
    alpha_m = (2.0 * rho_inf - 1.0) / (rho_inf + 1.0)
    alpha_f = rho_inf / (rho_inf + 1.0)
    gamma = 0.5 + alpha_f - alpha_m
    beta = 0.25 * (gamma + 0.5) ** 2
    return alpha_m, alpha_f, gamma, beta


# The time discretisation, written once for this solver and the LGT variant
# (``difflie.coords.LGTGeneralizedAlpha``): with ``a`` the algorithmic acceleration,
#     dq = h v0 + h^2 (1/2 - beta) a0 + h^2 beta a1,   v1 = v0 + h (1 - gamma) a0 + h gamma a1,
#     (1 - alpha_m) a1 + alpha_m a0 = (1 - alpha_f) vdot1 + alpha_f vdot0.


def alpha_increment(rho_inf, h, v0, a0, vdot0, vdot1):
    """The increment ``dq`` for a given ``vdot1`` (the Newton predictor)."""
    alpha_m, alpha_f, _, beta = alpha_coefficients(rho_inf)
    a1 = ((1 - alpha_f) * vdot1 + alpha_f * vdot0 - alpha_m * a0) / (1 - alpha_m)
    return h * v0 + h**2 * (0.5 - beta) * a0 + h**2 * beta * a1


def alpha_rates(rho_inf, h, v0, a0, vdot0, dq):
    """``(a1, v1, vdot1)`` from the increment ``dq``."""
    alpha_m, alpha_f, gamma, beta = alpha_coefficients(rho_inf)
    a1 = (dq - h * v0 - h**2 * (0.5 - beta) * a0) / (h**2 * beta)
    v1 = v0 + h * (1 - gamma) * a0 + h * gamma * a1
    vdot1 = ((1 - alpha_m) * a1 + alpha_m * a0 - alpha_f * vdot0) / (1 - alpha_f)
    return a1, v1, vdot1


class GeneralizedAlphaState(eqx.Module):
    """State carried from step to step; tangents are translation first ``(u, omega)``."""

    position: Float[Array, "nb 3"]  # world COM position
    rotation: Float[Array, "nb 3 3"]  # body to world
    velocity: Float[Array, "nb 3"]  # world COM velocity
    angular_velocity: Float[Array, "nb 3"]  # body frame
    acceleration: Float[Array, "nb 6"]  # vdot
    algorithmic_acceleration: Float[Array, "nb 6"]  # a
    multipliers: Float[Array, " m"]  # lambda


class GeneralizedAlphaSolverState(eqx.Module):
    """What a step passes to the next besides the state: the kept iteration matrix and the
    recent accelerations and multipliers that predict the next step's."""

    matrix: IterationMatrix
    history: History | None


# --------------------------------------------------------------------------------------------
# Physics: one residual, evaluated at configurations composed from the start of the step.


def _compose(x, R, dq):
    """Local-global transition: ``(x + dx, R exp(dpsi))``."""
    return x + dq[:, :3], mm(R, so3_exp_matrix(dq[:, 3:]))


def _local(x, R, z):
    """``(x + z_x, R (I + hat(z_psi)))``: the chart to first order, for first derivatives at
    ``z = 0`` only (no sin/cos/sqrt to evaluate and transpose there)."""
    return x + z[:, :3], R + mm(R, hat(z[:, 3:]))


def _constraint(model, t, x, R):
    """``Phi(t, origins, R)`` with the body-frame origins ``x - R com``."""
    return model.constraint_residual(t, x - mv(R, model.bodies.com), R)


def _mass_times(model, a: Float[Array, "nb 6"]) -> Float[Array, "nb 6"]:
    """``M a`` per body, ``M = diag(m I, J)`` on ``(translation, body-axes rotation)``."""
    return jnp.concatenate([model.bodies.mass[:, None] * a[:, :3], mv(model.bodies.inertia, a[:, 3:])], axis=-1)


def _dynamics(model, t, x, R, v, vdot, lam):
    """``(M vdot - g + B^T lambda, Phi, |M vdot| + |g|)``: the equilibrium rows, the constraint
    rows (the primal of the reverse pass that gives ``B^T lambda``) and the rows' scale."""
    phi, vjp = jax.vjp(lambda z: _constraint(model, t, *_local(x, R, z)), jnp.zeros_like(vdot))
    (bt_lam,) = vjp(lam)
    rows = jnp.concatenate(model.newton_euler(t, x, R, v[:, :3], v[:, 3:], vdot[:, :3], vdot[:, 3:]), axis=-1)
    m_vdot = _mass_times(model, vdot)
    scale = jnp.linalg.norm(m_vdot) + jnp.linalg.norm(m_vdot - rows)  # |M vdot| + |g|
    return rows + bt_lam, phi, scale


# --------------------------------------------------------------------------------------------


class GeneralizedAlpha(AbstractSolver):
    """Lie-group generalized-alpha, index 3, on R3 x SO(3); second order.

    **Arguments:**

    - ``rho_inf``: spectral radius at infinity in ``[0, 1)``; 0.9 as in Holzinger, Arnold & Gerstmayr (2024).
    - ``newton``: ``"full"`` (a fresh iteration matrix every iteration), ``"modified"``
      (the factorised matrix is kept across iterations, and across steps when
      ``reuse_across_steps``, and rebuilt when the residual contracts by less than
      ``contractivity`` per iteration, after ``max_reuse`` iterations on one matrix, or when the
      step size changes; a diverging iteration restarts the step from the predictor with a
      fresh matrix). With ``reuse_across_steps=False`` the matrix is built once per step, at
      the predictor. Under ``jax.vmap`` a batch decides its rebuilds together
      (``difflie.numerics.newton.Newton``). Exudyn's generalized-alpha uses the same modified
      Newton by default (contractivity 0.5, eight iterations per matrix). ``"auto"`` (the
      default): full Newton for one body, modified for more. One body's matrix costs about
      what an iteration costs, and a fast-spinning body makes a kept matrix stale within a
      step (the heavy top: 8.2 against 17.4 us per step); for mechanisms a matrix costs about
      twenty iterations, and modified Newton is 1.6x (a double pendulum) to 11x (a humanoid)
      faster (``benchmarks/RESULTS.md``).
    - ``rebuild_cost``: modified Newton also rebuilds a kept matrix at the start of a step when
      the last step took more iterations than the matrix's average cost per step so far, its
      build counted as ``rebuild_cost`` iterations (``difflie.numerics.newton.MatrixCost``,
      shared with ``BackwardEuler``): the replacement rule that minimises the
      cost per step when a matrix costs more iterations the older it gets (renewal theory: renew
      when the marginal cost exceeds the average). A build costs about 20 iterations (21 on a
      Panda arm, 23 on a 256-body chain); ``None``: only the contraction rules above. On the
      Panda over 0.2 s this takes 4.4 iterations per step on 3 matrices to 2.7 on 12, 22-26 %
      faster; chains, trees and loops of 1-256 bodies run as before (``benchmarks/RESULTS.md``).
    - ``rtol``, ``atol``, ``ctol``: converged when ``|M vdot - g + B^T lambda| <= atol + rtol
      (|M vdot| + |g|)`` and ``max |Phi| <= ctol`` (at least one iteration). ``None``:
      ``1e-8``/``1e-10``/``1e-12`` in float64, ``1e-4``/``1e-5``/``1e-5`` in float32.
    - ``max_iterations``: Newton iteration limit per step; beyond it the step reports
      ``RESULTS.newton_failed``.
    - ``scaling``: Bottasso scaling of the iteration matrix (on by default).
    - ``extrapolation``: Newton starts from ``vdot1`` and ``lambda1`` extrapolated by a
      polynomial of this degree through the last steps' (``difflie.solvers.predictor``);
      ``0`` starts from ``vdot1 = vdot0``, ``lambda1 = lambda0`` (Arnold & Brüls 2007).
    - ``block_size``: the iteration matrix is built from compressed derivatives in blocks along
      the mechanism's topology (a body and its joint's rows; the bodies around a loop) and
      eliminated from the leaves of that tree (``difflie.numerics.sparsity``); a body that is
      its parent's only child joins its parent's block up to this many unknowns. ``None``: one
      dense matrix, as for a step of at most ``sparsity.DENSE_STEP_LIMIT`` (48) unknowns on a
      kept matrix (modified Newton), where it is faster. The default keeps a body to a block:
      larger blocks were slower on chains, trees and loops (``benchmarks/RESULTS.md``, Scaling).
    """

    rho_inf: float = 0.9
    newton: Literal["auto", "full", "modified"] = eqx.field(static=True, default="auto")
    rtol: float | None = eqx.field(static=True, default=None)
    atol: float | None = eqx.field(static=True, default=None)
    ctol: float | None = eqx.field(static=True, default=None)
    max_iterations: int = eqx.field(static=True, default=25)
    contractivity: float = eqx.field(static=True, default=0.5)
    max_reuse: int = eqx.field(static=True, default=8)
    reuse_across_steps: bool = eqx.field(static=True, default=True)
    scaling: bool = eqx.field(static=True, default=True)
    extrapolation: int = eqx.field(static=True, default=3)
    block_size: int | None = eqx.field(static=True, default=16)
    rebuild_cost: float | None = eqx.field(static=True, default=20.0)

    order: ClassVar[int] = 2

    def __check_init__(self):
        if isinstance(self.rho_inf, (int, float)) and not 0.0 <= self.rho_inf < 1.0:
            raise ValueError(f"GeneralizedAlpha: rho_inf must lie in [0, 1) for index 3, got {self.rho_inf}")
        if self.newton not in ("auto", "full", "modified"):
            raise ValueError(f"GeneralizedAlpha: newton must be 'auto', 'full' or 'modified', got {self.newton!r}")
        if self.max_iterations < 1 or self.max_reuse < 1:
            raise ValueError("GeneralizedAlpha: max_iterations and max_reuse must be >= 1")
        if self.rebuild_cost is not None and not self.rebuild_cost >= 0:
            raise ValueError(f"GeneralizedAlpha: rebuild_cost must be None or >= 0, got {self.rebuild_cost!r}")
        if not isinstance(self.extrapolation, int) or self.extrapolation < 0:
            raise ValueError(f"GeneralizedAlpha: extrapolation must be an integer >= 0, got {self.extrapolation!r}")

    def structure(self, model) -> sparsity.Sparsity:
        """The iteration matrix's blocks: unknowns ``[dq (6 per body), s lambda]``."""
        nb = model.num_bodies
        rows = model.row_bodies
        block_size = sparsity.step_block_size(6 * nb + rows.shape[0], self.block_size, self._modified(6 * nb))
        return sparsity.block_structure(
            nb, model.coupling(), np.repeat(np.arange(nb), 6), rows, (6 * nb, rows.shape[0]), block_size
        )

    def _modified(self, n_dyn: int) -> bool:
        """Whether the step keeps its iteration matrix (``newton``; ``"auto"``: above one body)."""
        return self.newton == "modified" or (self.newton == "auto" and n_dyn > 6)

    def _tolerances(self, dtype):
        f64 = jnp.finfo(dtype).bits == 64
        rtol = self.rtol if self.rtol is not None else (1e-8 if f64 else 1e-4)
        atol = self.atol if self.atol is not None else (1e-10 if f64 else 1e-5)
        ctol = self.ctol if self.ctol is not None else (1e-12 if f64 else 1e-5)
        return rtol, atol, ctol

    # ---------------------------------------------------------------------------------------
    def init(self, model, t0, dt0):
        """The consistent initial state (``difflie.dae.consistent_state``, rA), ``a0 = vdot0``."""
        del dt0
        form = get_formulation("rA")
        x, R, u, w, acc, lam = dae.consistent_state(model, form, t0, self.block_size)
        nb = x.shape[0]
        vdot = jnp.concatenate([acc[: 3 * nb].reshape(nb, 3), acc[3 * nb :].reshape(nb, 3)], axis=-1)
        y0 = GeneralizedAlphaState(x, form.rotation(R), u, w, vdot, vdot, lam)
        st = self.structure(model)
        cache = IterationMatrix.start(st.zero_factors(x.dtype), x.dtype)
        history = History.start(self.extrapolation, jnp.asarray(t0, x.dtype), _predicted(y0)) if self.extrapolation else None
        return y0, GeneralizedAlphaSolverState(cache, history)

    def observe(self, model, y: GeneralizedAlphaState) -> BodyState:
        del model
        return BodyState(y.position, y.rotation, y.velocity, y.angular_velocity)

    # ---------------------------------------------------------------------------------------
    def _residual_fn(self, model, t1, h, y0, guess=None):
        """``(dq, s lambda) -> (F, dyn_scale)`` (two flat arrays: the iteration matrix then
        takes the multipliers' columns through ``B^T lambda`` only), ``unpack`` of the flat
        unknown ``x = [dq, s lambda]``, and the predictor from ``guess = [vdot1, lambda1]``
        (flat; default ``[vdot0, lambda0]``)."""
        beta = alpha_coefficients(self.rho_inf)[3]
        nb = y0.position.shape[0]
        s = beta * h**2 if self.scaling else jnp.ones_like(h)
        v0 = jnp.concatenate([y0.velocity, y0.angular_velocity], axis=-1)
        a0, vdot0 = y0.algorithmic_acceleration, y0.acceleration

        def unpack(xflat):
            return unpack_parts(_split(xflat, 6 * nb))

        def unpack_parts(parts):
            dq = parts[0].reshape(nb, 6)
            lam = parts[1] / s
            a1, v1, vdot1 = alpha_rates(self.rho_inf, h, v0, a0, vdot0, dq)
            x1, R1 = _compose(y0.position, y0.rotation, dq)
            return x1, R1, v1, vdot1, a1, lam

        def fn(parts):
            x1, R1, v1, vdot1, _, lam = unpack_parts(parts)
            dyn, phi, scale = _dynamics(model, t1, x1, R1, v1, vdot1, lam)
            return jnp.concatenate([s * dyn.reshape(-1), phi]), scale

        # Predictor: the increment of the guessed vdot1.
        vdot1, lam1 = (vdot0, y0.multipliers) if guess is None else (guess[: 6 * nb].reshape(nb, 6), guess[6 * nb :])
        dq_pred = alpha_increment(self.rho_inf, h, v0, a0, vdot0, vdot1)
        x_pred = jnp.concatenate([dq_pred.reshape(-1), s * lam1])
        # Traced once and reused by Newton, its iteration matrix and the implicit derivatives.
        return jax.jit(fn, inline=True), unpack, x_pred, s

    def _newton(self, fn, x0, s, n_dyn: int, cache: IterationMatrix, h, st: sparsity.Sparsity):
        """Full or modified Newton (``difflie.numerics.newton.newton_iterate``) on ``fn``
        (of the parts of ``x``); ``(x, iterations, converged, max |F(x)|, cache)``.

        The first ``n_dyn`` entries of ``F`` are the scaled dynamic rows, the rest the
        constraint residual; a diverging modified iteration (contraction rate above 2)
        restarts from the predictor.
        """
        rtol, atol, ctol = self._tolerances(x0.dtype)
        modified = self._modified(n_dyn)
        newton = Newton(
            max_iterations=self.max_iterations,
            modified=modified,
            test="residual",
            contractivity=self.contractivity,
            max_reuse=self.max_reuse,
            divergence=2.0,
        )

        def value_and_factors(x):
            return st.value_and_factors(lambda parts: fn(parts)[0], _split(x, n_dyn))

        def solve(factors, b):  # in a batch's form under vmap
            return st.solve(factors, b, indexed=None)

        def converged(x1, delta, F, scale):
            ok_dyn = jnp.linalg.norm(F[:n_dyn] / s) <= atol + rtol * scale
            return ok_dyn & jnp.all(jnp.abs(F[n_dyn:]) <= ctol)

        kept = cache.for_step(h, self.rebuild_cost) if modified and self.reuse_across_steps else None
        out = newton_iterate(
            lambda x: fn(_split(x, n_dyn)), x0, (value_and_factors, solve), newton,
            has_aux=True, converged=converged, kept=kept,
        )  # fmt: skip
        new_cache = cache.after(out, h, self.rebuild_cost)
        return out.value, out.iterations, out.converged, jnp.max(jnp.abs(out.residual[0])), new_cache

    def step(self, model, t0, t1, y0: GeneralizedAlphaState, solver_state: GeneralizedAlphaSolverState):
        dtype = y0.position.dtype
        t1 = jnp.asarray(t1, dtype)
        h = t1 - jnp.asarray(t0, dtype)
        n_dyn = 6 * y0.position.shape[0]
        fn, unpack, _, _ = self._residual_fn(model, t1, h, y0)

        # Newton on a gradient-free copy, then the implicit-function theorem for derivatives.
        h_ng = jax.lax.stop_gradient(h)
        history = solver_state.history
        guess = None if history is None else history.guess(jax.lax.stop_gradient(t1))
        fn_ng, _, x_pred, s = self._residual_fn(no_grad(model), jax.lax.stop_gradient(t1), h_ng, no_grad(y0), guess)
        st = self.structure(model)
        x_star, iterations, ok, residual, cache = self._newton(fn_ng, x_pred, s, n_dyn, solver_state.matrix, h_ng, st)
        x_star = implicit_derivatives(lambda z, _: fn(_split(z, n_dyn))[0], x_star, None, st)

        x1, R1, v1, vdot1, a1, lam = unpack(x_star)
        y1 = GeneralizedAlphaState(x1, R1, v1[:, :3], v1[:, 3:], vdot1, a1, lam)
        if history is not None:
            history = history.push(jax.lax.stop_gradient(t1), jax.lax.stop_gradient(_predicted(y1)))
        result = RESULTS.where(ok, RESULTS.successful, RESULTS.newton_failed)
        # Residual evaluations (the predictor's and one per iteration); Jacobians not counted.
        stats = StepStats(evaluations=iterations + 1, newton_iterations=iterations, residual=residual)
        return y1, None, GeneralizedAlphaSolverState(jax.lax.stop_gradient(cache), history), stats, result


def _split(x: Float[Array, " k"], n_dyn: int) -> tuple[Float[Array, " n"], Float[Array, " m"]]:
    """The flat unknown ``[dq, s lambda]`` as its two parts."""
    return x[:n_dyn], x[n_dyn:]


def _predicted(y: GeneralizedAlphaState) -> Float[Array, " k"]:
    """The extrapolated quantities of a state: ``[vdot (flat), lambda]``."""
    return jnp.concatenate([y.acceleration.reshape(-1), y.multipliers])
