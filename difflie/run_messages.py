"""What an eager run says about itself: why it failed (the driver undefined there, the force
element whose wrench is NaN, the bodies that moved fastest before a blow-up, dependent
constraint rows), and how far an implicit solver's consistent start moved the bodies from the
model's initial state."""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .results import RESULTS, BodyState
from .solution import Solution
from .xla import concrete


def explain_failure(sol: Solution, model, t0: float | None, dt: float | None = None) -> str:
    """The failure message, with what a failed Newton iteration or a failure at the first step
    usually means: dependent constraint rows are named (``check_independent`` at the initial
    configuration)."""
    message = sol.failure_message()
    undefined = _undefined_rows(model, sol, dt) if sol.result == RESULTS.newton_failed and not math.isfinite(float(sol.stats.failure_residual)) else ""
    if undefined:
        message += f"; {undefined}"
    elif sol.result == RESULTS.newton_failed:
        message += (" (a step too large for the motion, or a singular iteration matrix: the mechanism locks up "
                    "there, or its constraint rows are dependent)")  # fmt: skip
    elif sol.result == RESULTS.nonfinite:
        source = _nonfinite_source(model, sol, t0, dt)
        message += f"; {source}" if source else " (a force, driver or law of the model that gives NaN or Inf there, or a motion too fast for the step)"
        before = _fastest_before(sol)
        message += before
        if not source and not before:
            message += "; with saveat=SaveAt(steps=True) this message names the force element that gave it or the body that moved fastest"
    if int(sol.stats.failure_step) == 0 and model.num_constraints and t0 is not None:
        from .io.assembly import check_independent

        try:
            check_independent(model, t0, jnp.asarray(model.r0), jnp.asarray(model.R0), "the model")
        except ValueError as err:
            message += f"; {err}"
    return message


def _nonfinite_source(model, sol: Solution, t0: float | None, dt: float | None) -> str:
    """Where the state at the failed step's start is known (the model's initial state at step
    0, or a save at that time): the force element that gives a NaN or Inf wrench there, or the
    driver undefined there, at the step's start or end time, named with its body; else ``""``."""
    state = _state_at_failure(model, sol, t0)
    if state is None:
        return ""
    t = float(sol.stats.failure_time)
    constraints = getattr(model, "constraints", None)
    for at in (t, t + dt) if dt else (t,):
        for k, element in enumerate(getattr(model, "forces", ())):
            f, tau = element(jnp.asarray(at, state[0].dtype), *state)
            bad = np.flatnonzero(~(np.isfinite(np.asarray(f)).all(-1) & np.isfinite(np.asarray(tau)).all(-1)))
            if bad.size:
                return (f"forces[{k}] ({type(element).__name__}) gives a NaN or Inf wrench on body "
                        f"{model.body_names[int(bad[0])]!r} at t = {at:.6g} s")  # fmt: skip
        driver = _undefined_driver(constraints, at)
        if driver:
            return driver
    return ""


def _undefined_driver(constraints, at: float) -> str:
    """The drivers of ``constraints`` undefined (NaN or Inf) at time ``at``, named; ``""`` where
    none is, or there are no constraints."""
    bad = constraints.undefined_drivers(at) if constraints is not None else ()
    return f"the driver of {', '.join(map(repr, bad))} is NaN or Inf at t = {at:.6g} s (outside its domain)" if bad else ""


def _state_at_failure(model, sol: Solution, t0: float | None) -> tuple[Array, Array, Array, Array] | None:
    """``(r, R, v, omega)`` at the start of the failed step: the model's initial state at step 0,
    else a finite save at that time; ``None`` where neither is there."""
    if int(sol.stats.failure_step) == 0 and t0 is not None and hasattr(model, "initial_state"):
        return tuple(jnp.asarray(x) for x in model.initial_state())
    s = sol.states
    ts = np.asarray(sol.ts)
    at = np.flatnonzero(ts == float(sol.stats.failure_time))
    if not at.size:
        return None
    state = tuple(jnp.asarray(x[at[0]]) for x in (s.position, s.rotation, s.velocity, s.angular_velocity))
    return state if all(bool(jnp.all(jnp.isfinite(x))) for x in state) else None


def _fastest_before(sol: Solution) -> str:
    """Where a run turned non-finite: the bodies that turned and moved fastest at the last save
    before it (what blows up first, as a rule); ``""`` without such a save."""
    w, v = (np.abs(np.asarray(x)).max(axis=-1) for x in (sol.states.angular_velocity, sol.states.velocity))  # no overflow
    good = np.flatnonzero(np.isfinite(np.asarray(sol.ts)) & np.isfinite(w).all(axis=-1) & np.isfinite(v).all(axis=-1))
    if not good.size or not w.shape[-1]:
        return ""
    k = good[-1]
    i, j = int(np.argmax(w[k])), int(np.argmax(v[k]))
    moved = f", body {sol.body_names[j]!r} moved fastest ({v[k, j]:.3g} m/s)" if v[k, j] > 0 else ""
    return f"; at the last save before it (t = {float(sol.ts[k]):.6g} s) body {sol.body_names[i]!r} turned fastest (a component of {w[k, i]:.3g} rad/s){moved}"


def start_change(model, start: BodyState) -> Array:
    """How far the solver's start (an implicit solver's consistent state) is from the model's
    initial state: the largest COM displacement, the index of its body, the largest change of a
    velocity (world COM velocity, body angular velocity), and the scales they are judged
    against (the largest COM coordinate, the largest velocity)."""
    if not hasattr(model, "initial_state"):
        return jnp.zeros(5)
    (r, _, v, w), start = jax.lax.stop_gradient((model.initial_state(), start))  # a report: no derivative (|0|' is NaN)
    moved = jnp.linalg.norm(start.position - r, axis=-1)
    turned = jnp.max(jnp.abs(jnp.concatenate([start.velocity - v, start.angular_velocity - w], axis=-1)))
    rates = jnp.concatenate([v, w], axis=-1)
    return jnp.stack([jnp.max(moved), jnp.argmax(moved).astype(moved.dtype), turned, jnp.max(jnp.abs(r), initial=0.0),
                      jnp.max(jnp.abs(rates), initial=0.0)])  # fmt: skip


def warn_if_moved(model, change) -> None:
    """Say it where the run started from another state than the model's (its constraints did
    not hold), as ``load_model`` and ``connect`` say it when they make a state consistent."""
    change = concrete(change)
    if change is None:  # traced (jax.grad of an eager call): nothing to say
        return
    moved, body, turned, size, speed = change.tolist()
    eps = float(np.finfo(change.dtype).eps)
    if moved > max(1e-6, 100 * eps * max(1.0, size)):
        what = f"moved the COM of body {model.body_names[int(body)]!r} by {moved:.3e} m"
    elif turned > max(1e-5, 100 * eps) * max(1.0, speed):  # rates as printed
        what = f"changed its velocities by up to {turned:.3e}"
    else:
        return
    warnings.warn(f"simulate: the initial state does not satisfy the constraints; the solver's consistent start {what} "
                  "(difflie.io.consistent_initial_state(model) makes it consistent beforehand, saying what it changes)",
                  stacklevel=3)  # fmt: skip


def _undefined_rows(model, sol: Solution, dt: float | None) -> str:
    """Where a failed step's Newton residual is NaN or Inf: the drivers undefined at its start or
    end time, named; else what else it may be."""
    t = float(sol.stats.failure_time)
    constraints = getattr(model, "constraints", None)
    for at in ((t, t + dt) if dt else (t,)) if constraints is not None else ():
        driver = _undefined_driver(constraints, at)
        if driver:
            return f"the residual is not finite: {driver}"
    return ("the residual is not finite: a force, driver or law of the model gives NaN or Inf there, or the motion "
            "overflowed (a step too large for it)")
