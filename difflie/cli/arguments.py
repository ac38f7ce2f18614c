"""The command line's parser and the parsers of its option values; ``SOLVERS`` names the solvers
it offers."""

from __future__ import annotations

import argparse
import math
import re
import sys

SOLVERS = {
    "rkmk4": "explicit Runge-Kutta-Munthe-Kaas, order 4, fixed step",
    "dopri5": "explicit RKMK Dormand-Prince 5(4), adaptive (--rtol/--atol)",
    "gen-alpha": "Lie-group generalized-alpha, index 3, rho_inf = 0.9",
    "backward-euler": "implicit Euler, index 3, --formulation rA|rp|re",
    "dqvi": "dual-quaternion variational integrator (single free body)",
}
CONSTRAINED_SOLVER, FREE_SOLVER = "gen-alpha", "rkmk4"  # the defaults, with and without constraints


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (not the usage text too)."""

    def error(self, message):
        print(f"difflie: error: {message}", file=sys.stderr)
        sys.exit(2)


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
    from ..expr import Expression, ExpressionError

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
