"""How a run is carried out: in a worker thread that a Ctrl-C interrupts at once, as two compiled
programs for fixed steps, in chunks of steps for an adaptive one."""

from __future__ import annotations

import threading
import time

from . import CliError


def in_thread(fn, name: str):
    """Start ``fn()`` in a daemon thread; returns ``result()``, which waits for it in short
    slices (a Ctrl-C in the main thread is handled at once) and returns its value or re-raises
    its exception."""
    outcome = {}

    def target():
        try:
            outcome["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - re-raised by result()
            outcome["error"] = err

    worker = threading.Thread(target=target, name=name, daemon=True)
    worker.start()

    def result():
        while worker.is_alive():
            worker.join(0.05)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return result


def run_interruptibly(fn):
    """``fn()`` in a worker thread: the main thread waits in short slices, so a Ctrl-C is handled
    at once even while a compiled XLA computation (which cannot be interrupted) runs."""
    return in_thread(fn, "difflie-run")()


def compile_fixed(model, solver, go, h: float):
    """A fixed-step run as two compiled programs: the solver's start at ``t = 0`` (its
    ``init``: for an implicit solver the assembly and the consistent rates, accelerations and
    multipliers), compiled with ``difflie.xla.RUN_ONCE_OPTIONS`` since it runs once (half the
    compile of its part of one program), then ``go(model, start)``, the steps from it. The
    start compiles in a thread while the steps are traced (XLA's compiler runs without Python's
    lock). Returns ``(compiled go, start, (seconds tracing and lowering, seconds of the rest))``."""
    import jax.numpy as jnp

    from .. import xla

    dtype = model.r0.dtype
    t0 = time.perf_counter()
    init = xla.jit(lambda m: solver.init(m, jnp.zeros((), dtype), jnp.asarray(h, dtype)),
                   compiler_options=xla.RUN_ONCE_OPTIONS).lower(model)  # fmt: skip
    t_lower = time.perf_counter() - t0
    init_compiled = in_thread(init.compile, "difflie-compile-start")
    t = time.perf_counter()
    lowered = xla.jit(go).lower(model, init.out_info)
    t_lower += time.perf_counter() - t
    start = init_compiled()(model)
    compiled = lowered.compile()
    return compiled, start, (t_lower, time.perf_counter() - t0 - t_lower)


def adaptive_in_chunks(compiled, model, t0, dt0, max_calls: int, limit: float | None):
    """Run a compiled adaptive simulation (``compiled(model, t0, dt0)``, a buffer of ``chunk``
    steps) chunk by chunk: a call that stops at its ``max_steps`` goes on from its last state,
    time and step size, so the saved states grow on the host as the run goes instead of being
    allocated for ``max_steps`` up front. One ``Solution`` of the whole run, with the counters
    summed and a failure's step counted from ``t0``."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    from ..results import RESULTS
    from ..solution import Solution, Stats

    ts_parts, state_parts, totals, saved = [], [], np.zeros(4, np.int64), 0
    m, t, h = model, t0, dt0
    for _ in range(max_calls):
        sol = jax.block_until_ready(compiled(m, t, h))
        keep = np.isfinite(np.asarray(sol.ts))
        skip = 1 if ts_parts else 0  # a chunk's first state is the last one of the chunk before
        ts = np.asarray(sol.ts)[keep][skip:]
        states = jax.tree.map(lambda x: np.asarray(x)[keep][skip:], sol.states)
        s = sol.stats
        failure_step = int(s.failure_step) + int(totals[0]) if int(s.failure_step) >= 0 else -1
        totals += [int(s.steps), int(s.rejected_steps), int(s.evaluations), int(s.newton_iterations)]
        ts_parts.append(ts)
        state_parts.append(states)
        saved += ts.nbytes + sum(x.nbytes for x in jax.tree.leaves(states))
        if limit is not None and 2 * saved > limit:
            raise CliError(f"the saved states reached {saved / 2**30:.3g} GiB at t = {float(ts[-1]):.6g} s, near the "
                           f"{limit / 2**30:.3g} GiB available; use a looser --rtol or a shorter --t1, or raise --max-memory")  # fmt: skip
        if sol.result != RESULTS.max_steps_reached or ts.shape[0] == 0 or not ts[-1] > float(t):
            break  # done, failed, or no step taken
        # go on from the last state: the model's initial state, the time and the last step size
        # (the step before it ended at this chunk's start where the chunk saved one new state)
        last = jax.tree.map(lambda x: jnp.asarray(x[-1]), states)
        m = eqx.tree_at(lambda m: (m.r0, m.R0, m.v0, m.omega0), m,
                        (last.position, last.rotation, last.velocity, last.angular_velocity))  # fmt: skip
        h = jnp.asarray(ts[-1] - (ts[-2] if ts.shape[0] > 1 else float(t)), h.dtype)
        t = jnp.asarray(ts[-1], t.dtype)
    ts = np.concatenate(ts_parts)
    states = jax.tree.map(lambda *xs: np.concatenate(xs), *state_parts)
    st = sol.stats
    stats = Stats(*(jnp.asarray(x) for x in totals), jnp.asarray(failure_step), st.failure_time, st.failure_iterations,
                  st.failure_residual)  # fmt: skip
    return Solution(jnp.asarray(ts), jax.tree.map(jnp.asarray, states), stats, sol.result, sol.body_names)
