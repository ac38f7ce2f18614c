"""The commands: ``simulate`` (``run``), ``equilibrium`` (``statics``) and ``list`` (``list_all``)."""

from __future__ import annotations

import inspect
import os
import re
import sys
import textwrap
import time

from . import CliError
from .arguments import SOLVERS
from .checks import available_memory, check_memory, check_options
from .loading import accepting_solvers, builtin_models, load, make_solver
from .output import _atomic_write, energy_summary, joint_arrays
from .running import adaptive_in_chunks, compile_fixed, run_interruptibly


def run(args) -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from .. import diagnostics, xla
    from ..simulate import fixed_step_count, memory_estimate, simulate
    from ..solution import SaveAt
    from ..step_size import ConstantStepSize, PIDController

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
    from ..results import RESULTS

    if sol.result != RESULTS.successful:
        from ..run_messages import explain_failure

        hint = ""
        if sol.result == RESULTS.newton_failed:
            hint = "; try a smaller --dt" + ("" if args.retry_failed_steps else ", or --retry-failed-steps")
        print(f"difflie: simulation failed: {explain_failure(sol, model, 0.0)}{hint}", file=sys.stderr)
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
        from ..plot import summary_figure

        fig = summary_figure(sol, model)
        fmt = os.path.splitext(args.plot)[1].lower().lstrip(".")
        _atomic_write(args.plot, lambda f: fig.savefig(f, dpi=110, format=fmt))
        print(f"wrote {args.plot}")
    return 0


def statics(args) -> int:
    """``equilibrium``: ``difflie.equilibrium`` of the model from its initial configuration, then
    the lowest ``--modes`` eigenfrequencies of ``difflie.modes`` about it."""
    import numpy as np

    from .. import xla
    from ..joint_space import joint_coordinates
    from ..results import RESULTS
    from ..solvers.statics import equilibrium, modes

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
