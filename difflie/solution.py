"""What a run saves and returns: ``SaveAt``, ``Solution`` with its counters (``Stats``), and
the error an unsuccessful eager run raises."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Float, Int

from .results import RESULTS, BodyState
from .xla import concrete


class SaveAt(eqx.Module):
    """Where to save: ``t0``/``t1`` (the ends), ``ts`` (given increasing times in ``[t0, t1]``)
    or ``steps`` (the initial state and every accepted step). ``steps`` excludes the others.
    With fixed steps the times ``ts`` become step ends, so they must be concrete: build the
    ``SaveAt`` from NumPy times outside ``jit``/``grad`` and close over it."""

    t0: bool = eqx.field(static=True, default=False)
    t1: bool = eqx.field(static=True, default=False)
    ts: Float[Array, " n"] | None = None
    steps: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        if self.ts is not None and np.size(self.ts) == 0:
            raise ValueError("SaveAt(ts): no save times given; pass at least one, or use t0/t1")
        if not (self.t0 or self.t1 or self.steps or self.ts is not None):
            raise ValueError("SaveAt: choose at least one of t0, t1, ts, steps")
        if self.steps and (self.t0 or self.t1 or self.ts is not None):
            raise ValueError("SaveAt: steps=True saves every step already; do not combine it with t0/t1/ts")


class SimulationError(RuntimeError):
    """An unsuccessful ``simulate`` with ``throw=True``, outside ``jit``: the message names
    the reason, the step and its time (``Solution.failure_message``)."""


class Stats(eqx.Module):
    """Counters of a simulation, and where it first failed.

    ``failure_step`` is the index of the first unsuccessful step (-1 when none), starting at
    ``failure_time``; ``failure_iterations`` and ``failure_residual`` are that step's Newton
    iterations and last residual (NaN for explicit solvers).
    """

    steps: Int[Array, ""]
    rejected_steps: Int[Array, ""]
    evaluations: Int[Array, ""]
    newton_iterations: Int[Array, ""]
    failure_step: Int[Array, ""]
    failure_time: Float[Array, ""]
    failure_iterations: Int[Array, ""]
    failure_residual: Float[Array, ""]

    def __repr__(self) -> str:
        """The values (the default repr, with shapes, where they are traced)."""
        fields = {name: concrete(getattr(self, name)) for name in self.__dataclass_fields__}
        if any(a is None for a in fields.values()):
            return super().__repr__()
        return "Stats(" + ", ".join(f"{k}={np.array2string(a, separator=', ')}" for k, a in fields.items()) + ")"


class Solution(eqx.Module):
    """Saved times ``ts`` (n,) and states (n, nb, ...); unused slots hold time ``inf``: those of
    ``SaveAt(steps=True)`` with adaptive steps, and the saves after a failed step (their states
    are NaN; ``stats.steps`` counts the steps that succeeded). ``result`` is a ``RESULTS`` item."""

    ts: Float[Array, " n"]
    states: BodyState
    stats: Stats
    result: RESULTS
    body_names: tuple[str, ...] = eqx.field(static=True)

    def failure_message(self) -> str:
        """What went wrong and where, in one line ("" after a successful run; concrete values
        only). For a batch (``jax.vmap``, ``simulate_batch``): how many runs failed, their batch
        indices, and the first one's message."""
        codes = np.asarray(self.result._value)
        if codes.ndim:
            failed = np.argwhere(codes != np.asarray(RESULTS.successful._value))
            if not failed.size:
                return ""
            indices = [tuple(int(k) for k in i) for i in failed[:10]]
            label = [str(i) if codes.ndim > 1 else str(i[0]) for i in indices]
            one = jax.tree.map(lambda x: x[indices[0]], self)
            more = f" and {len(failed) - 10} more" if len(failed) > 10 else ""
            return (f"{len(failed)} of {codes.size} runs failed (batch indices {', '.join(label)}{more}); "
                    f"run {label[0]}: {one.failure_message()}")
        if self.result == RESULTS.successful:
            return ""
        s = self.stats
        what = RESULTS[self.result]
        where = f"at step {int(s.failure_step)} (t = {float(s.failure_time):.6g} s)"
        if self.result == RESULTS.newton_failed:
            return f"{what} {where}: residual {float(s.failure_residual):.3e} after {int(s.failure_iterations)} iterations"
        if self.result == RESULTS.dt_underflow:
            last = ""
            if math.isfinite(float(s.failure_residual)):  # an implicit step that failed at every size
                last = f"; the last try's Newton residual {float(s.failure_residual):.3e} after {int(s.failure_iterations)} iterations"
            return f"{what} {where}, after {int(s.steps)} accepted and {int(s.rejected_steps)} rejected steps{last}"
        if self.result == RESULTS.max_steps_reached:
            return f"{what}: stopped at t = {float(s.failure_time):.6g} s after {int(s.steps)} steps"
        return f"{what} {where}"

    @property
    def position(self):
        return self.states.position

    @property
    def rotation(self):
        return self.states.rotation

    @property
    def velocity(self):
        return self.states.velocity

    @property
    def angular_velocity(self):
        return self.states.angular_velocity
