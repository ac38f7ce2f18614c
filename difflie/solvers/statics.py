"""Static equilibrium: the configuration at rest where the applied forces and the constraint
forces balance (Exudyn's ``SolveStatic``), on the unknowns of a generalized-alpha step; and the
small oscillations about it (``modes``).

With every velocity and acceleration zero, the Newton-Euler rows of ``difflie.Model`` and the
constraint rows give, in the increment ``dq = (dx, dpsi)`` of each body from a start
``(x0, R0)`` (``x = x0 + dx``, ``R = R0 exp(dpsi)``) and the multipliers ``lambda``:

    F(dq, lambda) = [ -g(x, R, 0, t) + B(x, R)^T lambda ;  Phi(t, x, R) ] = 0.

Newton solves it in the blocks of the mechanism's topology (``difflie.numerics.sparsity``).
Plain Newton finds the equilibrium nearest its start, stable or not (a chain released from the
horizontal folds into a zigzag), and a direction in which no force acts (a rod spinning about
its own axis on a spherical joint) makes ``dF/dq`` singular. So the iteration matrix adds
``c M`` (``M`` the mass matrix) to its dynamic rows, as Exudyn's ``stabilizerODE2term`` does:
a step of pseudo-transient continuation (Kelley & Keyes 1998, SIAM J. Numer. Anal. 35(2)) along
``M dq/dtau = -F``, which descends the potential onto a stable equilibrium, with
``c = stabilizer |F| / |F_0|`` shrinking as the residual does (switched evolution relaxation,
Mulder & van Leer 1985), so the last iterations are Newton's. The residual, and so the
equilibrium, is the one above. The start is the model's initial configuration, assembled.
Derivatives with respect to the model's parameters come from the implicit-function theorem.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .. import dae
from ..constraints.formulations import get_formulation
from ..numerics.newton import Newton, implicit_derivatives, newton_iterate, no_grad
from ..results import RESULTS, BodyState, carrying_error
from ..xla import concrete
from .generalized_alpha import GeneralizedAlpha, _compose, _constraint, _dynamics, _mass_times, _split


class Equilibrium(eqx.Module):
    """What ``equilibrium`` returns: ``state`` (at rest), the constraint ``multipliers``, the
    Newton ``iterations``, ``result`` (``RESULTS.successful`` or ``RESULTS.newton_failed``) and
    ``residual``, the largest entry of ``F`` at the end."""

    state: BodyState
    multipliers: Float[Array, " m"]
    iterations: Int[Array, ""]
    result: RESULTS
    residual: Float[Array, ""]


def equilibrium(
    model,
    t: float | Array = 0.0,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    ctol: float | None = None,
    max_iterations: int = 50,
    stabilizer: float = 100.0,
    block_size: int | None = 16,
    throw: bool = True,
) -> Equilibrium:
    """The static equilibrium of ``model`` at time ``t`` nearest its initial configuration
    (see the module docstring). Converged when ``|-g + B^T lambda| <= atol + rtol |g|`` and
    ``max |Phi| <= ctol`` (defaults as ``GeneralizedAlpha``'s); ``stabilizer`` (1/s^2) times
    the mass matrix joins the iteration matrix at the start (larger: smaller first steps, more
    iterations; 0: plain Newton, the nearest equilibrium). Released from the horizontal, chains,
    trees and ladders of 1 m rods settle hanging down in 30-47 iterations at the default;
    at 1 they fold into unstable equilibria, at 1e4 they had not arrived after 200. With ``throw`` a Newton failure raises
    (eagerly a ``ValueError`` with the residual; under ``jit`` the arrays carry the error).
    Traceable and differentiable (``jax.grad`` of a function of the result with respect to
    the model's parameters: stiffnesses, masses, loads)."""
    if not (isinstance(max_iterations, int) and max_iterations >= 1):
        raise ValueError(f"equilibrium: max_iterations must be an int >= 1, got {max_iterations!r}")
    t_given = concrete(t)
    if t_given is not None and not (t_given.shape == () and np.isfinite(t_given)):
        raise ValueError(f"equilibrium: t must be a finite time, got {t_given.tolist()}")
    if hasattr(model, "check_finite"):
        model.check_finite()
        model.check_physical()
    # Full Newton (a fresh matrix every iteration), so the step's structure is that of full Newton.
    alpha = GeneralizedAlpha(newton="full", rtol=rtol, atol=atol, ctol=ctol, block_size=block_size)
    form = get_formulation("rA")
    at_rest = eqx.tree_at(lambda m: (m.v0, m.omega0), model, (jnp.zeros_like(model.v0), jnp.zeros_like(model.omega0)))
    dtype = jnp.result_type(model.r0)
    t = jnp.asarray(t, dtype)
    x0, R0, _, _, _, lam0 = dae.consistent_state(no_grad(at_rest), form, jax.lax.stop_gradient(t), block_size)
    x0, R0 = jax.lax.stop_gradient(x0), form.rotation(jax.lax.stop_gradient(R0))
    nb = x0.shape[0]
    n_dyn = 6 * nb
    zero = jnp.zeros((nb, 6), dtype)
    t_ng = jax.lax.stop_gradient(t)

    def residual(m, tt, parts):
        dq, lam = parts[0].reshape(nb, 6), parts[1]
        x, R = _compose(x0, R0, dq)
        dyn, phi, scale = _dynamics(m, tt, x, R, zero, zero, lam)
        return jnp.concatenate([dyn.reshape(-1), phi]), scale

    st = alpha.structure(model)
    ng = no_grad(model)
    rtol_, atol_, ctol_ = alpha._tolerances(dtype)

    z0 = jnp.concatenate([jnp.zeros(n_dyn, dtype), jax.lax.stop_gradient(lam0)])
    norm0 = jnp.maximum(jnp.linalg.norm(residual(ng, t_ng, _split(z0, n_dyn))[0]), jnp.finfo(dtype).tiny)

    def value_and_factors(z):
        at = z[:n_dyn].reshape(nb, 6)

        def stabilised(parts):
            """The residual plus ``c M (dq - dq_at)``: the same value at ``at``, and ``c M`` in
            its derivative, with ``c`` from the residual there (switched evolution relaxation:
            the pseudo-time step grows as the residual falls)."""
            F, _ = residual(ng, t_ng, parts)
            c = stabilizer * jnp.minimum(1.0, jax.lax.stop_gradient(jnp.linalg.norm(F)) / norm0)
            extra = c * _mass_times(ng, parts[0].reshape(nb, 6) - at)
            return F + jnp.concatenate([extra.reshape(-1), jnp.zeros_like(parts[1])])

        return st.value_and_factors(stabilised, _split(z, n_dyn))

    def solve(factors, b):
        return st.solve(factors, b, indexed=None)

    def converged(z, delta, F, scale):
        return (jnp.linalg.norm(F[:n_dyn]) <= atol_ + rtol_ * scale) & jnp.all(jnp.abs(F[n_dyn:]) <= ctol_)

    out = newton_iterate(
        lambda z: residual(ng, t_ng, _split(z, n_dyn)), z0, (value_and_factors, solve),
        Newton(max_iterations=max_iterations, test="residual"), has_aux=True, converged=converged,
    )  # fmt: skip
    z = implicit_derivatives(lambda z, _: residual(model, t, _split(z, n_dyn))[0], out.value, None, st)
    x, R = _compose(x0, R0, z[:n_dyn].reshape(nb, 6))
    state = BodyState(x, R, jnp.zeros_like(x), jnp.zeros_like(x))
    result = RESULTS.where(out.converged, RESULTS.successful, RESULTS.newton_failed)
    res = jnp.max(jnp.abs(out.residual[0]))
    found = Equilibrium(state, z[n_dyn:], out.iterations, result, res)
    if throw:
        failed = ~out.converged
        try:
            known = bool(failed)
        except jax.errors.ConcretizationTypeError:  # traced: the state carries the error, derivatives included
            return eqx.tree_at(lambda e: e.state, found, carrying_error(result, failed, state))
        if known:
            raise ValueError(
                f"equilibrium: Newton did not converge in {int(out.iterations)} iterations (largest residual "
                f"{float(res):.3e}): no equilibrium near the start, a mechanism free to move without a force "
                "(raise stabilizer), or dependent constraint rows"
            )
    return found


class Modes(eqx.Module):
    """What ``modes`` returns: ``omega_squared`` ``(n,)`` (1/s^2, ascending; negative where
    the equilibrium is unstable, zero for a free motion) and ``shapes`` ``(n, nb, 6)``, the
    mode shapes as increments ``(dx, dpsi)`` per body (world COM displacement, body-axes
    rotation), mass-normalised (``phi^T M phi = 1``)."""

    omega_squared: Float[Array, " n"]
    shapes: Float[Array, "n nb 6"]

    @property
    def frequencies(self) -> Float[Array, " n"]:
        """Natural frequencies ``sqrt(omega^2) / 2 pi`` in Hz (NaN for unstable modes)."""
        return jnp.sqrt(jnp.where(self.omega_squared >= 0, self.omega_squared, jnp.nan)) / (2 * jnp.pi)


def modes(model, at: Equilibrium, t: float | Array = 0.0, *, rank_tol: float = 1e-9) -> Modes:
    """Small undamped oscillations about the equilibrium ``at`` (Exudyn's
    ``ComputeODE2Eigenvalues``): with ``K = d(-g + B^T lambda)/dq`` at rest (the tangent and the
    geometric stiffness, applied forces that depend on the configuration included, those of the
    velocities left out) and ``M`` the rows' derivative in the accelerations (``diag(m I, J)``
    per body, and the joints' rotor inertias), the eigenproblem

        N^T K N phi = omega^2 N^T M N phi,   N an orthonormal basis of the null space of B,

    on the motions the constraints allow (rows of ``B`` below ``rank_tol`` times its largest
    singular value count as dependent; under ``jit``, where the rank must be known beforehand,
    the rows count as independent). ``K`` is symmetrised: at an equilibrium of conservative
    forces it is symmetric. Dense (one eigendecomposition of size ``6 nb - rank B``);
    differentiable where the eigenvalues are distinct."""
    x, R, lam = at.state.position, at.state.rotation, at.multipliers
    nb = x.shape[0]
    dtype = x.dtype
    t = jnp.asarray(t, dtype)
    zero = jnp.zeros((nb, 6), dtype)

    def dyn(dq):
        x1, R1 = _compose(x, R, dq.reshape(nb, 6))
        return _dynamics(model, t, x1, R1, zero, zero, lam)[0].reshape(-1)

    def phi(dq):
        x1, R1 = _compose(x, R, dq.reshape(nb, 6))
        return _constraint(model, t, x1, R1)

    dq0 = jnp.zeros(6 * nb, dtype)
    K = jax.jacfwd(dyn)(dq0)
    K = 0.5 * (K + K.T)
    # The rows' derivative in the accelerations: M = diag(m I, J) and the joints' rotor inertias.
    M = jax.jacfwd(lambda a: _dynamics(model, t, x, R, zero, a.reshape(nb, 6), lam)[0].reshape(-1))(dq0)
    if model.num_constraints:
        # A basis of the null space that follows B: the SVD's (a constant) projected onto
        # the null space of the independent combinations of B's rows, differentiably.
        B = jax.jacfwd(phi)(dq0)
        U, sv, Vt = jnp.linalg.svd(jax.lax.stop_gradient(B), full_matrices=True)
        try:
            rank = int(np.sum(np.asarray(sv) > rank_tol * float(np.max(np.asarray(sv)))))
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):  # under jit: rows independent
            rank = min(B.shape)
        Br = U[:, :rank].T @ B
        N0 = Vt[rank:].T
        N = N0 - Br.T @ jnp.linalg.solve(Br @ Br.T, Br @ N0)
    else:
        N = jnp.eye(6 * nb, dtype=dtype)
    Kr, Mr = N.T @ K @ N, N.T @ M @ N
    L = jnp.linalg.cholesky(Mr)
    Linv = jax.scipy.linalg.solve_triangular(L, jnp.eye(L.shape[0], dtype=dtype), lower=True)
    w2, Y = jnp.linalg.eigh(Linv @ Kr @ Linv.T)
    shapes = N @ (Linv.T @ Y)  # M-orthonormal
    return Modes(w2, shapes.T.reshape(-1, nb, 6))


__all__ = ["Equilibrium", "Modes", "equilibrium", "modes"]
