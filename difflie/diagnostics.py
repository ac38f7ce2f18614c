"""Invariants and residuals of a solution: energy, momenta, constraint residual.

All functions take the saved :class:`~difflie.results.BodyState` (leading time axis, then
bodies) of a :class:`~difflie.simulate.Solution` and the model it came from.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .lie.ops import mv
from .results import BodyState


def kinetic_energy(model, states: BodyState) -> Float[Array, " n"]:
    """``sum_i m_i |v_i|^2 / 2 + omega_i . J_i omega_i / 2`` (COM velocity, COM inertia)."""
    m, J = model.bodies.mass, model.bodies.inertia
    v, w = states.velocity, states.angular_velocity
    return 0.5 * jnp.sum(m * jnp.sum(v * v, -1) + jnp.sum(w * mv(J, w), -1), -1)


def potential_energy(model, states: BodyState) -> Float[Array, " n"]:
    """Gravitational potential ``-sum_i m_i g . r_i`` (force elements are not included)."""
    return -jnp.sum(model.bodies.mass * (states.position @ model.gravity), -1)


def energy(model, states: BodyState) -> Float[Array, " n"]:
    """Kinetic plus gravitational potential energy."""
    return kinetic_energy(model, states) + potential_energy(model, states)


def linear_momentum(model, states: BodyState) -> Float[Array, "n 3"]:
    return jnp.sum(model.bodies.mass[:, None] * states.velocity, -2)


def angular_momentum(model, states: BodyState, about: Array | None = None) -> Float[Array, "n 3"]:
    """World angular momentum about the point ``about`` (default: the origin)."""
    r = states.position if about is None else states.position - about
    spin = mv(states.rotation, mv(model.bodies.inertia, states.angular_velocity))
    orbit = jnp.cross(r, model.bodies.mass[:, None] * states.velocity)
    return jnp.sum(spin + orbit, -2)


def constraint_residual(model, ts: Float[Array, " n"], states: BodyState) -> Float[Array, " n"]:
    """Largest absolute position-level constraint residual at each saved time, pinned points
    included (:meth:`difflie.Model.constraint_residual`; 0 if none)."""
    if model.num_constraints == 0:
        return jnp.zeros_like(ts)
    origins = states.position - mv(states.rotation, model.bodies.com)
    res = jax.vmap(model.constraint_residual)(ts, origins, states.rotation)
    return jnp.max(jnp.abs(res), axis=-1)
