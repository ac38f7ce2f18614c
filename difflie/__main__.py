"""Command line: ``python -m difflie simulate MODEL ...`` and ``python -m difflie list``.

Bad input prints one line on stderr and exits with status 2 (1 for a failed simulation), with
no traceback and no partial output file.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
import time

SOLVERS = {
    "rkmk4": "explicit Runge-Kutta-Munthe-Kaas, order 4, fixed step",
    "dopri5": "explicit RKMK Dormand-Prince 5(4), adaptive (--rtol/--atol)",
    "gen-alpha": "Lie-group generalized-alpha, index 3, rho_inf = 0.9",
    "backward-euler": "implicit Euler, index 3, --formulation rA|rp|re",
    "dqvi": "dual-quaternion variational integrator (single free body)",
}


class CliError(Exception):
    """An error reported as one line, exit status 2."""


def builtin_models() -> dict[str, object]:
    """``{cli-name: function}`` of every function exported by :mod:`difflie.models`."""
    from . import models

    return {
        name.replace("_", "-"): fn
        for name, fn in inspect.getmembers(models, inspect.isfunction)
        if not name.startswith("_")
    }


def load(model: str):
    from .io import load_model

    table = builtin_models()
    key = model.replace("_", "-")
    if key in table:
        return table[key]()
    if not os.path.exists(model):
        raise CliError(f"no model file or built-in model named {model!r} (see `python -m difflie list`)")
    return load_model(model)


def default_solvers() -> dict[str, object]:
    """``{cli-name: solver}`` with the command line's defaults (the keys of :data:`SOLVERS`)."""
    import difflie as dl

    return {"rkmk4": dl.RKMK4(), "dopri5": dl.Dopri5(), "gen-alpha": dl.GeneralizedAlpha(rho_inf=0.9),
            "backward-euler": dl.BackwardEuler(), "dqvi": dl.DQVI()}  # fmt: skip


def make_solver(args, model):
    import difflie as dl

    constrained = getattr(model, "constraints", None) is not None
    name = args.solver or ("gen-alpha" if constrained else "rkmk4")
    if name not in SOLVERS:
        raise CliError(f"unknown solver {name!r}; choose one of {', '.join(SOLVERS)}")
    if args.formulation is not None and name != "backward-euler":
        raise CliError("--formulation applies to --solver backward-euler only")
    controller = dl.ConstantStepSize()
    solver = default_solvers()[name]
    if name == "dopri5":
        rtol = 1e-6 if args.rtol is None else args.rtol
        controller = dl.PIDController(rtol=rtol, atol=rtol if args.atol is None else args.atol)
    elif name == "backward-euler":
        solver = dl.BackwardEuler(formulation=args.formulation or "rA")
    try:
        solver.check_model(model)  # the solver's own rule, before anything is compiled
    except ValueError as e:
        raise CliError(f"solver {name!r} cannot take this model: {e}") from None
    return name, solver, controller


def run(args) -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from . import diagnostics, xla
    from .simulate import SaveAt, simulate

    if args.dt is not None and not args.dt > 0:
        raise CliError(f"--dt must be positive, got {args.dt}")
    if not args.t1 > 0:
        raise CliError(f"--t1 must be positive, got {args.t1}")
    for flag in ("rtol", "atol"):
        value = getattr(args, flag)
        if value is not None and not value > 0:
            raise CliError(f"--{flag} must be positive, got {value}")
    for path in (args.out, args.plot):
        if path is not None and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise CliError(f"cannot write {path}: no such directory")
    model = load(args.model)
    name, solver, controller = make_solver(args, model)
    dt = 1e-3 if args.dt is None else args.dt
    n_steps = int(round(args.t1 / dt))
    saveat = SaveAt(steps=True)

    show = sys.stderr.isatty() if args.progress is None else args.progress

    def go(m):
        return simulate(m, solver, 0.0, args.t1, dt, saveat=saveat, stepsize_controller=controller,
                        max_steps=max(100_000, 10 * n_steps), throw=False, progress=True if show else None)  # fmt: skip

    print(f"difflie: {args.model} with {name}, t1 = {args.t1} s, "
          + (f"rtol = {controller.rtol}" if hasattr(controller, "rtol") else f"dt = {dt} ({n_steps} steps)"),
          file=sys.stderr)  # fmt: skip
    t_start = time.perf_counter()
    compiled = xla.jit(go).lower(model).compile()
    t_compiled = time.perf_counter()
    sol = jax.block_until_ready(compiled(model))
    t_done = time.perf_counter()
    from .results import RESULTS

    if sol.result != RESULTS.successful:
        print(f"difflie: simulation failed: {sol.failure_message()}", file=sys.stderr)
        return 1
    keep = np.isfinite(np.asarray(sol.ts))
    states = jax.tree.map(lambda x: x[keep], sol.states)
    ts = sol.ts[keep]
    e = np.asarray(diagnostics.energy(model, states))
    drift = float(np.max(np.abs(e - e[0])) / max(abs(e[0]), float(np.max(np.abs(np.asarray(diagnostics.kinetic_energy(model, states))))), 1e-300))
    residual = float(jnp.max(diagnostics.constraint_residual(model, ts, states)))
    s = sol.stats
    print(
        f"steps {int(s.steps)}, rejected {int(s.rejected_steps)}, evaluations {int(s.evaluations)}, "
        f"Newton iterations {int(s.newton_iterations)}, relative energy drift {drift:.3e}, "
        f"max constraint residual {residual:.3e}, compile {t_compiled - t_start:.2f} s, "
        f"run {t_done - t_compiled:.3f} s"
    )
    if args.out is not None:
        arrays = dict(
            t=np.asarray(ts), position=np.asarray(states.position), rotation=np.asarray(states.rotation),
            velocity=np.asarray(states.velocity), angular_velocity=np.asarray(states.angular_velocity),
            body_names=np.asarray(model.body_names),
        )  # fmt: skip
        _atomic_write(args.out, lambda f: np.savez(f, **arrays))
        print(f"wrote {args.out}")
    if args.plot is not None:
        from .plot import summary_figure

        fig = summary_figure(sol, model)
        _atomic_write(args.plot, lambda f: fig.savefig(f, dpi=110, format="png"))
        print(f"wrote {args.plot}")
    return 0


def _atomic_write(path: str, write) -> None:
    """Write through a temporary file in the same directory, so no partial file is left."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    try:
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


def list_all() -> int:
    print("built-in models (and the solvers that take them):")
    for name, fn in builtin_models().items():
        doc = (inspect.getdoc(fn) or "").splitlines()
        print(f"  {name:24s} {doc[0] if doc else ''}")
        print(f"  {'':24s} solvers: {', '.join(accepting_solvers(fn()))}")
    print("solvers:")
    for name, doc in SOLVERS.items():
        print(f"  {name:24s} {doc}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m difflie", description="Simulate rigid and multibody systems.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("simulate", help="simulate a model file or a built-in model")
    s.add_argument("model", help="model file (.json, .mdl) or built-in name (see `list`)")
    s.add_argument("--solver", choices=list(SOLVERS))
    s.add_argument("--formulation", choices=["rA", "rp", "re"])
    s.add_argument("--dt", type=float, help="step size (initial step for dopri5); default 1e-3")
    s.add_argument("--t1", type=float, default=1.0, help="end time, default 1")
    s.add_argument("--rtol", type=float)
    s.add_argument("--atol", type=float, help="defaults to --rtol")
    s.add_argument("--out", help="write the trajectory to FILE.npz")
    s.add_argument("--plot", help="write a summary figure to FILE.png")
    s.add_argument("--float32", action="store_true", help="compute in float32 (default: float64)")
    s.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")  # fmt: skip
    sub.add_parser("list", help="list built-in models and solvers")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "list":
            return list_all()
        if not args.float32:  # this process is the user's program: float64 by default
            import jax

            jax.config.update("jax_enable_x64", True)
        return run(args)
    except (CliError, ValueError, FileNotFoundError, KeyError, TypeError) as e:
        print(f"difflie: error: {e}".splitlines()[0] if str(e) else f"difflie: error: {type(e).__name__}", file=sys.stderr)
        return 2
    except Exception as e:  # an error raised inside the compiled run (eqx.error_if)
        message = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        print(f"difflie: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
