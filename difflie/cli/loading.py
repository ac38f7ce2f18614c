"""The model and the solver that the arguments name: a built-in model with ``--set``, a model or
robot file with its options, a solver with its own."""

from __future__ import annotations

import inspect
import os

from . import CliError
from .arguments import CONSTRAINED_SOLVER, FREE_SOLVER, SOLVERS


def builtin_models() -> dict[str, object]:
    """``{cli-name: function}`` of every function exported by ``difflie.models``."""
    from .. import models

    return {
        name.replace("_", "-"): fn
        for name, fn in inspect.getmembers(models, inspect.isfunction)
        if not name.startswith("_")
    }


def load(args):
    from ..io import load_model
    from ..io.robot import ROBOT_EXTENSIONS

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
