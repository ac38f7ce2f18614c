"""Invariants and residuals of a solution: energy, momenta, constraint residual, the work of
drivers and force elements, the constraint rows' multipliers and the joints' reaction forces.

All functions take the saved ``BodyState`` (leading time axis, then
bodies) of a ``Solution`` and the model it came from.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .constraints import jacobians as jac
from .constraints.formulations import get_formulation
from .constraints.joints import joint_name
from .dae import dynamics_residual
from .lie.ops import mv
from .results import BodyState
from .xla import eager


@eager
def kinetic_energy(model, states: BodyState) -> Float[Array, " n"]:
    """``sum_i m_i |v_i|^2 / 2 + omega_i . J_i omega_i / 2`` (COM velocity, COM inertia), plus
    that of the joints' rotor inertias (``difflie.forces.JointInertia``)."""
    m, J = model.bodies.mass, model.bodies.inertia
    v, w = states.velocity, states.angular_velocity
    bodies = 0.5 * jnp.sum(m * jnp.sum(v * v, -1) + jnp.sum(w * mv(J, w), -1), -1)
    rotors = [jax.vmap(element.kinetic_energy)(states.position, states.rotation, v, w) for element in model.forces if element.accelerated]
    return bodies + sum(rotors)


@eager
def potential_energy(model, states: BodyState) -> Float[Array, " n"]:
    """Gravitational potential ``-sum_i m_i g . r_i`` (force elements are not included)."""
    return -jnp.sum(model.bodies.mass * (states.position @ model.gravity), -1)


@eager
def energy(model, states: BodyState) -> Float[Array, " n"]:
    """Kinetic plus gravitational potential energy."""
    return kinetic_energy(model, states) + potential_energy(model, states)


@eager
def linear_momentum(model, states: BodyState) -> Float[Array, "n 3"]:
    return jnp.sum(model.bodies.mass[:, None] * states.velocity, -2)


@eager
def angular_momentum(model, states: BodyState, about: Array | None = None) -> Float[Array, "n 3"]:
    """World angular momentum about the point ``about`` (default: the origin)."""
    r = states.position if about is None else states.position - about
    spin = mv(states.rotation, mv(model.bodies.inertia, states.angular_velocity))
    orbit = jnp.cross(r, model.bodies.mass[:, None] * states.velocity)
    return jnp.sum(spin + orbit, -2)


@eager
def constraint_residual(model, ts: Float[Array, " n"], states: BodyState) -> Float[Array, " n"]:
    """Largest absolute position-level constraint residual at each saved time, pinned points
    included (``difflie.Model.constraint_residual``; 0 if none)."""
    if model.num_constraints == 0:
        return jnp.zeros_like(ts)
    origins = states.position - mv(states.rotation, model.bodies.com)
    res = jax.vmap(model.constraint_residual)(ts, origins, states.rotation)
    return jnp.max(jnp.abs(res), axis=-1)


def _per_state(model, ts, states, fn):
    """``fn(t, r, rot, lambda)`` at every saved state (rA), with the multipliers ``lambda`` of
    the state: ``[[M, G^T], [G, 0]] [a; lambda] = [-E(q, q_dot, 0); gamma]``."""
    form = get_formulation("rA")
    st = jac.saddle_structure(model, form)

    def one(t, r, R, v, w):
        rot = form.from_rotation(R)
        rate = form.rate(rot, w)

        def E(a):
            return dynamics_residual(model, form, t, r, rot, v, rate, a)

        gamma = jac.gamma(model, form, t, r, rot, jac.join(v, rate))
        _, lam = jac.solve_saddle(model, form, t, r, rot, E, gamma, st)
        return fn(t, r, rot, lam)

    return jax.vmap(one)(ts, states.position, states.rotation, states.velocity, states.angular_velocity)


@eager
def multipliers(model, ts: Float[Array, " n"], states: BodyState) -> Float[Array, "n m"]:
    """The Lagrange multipliers ``lambda`` of the constraint rows (``Model.constraint_names``,
    in the rA formulation: ``M q_ddot + G^T lambda = Q``) at each saved state, from the
    equations of motion at that state (an index-3 solver's own multipliers differ from these
    by its discretisation error)."""
    if model.num_constraints == 0:
        return jnp.zeros(ts.shape + (0,), ts.dtype)
    return _per_state(model, ts, states, lambda t, r, rot, lam: lam)


@eager
def joint_reactions(model, ts: Float[Array, " n"], states: BodyState) -> dict[str, tuple[Float[Array, "n 2 3"], Float[Array, "n 2 3"]]]:
    """The force and torque each joint's constraint rows exert on its two bodies, by joint
    name (rows grouped by ``difflie.constraints.joint_name``; pinned points as ``"pin of
    <body>"``): ``{name: (force, torque)}``, each ``(n_saves, 2, 3)``, index 0 on the joint's
    first body and 1 on its second (zeros for the ground), world axes, the force at the body's
    COM and the torque about it. They are ``-G_k^T lambda_k`` (``multipliers``) for the rows
    ``k`` of the joint: with gravity and the applied forces they make ``m a`` of every body."""
    if model.num_constraints == 0:
        return {}
    names = [joint_name(n) for n in model.constraint_names]
    groups = list(dict.fromkeys(names))
    member = jnp.asarray(np.array([[n == g for n in names] for g in groups], dtype=float))
    bodies = model.row_bodies[[names.index(g) for g in groups]]  # (k, 2)
    form = get_formulation("rA")
    nb = model.num_bodies

    def wrenches(t, r, rot, lam):
        def one(mask):
            _, q = jac.psi_and_reaction(model, form, t, r, rot, mask.astype(lam.dtype) * lam)
            f, tau_body = -q[: 3 * nb].reshape(nb, 3), -q[3 * nb :].reshape(nb, 3)
            return f, mv(rot, tau_body)  # torques to world axes

        f, tau = jax.vmap(one)(member)  # (k, nb, 3)
        pick = jnp.asarray(np.maximum(bodies, 0))
        ground = jnp.asarray(bodies < 0)[..., None]
        take = lambda x: jnp.where(ground, 0.0, jnp.take_along_axis(x, pick[..., None], axis=1))  # noqa: E731
        return take(f), take(tau)

    f, tau = _per_state(model, ts, states, wrenches)  # (n, k, 2, 3)
    return {g: (f[:, k], tau[:, k]) for k, g in enumerate(groups)}


@eager
def driver_power(model, ts: Float[Array, " n"], states: BodyState) -> Float[Array, " n"]:
    """Power the constraint forces put into the bodies at each saved state: the drivers' power.

    With the DAE ``E(q, q_dot, a) + G^T lambda = 0`` (``difflie.dae``, rA), the energy obeys
    ``dE/dt = -lambda^T G q_dot = -lambda^T nu`` with ``nu = -dPhi/dt``: zero for joints that do
    not depend on time, the work rate of the drivers otherwise (``multipliers`` gives
    ``lambda``).
    """
    if model.num_constraints == 0:
        return jnp.zeros_like(ts)
    form = get_formulation("rA")
    return _per_state(model, ts, states, lambda t, r, rot, lam: -lam @ jac.nu(model, form, t, r, rot))


def _work(P: Float[Array, " n"], ts: Float[Array, " n"]) -> Float[Array, " n"]:
    """``int P dt`` from the first saved time, by the trapezoidal rule on the saved times."""
    steps = 0.5 * (P[1:] + P[:-1]) * jnp.diff(ts)
    return jnp.concatenate([jnp.zeros((1,), P.dtype), jnp.cumsum(steps)])


@eager
def driver_work(model, ts: Float[Array, " n"], states: BodyState) -> Float[Array, " n"]:
    """Work of the drivers since the first saved time, ``W(t) = int P dt`` (trapezoidal rule on
    the saved times, ``driver_power``), so that ``E - E0 - W`` is the integrator's energy
    error of a driven mechanism."""
    return _work(driver_power(model, ts, states), ts)


@eager
def force_power(model, ts: Float[Array, " n"], states: BodyState) -> Float[Array, " n"]:
    """Power of the model's force elements (``Model.forces``: springs, dampers, joint torques
    and joint damping; gravity, whose potential ``energy`` holds, left out) at each saved
    state: ``sum_i f_i . v_i + tau_i . omega_i`` (world force at the COM and COM velocity,
    body-axes torque and angular velocity)."""
    if not model.forces:
        return jnp.zeros_like(ts)

    def one(t, r, R, v, w):
        f, tau = model.applied_forces(t, r, R, v, w)
        f = f - model.bodies.mass[:, None] * model.gravity  # gravity's is in the potential energy
        return jnp.sum(f * v) + jnp.sum(tau * w)

    return jax.vmap(one)(ts, states.position, states.rotation, states.velocity, states.angular_velocity)


@eager
def force_work(model, ts: Float[Array, " n"], states: BodyState) -> Float[Array, " n"]:
    """Work of the force elements since the first saved time (``force_power``, trapezoidal
    rule on the saved times): with the drivers' (``driver_work``), ``E - E0 - W`` is the
    integrator's energy error of a mechanism with springs, dampers or joint torques."""
    return _work(force_power(model, ts, states), ts)


@eager
def work(model, ts: Float[Array, " n"], states: BodyState) -> Float[Array, " n"]:
    """``driver_work + force_work``: all the work done on the bodies but gravity's."""
    return _work(driver_power(model, ts, states) + force_power(model, ts, states), ts)
