"""What a simulation reports: result codes and the per-body state a user reads.

Low in the package on purpose: the model, kinematics, diagnostics and every solver use these
types, and none of them imports a solver to get them.
"""

from __future__ import annotations

import equinox as eqx
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
