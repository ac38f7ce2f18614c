"""Invariants and residuals of a solution: energy, momenta, constraint residual.

All functions take the saved :class:`~difflie.solvers.base.BodyState` (leading time axis, then
bodies) of a :class:`~difflie.simulate.Solution` and the model it came from.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .solvers.base import BodyState


def _mv(M: Array, v: Array) -> Array:
    return jnp.einsum("...ij,...j->...i", M, v)


def kinetic_energy(model, states: BodyState) -> Float[Array, " n"]:
    """``sum_i m_i |v_i|^2 / 2 + omega_i . J_i omega_i / 2`` (COM velocity, COM inertia)."""
    m, J = model.bodies.mass, model.bodies.inertia
    v, w = states.velocity, states.angular_velocity
    return 0.5 * jnp.sum(m * jnp.sum(v * v, -1) + jnp.sum(w * _mv(J, w), -1), -1)


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
    spin = _mv(states.rotation, _mv(model.bodies.inertia, states.angular_velocity))
    orbit = jnp.cross(r, model.bodies.mass[:, None] * states.velocity)
    return jnp.sum(spin + orbit, -2)


def constraint_residual(model, ts: Float[Array, " n"], states: BodyState) -> Float[Array, " n"]:
    """Largest absolute position-level constraint residual at each saved time (0 if none)."""
    if getattr(model, "constraints", None) is None:
        return jnp.zeros_like(ts)
    res = jax.vmap(model.constraints.residual)(ts, states.position, states.rotation)
    return jnp.max(jnp.abs(res), axis=-1) if res.shape[-1] else jnp.zeros_like(ts)
