"""Kinematic analysis (Kissel, Taves & Negrut, §2): assembly, velocity projection, and the position /
velocity / acceleration analysis of zero-degree-of-freedom (fully driven) models.

At each time ``t_n`` of the grid, in formulation rA, rp or re:

1. position: Newton on ``Psi(t_n, chart(q_{n-1}, x)) = 0`` from the previous configuration
   (chord / modified Newton: iteration matrix ``G`` factored once per step, as the paper's public
   codes do), stopping when ``||delta||_2 < tol``; for rA the chart is ``A exp(hat(x))``;
2. velocity: ``G q_dot = nu``;
3. acceleration: ``G q_ddot = gamma``.

Jacobian, ``nu`` and ``gamma`` come from autodiff (``difflie.constraints.jacobians``).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .constraints import jacobians as jac
from .constraints.formulations import AbstractFormulation, get_formulation
from .numerics import linear, sparsity
from .numerics.newton import Newton, newton_iterate
from .results import RESULTS
from .xla import eager


class KinematicsSolution(eqx.Module):
    """Trajectory of a kinematic analysis; one row per grid time, bodies along axis 1."""

    ts: Float[Array, " n"]
    position: Float[Array, "n nb 3"]  # world COM
    rotation: Float[Array, "n nb 3 3"]  # body to world
    velocity: Float[Array, "n nb 3"]  # world COM velocity
    angular_velocity: Float[Array, "n nb 3"]  # body frame
    acceleration: Float[Array, "n nb 3"]
    angular_acceleration: Float[Array, "n nb 3"]  # body frame
    residual: Float[Array, "n m"]  # Psi after the position solve
    iterations: Int[Array, " n"]  # position Newton iterations (0 at t0 if consistent)
    result: RESULTS

    @property
    def mean_iterations(self) -> Float[Array, ""]:
        """Average position-Newton iterations per step, t0 excluded (Kissel, Taves & Negrut, Table 9)."""
        return jnp.mean(self.iterations[1:].astype(self.ts.dtype))


def _check_model(model) -> None:
    if model.num_constraints == 0:
        raise ValueError("kinematics: the model has no constraints")


@eager
def assemble(
    model,
    t,
    formulation: str | AbstractFormulation = "rA",
    r=None,
    rot=None,
    *,
    tol: float = 1e-12,
    max_iterations: int = 50,
    block_size: int | None = 16,
):
    """Project a configuration onto ``Psi(t, .) = 0`` by Gauss-Newton with minimum-norm steps.

    Returns ``(r, rot, iterations, residual_norm)``; defaults to the model's initial state.
    Works for any number of degrees of freedom (``G`` of full row rank). The steps are solved
    as ``difflie.constraints.jacobians.least_norm_system`` does, in the blocks of
    ``saddle_structure(model, form, block_size)`` (dense for a small model).

    The iterations run without derivatives. The derivative of the projection is that of one
    more minimum-norm step from their result (``dq = (I - G^+ G) dq_start - G^+ dPsi/dp``; exact
    when the start is consistent), attached as a custom JVP: reverse-mode gradients pass through
    an assembly (no ``while_loop`` to transpose), and a program that takes no derivative holds
    the iterations only.
    """
    _check_model(model)
    form = get_formulation(formulation) if isinstance(formulation, str) else formulation
    r = jnp.asarray(model.r0 if r is None else r)
    rot = form.from_rotation(jnp.asarray(model.R0, r.dtype)) if rot is None else rot
    t = jnp.asarray(t, r.dtype)
    dynamic, static = eqx.partition((model, t, r, rot), eqx.is_inexact_array)
    st = jac.saddle_structure(model, form, block_size)

    def gauss_newton(dynamic):
        """One more step, its matrix held fixed (it multiplies ``Psi ~ 0``)."""
        model, t, r, rot = eqx.combine(dynamic, static)
        value_and_factors, solve = jac.least_norm_system(model, form, t, st)
        value, factors = value_and_factors((r, rot))
        return jac.chart(form, r, rot, -solve(jax.lax.stop_gradient(factors), value))

    @jax.custom_jvp
    def project(dynamic):
        model, t, r, rot = eqx.combine(dynamic, static)
        system = jac.least_norm_system(model, form, t, st)
        # At least one iteration, also from a start within tol: it leaves the rows at rounding
        # level (a start kept as it was took the rp single pendulum's predicted backward-Euler
        # steps from 1.08 to 1.13 Newton iterations each).
        out = newton_iterate(
            lambda x: jac.psi(model, form, t, *x), (r, rot), system, Newton(tol=tol, max_iterations=max_iterations),
            retract=lambda x, delta: jac.chart(form, *x, -delta),
        )  # fmt: skip
        return out.value, out.num_steps

    @project.defjvp
    def project_jvp(primals, tangents):
        ((model_d, t_d, _, _),), (dots,) = primals, tangents
        (r_hat, rot_hat), k = project(*primals)
        _, dq = jax.jvp(gauss_newton, ((model_d, t_d, r_hat, rot_hat),), (dots,))
        return ((r_hat, rot_hat), k), (dq, np.zeros(k.shape, jax.dtypes.float0))

    (r, rot), k = project(dynamic)
    return r, rot, k, jnp.max(jnp.abs(jac.psi(model, form, t, r, rot)))


@eager
def project_velocity(model, t, formulation, r, rot, rdot, rate, st: sparsity.Sparsity | None = None, G=None):
    """Closest ``(r_dot, rate)`` (Euclidean) with ``G q_dot = nu``; ``st``: the structure to
    solve in (default ``difflie.constraints.jacobians.saddle_structure``); ``G``: the dense
    Jacobian at ``(t, r, rot)`` where the caller has it already."""
    form = get_formulation(formulation) if isinstance(formulation, str) else formulation
    st = jac.saddle_structure(model, form) if st is None else st
    qdot, nu = jac.join(rdot, rate), jac.nu(model, form, t, r, rot)
    if st.is_dense:  # dense: the least-norm correction factors G G^T, smaller than the saddle matrix
        G = jac.jacobian(model, form, t, r, rot) if G is None else G
        qdot = qdot - jac.least_norm(G, G @ qdot - nu)
    else:
        qdot, _ = jac.solve_saddle(model, form, t, r, rot, lambda x: x - qdot, nu, st)
    return jac.split(form, qdot, r.shape[0])


@eager
def kinematics(
    model,
    ts: Float[Array, " n"],
    formulation: str = "rA",
    *,
    tol: float = 1e-10,
    max_iterations: int = 50,
    modified: bool = True,
    predictor: bool = False,
) -> KinematicsSolution:
    """Position, velocity and acceleration analysis of a zero-DOF model on the grid ``ts``.

    ``modified`` freezes the iteration matrix per step (the paper's public codes); ``predictor`` starts
    Newton from the exp-map predictor ``A_{n-1} exp(h omega_{n-1})`` (eq. 11) instead of the
    previous configuration. The initial configuration is assembled at ``ts[0]`` first.
    """
    _check_model(model)
    form = get_formulation(formulation)
    ts = jnp.asarray(ts)
    dtype = jnp.result_type(ts, model.r0)
    ts = ts.astype(dtype)
    nb = model.num_bodies
    n = jac.num_coordinates(form, nb)
    m = model.num_constraints + (nb if form.normalization else 0)
    if m != n:
        raise ValueError(
            f"kinematics: the model has {model.num_constraints} constraints for {nb} bodies; kinematic "
            f"analysis needs zero degrees of freedom ({n - (nb if form.normalization else 0)} constraints)"
        )

    def position(t, r, rot):
        # Newton with the configuration updated after every iteration (for rA:
        # A <- A exp(hat(-delta))), the iteration matrix frozen at the step's start (modified)
        # or re-evaluated at every iterate (full).
        def psi(x):
            return jac.psi(model, form, t, *x)

        def value_and_factors(x):
            return psi(x), linear.factor(jac.jacobian(model, form, t, *x))

        out = newton_iterate(
            psi, (r, rot), (value_and_factors, linear.solve_factored),
            Newton(tol=tol, max_iterations=max_iterations, modified=modified),
            retract=lambda x, delta: jac.chart(form, *x, -delta),
        )  # fmt: skip
        return out.value[0], out.value[1], out.num_steps, out.result

    def velocity_acceleration(t, r, rot):
        G = jac.jacobian(model, form, t, r, rot)
        lu = linear.factor(G)
        qdot = linear.solve_factored(lu, jac.nu(model, form, t, r, rot))
        qddot = linear.solve_factored(lu, jac.gamma(model, form, t, r, rot, qdot))
        rdot, rate = jac.split(form, qdot, nb)
        rddot, rate_dot = jac.split(form, qddot, nb)
        omega, omega_dot = form.omega(rot, rate), form.omega_dot(rot, rate, rate_dot)
        return rdot, rddot, omega, omega_dot, rate

    def outputs(t, r, rot, k, result):
        rdot, rddot, omega, omega_dot, rate = velocity_acceleration(t, r, rot)
        out = (r, form.rotation(rot), rdot, omega, rddot, omega_dot, jac.psi(model, form, t, r, rot), k, result)
        return out, rate

    r0 = jnp.asarray(model.r0, dtype)
    rot0 = form.from_rotation(jnp.asarray(model.R0, dtype))
    r0, rot0, k0, res0 = position(ts[0], r0, rot0)
    out0, rate0 = outputs(ts[0], r0, rot0, k0, res0)

    def step(carry, t1):
        r, rot, rdot, rate, t0 = carry
        if predictor:
            r, rot = jac.chart(form, r, rot, (t1 - t0) * jac.join(rdot, rate))
        r1, rot1, k, result = position(t1, r, rot)
        out, rate1 = outputs(t1, r1, rot1, k, result)
        return (r1, rot1, out[2], rate1, t1), out

    _, outs = jax.lax.scan(step, (r0, rot0, out0[2], rate0, ts[0]), ts[1:])
    outs = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), out0, outs)
    pos, rotm, vel, om, acc, omd, resid, iters, results = outs
    worst = RESULTS.where(jnp.all(results == RESULTS.successful), RESULTS.successful, RESULTS.newton_failed)
    return KinematicsSolution(ts, pos, rotm, vel, om, acc, omd, resid, iters, worst)
