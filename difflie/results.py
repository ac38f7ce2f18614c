"""What a simulation reports: result codes and the per-body state a user reads.

Low in the package on purpose: the model, kinematics, diagnostics and every solver use these
types, and none of them imports a solver to get them.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


class RESULTS(eqx.Enumeration):
    """Result codes carried out of a jitted simulation."""

    successful = "successful"
    newton_failed = "Newton iteration did not converge"
    nonfinite = "NaN or Inf in the state or the times"
    dt_underflow = "step size underflow (below dtmin, or too small to advance t)"
    max_steps_reached = "max_steps reached before t1"
    no_solution = "the implicit step has no solution at this step size"
    nonphysical = "a body's mass or inertia is not physical, or an initial rotation is not a rotation matrix"
    empty_interval = "t1 <= t0, or a first step dt <= 0"


def carrying_error(result, failed, tree):
    """``tree`` times a 1 that raises ``result``'s error where ``failed`` (``eqx.error_if``).
    The error must survive what only a derivative reads: ``jax.jit(jax.grad(loss))`` uses
    no primal output, and an ``error_if`` on the outputs themselves would be dead code there
    (its tangent passes through), the gradient then zero or NaN without a word. The factor's
    derivative rule scales every tangent and cotangent by it, so computing them runs the check."""
    dtype = next(a.dtype for a in jax.tree.leaves(tree) if eqx.is_inexact_array(a))
    one = result.error_if(jnp.ones((), dtype), failed)
    return jax.tree.map(lambda a: a * one.astype(a.dtype) if eqx.is_inexact_array(a) else a, tree)


class BodyState(eqx.Module):
    """What a user reads off a state: one row per body (ground excluded).

    ``position`` is the world position of the centre of mass, ``rotation`` maps body to world,
    ``velocity`` is the world velocity of the centre of mass and ``angular_velocity`` is in body
    axes.
    """

    position: Float[Array, "*batch nb 3"]
    rotation: Float[Array, "*batch nb 3 3"]
    velocity: Float[Array, "*batch nb 3"]
    angular_velocity: Float[Array, "*batch nb 3"]
