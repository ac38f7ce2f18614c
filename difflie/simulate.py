"""The time loop: ``simulate`` with fixed steps (a ``lax.scan``) or adaptive ones (a bounded
``equinox.internal.while_loop`` with online checkpointing, so reverse mode works with memory
bounded by the number of checkpoints).

Fixed steps run as a ``lax.scan`` nested in chunks of about ``sqrt(n)`` steps whose inner scan is
rematerialised (``jax.checkpoint``, ``difflie.loops``), so reverse mode stores ``O(sqrt n)``
states (or one per step with ``checkpoint="steps"``, for the cheapest reverse pass). What a run
saves and returns is in ``difflie.solution``, the step-size controllers in
``difflie.step_size``, and what an eager run says about a failure in ``difflie.run_messages``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, PyTree

from .loops import chunked_scan, progress_function, reporter, sub_chunk
from .results import RESULTS, BodyState, carrying_error
from .run_messages import explain_failure, start_change, warn_if_moved
from .solution import SaveAt, SimulationError, Solution, Stats
from .solvers.base import AbstractSolver, StepStats
from .step_size import ConstantStepSize, PIDController, ReducingStepSize, pid_step
from .xla import concrete, concrete_float, filter_jit


class _Failure(eqx.Module):
    """The first failed step: index, start time, Newton iterations, residual."""

    step: Array
    time: Array
    iterations: Array
    residual: Array

    @classmethod
    def none(cls, dtype):
        return cls(jnp.asarray(-1, jnp.int32), jnp.asarray(jnp.nan, dtype), jnp.asarray(0, jnp.int32),
                   jnp.asarray(jnp.nan, dtype))  # fmt: skip

    def record(self, result, new, step, time, st: StepStats | None) -> _Failure:
        """Keep the first failure: ``new`` is this step's result, ``result`` the one so far
        (``st`` None: before the first step)."""
        first = (result == RESULTS.successful) & (new != RESULTS.successful)
        residual = jnp.asarray(jnp.nan if st is None or st.residual is None else st.residual, self.residual.dtype)
        iterations = 0 if st is None else st.newton_iterations
        return _Failure(
            jnp.where(first, jnp.asarray(step, jnp.int32), self.step),
            jnp.where(first, jnp.asarray(time, self.time.dtype), self.time),
            jnp.where(first, jnp.asarray(iterations, jnp.int32), self.iterations),
            jnp.where(first, residual, self.residual),
        )


def _select(pred, a, b):
    return jax.tree.map(lambda x, y: jnp.where(pred, x, y), a, b)


def _stack_obs(obs: BodyState, n: int, fill) -> BodyState:
    return jax.tree.map(lambda x: jnp.full((n,) + x.shape, fill, x.dtype), obs)


def _fields(failure: _Failure):
    return failure.step, failure.time, failure.iterations, failure.residual


def _first_failure(old, new):
    return RESULTS.where(old == RESULTS.successful, new, old)


def _start_result(model, y, result, ordered):
    """The result of step 0: ``result``, else ``RESULTS.nonfinite`` where the initial state
    ``y`` holds a NaN or Inf, ``RESULTS.empty_interval`` where the times are not ``ordered``
    (``t0 < t1``, a first step > 0), ``RESULTS.nonphysical`` where a body is not
    (``Model.is_physical``). Eagerly ``simulate`` refuses all of these by name before running;
    this catches them where they are traced. Run on the initial state only: each solver checks
    what its own step computes, and a check of every state per step would cost 5-10 % of a
    small system's step (measured on the heavy top and the single pendulum)."""
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(y) if eqx.is_inexact_array(leaf)]))
    physical = model.is_physical() if hasattr(model, "is_physical") else True
    result = RESULTS.where(finite | (result != RESULTS.successful), result, RESULTS.nonfinite)
    result = RESULTS.where(ordered | (result != RESULTS.successful), result, RESULTS.empty_interval)
    return RESULTS.where(physical | (result != RESULTS.successful), result, RESULTS.nonphysical)


# -- fixed steps ---------------------------------------------------------------------------------


@filter_jit
def _fixed(model, solver, t0, t1, fractions, save_index, saveat, chunk, remat, save_every, progress, start):
    grid = t0 + (t1 - t0) * fractions
    y0, state0 = solver.init(model, t0, grid[1] - grid[0]) if start is None else start
    zero = jnp.asarray(0, jnp.int32)

    def body(carry, xs):
        y, state, evals, newton, result, failure = carry
        k, ta, tb = xs
        y1, _, state1, st, res = solver.step(model, ta, tb, y, state)
        failure = failure.record(result, res, k, ta, st)
        carry = (y1, state1, evals + st.evaluations, newton + st.newton_iterations, _first_failure(result, res), failure)
        return carry, (solver.observe(model, y1) if save_every else None)

    n = fractions.shape[0] - 1
    result0 = _start_result(model, y0, RESULTS.where(True, RESULTS.successful, RESULTS.successful), t1 > t0)
    failure0 = _Failure.none(grid.dtype).record(RESULTS.successful, result0, 0, t0, None)
    init = (y0, state0, zero, zero, result0, failure0)
    xs = (jnp.arange(n, dtype=jnp.int32), grid[:-1], grid[1:])
    (y1, _, evals, newton, result, failure), obs = chunked_scan(body, init, xs, chunk, remat, reporter(progress, t1, n), sub_chunk(y0))
    obs0 = solver.observe(model, y0)
    failed = failure.step >= 0
    steps = jnp.where(failed, failure.step, n).astype(jnp.int32)  # the steps that succeeded
    stats = Stats(steps, zero, evals.astype(jnp.int32), newton.astype(jnp.int32), *_fields(failure))
    if saveat.steps:
        states = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), obs0, obs)
        return _after_failure(grid, states, jnp.arange(n + 1), steps, failed), stats, result, start_change(model, obs0)
    parts_t, parts_s, parts_k = [], [], []
    if saveat.t0:
        parts_t.append(t0[None])
        parts_s.append(jax.tree.map(lambda x: x[None], obs0))
        parts_k.append(jnp.zeros(1, jnp.int32))
    if saveat.ts is not None:
        all_obs = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), obs0, obs)
        parts_t.append(jnp.asarray(saveat.ts, grid.dtype))
        parts_s.append(jax.tree.map(lambda x: x[save_index], all_obs))
        parts_k.append(jnp.asarray(save_index, jnp.int32))
    if saveat.t1:
        parts_t.append(t1[None])
        parts_s.append(jax.tree.map(lambda x: x[None], solver.observe(model, y1)))
        parts_k.append(jnp.full(1, n, jnp.int32))
    states = jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts_s)
    return _after_failure(jnp.concatenate(parts_t), states, jnp.concatenate(parts_k), steps, failed), stats, result, start_change(model, obs0)


def _after_failure(ts, states, index, steps, failed):
    """``(ts, states)`` with the saves after a failed step marked as unused slots (time ``inf``,
    states NaN): ``index`` is the steps each save comes after; the first ``steps`` succeeded."""
    valid = ~failed | (index <= steps)
    ts = jnp.where(valid, ts, jnp.inf)
    states = jax.tree.map(lambda x: jnp.where(valid.reshape((-1,) + (1,) * (x.ndim - 1)), x, jnp.nan), states)
    return ts, states


MAX_STEPS = 2**31 - 1  # step indices are int32


def fixed_step_count(t0: float, t1: float, dt: float) -> int:
    """The number of fixed steps from ``t0`` to ``t1`` with steps of at most ``dt`` (shortened
    evenly to end at ``t1``); ``ValueError`` when over ``MAX_STEPS``."""
    if not dt > 0:
        raise ValueError(f"simulate: dt must be positive, got {dt}")
    n = (t1 - t0) / dt * (1 - 1e-12)
    if not n <= MAX_STEPS:
        raise ValueError(f"simulate: dt = {dt:g} from t0 = {t0:g} to t1 = {t1:g} makes {n:.3g} steps; at most {MAX_STEPS}")
    return max(1, math.ceil(n))


def memory_estimate(model, saveat: SaveAt, n_steps: int, adaptive: bool = False) -> int:
    """Bytes a run allocates in proportion to its length, a lower bound to check before
    compiling: the saved states (each field once, plus the copy that stacks them), and for
    fixed steps the time grid (about 36 bytes a step). ``n_steps`` is the number of fixed
    steps, or ``max_steps`` for an adaptive run (whose ``SaveAt(steps=True)`` buffer has
    ``max_steps + 1`` slots)."""
    leaves = [x for x in jax.tree.leaves(model) if eqx.is_inexact_array(x)]
    item = jnp.result_type(*leaves).itemsize if leaves else 8
    per_state = item * (1 + model.num_bodies * 18)  # t, position 3, rotation 9, velocity 3, omega 3
    n_ts = 0 if saveat.ts is None else int(np.size(saveat.ts))
    n_saves = n_steps + 1 if saveat.steps else n_ts + saveat.t0 + saveat.t1
    if not adaptive and saveat.ts is not None:  # every step is observed, then the save times taken
        n_saves += n_steps + 1
    grid = 0 if adaptive else (n_steps + 1) * (3 * item + 4 + 8)  # grid, its two slices, indices, host fractions
    return 2 * n_saves * per_state + grid


def _check_resolution(t0: float | None, t1: float | None, dt: float | None, dtype) -> None:
    """Refuse a step that the dtype's times cannot resolve: below 16 roundings of the largest
    time (6.1e-5 s near t = 1000 s in float32), steps are off by more than 6 % (down to 0),
    and the run covers another interval than asked."""
    if None in (t0, t1, dt):
        return
    ulp = float(np.spacing(np.asarray(max(abs(t0), abs(t1)), dtype)))
    if 0 < dt < 16 * ulp:
        wider = " or use float64" if jnp.finfo(dtype).bits < 64 else ""
        raise ValueError(f"simulate: dt = {dt:g} is below the resolution of {jnp.dtype(dtype).name} times near t = "
                         f"{max(abs(t0), abs(t1)):g} ({ulp:.2g} s), which would distort every step; start the clock "
                         f"nearer 0 (t0 = 0){wider}")  # fmt: skip


def _fixed_grid(t0, t1, dt, n_steps, ts) -> tuple[np.ndarray, np.ndarray | None]:
    """Step fractions in [0, 1] (uniform, plus the save times) and the save times' indices."""
    if n_steps is None:
        t0f, t1f, dtf = (concrete_float(x) for x in (t0, t1, dt))
        if None in (t0f, t1f, dtf):
            raise ValueError("simulate: with fixed steps, t0, t1 and dt must be concrete, or pass n_steps")
        n_steps = fixed_step_count(t0f, t1f, dtf)
    if not (isinstance(n_steps, int) and 1 <= n_steps <= MAX_STEPS):
        raise ValueError(f"simulate: n_steps must be a positive int, got {n_steps!r}")
    fractions = np.arange(n_steps + 1) / n_steps
    if ts is None:
        return fractions, None
    t0f, t1f = concrete_float(t0), concrete_float(t1)
    tsn = _concrete_ts(ts)
    if tsn is None or t0f is None or t1f is None:
        raise ValueError("simulate: with fixed steps, SaveAt(ts=...), t0 and t1 must be concrete")
    f_ts = (tsn - t0f) / (t1f - t0f)
    # Save times on the uniform grid (to rounding) use it; the others become extra step ends.
    snapped = np.round(f_ts * n_steps)
    on_grid = np.abs(f_ts * n_steps - snapped) < 1e-9
    f_ts = np.where(on_grid, snapped / n_steps, f_ts)
    fractions = np.unique(np.concatenate([fractions, f_ts]))
    return fractions, np.searchsorted(fractions, f_ts)


def _concrete_ts(ts) -> np.ndarray | None:
    tsn = concrete(ts)
    return None if tsn is None else tsn.astype(float)


# -- adaptive steps ------------------------------------------------------------------------------


_FIELDS = ("position", "rotation", "velocity", "angular_velocity")


class _Carry(eqx.Module):
    t: Array
    y: object
    state: object
    dt: Array
    inv_errs: Array  # PIDController: 1/err of the last two accepted steps
    streak: Array  # ReducingStepSize: steps accepted since the step last changed
    accepted: Array
    rejected: Array
    evals: Array
    newton: Array
    result: RESULTS
    failure: _Failure
    save_next: Array
    buf_t: Array
    buf_s: BodyState


def _all_finite(tree) -> Array:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if eqx.is_inexact_array(x)]))


@filter_jit
def _adaptive(model, solver, t0, t1, dt0, controller, saveat, max_steps, kind, progress, start):
    y0, state0 = solver.init(model, t0, dt0) if start is None else start
    obs0 = solver.observe(model, y0)
    dtype = t0.dtype
    zero = jnp.asarray(0, jnp.int32)
    c = controller
    reducing = isinstance(c, ReducingStepSize)
    if saveat.steps:
        nbuf = max_steps + 1
        save_ts = None
        buf_t = jnp.full((nbuf,), jnp.inf, dtype).at[0].set(t0)
        buf_s = jax.tree.map(lambda full, x: full.at[0].set(x), _stack_obs(obs0, nbuf, jnp.inf), obs0)
        save_next = jnp.asarray(1, jnp.int32)
    elif saveat.ts is not None:
        save_ts = jnp.asarray(saveat.ts, dtype)
        nbuf = save_ts.shape[0]
        at_start = save_ts <= t0
        buf_t = jnp.where(at_start, save_ts, jnp.inf)
        buf_s = jax.tree.map(
            lambda full, x: jnp.where(at_start.reshape((-1,) + (1,) * x.ndim), x, full),
            _stack_obs(obs0, nbuf, jnp.inf),
            obs0,
        )
        save_next = jnp.sum(at_start).astype(jnp.int32)
    else:
        save_ts, buf_t, buf_s, save_next = None, jnp.zeros((0,), dtype), None, zero

    def target(carry):
        if save_ts is None:
            return t1
        nxt = save_ts[jnp.minimum(carry.save_next, save_ts.shape[0] - 1)]
        return jnp.where(carry.save_next < save_ts.shape[0], jnp.minimum(nxt, t1), t1)

    every = max(1, max_steps // 100)

    def cond(carry):
        return (carry.t < t1) & (carry.result == RESULTS.successful)

    def body(carry):
        goal = target(carry)
        t_next = jnp.where(carry.t + carry.dt >= goal, goal, carry.t + carry.dt)
        dt = t_next - carry.t
        y1, y_err, state1, st, res = solver.step(model, carry.t, t_next, carry.y, carry.state)
        if reducing:
            accept = (res == RESULTS.successful) & _all_finite(y1)
            grow = accept & (carry.streak + 1 >= c.recovery_steps) & (carry.dt < dt0)
            dt_new = jnp.where(accept, jnp.where(grow, jnp.minimum(carry.dt * c.increase, dt0), carry.dt), dt * c.decrease)
            dt_new = jnp.maximum(dt_new, c.dtmin)
            streak = jnp.where(accept & ~grow, carry.streak + 1, 0)
            inv_errs = carry.inv_errs
        else:
            dt_new, accept, inv_errs = pid_step(c, solver.order, solver.error_norm(carry.y, y1, y_err, c.rtol, c.atol), dt, carry.inv_errs)
            streak = carry.streak
        # A rejected step at dtmin, or too small to move t in floating point, cannot progress.
        floor = jnp.maximum(c.dtmin, 4 * jnp.finfo(dtype).eps * jnp.maximum(jnp.abs(carry.t), t1 - t0))
        underflow = ~accept & (dt <= floor * (1 + 1e-9))  # a step at dtmin, to rounding
        new = RESULTS.where(underflow, RESULTS.dt_underflow, RESULTS.where(accept, res, RESULTS.successful))
        result = _first_failure(carry.result, new)
        failure = carry.failure.record(carry.result, new, carry.accepted, carry.t, st)
        if progress is not None:  # every `every` accepted steps, and at t1
            tick = accept & (((carry.accepted + 1) % every == 0) | (t_next >= t1))
            jax.lax.cond(tick, lambda: jax.debug.callback(progress, t_next, t1, ordered=True), lambda: None)
        t = jnp.where(accept, t_next, carry.t)
        y = _select(accept, y1, carry.y)
        state = _select(accept, state1, carry.state)
        buf_t_, buf_s_, save_next = carry.buf_t, carry.buf_s, carry.save_next
        if saveat.steps or save_ts is not None:
            idx = jnp.minimum(save_next, nbuf - 1)
            pred = accept & (save_next < nbuf)
            if save_ts is not None:
                pred = pred & (t_next >= save_ts[idx])
            obs = solver.observe(model, y1)
            buf_t_ = buf_t_.at[idx].set(t_next, pred=pred)
            buf_s_ = BodyState(
                *(getattr(buf_s_, f).at[idx].set(getattr(obs, f), pred=pred) for f in _FIELDS)
            )
            save_next = jnp.where(pred, save_next + 1, save_next)
        return _Carry(
            t, y, state, dt_new, inv_errs, streak,
            carry.accepted + accept, carry.rejected + (~accept),
            carry.evals + st.evaluations, carry.newton + st.newton_iterations,
            result, failure, save_next, buf_t_, buf_s_,
        )  # fmt: skip

    # A non-finite initial state or save time fails at once (the loop does not run).
    ok0 = True if save_ts is None else jnp.all(jnp.isfinite(save_ts))
    result0 = _start_result(model, y0, RESULTS.where(ok0, RESULTS.successful, RESULTS.nonfinite), (t1 > t0) & (dt0 > 0))
    failure0 = _Failure.none(dtype).record(RESULTS.successful, result0, 0, t0, None)
    init = _Carry(
        t0, y0, state0, jnp.asarray(dt0, dtype), jnp.ones(2, dtype), zero, zero, zero, zero, zero,
        result0, failure0, save_next, buf_t, buf_s,
    )  # fmt: skip
    buffers = (lambda cr: (cr.buf_t, cr.buf_s)) if (saveat.steps or save_ts is not None) else None
    final = eqxi.while_loop(cond, body, init, max_steps=max_steps, buffers=buffers, kind=kind)
    out_of_steps = (final.t < t1) & (final.result == RESULTS.successful)
    result = RESULTS.where(out_of_steps, RESULTS.max_steps_reached, final.result)
    failure = _select(
        out_of_steps, _Failure(final.accepted, final.t, zero, jnp.asarray(jnp.nan, dtype)), final.failure
    )
    stats = Stats(final.accepted, final.rejected, final.evals, final.newton, *_fields(failure))
    if saveat.steps:
        return final.buf_t, final.buf_s, stats, result, start_change(model, obs0)
    parts_t, parts_s = [], []
    if saveat.t0:
        parts_t.append(t0[None])
        parts_s.append(jax.tree.map(lambda x: x[None], obs0))
    if save_ts is not None:
        parts_t.append(final.buf_t)
        parts_s.append(final.buf_s)
    if saveat.t1:
        parts_t.append(final.t[None])
        parts_s.append(jax.tree.map(lambda x: x[None], solver.observe(model, final.y)))
    return jnp.concatenate(parts_t), jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts_s), stats, result, start_change(model, obs0)


# -- public --------------------------------------------------------------------------------------


def simulate(
    model,
    solver: AbstractSolver,
    t0: ArrayLike,
    t1: ArrayLike,
    dt: ArrayLike,
    *,
    saveat: SaveAt = SaveAt(t1=True),
    stepsize_controller: ConstantStepSize | PIDController | ReducingStepSize = ConstantStepSize(),
    max_steps: int = 100_000,
    n_steps: int | None = None,
    checkpoint: bool | str = True,
    adjoint: str = "checkpointed",
    throw: bool = True,
    progress: bool | Callable | None = None,
    start: tuple[PyTree, PyTree] | None = None,
) -> Solution:
    """Integrate ``model`` from ``t0`` to ``t1`` with ``solver``.

    ``dt`` is the fixed step (``ConstantStepSize``: ``ceil((t1 - t0) / dt)`` equal steps that
    end at ``t1``, so ``dt=3e-3`` over ``[0, 0.01]`` runs 4 steps of 2.5e-3; ``n_steps`` overrides
    it when the times are traced; ``dt`` may then be ``None``) or the initial step of an adaptive run (``PIDController``, bounded by
    ``max_steps`` attempted steps), or the largest step of a ``ReducingStepSize`` run (fixed
    steps retried smaller where they fail; also bounded by ``max_steps``). Fixed steps with ``SaveAt(ts=...)`` add the save times
    that are off the uniform grid as step ends. ``checkpoint`` (fixed steps) sets what reverse
    mode keeps: ``True`` nests the scan in rematerialised chunks of ~sqrt(n) steps, ``O(sqrt n)``
    states; ``"steps"`` one state per step (``O(n)`` memory, each step recomputed once: the
    cheapest reverse pass on CPU); ``False`` every intermediate XLA needs (no recomputation).
    With ``throw=True`` an unsuccessful result (non-finite state, step-size underflow,
    ``max_steps``, Newton failure) raises: eagerly a ``SimulationError`` naming the
    reason, step and time; under ``jit`` and ``vmap`` every returned array carries the error
    (``equinox``'s runtime error with the reason; ``throw=False`` and
    ``Solution.failure_message`` give the step and time there, and for a batch which runs). A NaN
    or Inf in the initial state, the times or ``SaveAt(ts)`` is refused before running where
    they are concrete, and fails at step 0 where they are traced; so are bodies that are not
    physical, initial rotations that are not rotations, and ``t1 <= t0``. An implicit solver
    starts from the consistent state nearest the model's (assembled, rates projected); eagerly,
    ``simulate`` warns where that moved the bodies or changed their velocities.
    ``adjoint`` picks the differentiation mode of the adaptive loop: ``"checkpointed"`` (reverse
    mode with bounded memory; no forward mode) or ``"forward"`` (a plain bounded while loop:
    forward mode, ``jax.jvp``/``jax.jacfwd``, but no reverse mode). With ``throw=False`` a failed
    run returns normally: ``Solution.stats`` holds the first failed step (index, time, Newton
    iterations and residual) and ``Solution.failure_message()`` says it in one line.
    ``progress``: ``True`` prints a bar on stderr, a callable is called as ``progress(t, t1)``
    (host callback, ``jax.debug.callback``) after chunks of about ``sqrt(n)`` fixed steps (at most
    every 2 % of the steps), or
    every ``max_steps // 100`` accepted adaptive steps, and at ``t1``. ``None`` (default) adds
    nothing to the compiled program. Under ``vmap`` it is called for each batch element; reverse
    mode calls it again while recomputing the forward pass.
    ``start``: the solver's ``(y0, solver_state)`` at ``t0``, as ``solver.init(model, t0, dt0)``
    returns it (``dt0``: the first step, ``(t1 - t0) / n`` for ``n`` fixed steps), computed
    beforehand; by default the run's program computes it. For an implicit solver it is the
    consistent start (assembly, projected rates, accelerations and multipliers), about a third
    of the program: compiled on its own with ``difflie.xla.RUN_ONCE_OPTIONS`` it compiles in
    half the time, as the command line does.
    Compiled once per model structure; works under ``jax.jit``, ``jax.vmap`` and ``jax.grad``.
    """
    progress = progress_function(progress)
    if checkpoint not in (True, False, "steps"):
        raise ValueError(f"simulate: checkpoint must be True, False or 'steps', got {checkpoint!r}")
    if adjoint not in ("checkpointed", "forward"):
        raise ValueError(f"simulate: adjoint must be 'checkpointed' or 'forward', got {adjoint!r}")
    if not isinstance(solver, AbstractSolver):
        raise ValueError(f"simulate: solver must be an AbstractSolver, got {type(solver).__name__}")
    if not isinstance(saveat, SaveAt):
        raise ValueError(f"simulate: saveat must be a difflie.SaveAt, e.g. SaveAt(ts=times), got {type(saveat).__name__}")
    t0f, t1f = concrete_float(t0), concrete_float(t1)
    if t0f is not None and t1f is not None and not t1f > t0f:
        raise ValueError(f"simulate: need t1 > t0, got t0={t0f}, t1={t1f}")
    tsn = None if saveat.ts is None else _concrete_ts(saveat.ts)
    if tsn is not None:
        if tsn.ndim != 1 or np.any(np.diff(tsn) <= 0):
            raise ValueError("SaveAt(ts): times must be a strictly increasing 1-d array")
        if t0f is not None and t1f is not None and (tsn[0] < t0f or tsn[-1] > t1f * (1 + 1e-14) + 1e-300):
            raise ValueError(f"SaveAt(ts): times must lie in [t0, t1] = [{t0f}, {t1f}]")
        if not np.all(np.isfinite(tsn)):
            raise ValueError(f"SaveAt(ts): times must be finite, got {tsn.tolist()}")
    for name, x in (("t0", t0f), ("t1", t1f), ("dt", concrete_float(dt))):
        if x is not None and not math.isfinite(x):
            raise ValueError(f"simulate: {name} must be finite, got {x}")
    if isinstance(model, (str, bytes, os.PathLike)) or not any(eqx.is_inexact_array(x) for x in jax.tree.leaves(model)):
        raise ValueError(f"simulate: model must be a difflie model (dl.load_model(path or name), dl.models.*, dl.Model), "
                         f"got {type(model).__name__}")  # fmt: skip
    solver.check_model(model)
    if start is not None and not (isinstance(start, tuple) and len(start) == 2):
        raise ValueError(f"simulate: start must be the pair (y0, solver_state) that solver.init returns, got {type(start).__name__}")
    if hasattr(model, "check_finite"):
        model.check_finite()
    if hasattr(model, "check_physical"):
        model.check_physical()
    dtype = jnp.result_type(*(x for x in jax.tree.leaves(model) if eqx.is_inexact_array(x)))
    t0a, t1a = (jnp.asarray(x, dtype) for x in (t0, t1))
    if isinstance(stepsize_controller, (PIDController, ReducingStepSize)):
        if dt is None:
            raise ValueError(f"simulate: {type(stepsize_controller).__name__} needs dt, its first step")
        if isinstance(stepsize_controller, PIDController) and not solver.adaptive:
            raise ValueError(f"simulate: {type(solver).__name__} has no error estimate; use ConstantStepSize or ReducingStepSize")
        if not (isinstance(max_steps, int) and 1 <= max_steps <= MAX_STEPS):
            raise ValueError(f"simulate: max_steps must be an int in [1, {MAX_STEPS}], got {max_steps!r}")
        dt0 = concrete_float(dt)
        if dt0 is not None and not dt0 > 0:
            raise ValueError(f"simulate: the initial step dt must be positive, got {dt0}")
        try:
            ts, states, stats, result, change = _adaptive(
                model, solver, t0a, t1a, jnp.asarray(dt, dtype), stepsize_controller, saveat, max_steps,
                "checkpointed" if adjoint == "checkpointed" else "lax", progress, start,
            )  # fmt: skip
        except TypeError as err:  # JAX's own words name neither the loop nor the remedy
            if adjoint == "checkpointed" and "custom_vjp" in str(err):
                raise TypeError("simulate: an adaptive run differentiates in reverse mode by default (adjoint="
                                "'checkpointed'); for forward mode (jax.jvp, jax.jacfwd) "
                                "pass adjoint='forward'") from err  # fmt: skip
            raise
    elif isinstance(stepsize_controller, ConstantStepSize):
        fractions, save_index = _fixed_grid(t0, t1, dt, n_steps, saveat.ts)
        _check_resolution(t0f, t1f, None if n_steps is not None else concrete_float(dt), dtype)
        n = fractions.shape[0] - 1
        chunk = max(2, math.isqrt(n)) if (checkpoint or progress is not None) and n > 16 else None
        save_every = saveat.steps or saveat.ts is not None
        (ts, states), stats, result, change = _fixed(
            model, solver, t0a, t1a, jnp.asarray(fractions, dtype),
            None if save_index is None else jnp.asarray(save_index), saveat, chunk, checkpoint, save_every,
            progress, start,
        )  # fmt: skip
    else:
        raise ValueError(f"simulate: unknown stepsize_controller {stepsize_controller!r}")
    if throw:
        failed = result != RESULTS.successful
        if concrete_float(failed) is not None:  # eager: one line naming step, time and reason
            warn_if_moved(model, change)
            if bool(failed):
                raise SimulationError(explain_failure(Solution(ts, states, stats, result, model.body_names), model, t0f, concrete_float(dt)))
        else:  # traced: every returned array carries the error, derivatives included
            ts, states = carrying_error(result, failed, (ts, states))
    return Solution(ts, states, stats, result, model.body_names)
