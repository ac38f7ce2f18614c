"""Command line: ``python -m difflie simulate MODEL ...`` and ``python -m difflie list``.

Bad input prints one line on stderr and exits with status 2 (1 for a failed simulation, 130
for an interrupt), with no traceback and no partial output file. Everything that can be checked
before the run is: the options, the output paths, the model file and the memory the run needs.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import re
import textwrap
import signal
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from . import _interrupted_while_starting

SOLVERS = {
    "rkmk4": "explicit Runge-Kutta-Munthe-Kaas, order 4, fixed step",
    "dopri5": "explicit RKMK Dormand-Prince 5(4), adaptive (--rtol/--atol)",
    "gen-alpha": "Lie-group generalized-alpha, index 3, rho_inf = 0.9",
    "backward-euler": "implicit Euler, index 3, --formulation rA|rp|re",
    "dqvi": "dual-quaternion variational integrator (single free body)",
}
CONSTRAINED_SOLVER, FREE_SOLVER = "gen-alpha", "rkmk4"  # the defaults, with and without constraints


PLOT_FORMATS = ("png", "pdf", "svg")


class CliError(Exception):
    """An error reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (not the usage text too)."""

    def error(self, message):
        print(f"difflie: error: {message}", file=sys.stderr)
        sys.exit(2)


def builtin_models() -> dict[str, object]:
    """``{cli-name: function}`` of every function exported by ``difflie.models``."""
    from . import models

    return {
        name.replace("_", "-"): fn
        for name, fn in inspect.getmembers(models, inspect.isfunction)
        if not name.startswith("_")
    }


def load(args):
    from .io import load_model
    from .io.robot import ROBOT_EXTENSIONS

    table = builtin_models()
    key = args.model.replace("_", "-")
    given = {k: v for k, v in (("default_mass", args.mass), ("default_inertia", args.inertia)) if v is not None}
    robot = robot_options(args)
    if robot and (key in table or not args.model.lower().endswith(ROBOT_EXTENSIONS)):
        flags = [ROBOT_OPTIONS[k] for k in robot]
        raise CliError(f"{', '.join(flags)} appl{'ies' if len(flags) == 1 else 'y'} to robot files (.urdf, MJCF .xml) only")
    if args.redundant:
        if key in table:
            raise CliError("--remove-redundant applies to model files (.json, .mdl, .urdf, MJCF .xml) only")
        given["redundant"] = "remove"
    if args.settings and key not in table:
        raise CliError("--set applies to built-in models only (see `python -m difflie list`)")
    if key in table:
        if given:
            raise CliError("--mass and --inertia apply to model files only")
        return builtin(table[key], key, by_name(args.settings or [], "--set"))
    if not os.path.exists(args.model):
        raise CliError(f"no model file or built-in model named {args.model!r} (see `python -m difflie list`)")
    try:
        return load_model(args.model, **given, **robot)
    except ValueError as err:  # in the words of the command line: --joint-positions, not joint_positions
        message = str(err)
        for key, flag in ROBOT_OPTIONS.items():
            message = message.replace(f"load_model: {key} ", f"{flag} ")
        if message == str(err):
            raise
        raise CliError(message) from None


def builtin(fn, name: str, settings: dict[str, object]):
    """The built-in model ``fn`` with the keyword arguments of ``--set``."""
    known = [k for k, p in inspect.signature(fn).parameters.items() if p.kind == p.KEYWORD_ONLY or p.kind == p.POSITIONAL_OR_KEYWORD]
    unknown = [k for k in settings if k not in known]
    if unknown:
        raise CliError(f"--set: {name} has no parameter {', '.join(map(repr, unknown))}; its parameters are {', '.join(known)}")
    try:
        return fn(**settings)
    except (TypeError, ValueError) as err:
        raise CliError(f"--set: {name}({', '.join(f'{k}={v!r}' for k, v in settings.items())}): {err}") from None


ROBOT_OPTIONS = {"joint_positions": "--joint-positions", "joint_velocities": "--joint-velocities",
                 "joint_torques": "--joint-torques", "locked_joints": "--lock", "floating_base": "--floating-base",
                 "joint_limits": "--joint-limits", "joint_friction": "--joint-friction", "joint_couplings": "--joint-couplings",
                 "bound_mass": "--bound-mass", "bound_inertia": "--bound-inertia", "balance_inertia": "--balance-inertia",
                 "controls": "--controls"}  # fmt: skip


def robot_options(args) -> dict[str, object]:
    """The keywords of ``load_robot`` that the robot options give (``{}`` without any)."""
    options = {}
    for key, flag in ROBOT_OPTIONS.items():
        value = getattr(args, key)
        if value is not None:  # the joint state and torque options hold (name, value) pairs
            options[key] = by_name(value, flag) if key in ("joint_positions", "joint_velocities", "joint_torques", "controls") else value
    return options


def by_name(pairs: list[tuple[str, object]], flag: str) -> dict[str, object]:
    """``{name: value}`` of the ``(name, value)`` pairs of a repeatable option, each name once."""
    values = {}
    for name, value in pairs:
        if name in values:
            raise CliError(f"{flag} gives {name!r} twice")
        values[name] = value
    return values


def default_solvers() -> dict[str, object]:
    """``{cli-name: solver}`` with the command line's defaults (the keys of ``SOLVERS``)."""
    import difflie as dl

    return {"rkmk4": dl.RKMK4(), "dopri5": dl.Dopri5(), "gen-alpha": dl.GeneralizedAlpha(rho_inf=0.9),
            "backward-euler": dl.BackwardEuler(), "dqvi": dl.DQVI()}  # fmt: skip


def make_solver(args, model):
    import difflie as dl

    constrained = getattr(model, "constraints", None) is not None
    name = args.solver or (CONSTRAINED_SOLVER if constrained else FREE_SOLVER)
    if name not in SOLVERS:
        raise CliError(f"unknown solver {name!r}; choose one of {', '.join(SOLVERS)}")
    if args.formulation is not None and name != "backward-euler":
        raise CliError("--formulation applies to --solver backward-euler only")
    if args.rho_inf is not None and name != "gen-alpha":
        raise CliError("--rho-inf applies to --solver gen-alpha only")
    implicit = {k: v for k, v in (("newton", args.newton), ("max_iterations", args.max_iterations)) if v is not None}
    if implicit and name not in ("gen-alpha", "backward-euler"):
        raise CliError(f"{', '.join('--' + k.replace('_', '-') for k in implicit)}: for the implicit solvers "
                       "(gen-alpha, backward-euler) only")  # fmt: skip
    if implicit.get("newton") == "auto" and name == "backward-euler":
        raise CliError("--newton auto is gen-alpha's; backward-euler takes full or modified")
    controller = dl.ConstantStepSize()
    if args.retry_failed_steps:
        if name not in ("gen-alpha", "backward-euler"):
            raise CliError("--retry-failed-steps: for the implicit solvers (gen-alpha, backward-euler) only")
        controller = dl.ReducingStepSize()
    solver = default_solvers()[name]
    if name == "dopri5":
        rtol = 1e-6 if args.rtol is None else args.rtol
        controller = dl.PIDController(rtol=rtol, atol=rtol if args.atol is None else args.atol)
    elif name == "backward-euler":
        solver = dl.BackwardEuler(formulation=args.formulation or "rA", **implicit)
    elif name == "gen-alpha":
        solver = dl.GeneralizedAlpha(rho_inf=0.9 if args.rho_inf is None else args.rho_inf, **implicit)
    try:
        solver.check_model(model)  # the solver's own rule, before anything is compiled
    except ValueError as e:
        raise CliError(f"solver {name!r} cannot take this model: {e}") from None
    return name, solver, controller


def energy_summary(model, ts, states) -> str:
    """The relative energy drift; for a mechanism with drivers or force elements (springs,
    dampers, joint torques and damping), the energy change, their work ``W`` and the balance
    ``max |E - E0 - W|`` (the integrator's energy error) instead."""
    import numpy as np

    from . import diagnostics

    e = np.asarray(diagnostics.energy(model, states))
    driven = model.constraints is not None and model.constraints.driven
    if driven or model.forces:
        w = np.asarray(diagnostics.work(model, ts, states))
        balance = np.max(np.abs(e - e[0] - w))
        label = "work of drivers and forces" if driven and model.forces else "drivers' work" if driven else "forces' work"
        return f"energy change {e[-1] - e[0]:.3e} J, {label} {w[-1]:.3e} J, balance max |E - E0 - W| {balance:.1e} J"
    kinetic = np.asarray(diagnostics.kinetic_energy(model, states))
    drift = float(np.max(np.abs(e - e[0])) / max(abs(e[0]), float(np.max(np.abs(kinetic))), 1e-300))
    return f"relative energy drift {drift:.3e}"


def compile_cache_dir() -> Path:
    """Where the CLI keeps compiled programs: ``$XDG_CACHE_HOME/difflie/jax`` (default
    ``~/.cache/difflie/jax``); a ``JAX_COMPILATION_CACHE_DIR`` set in the environment wins."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "difflie" / "jax"


def check_options(args) -> None:
    if args.adaptive_chunk < 1:
        raise CliError(f"--adaptive-chunk must be a positive number of steps, got {args.adaptive_chunk}")
    if args.dt is not None and not (args.dt > 0 and math.isfinite(args.dt)):
        raise CliError(f"--dt must be a positive finite number, got {args.dt}")
    if not (args.t1 > 0 and math.isfinite(args.t1)):
        raise CliError(f"--t1 must be a positive finite number, got {args.t1}")
    for flag in ("rtol", "atol", "mass"):
        value = getattr(args, flag)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise CliError(f"--{flag} must be a positive finite number, got {value}")
    check_output(args.out, "--out", ("npz",))
    check_output(args.plot, "--plot", PLOT_FORMATS)


def check_output(path: str | None, flag: str, formats: tuple[str, ...]) -> None:
    """Refuse an output path that cannot be written, before any work: a directory, a missing or
    unwritable directory, an unsupported extension."""
    if path is None:
        return
    if os.path.isdir(path):
        raise CliError(f"{flag} {path}: is a directory")
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in formats:
        raise CliError(f"{flag} {path}: unsupported file type {ext or '(none)'!r}; use {', '.join('.' + f for f in formats)}")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CliError(f"cannot write {path}: no such directory")
    try:  # the one reliable test of a writable place (root ignores the mode bits)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".difflie-", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise CliError(f"cannot write {path}: {err.strerror}") from None


def memory_size(text: str) -> float:
    """``"8G"``, ``"512M"``, ``"2e9"``: bytes (K, M, G, T are powers of 1024)."""
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kKmMgGtT]?)i?[bB]?\s*", text)
    try:
        value = float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " ") if m else math.nan
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a size such as 8G, 512M or 2e9 bytes, got {text!r}")
    return value


def available_memory() -> float | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_memory(needed: float, limit: float | None) -> None:
    """Refuse a run whose arrays exceed ``limit`` (``--max-memory``, else the available memory)."""
    limit = available_memory() if limit is None else limit
    if limit is not None and needed > limit:
        raise CliError(
            f"the run needs at least {needed / 2**30:.3g} GiB for its saved states and time grid, more than "
            f"the {limit / 2**30:.3g} GiB available; use a larger --dt or a shorter --t1, or raise the limit with --max-memory"
        )


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

    from . import xla

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

    from .results import RESULTS
    from .simulate import Solution, Stats

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


def run(args) -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from . import diagnostics, xla
    from .simulate import ConstantStepSize, PIDController, SaveAt, fixed_step_count, memory_estimate, simulate

    check_options(args)
    model = load(args)
    name, solver, controller = make_solver(args, model)
    dt = 1e-3 if args.dt is None else args.dt
    adaptive = not isinstance(controller, ConstantStepSize)  # steps that the run chooses
    n_steps = fixed_step_count(0.0, args.t1, dt)
    max_steps = max(100_000, 10 * n_steps) if adaptive else n_steps
    # an adaptive run saves by chunks of at most this many steps (its compiled buffer), not max_steps
    chunk = min(max_steps, args.adaptive_chunk) if adaptive else n_steps
    saveat = SaveAt(steps=True)
    # twice the library's figure: the saved states are copied to the host, then the finite ones kept
    check_memory(2 * memory_estimate(model, saveat, chunk, adaptive), args.max_memory)

    show = sys.stderr.isatty() if args.progress is None else args.progress
    options = dict(saveat=saveat, stepsize_controller=controller, throw=False, progress=True if show else None)

    if adaptive:  # the start time and first step are arguments: one program serves every chunk

        def go(m, t0, dt0):
            return simulate(m, solver, t0, args.t1, dt0, max_steps=chunk, **options)

        start = (model, jnp.asarray(0.0, model.r0.dtype), jnp.asarray(dt, model.r0.dtype))
    else:

        def go(m, s):
            return simulate(m, solver, 0.0, args.t1, dt, max_steps=max_steps, start=s, **options)

    if isinstance(controller, PIDController):
        step = f"rtol = {controller.rtol}"
    elif adaptive:
        step = f"dt = {dt:.6g}, halved where a step fails"
    else:
        step = f"dt = {args.t1 / n_steps:.6g} ({n_steps} step{'s' * (n_steps > 1)})"
    print(f"difflie: {args.model} with {name}, t1 = {args.t1} s, {step}, {np.dtype(model.r0.dtype).name}", file=sys.stderr)

    def compile_and_run():
        print(f"difflie: compiling {name} for {args.model} ...", file=sys.stderr, flush=True)
        t_start = time.perf_counter()
        if adaptive:
            compiled = xla.jit(go).lower(*start).compile()
        else:
            compiled, s0, _ = compile_fixed(model, solver, go, args.t1 / n_steps)
        t_compiled = time.perf_counter()
        print(f"difflie: compiled in {t_compiled - t_start:.1f} s", file=sys.stderr, flush=True)
        if adaptive:
            limit = available_memory() if args.max_memory is None else args.max_memory
            sol = adaptive_in_chunks(compiled, *start, max_steps // chunk + 1, limit)
        else:
            sol = jax.block_until_ready(compiled(model, s0))
        return sol, t_compiled - t_start, time.perf_counter() - t_compiled

    sol, t_compile, t_run = run_interruptibly(compile_and_run)
    from .results import RESULTS

    if sol.result != RESULTS.successful:
        from .run_messages import explain_failure as _explained

        hint = ""
        if sol.result == RESULTS.newton_failed:
            hint = "; try a smaller --dt" + ("" if args.retry_failed_steps else ", or --retry-failed-steps")
        print(f"difflie: simulation failed: {_explained(sol, model, 0.0)}{hint}", file=sys.stderr)
        return 1
    keep = np.isfinite(np.asarray(sol.ts))
    states = jax.tree.map(lambda x: x[keep], sol.states)
    ts = sol.ts[keep]
    residual = float(jnp.max(diagnostics.constraint_residual(model, ts, states)))
    s = sol.stats
    print(
        f"steps {int(s.steps)}, rejected {int(s.rejected_steps)}, evaluations {int(s.evaluations)}, "
        f"Newton iterations {int(s.newton_iterations)}, {energy_summary(model, ts, states)}, "
        f"max constraint residual {residual:.3e}, compile {t_compile:.2f} s, run {t_run:.3f} s"
    )
    if args.out is not None:
        arrays = dict(
            t=np.asarray(ts), position=np.asarray(states.position), rotation=np.asarray(states.rotation),
            velocity=np.asarray(states.velocity), angular_velocity=np.asarray(states.angular_velocity),
            body_names=np.asarray(model.body_names), **joint_arrays(model, states),
        )  # fmt: skip
        _atomic_write(args.out, lambda f: np.savez(f, **arrays))
        print(f"wrote {args.out}")
    if args.plot is not None:
        from .plot import summary_figure

        fig = summary_figure(sol, model)
        fmt = os.path.splitext(args.plot)[1].lower().lstrip(".")
        _atomic_write(args.plot, lambda f: fig.savefig(f, dpi=110, format=fmt))
        print(f"wrote {args.plot}")
    return 0


def statics(args) -> int:
    """``equilibrium``: ``difflie.equilibrium`` of the model from its initial configuration, then
    the lowest ``--modes`` eigenfrequencies of ``difflie.modes`` about it."""
    import numpy as np

    from . import xla
    from .joint_space import joint_coordinates
    from .results import RESULTS
    from .solvers.statics import equilibrium, modes

    if args.modes < 0:
        raise CliError(f"--modes must be 0 or more, got {args.modes}")
    model = load(args)
    print(f"difflie: equilibrium of {args.model}, {np.dtype(model.r0.dtype).name}", file=sys.stderr)
    t_start = time.perf_counter()
    eq = xla.jit(lambda m: equilibrium(m, stabilizer=args.stabilizer, max_iterations=args.max_iterations, throw=False))(model)
    if not bool(eq.result == RESULTS.successful):
        print(f"difflie: no equilibrium: Newton stopped after {int(eq.iterations)} iterations at residual "
              f"{float(eq.residual):.1e} (more --max-iterations, or a smaller --stabilizer for slow, heavy "
              "mechanisms)", file=sys.stderr)  # fmt: skip
        return 1
    state = eq.state
    print(f"equilibrium in {int(eq.iterations)} iterations, residual {float(eq.residual):.1e}, "
          f"{time.perf_counter() - t_start:.1f} s (compile included)")  # fmt: skip
    arrays = dict(position=np.asarray(state.position), rotation=np.asarray(state.rotation),
                  multipliers=np.asarray(eq.multipliers), body_names=np.asarray(model.body_names))  # fmt: skip
    if model.joint_names:
        arrays.update(joint_names=np.asarray(model.joint_names), q=np.asarray(joint_coordinates(model, state)))
    for name, x in zip(model.body_names, arrays["position"]):
        print(f"  {name:24s} COM at ({x[0]: .6f}, {x[1]: .6f}, {x[2]: .6f}) m")
    for name, q in zip(arrays.get("joint_names", ()), arrays.get("q", ())):
        print(f"  joint {name:18s} {q: .6f}")
    if args.modes:
        md = xla.jit(modes)(model, eq)
        w2 = np.asarray(md.omega_squared)
        arrays.update(omega_squared=w2, shapes=np.asarray(md.shapes))
        shown = np.where(np.abs(w2) <= 1e-10 * np.abs(w2).max(initial=0.0), 0.0, w2)[: args.modes]  # rounding: 0
        hz = np.sqrt(np.abs(shown)) * np.sign(shown) / (2 * np.pi)
        print(f"lowest {shown.size} of {w2.size} modes, Hz (negative: unstable, omega^2 < 0): "
              + ", ".join(f"{f:.6g}" for f in hz))  # fmt: skip
    if args.out is not None:
        _atomic_write(args.out, lambda f: np.savez(f, **arrays))
        print(f"wrote {args.out}")
    return 0


def joint_arrays(model, states) -> dict[str, object]:
    """A robot's ``joint_names`` and its joint coordinates ``q`` and rates ``qd`` (n_saves,
    n_joints) at ``states``, and its ``ball_joint_names`` with ``ball_q`` (n_saves, n_balls, 4)
    and ``ball_qd`` (n_saves, n_balls, 3); ``{}`` for a model without movable joints."""
    import numpy as np

    from .joint_space import ball_joint_quaternions, ball_joint_velocities, joint_coordinates, joint_velocities

    out = {}
    if model.joint_names:
        out.update(joint_names=np.asarray(model.joint_names), q=np.asarray(joint_coordinates(model, states)),
                   qd=np.asarray(joint_velocities(model, states)))  # fmt: skip
    if model.ball_joint_names:
        out.update(ball_joint_names=np.asarray(model.ball_joint_names), ball_q=np.asarray(ball_joint_quaternions(model, states)),
                   ball_qd=np.asarray(ball_joint_velocities(model, states)))  # fmt: skip
    return out


def _atomic_write(path: str, write) -> None:
    """Write through a temporary file in the same directory, so no partial file is left (an
    interrupt included); the file gets the mode the umask gives a new file."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".difflie-", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def accepting_solvers(model) -> list[str]:
    """The solvers whose own rule (``check_model``) takes ``model``."""
    names = []
    for name, solver in default_solvers().items():
        try:
            solver.check_model(model)
            names.append(name)
        except ValueError:
            pass
    return names


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = " ".join(doc.split("\n\n")[0].split()).replace("``", "")  # docstring markup, not for a terminal
    end = re.search(r"\.(?=\s+[A-Z]|$)", paragraph)  # not "Fig. 1"
    return paragraph[: end.start() + 1] if end else paragraph


def list_all() -> int:
    print("built-in models (and the solvers that take them):")
    for name, fn in builtin_models().items():
        print(textwrap.fill(first_sentence(inspect.getdoc(fn) or ""), 110, initial_indent=f"  {name:24s} ", subsequent_indent=" " * 27))
        print(f"  {'':24s} solvers: {', '.join(accepting_solvers(fn()))}")
    print("solvers:")
    for name, doc in SOLVERS.items():
        print(f"  {name:24s} {doc}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m difflie", description="Simulate rigid and multibody systems.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("simulate", help="simulate a model file or a built-in model")
    s.add_argument("model", help="model file (.json, .mdl; a robot: .urdf, MJCF .xml) or built-in name (see `list`)")
    s.add_argument("--solver", choices=list(SOLVERS),
                   help=f"integrator (see `list`; default: {CONSTRAINED_SOLVER} for a model with constraints: joints, "
                        f"drivers; {FREE_SOLVER} for one without: free bodies, a pinned top)")  # fmt: skip
    s.add_argument("--formulation", choices=["rA", "rp", "re"], help="rotation coordinates of backward-euler (default: rA)")
    s.add_argument("--rho-inf", type=spectral_radius, metavar="R",
                   help="gen-alpha's spectral radius at infinity, in [0, 1): near 1 damps the least, 0 the most (default: 0.9)")
    s.add_argument("--newton", choices=["auto", "full", "modified"],
                   help="Newton of the implicit solvers: a fresh iteration matrix every iteration (full) or kept while it "
                        "contracts (modified); auto, gen-alpha's default, is full for one body and modified for more "
                        "(backward-euler's default: modified)")  # fmt: skip
    s.add_argument("--max-iterations", type=positive_int, metavar="N",
                   help="Newton iterations per step before a step fails (default: 25 for gen-alpha, 20 for backward-euler)")
    s.add_argument("--dt", type=float, help="step size, the initial one for dopri5 (default: 1e-3)")
    s.add_argument("--retry-failed-steps", action="store_true",
                   help="retry a step whose Newton iteration fails at half the size, growing back to --dt after "
                        "ten good steps, as Exudyn's adaptiveStep (dl.ReducingStepSize; implicit solvers)")
    s.add_argument("--t1", type=float, default=1.0, help="end time in seconds (default: %(default)g)")
    s.add_argument("--rtol", type=float, help="relative tolerance of dopri5 (default: 1e-6)")
    s.add_argument("--atol", type=float, help="absolute tolerance of dopri5 (default: --rtol)")
    s.add_argument("--out", help="write the trajectory to FILE.npz")
    s.add_argument("--plot", help="write a summary figure to FILE.png (.pdf, .svg)")
    _model_options(s)
    s.add_argument("--max-memory", type=memory_size, metavar="SIZE",
                   help="refuse runs needing more, e.g. 16G (default: the available memory)")  # fmt: skip
    s.add_argument("--adaptive-chunk", type=int, default=100_000, metavar="N",
                   help="an adaptive run saves in chunks of N steps, each one compiled call (default: %(default)d)")
    _compute_options(s)
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")  # fmt: skip
    e = sub.add_parser("equilibrium", help="the static equilibrium of a model and its small oscillations")
    e.add_argument("model", help="model file (.json, .mdl; a robot: .urdf, MJCF .xml) or built-in name (see `list`)")
    e.add_argument("--modes", type=int, default=6, metavar="N",
                   help="print the N lowest eigenfrequencies about the equilibrium (default: %(default)d; 0: none)")
    e.add_argument("--stabilizer", type=float, default=100.0, metavar="C",
                   help="pseudo-transient continuation: C times the mass matrix joins Newton's matrix at the start, "
                        "so that it descends onto a stable equilibrium (default: %(default)g; 0: plain Newton, the "
                        "nearest equilibrium)")  # fmt: skip
    e.add_argument("--max-iterations", type=positive_int, default=200, metavar="N",
                   help="Newton iterations before giving up (default: %(default)d)")
    e.add_argument("--out", help="write the equilibrium (and modes) to FILE.npz")
    _model_options(e)
    _compute_options(e)
    sub.add_parser("list", help="list built-in models and solvers")
    return p


def _model_options(s: argparse.ArgumentParser) -> None:
    """The options that make the model: masses of the C1/C2 files, redundant rows, robots."""
    s.add_argument("--mass", type=float, help="mass of every body the model file gives none (the C1/C2 files)")
    s.add_argument("--inertia", type=inertia, help="inertia of every body the file gives none: J, or J1,J2,J3 (principal moments)")
    s.add_argument("--set", dest="settings", type=model_settings, action="extend", metavar="NAME=VALUE[,...]",
                   help="parameters of a built-in model (see `list`), e.g. `chain --set n=16,joint=spherical`")
    s.add_argument("--remove-redundant", dest="redundant", action="store_true",
                   help="remove constraint rows that depend on the others (a planar loop of revolute joints), "
                        "naming them, instead of refusing the model")
    r = s.add_argument_group(
        "robot files (.urdf, MJCF .xml)",
        "NAME is a movable joint of the file (model.joint_names); each option may be repeated, and its "
        "entries are separated by commas (a comma inside parentheses belongs to an expression)",
    )
    r.add_argument("--joint-positions", type=joint_numbers, action="extend", metavar="NAME=VALUE[,...]",
                   help="initial joint positions in rad or m (default: the file's reference position)")
    r.add_argument("--joint-velocities", type=joint_numbers, action="extend", metavar="NAME=VALUE[,...]",
                   help="initial joint rates in rad/s or m/s (default: at rest)")
    r.add_argument("--joint-torques", type=joint_expressions, action="extend", metavar="NAME=EXPR[,...]",
                   help="joint torques in N m (a prismatic joint: forces in N), each a number or an expression "
                        "of t as in the model files, e.g. 'panda_joint1=2*sin(5*t)' (default: none)")
    r.add_argument("--controls", type=joint_expressions, action="extend", metavar="NAME=EXPR[,...]",
                   help="drive the MJCF file's actuators with these controls, each a number or an expression of t "
                        "(others 0, as MuJoCo's ctrl; default: actuators not modelled, named in the warning)")
    r.add_argument("--lock", dest="locked_joints", type=joint_list, action="extend", metavar="NAME[,...]",
                   help="weld these joints at their --joint-positions value (else the file's reference position)")
    r.add_argument("--joint-limits", action="store_true", default=None,
                   help="enforce the file's joint limits as spring-dampers as soft as MuJoCo's "
                        "(default: not modelled, named in the warning)")
    r.add_argument("--joint-friction", action="store_true", default=None,
                   help="make the joints' frictionloss dry friction that creeps as MuJoCo's soft friction does "
                        "(default: not modelled, named in the warning)")
    r.add_argument("--joint-couplings", action="store_true", default=None,
                   help="hold the file's joint couplings (URDF mimic, MJCF joint equalities) as softly as MuJoCo "
                        "does (default: not modelled, named in the warning)")
    r.add_argument("--bound-mass", type=float, metavar="KG",
                   help="least mass of every link, for files with massless placeholder links (MuJoCo's boundmass; "
                        "default: as the file has it)")
    r.add_argument("--bound-inertia", type=float, metavar="KG_M2",
                   help="least principal moment of inertia of every link (MuJoCo's boundinertia; default: as the file "
                        "has it)")
    r.add_argument("--balance-inertia", action="store_true", default=None,
                   help="a link whose principal moments break the triangle inequality takes their mean (MuJoCo's "
                        "balanceinertia; default: as the file has it)")
    r.add_argument("--floating-base", action=argparse.BooleanOptionalAction, default=None,
                   help="free the root link; --no-floating-base fixes it where it starts (default: as the "
                        "file has it: an MJCF free joint floats, a URDF root is fixed)")


def _compute_options(s: argparse.ArgumentParser) -> None:
    s.add_argument("--float32", action="store_true", help="compute in float32 (default: float64; the first line says which)")
    s.add_argument("--compile-cache", action=argparse.BooleanOptionalAction, default=True,
                   help="keep compiled programs in JAX's persistent cache, so that a second run of the same model, "
                        "solver and options skips most of the compile (default: on, in $XDG_CACHE_HOME/difflie/jax "
                        "or ~/.cache/difflie/jax; JAX_COMPILATION_CACHE_DIR overrides)")  # fmt: skip


def spectral_radius(text: str) -> float:
    """``--rho-inf``: a number in [0, 1) (index 3 needs ``rho_inf < 1``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}")
    return value


def positive_int(text: str) -> int:
    """``--max-iterations``: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def inertia(text: str) -> list[float]:
    """``--inertia``: one moment (a sphere-like body) or three principal moments."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (1, 3):
        raise argparse.ArgumentTypeError(f"expected J or J1,J2,J3, got {text!r}")
    return values * 3 if len(values) == 1 else values


def split_entries(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, each entry stripped."""
    entries, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            entries.append(text[start:i].strip())
            start = i + 1
    return [*entries, text[start:].strip()]


def joint_pairs(text: str, value: str) -> list[tuple[str, str]]:
    """``NAME=VALUE[,NAME=VALUE...]`` as ``(name, value text)`` pairs."""
    pairs = [tuple(part.strip() for part in entry.split("=", 1)) for entry in split_entries(text)]
    if not all(len(pair) == 2 and all(pair) for pair in pairs):
        raise argparse.ArgumentTypeError(f"expected NAME={value}[,NAME={value}...], got {text!r}")
    return pairs


def model_settings(text: str) -> list[tuple[str, object]]:
    """``--set``: ``NAME=VALUE,...``, each value an int, a float, true / false or a word."""

    def value(v: str):
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return {"true": True, "false": False}.get(v.lower(), v)

    return [(name, value(v)) for name, v in joint_pairs(text, "VALUE")]


def joint_numbers(text: str) -> list[tuple[str, float]]:
    """``--joint-positions``, ``--joint-velocities``: ``NAME=NUMBER,...``."""
    pairs = joint_pairs(text, "NUMBER")
    try:
        values = [(name, float(value)) for name, value in pairs]
        if all(math.isfinite(v) for _, v in values):
            return values
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected NAME=NUMBER[,NAME=NUMBER...] with finite numbers, got {text!r}")


def joint_expressions(text: str) -> list[tuple[str, object]]:
    """``--joint-torques``, ``--controls``: ``NAME=EXPR,...``, each a number or an expression of ``t``."""
    from .expr import Expression, ExpressionError

    values = []
    for name, source in joint_pairs(text, "EXPR"):
        try:
            values.append((name, Expression(source)))
        except ExpressionError as err:
            raise argparse.ArgumentTypeError(f"{name}: {err}") from None
    return values


def joint_list(text: str) -> list[str]:
    """``--lock``: ``NAME[,NAME...]``."""
    names = split_entries(text)
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected NAME[,NAME...], got {text!r}")
    return names


def _warn(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"difflie: warning: {message}", file=sys.stderr)


def _use_compile_cache(args) -> None:
    """JAX's persistent compilation cache in ``compile_cache_dir()`` (unless ``--no-compile-cache``
    or JAX already has a cache folder), keeping every program, however quickly it compiled: a
    command's run is short, and the eager steps that build a model and the compile of a small
    model's run (under a second) are most of its wait, which JAX's default (programs of a second
    or more) would compile again at every run. ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``
    overrides."""
    import jax

    if getattr(args, "compile_cache", True) and not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(compile_cache_dir()))
        if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def main(argv: list[str] | None = None) -> int:
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:  # installed for the imports
        signal.signal(signal.SIGINT, signal.default_int_handler)
    with warnings.catch_warnings():
        warnings.showwarning = _warn  # one line each, no source line
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        args = parser().parse_args(argv)
        _use_compile_cache(args)
        if args.command == "list":
            return list_all()
        import jax

        jax.config.update("jax_enable_x64", not args.float32)  # this process is the user's program
        return statics(args) if args.command == "equilibrium" else run(args)
    except KeyboardInterrupt:
        print("difflie: interrupted", file=sys.stderr)
        return 130
    except (CliError, ValueError, OSError, KeyError, TypeError) as e:
        print(f"difflie: error: {e}".splitlines()[0] if str(e) else f"difflie: error: {type(e).__name__}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - an error of the run itself: one line, never a traceback
        message = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        print(f"difflie: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    code = main()
    if code == 130:  # interrupted: end now, without waiting for a compiled run still in its thread
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
