"""Model files: the native JSON format and the C2 ``.json`` / C1 ``.mdl`` files
of the rA/rp/re paper's public codes (Kissel, Taves & Negrut).

Schema (a superset of the public codes' C2 format)::

    {"name": ..., "gravity": [0, 0, -9.81],                       (optional)
     "bodies": [{"name": "ground", "id": 0},                      (the ground: no state)
                {"name": ..., "id": 1, "r": [3], "r_dot": [3], "A": [[3x3]], "omega": [3],
                 "mass": m, "inertia": [[3x3]] or [3] (diagonal)}, ...],
     "constraints": [{"name": ..., "type": "DP1" | "DP2" | "D" | "CD" | "angle" | "dp1_swap",
                      "body_i": id, "body_j": id, "a_bar_i": ..., "f": "expression of t"}, ...],
     "joints": [{"type": "spherical" | "revolute" | "universal" | "cylindrical" | "prismatic"
                 | "fixed", "body_i": id, "body_j": id, ...}, ...]}              (optional)

``r`` is the COM (= body-frame origin), ``A`` maps body to world (row-major), ``omega`` is the
body-frame angular velocity. ``f`` strings go through the safe evaluator ``difflie.expr``;
their derivatives come from autodiff and the files' ``f_dot`` / ``f_ddot`` are ignored (some
are wrong). Mass and inertia missing from the file are given by the caller, per body name.

After loading, the initial configuration is assembled at ``t = 0`` (with a warning stating the
residual when it exceeds ``1e-6``) and the initial velocities are projected onto the velocity
constraints (with a warning when they change by more than ``1e-6``).
"""

from __future__ import annotations

import difflib
import inspect
import json
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .. import constraints as C
from ..body import RigidBody, check_bodies
from ..constraints.basic import VECTOR_FIELDS
from ..constraints.joints import joint_name
from ..expr import Expression, ExpressionError
from ..model import Model
from ..xla import eager

_JOINT_FIELDS = {
    "spherical": ("s_bar_i", "s_bar_j"),
    "revolute": ("s_bar_i", "axis_i", "s_bar_j", "axis_j"),
    "universal": ("s_bar_i", "a_bar_i", "s_bar_j", "a_bar_j"),
    "cylindrical": ("s_bar_i", "axis_i", "s_bar_j", "axis_j"),
    "prismatic": ("s_bar_i", "axis_i", "s_bar_j", "axis_j", "ref_i", "ref_j"),
    "fixed": ("s_bar_i", "s_bar_j"),
}
ASSEMBLY_WARN = 1e-6
_ASSEMBLY_TOL = 1e-12  # the 2-norm of the rows below which the initial configuration is kept


class ModelFileError(ValueError):
    """A model file entry that is missing or malformed; the message names its JSON path."""


def _show(value, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _numbers(value, depth: int) -> bool:
    """``value`` is a number (``depth`` 0) or lists nested ``depth`` deep with numbers at the
    bottom: no booleans, no numeric strings."""
    if depth == 0:
        return _is_number(value)
    return isinstance(value, list) and all(_numbers(v, depth - 1) for v in value)


def _array(value, path: str, shape: tuple[int, ...]) -> np.ndarray:
    if not _numbers(value, len(shape)):
        raise ModelFileError(f"{path}: expected numbers with shape {shape}, got {_show(value)}")
    try:
        arr = np.asarray(value, dtype=float)
    except ValueError:  # ragged
        raise ModelFileError(f"{path}: expected shape {shape}, got rows of different lengths {_show(value)}") from None
    except OverflowError:
        raise ModelFileError(f"{path}: values must be finite, got {_show(value)}") from None
    if arr.shape != shape:
        raise ModelFileError(f"{path}: expected shape {shape}, got {arr.shape} ({_show(value)})")
    if not np.all(np.isfinite(arr)):
        raise ModelFileError(f"{path}: values must be finite, got {_show(value)}")
    return arr


def _string(entry: Mapping, key: str, path: str, default: str | None = None) -> str:
    value = entry.get(key, default) if default is not None else _get(entry, key, path)
    if not isinstance(value, str):
        raise ModelFileError(f"{path}.{key}: expected a string, got {_show(value)}")
    return value


def _id(value, path: str):
    """A body id: an integer or a string."""
    if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
        raise ModelFileError(f"{path}: a body id must be an integer or a string, got {_show(value)}")
    return value


_TOP_KEYS = ("name", "gravity", "bodies", "constraints", "joints")
_BODY_KEYS = ("name", "id", "r", "r_dot", "A", "omega", "omega_dot", "mass", "inertia")  # omega_dot: C1 files, unused
# The C2 files list every vector of every basic constraint (placeholders where unused).
_CONSTRAINT_KEYS = ("name", "type", "body_i", "body_j", "f", "f_dot", "f_ddot", "theta",
                    *sorted({key for keys in VECTOR_FIELDS.values() for key in keys}))  # fmt: skip


def _known_keys(entry: Mapping, known, path: str) -> None:
    """Refuse a key the format does not have (a typo would otherwise be ignored silently)."""
    absent = [str(k) for k in known if k not in entry]  # a renamed key: guess among these first
    for key in entry:
        if key not in known:
            close = difflib.get_close_matches(str(key), absent, n=1) or difflib.get_close_matches(str(key), [str(k) for k in known], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
            raise ModelFileError(f"{path}.{key}: unknown key{hint}")


def _get(entry: Mapping, key: str, path: str):
    if key not in entry:
        raise ModelFileError(f"{path}: missing key {key!r}")
    return entry[key]


def _expression(value, path: str):
    """A constant float or an ``Expression`` of ``t``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if callable(value):
        return value
    if not isinstance(value, str):
        raise ModelFileError(f"{path}: expected a number or an expression string of t, got {value!r}")
    try:
        expr = Expression(value)
    except ExpressionError as err:
        raise ModelFileError(f"{path}: {err}") from None
    if expr.is_constant():
        return float(expr(0.0))
    return expr


def _inertia(value, path: str) -> np.ndarray:
    """A 3x3 inertia, or its 3 principal moments (a list of numbers)."""
    diagonal = isinstance(value, list) and not any(isinstance(v, list) for v in value)
    return np.diag(_array(value, path, (3,))) if diagonal else _array(value, path, (3, 3))


def _per_body(value, names: list[str], what: str, shape) -> list[np.ndarray | None]:
    """Caller-supplied mass / inertia: a mapping by body name or a sequence in file order."""
    if value is None:
        return [None] * len(names)
    if isinstance(value, Mapping):
        unknown = set(value) - set(names)
        if unknown:
            raise ValueError(f"load_model: {what} given for unknown bodies {sorted(unknown)}; bodies are {names}")
        items = [value.get(n) for n in names]
    else:
        items = list(value)
        if len(items) != len(names):
            raise ValueError(f"load_model: {what} has {len(items)} entries for {len(names)} bodies {names}")
    return [None if v is None else _given(v, f"{what} of body {n!r}", shape) for n, v in zip(names, items)]


def _given(value, what: str, shape) -> np.ndarray:
    """A caller-supplied mass (``shape`` ``()``) or inertia (``(3, 3)``, or 3 principal moments)."""
    if isinstance(value, jax.core.Tracer):
        raise ValueError(
            f"load_model: {what}: a traced value (under jax.grad, jit or vmap); a file is read once, outside: load the "
            "model with numbers, then put the traced ones in with eqx.tree_at (for example eqx.tree_at(lambda m: "
            "m.bodies.mass, model, masses))"
        )
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"load_model: {what}: expected numbers, got {_show(value)}") from None
    if shape == (3, 3) and arr.shape == (3,):
        arr = np.diag(arr)
    if arr.shape != shape:
        raise ValueError(f"load_model: {what} must have shape {shape}, got {arr.shape}")
    return arr


def _nearest_rotation(A: np.ndarray, path: str) -> np.ndarray:
    """Project the printed (rounded) matrix onto SO(3); reject anything far from a rotation."""
    U, _, Vt = np.linalg.svd(A)
    R = U @ Vt
    if np.linalg.det(R) < 0:
        raise ModelFileError(f"{path}: not a rotation matrix (a reflection: det A = {np.linalg.det(A):.3g})")
    if np.abs(R - A).max() > 1e-4:
        raise ModelFileError(f"{path}: not a rotation matrix (A^T A - I up to {np.abs(A.T @ A - np.eye(3)).max():.2e})")
    return R


# What a file that is not JSON may be, by its extension.
_OTHER_FORMATS = {
    ".xacro": "a xacro file is a URDF with macros: expand it first (`xacro robot.urdf.xacro > robot.urdf`)",
    ".sdf": "SDFormat is not read: convert the model to URDF or MJCF",
}


def _formats(path: str) -> str:
    """For a file that is not JSON and not named ``.json``: the formats ``load_model`` reads."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".json":
        return ""
    other = _OTHER_FORMATS.get(ext)
    return "; difflie reads JSON model files (.json, .mdl), URDF (.urdf) and MJCF (.xml)" + (f"; {other}" if other else "")


def _read(path: str) -> dict:
    if os.path.isdir(path):
        raise ModelFileError(f"{path}: is a directory, not a model file")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as err:
        raise ModelFileError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}){_formats(path)}") from None
    except UnicodeDecodeError:
        raise ModelFileError(f"{path}: not valid JSON (not UTF-8 text){_formats(path)}") from None
    except RecursionError:
        raise ModelFileError(f"{path}: not valid JSON (nested too deeply)") from None
    except OSError as err:
        raise ModelFileError(f"{path}: cannot read ({err.strerror})") from None
    if not isinstance(data, dict):
        raise ModelFileError(f"{path}: the top level must be a JSON object")
    return data


def _driver(value, path: str):
    if isinstance(value, str):
        try:
            return Expression(value)
        except ExpressionError as err:
            raise ModelFileError(f"{path}: {err}") from None
    if callable(value):
        return value
    raise ModelFileError(f"{path}: a driver must be an expression string or a callable of t, got {value!r}")


def load_model(
    path: str | os.PathLike,
    *,
    mass=None,
    inertia=None,
    drivers: Mapping[str, str | Callable] | None = None,
    angle_drivers: Mapping[str, Mapping[str, Any]] | None = None,
    gravity=None,
    assemble: bool = True,
    default_mass: float | None = None,
    default_inertia=None,
    joint_positions: Mapping[str, float] | None = None,
    joint_velocities: Mapping[str, float] | None = None,
    joint_torques: Mapping[str, Any] | Callable | None = None,
    joint_feedback: Callable | None = None,
    joint_limits: bool = False,
    joint_friction: bool = False,
    joint_couplings: bool = False,
    controls: Mapping[str, Any] | Callable | None = None,
    base_pose=None,
    base_velocity=None,
    floating_base: bool | None = None,
    locked_joints=(),
    redundant: str = "error",
    bound_mass: float = 0.0,
    bound_inertia: float = 0.0,
    balance_inertia: bool = False,
    **builtin_kwargs,
) -> Model:
    """Load a model file (native JSON, C2 ``.json`` or C1 ``.mdl`` of the
    rA/rp/re paper's public codes), a robot (URDF ``.urdf`` or MJCF ``.xml``) or a built-in name
    (with that model function's keywords).

    Robots only (``difflie.io.robot.load_robot`` says more): ``joint_positions`` /
    ``joint_velocities`` ``{joint name: value}``, the initial state by forward kinematics;
    ``joint_torques`` ``{joint name: number, expression of t or function of t}`` or one function
    ``t -> (n_joints,)``; ``joint_feedback`` ``(t, q, qd) -> (n_joints,)``, torques from the
    joint state (a controller); ``joint_limits=True`` enforces the file's joint limits as
    spring-dampers (``difflie.joint_laws.JointLimits``), ``joint_friction=True`` its joint
    friction (``JointFriction``) and ``joint_couplings=True`` its joint couplings (URDF
    ``mimic``, MJCF joint equalities: ``JointCouplings``); ``controls`` drives an MJCF file's
    actuators (``{actuator name: value}``: ``difflie.joint_laws.Actuators``); ``base_pose`` / ``base_velocity`` of a floating base;
    ``floating_base`` (frees a URDF's root link); ``locked_joints`` (welded where
    ``joint_positions`` puts them); ``bound_mass`` / ``bound_inertia`` / ``balance_inertia``
    (MuJoCo's corrections of placeholder inertials: least mass and principal moment of every
    link, moments that break the triangle inequality averaged).

    ``mass`` / ``inertia``: per body (mapping by body name, or a sequence in file order); they
    override the file's values. ``drivers``: ``{constraint name: expression or callable}``
    replacing a constraint's ``f`` (the C2 files carry placeholder driver strings).
    ``angle_drivers``: ``{name of a DP1 driver: {"theta": expr, "a_bar_i" or "a_bar_j": v,
    "swap": bool}}`` turns a DP1 driver ``cos(theta(t))`` into the rank-safe angle row (or, with
    ``"swap": true``, the public codes' switch to the alternate DP1 whose vector ``v`` replaces
    ``a_bar_i`` / ``a_bar_j`` and whose ``f`` is ``sin(theta(t))``).
    ``default_mass`` / ``default_inertia`` (a 3x3 matrix, or 3 principal moments): for every
    body that neither the file nor ``mass`` / ``inertia`` give one (the command line's
    ``--mass`` / ``--inertia``; the C1/C2 files have none).
    ``redundant``: constraint rows that depend on the others at the initial configuration (a
    planar loop of revolute joints; in a robot file, a loop closed by an MJCF ``connect``) raise
    ``ValueError`` (``"error"``) or are removed with a warning naming them (``"remove"``:
    ``difflie.io.remove_dependent_rows``).

    Every entry is checked before anything is built: a malformed or unknown key raises a
    ``ModelFileError`` naming its JSON path (``$.bodies[1].omgea: unknown key; did you
    mean 'omega'?``).
    """
    path = os.fspath(path)
    if path.lower().endswith((".urdf", ".xml")):  # robots (URDF, MJCF): difflie.io.robot
        from .robot import load_robot

        if builtin_kwargs:
            raise ValueError(f"load_model: unexpected keyword arguments {sorted(builtin_kwargs)} for a robot file")
        return load_robot(path, redundant=redundant, mass=mass, inertia=inertia, drivers=drivers, angle_drivers=angle_drivers, gravity=gravity,
                          default_mass=default_mass, default_inertia=default_inertia, joint_positions=joint_positions,
                          joint_velocities=joint_velocities, joint_torques=joint_torques,
                          joint_feedback=joint_feedback, joint_limits=joint_limits,
                          joint_friction=joint_friction, joint_couplings=joint_couplings, controls=controls, base_pose=base_pose,
                          base_velocity=base_velocity, floating_base=floating_base, locked_joints=locked_joints,
                          bound_mass=bound_mass, bound_inertia=bound_inertia, balance_inertia=balance_inertia)  # fmt: skip
    robot_only = dict(joint_positions=joint_positions, joint_velocities=joint_velocities, joint_torques=joint_torques, controls=controls,
                      joint_feedback=joint_feedback, base_pose=base_pose, base_velocity=base_velocity, floating_base=floating_base)  # fmt: skip
    given = [name for name, value in robot_only.items() if value is not None]
    given += [name for name, value in (("locked_joints", locked_joints), ("joint_limits", joint_limits),
                                       ("joint_friction", joint_friction), ("joint_couplings", joint_couplings),
                                       ("bound_mass", bound_mass), ("bound_inertia", bound_inertia), ("balance_inertia", balance_inertia)) if value]  # fmt: skip
    if given:
        raise ValueError(f"load_model: {', '.join(f'{name}=' for name in given)} only for robot files (.urdf, MJCF .xml)")
    if not os.path.exists(path):
        if redundant != "error":
            raise ValueError(f"load_model: redundant= is for model files and connect, not the built-in model {path!r}")
        return _builtin(path, builtin_kwargs)
    if builtin_kwargs:
        raise ValueError(f"load_model: unexpected keyword arguments {sorted(builtin_kwargs)} for a model file")
    data = _read(path)
    _known_keys(data, _TOP_KEYS, "$")
    bodies_raw = _get(data, "bodies", "$")
    cons_raw = data.get("constraints", [])
    joints_raw = data.get("joints", [])
    if not isinstance(bodies_raw, list) or not bodies_raw:
        raise ModelFileError("$.bodies: expected a non-empty list of bodies")
    for key, value in (("constraints", cons_raw), ("joints", joints_raw)):
        if not isinstance(value, list):
            raise ModelFileError(f"$.{key}: expected a list of {key}, got {_show(value)}")

    ids: dict[Any, int] = {}
    names: list[str] = []
    paths: list[str] = []  # the JSON path of each body
    ground = None  # the JSON path of the ground
    state = {"r": [], "r_dot": [], "A": [], "omega": []}
    file_mass, file_inertia = [], []
    for k, b in enumerate(bodies_raw):
        bp = f"$.bodies[{k}]"
        if not isinstance(b, dict):
            raise ModelFileError(f"{bp}: expected an object")
        _known_keys(b, _BODY_KEYS, bp)
        name = _string(b, "name", bp)
        bid = _id(_get(b, "id", bp), f"{bp}.id")
        if name == "ground" and ground is not None:
            raise ModelFileError(f"{bp}: a second ground body (the first is {ground}); the body named 'ground' is the fixed world frame, give it once")
        if bid in ids:
            raise ModelFileError(f"{bp}.id: duplicate body id {bid!r}")
        if name == "ground":
            ids[bid], ground = C.GROUND, bp
            continue
        if name in names:
            raise ModelFileError(f"{bp}.name: duplicate body name {name!r}")
        ids[bid] = len(names)
        names.append(name)
        paths.append(bp)
        state["r"].append(_array(_get(b, "r", bp), f"{bp}.r", (3,)))
        state["r_dot"].append(_array(b.get("r_dot", [0, 0, 0]), f"{bp}.r_dot", (3,)))
        state["A"].append(_nearest_rotation(_array(_get(b, "A", bp), f"{bp}.A", (3, 3)), f"{bp}.A"))
        state["omega"].append(_array(b.get("omega", [0, 0, 0]), f"{bp}.omega", (3,)))
        file_mass.append(None if "mass" not in b else float(_array(b["mass"], f"{bp}.mass", ())))
        file_inertia.append(None if "inertia" not in b else _inertia(b["inertia"], f"{bp}.inertia"))
    if not names:
        raise ModelFileError("$.bodies: no body besides the ground")

    default_mass = None if default_mass is None else float(_given(default_mass, "default_mass", ()))
    default_inertia = None if default_inertia is None else _given(default_inertia, "default_inertia", (3, 3))
    masses = [next((x for x in (u, f, default_mass) if x is not None), None) for u, f in zip(_per_body(mass, names, "mass", ()), file_mass)]
    inertias = [next((x for x in (u, f, default_inertia) if x is not None), None) for u, f in zip(_per_body(inertia, names, "inertia", (3, 3)), file_inertia)]
    for k, n in enumerate(names):
        if masses[k] is None:
            raise ValueError(f"load_model: body {n!r} has no mass in {path}; pass mass={{{n!r}: ...}} (command line: --mass)")
        if inertias[k] is None:
            raise ValueError(f"load_model: body {n!r} has no inertia in {path}; pass inertia={{{n!r}: ...}} (command line: --inertia)")
        try:
            check_bodies(np.asarray([masses[k]]), inertias[k][None], np.zeros((1, 3)), (n,))
        except ValueError as err:  # its text begins with check_bodies' label of the body
            raise ModelFileError(f"{paths[k]}: body {n!r}: {str(err).split(': ', 1)[-1]}") from None

    drivers = dict(drivers or {})
    angle_drivers = dict(angle_drivers or {})
    rows = []
    seen: dict[str, str] = {}  # constraint name -> its JSON path
    groups: dict[str, str] = {}  # joint name (difflie.constraints.joint_name) -> the JSON path of its first entry
    for k, c in enumerate(cons_raw):
        cp = f"$.constraints[{k}]"
        if not isinstance(c, dict):
            raise ModelFileError(f"{cp}: expected an object")
        _known_keys(c, _CONSTRAINT_KEYS, cp)
        kind = _get(c, "type", cp)
        if not isinstance(kind, str) or kind not in VECTOR_FIELDS:
            raise ModelFileError(f"{cp}.type: expected one of {sorted(VECTOR_FIELDS)}, got {_show(kind)}")
        name = _string(c, "name", cp, default=f"{kind}_{k}")
        if name in seen:
            raise ModelFileError(f"{cp}.name: duplicate constraint name {name!r} (also {seen[name]})")
        seen[name] = cp
        groups.setdefault(joint_name(name), cp)
        bi, bj = _bodies(ids, names, c, cp, name)
        vecs = [_array(_get(c, key, cp), f"{cp}.{key}", (3,)) for key in VECTOR_FIELDS[kind]]
        if kind in ("angle", "dp1_swap"):
            theta = _expression(_get(c, "theta", cp), f"{cp}.theta")
            rows.append(_make_angle(kind, bi, vecs[0], bj, vecs[1], vecs[2], theta, name))
            continue
        f = _driver(drivers[name], f"drivers[{name!r}]") if name in drivers else _expression(c.get("f", 0.0), f"{cp}.f")
        if name in angle_drivers:
            if kind != "DP1":
                raise ValueError(f"load_model: angle_drivers[{name!r}]: constraint {name!r} is a {kind}, not a DP1")
            rows.append(_angle_from_dp1(name, bi, vecs[0], bj, vecs[1], angle_drivers[name]))
            continue
        builder = {"DP1": C.dp1, "DP2": C.dp2, "D": C.d, "CD": C.cd}[kind]
        if kind == "CD":
            rows.append(C.cd(vecs[0], bi, vecs[1], bj, vecs[2], f=f, name=name))
        elif kind == "DP2":
            rows.append(C.dp2(bi, vecs[0], vecs[1], bj, vecs[2], f=f, name=name))
        else:
            rows.append(builder(bi, vecs[0], bj, vecs[1], f=f, name=name))
    for k, j in enumerate(joints_raw):
        rows.extend(_joint(ids, names, j, f"$.joints[{k}]", groups))
    for keyword, given in (("drivers", drivers), ("angle_drivers", angle_drivers)):
        unknown = [n for n in given if n not in seen]
        if unknown:
            known = f"the file's constraints are {list(seen)}" if seen else "the file has no basic constraints ($.constraints)"
            raise ValueError(f"load_model: {keyword}: no constraint named {', '.join(map(repr, unknown))}; {known}")

    g = data.get("gravity", [0.0, 0.0, -9.81]) if gravity is None else gravity
    g = _array(g, "$.gravity", (3,))
    bodies = _rigid_bodies(np.asarray(masses), np.stack(inertias), tuple(names))
    model = Model(
        bodies,
        r0=np.stack(state["r"]),
        R0=np.stack(state["A"]),
        v0=np.stack(state["r_dot"]),
        omega0=np.stack(state["omega"]),
        gravity=g,
        constraints=C.ConstraintSet(rows, len(names)) if rows else None,
        body_names=tuple(names),
    )
    return consistent_initial_state(model, label=path, redundant=redundant) if (assemble and rows) else model


def _body(ids, entry, key, path) -> int:
    bid = _id(_get(entry, key, path), f"{path}.{key}")
    if bid not in ids:
        raise ModelFileError(f"{path}.{key}: unknown body id {bid!r} (known ids: {sorted(ids, key=str)})")
    return ids[bid]


def _bodies(ids, names, entry, path, name) -> tuple[int, int]:
    """The indices of ``body_i`` and ``body_j`` of a constraint or joint: two different bodies."""
    bi, bj = _body(ids, entry, "body_i", path), _body(ids, entry, "body_j", path)
    if bi == bj:
        body = "the ground" if bi == C.GROUND else f"body {names[bi]!r}"
        label = f"{path} ({name!r})" if "name" in entry else path
        raise ModelFileError(f"{label}: body_i and body_j are both {body} (id {entry['body_i']!r})")
    return bi, bj


def _make_angle(kind, bi, a, bj, b, c, theta, name):
    theta = theta if callable(theta) else C.Driver(lambda t, v: v + 0.0 * t, jnp.asarray(theta))
    return (C.angle if kind == "angle" else C.dp1_swap)(bi, a, bj, b, c, theta, name=name)


def _angle_from_dp1(name, bi, a_i, bj, a_j, spec):
    """DP1 ``a_i . a_j = cos theta`` + alternate vector -> angle (or swap) row."""
    if not isinstance(spec, Mapping) or "theta" not in spec:
        raise ValueError(f"load_model: angle_drivers[{name!r}] must be a mapping with 'theta' and 'a_bar_i' or 'a_bar_j'")
    theta = _expression(spec["theta"], f"angle_drivers[{name!r}].theta")
    kind = "dp1_swap" if spec.get("swap", False) else "angle"
    if "a_bar_j" in spec:  # alternate vector on body j: the fixed pair (a_j, alt) is on j
        alt = _array(spec["a_bar_j"], f"angle_drivers[{name!r}].a_bar_j", (3,))
        return _make_angle(kind, bi, a_i, bj, a_j, alt, theta, name)
    if "a_bar_i" in spec:  # the pair is on body i: swap the roles of the bodies
        alt = _array(spec["a_bar_i"], f"angle_drivers[{name!r}].a_bar_i", (3,))
        return _make_angle(kind, bj, a_j, bi, a_i, alt, theta, name)
    raise ValueError(f"load_model: angle_drivers[{name!r}] needs the alternate vector 'a_bar_i' or 'a_bar_j'")


def _joint(ids, names, j, jp, groups):
    if not isinstance(j, dict):
        raise ModelFileError(f"{jp}: expected an object")
    kind = _get(j, "type", jp)
    if not isinstance(kind, str) or kind not in _JOINT_FIELDS:
        raise ModelFileError(f"{jp}.type: expected one of {sorted(_JOINT_FIELDS)}, got {_show(kind)}")
    extra = ("relative_rotation",) if kind == "fixed" else ()
    _known_keys(j, ("type", "name", "body_i", "body_j", *_JOINT_FIELDS[kind], *extra), jp)
    name = _string(j, "name", jp, default=f"{kind}_{jp}")
    if name in groups:
        raise ModelFileError(f"{jp}.name: duplicate joint name {name!r} (also {groups[name]})")
    groups[name] = jp
    bi, bj = _bodies(ids, names, j, jp, name)
    v = {key: _array(_get(j, key, jp), f"{jp}.{key}", (3,)) for key in _JOINT_FIELDS[kind]}
    for key in _JOINT_FIELDS[kind]:
        if not key.startswith("s_bar") and not np.linalg.norm(np.asarray(v[key])) > 0:
            raise ModelFileError(f"{jp}.{key}: a direction needs a nonzero length, got {_show(j[key])}")
    if kind == "spherical":
        return C.spherical(bi, v["s_bar_i"], bj, v["s_bar_j"], name)
    if kind in ("revolute", "cylindrical"):
        fn = C.revolute if kind == "revolute" else C.cylindrical
        return fn(bi, v["s_bar_i"], v["axis_i"], bj, v["s_bar_j"], v["axis_j"], name)
    if kind == "universal":
        return C.universal(bi, v["s_bar_i"], v["a_bar_i"], bj, v["s_bar_j"], v["a_bar_j"], name)
    if kind == "prismatic":
        return C.prismatic(bi, v["s_bar_i"], v["axis_i"], bj, v["s_bar_j"], v["axis_j"], v["ref_i"], v["ref_j"], name)
    rel = None if "relative_rotation" not in j else _array(j["relative_rotation"], f"{jp}.relative_rotation", (3, 3))
    return C.fixed(bi, v["s_bar_i"], bj, v["s_bar_j"], rel, name)


def _rigid_bodies(mass, inertia, names) -> RigidBody:
    return RigidBody(jnp.asarray(mass), jnp.asarray(inertia), names=names)


@eager
def _initial_rows(model: Model, t0) -> Array:
    """The constraint rows at the model's initial configuration."""
    return model.constraint_residual(t0, model.r0 - jnp.einsum("bij,bj->bi", model.R0, model.bodies.com), model.R0)


# Up to this many constraint rows the loader checks them for independence (a dense SVD of G).
_RANK_CHECK_ROWS = 1200


def check_independent(model: Model, t0, r, R, label: str) -> Array | None:
    """``ValueError`` when the constraint rows are dependent at ``(r, R)``: the rank of ``G``
    (rA, singular values above ``1e-9`` of the largest) is less than its rows. The implicit
    solvers need independent rows (their saddle-point matrices are singular otherwise); the
    message names the rows of the dependent combinations (the left null space of ``G``).
    Returns the dense ``G`` it checked (``None`` without rows or above ``_RANK_CHECK_ROWS``)."""
    from ..constraints import jacobians as jac
    from ..constraints.formulations import get_formulation

    m = model.num_constraints
    if m == 0 or m > _RANK_CHECK_ROWS:
        return None
    G = jac.jacobian(model, get_formulation("rA"), jnp.asarray(t0, r.dtype), r, R)
    u, s, _ = np.linalg.svd(np.asarray(G), full_matrices=True)
    rank = int(np.sum(s > 1e-9 * max(s[0], 1e-300)))
    if rank == m:
        return G
    null = u[:, rank:]  # combinations of rows that vanish
    involved = np.flatnonzero(np.max(np.abs(null), axis=1) > 1e-6)
    names = model.constraint_names
    joints = list(dict.fromkeys(joint_name(names[k]) for k in involved))
    raise ValueError(
        f"{label}: the constraints are redundant: {m} rows, {rank} independent at t = {float(t0)} "
        f"({m - rank} dependent); the dependent rows belong to {joints}. The implicit solvers need "
        "independent rows. A closed loop of revolute joints with parallel axes (a planar four-bar) "
        "is overconstrained in space: make one of its joints universal and another spherical, give only "
        "the rows that are needed, or let connect / load_model(..., redundant='remove') drop the dependent rows"
    )


def remove_dependent_rows(model: Model, t0, r, R, label: str) -> tuple[Model, Array | None]:
    """``model`` without the constraint rows that depend on the others at ``(r, R)``, and the
    ``G`` (rA) of the rows kept (``None`` above ``_RANK_CHECK_ROWS`` rows, where nothing is
    checked or removed).

    Rows are kept greedily in this order, each when it adds to the rank of those before it
    (a pivoted Gram-Schmidt on the rows of ``G``): pinned points, the joints' point rows (CD,
    D, DP2), their direction rows (DP1, fixed angles), then drivers. A planar loop of revolute
    joints thus keeps all its common points and loses the out-of-plane direction rows of its
    last joints (Adams' removal of redundant constraints does the like). Refused, naming the
    rows: a driver that depends on the joints (it drives a motion they lock), and rows that
    depend on the others only at this configuration (a singular position, where removing them
    would free the mechanism elsewhere): the mechanism is moved at random by 1e-2 of its size
    and 1e-2 rad and assembled again on the rows kept, twice, and the rows removed must still
    hold there. The reactions the removed rows would share are carried by the rows kept."""
    from ..constraints import jacobians as jac
    from ..constraints.formulations import get_formulation
    from ..kinematics import assemble
    from ..lie.ops import so3_exp_matrix

    m = model.num_constraints
    cs = model.constraints
    if cs is None or m > _RANK_CHECK_ROWS:  # no rows, or pinned points only (independent)
        return model, None
    G = np.asarray(jac.jacobian(model, get_formulation("rA"), jnp.asarray(t0, r.dtype), r, R))
    own = cs.num_constraints
    driven = set(cs.driven_rows)
    point = [k for k in range(own) if k not in driven and cs.row_kinds[k] in ("CD", "D", "DP2")]
    direction = [k for k in range(own) if k not in driven and k not in point]
    order = list(range(own, m)) + point + direction + sorted(driven)
    keep = _independent_rows(G, order)
    if len(keep) == m:
        return model, G
    names = model.constraint_names
    removed = sorted(set(range(m)) - set(keep))
    if any(k >= own for k in removed) or driven & set(removed):
        bad = [names[k] for k in removed if k >= own or k in driven]
        raise ValueError(
            f"{label}: the rows {bad} depend on the other constraints at t = {float(t0)}: a driver that drives a "
            "motion the joints lock (or another driver drives) cannot be removed; drop it or free the joint"
        )
    kept_rows = sorted(k for k in keep if k < own)
    reduced = eqx.tree_at(lambda mo: mo.constraints, model, cs.take(kept_rows))
    size = max(float(np.ptp(np.asarray(r), axis=0).max()), float(np.abs(np.asarray(cs.vectors)).max()), 1e-3)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(2):
        r1 = np.asarray(r) + 1e-2 * size * rng.standard_normal(r.shape)
        R1 = np.asarray(R) @ np.asarray(so3_exp_matrix(jnp.asarray(1e-2 * rng.standard_normal(r.shape))))
        r1, R1, _, res = assemble(reduced, jnp.asarray(t0, r.dtype), "rA", jnp.asarray(r1, r.dtype), jnp.asarray(R1, r.dtype),
                                  tol=_ASSEMBLY_TOL)  # fmt: skip
        moved = eqx.tree_at(lambda mo: (mo.r0, mo.R0), model, (r1, R1))
        phi = np.asarray(_initial_rows(moved, t0))
        if not float(res) < 1e-9:
            raise ValueError(f"{label}: the rows {[names[k] for k in removed]} depend on the others at t = {float(t0)}, "
                             f"but the mechanism could not be moved to check that they stay dependent (residual "
                             f"{float(res):.1e}); remove them by hand")  # fmt: skip
        worst = max(worst, float(np.abs(phi[removed]).max()))
    if worst > 1e-8 * max(size, 1.0):
        raise ValueError(
            f"{label}: the rows {[names[k] for k in removed]} depend on the others at t = {float(t0)} only: moved a "
            f"little and assembled on the other rows, the mechanism violates them by {worst:.1e}. The initial "
            "configuration is a singular position; removing the rows would free the mechanism elsewhere"
        )
    joints = list(dict.fromkeys(joint_name(names[k]) for k in removed))
    warnings.warn(
        f"{label}: removed {len(removed)} of {m} constraint rows that depend on the others at t = {float(t0)}: "
        f"{[names[k] for k in removed]} (joints {joints}); they still hold after moving the mechanism "
        f"(to {worst:.1e}). Their share of the reactions is carried by the rows kept",
        stacklevel=4,
    )
    return reduced, G[np.asarray(kept_rows + list(range(own, m)))]


def _independent_rows(G: np.ndarray, order: list[int]) -> list[int]:
    """The rows of ``G``, taken in ``order``, that each add to the rank of those taken before
    (their part orthogonal to those above ``1e-9`` of ``G``'s largest singular value)."""
    tol = 1e-9 * max(float(np.linalg.norm(G, 2)), 1e-300)
    basis = np.zeros((0, G.shape[1]))
    keep = []
    for k in order:
        g = G[k]
        for _ in range(2):  # twice is enough (Giraud et al. 2005)
            g = g - basis.T @ (basis @ g)
        norm = float(np.linalg.norm(g))
        if norm > tol:
            basis = np.vstack([basis, g / norm])
            keep.append(k)
    return keep


def consistent_initial_state(model: Model, t0: float = 0.0, label: str = "model", redundant: str = "error") -> Model:
    """Assemble the initial configuration and project the velocities (rA), warning on changes.

    ``redundant``: what to do with constraint rows that depend on the others at the assembled
    configuration: ``"error"`` (``ValueError`` naming their joints) or ``"remove"``
    (``remove_dependent_rows``, with a warning naming the rows removed)."""
    if redundant not in ("error", "remove"):
        raise ValueError(f"{label}: redundant must be 'error' or 'remove', got {redundant!r}")
    from ..kinematics import assemble, project_velocity

    form = "rA"
    dtype = jnp.result_type(model.r0)
    r0, R0 = jnp.asarray(model.r0), jnp.asarray(model.R0)
    # The rows' rounding level in this dtype (float32: about 1e-7 of the mechanism's size).
    rounding = float(jnp.finfo(dtype).eps) * max(1.0, float(np.abs(np.asarray(r0)).max(initial=0.0)))
    tol, accept = max(_ASSEMBLY_TOL, 10 * rounding), max(1e-9, 100 * rounding)
    phi0 = np.asarray(_initial_rows(model, t0))
    res0 = float(np.max(np.abs(phi0), initial=0.0))
    worst = model.constraint_names[int(np.argmax(np.abs(phi0)))] if phi0.size else None
    if np.linalg.norm(phi0) < tol:  # consistent: no Gauss-Newton program to compile
        r, R, iters, res = r0, R0, 0, res0
    else:
        # Gauss-Newton's steps need independent rows: dependent ones (a planar loop in space)
        # are named, or removed, before it starts.
        try:
            if redundant == "remove":
                model, _ = remove_dependent_rows(model, t0, r0, R0, label)
            else:
                check_independent(model, t0, r0, R0, label)
        except ValueError as err:
            raise ValueError(
                f"{err}. The initial configuration violates the constraints by {res0:.3e} (row {worst!r}); where it is far from any "
                "configuration its joints allow (a revolute joint's two axes across each other), its rows may depend "
                "on each other there only: start the bodies nearer a configuration their joints allow"
            ) from None
        r, R, iters, res = assemble(model, jnp.asarray(t0, dtype), form, tol=tol)
    its = f"{int(iters)} Gauss-Newton iteration{'' if int(iters) == 1 else 's'}"
    if not float(res) < accept:
        raise ValueError(
            f"{label}: cannot assemble the initial configuration: it violates the constraints by {res0:.3e} (row "
            f"{worst!r}), and {its} left a residual of {float(res):.3e}; start the bodies nearer a configuration "
            "their joints allow"
        )
    if res0 > ASSEMBLY_WARN:
        moved = np.linalg.norm(np.asarray(r) - np.asarray(r0), axis=1)  # of each COM
        b = int(np.argmax(moved))
        warnings.warn(
            f"{label}: initial configuration violates the constraints by {res0:.3e} (row {worst!r}); assembled at "
            f"t = {t0} ({its}, residual now {float(res):.1e}), moving the COM of body {model.body_names[b]!r} "
            f"most, by {moved[b]:.3e} m",
            stacklevel=3,
        )
    if redundant == "remove":
        model, G = remove_dependent_rows(model, t0, r, R, label)
    else:
        G = check_independent(model, t0, r, R, label)
    v, w = project_velocity(model, jnp.asarray(t0, dtype), form, r, R, jnp.asarray(model.v0), jnp.asarray(model.omega0), G=G)
    dv = float(jnp.max(jnp.abs(jnp.concatenate([(v - model.v0).ravel(), (w - model.omega0).ravel()]))))
    if dv > ASSEMBLY_WARN:
        warnings.warn(f"{label}: initial velocities inconsistent by {dv:.3e}; projected onto the velocity constraints", stacklevel=3)
    return eqx.tree_at(lambda m: (m.r0, m.R0, m.v0, m.omega0), model, (r, R, v, w))


def _builtin(name: str, kwargs) -> Model:
    from .. import models

    table = dict(inspect.getmembers(models, inspect.isfunction))
    fn = table.get(name) if not name.startswith("_") else None
    if fn is None:
        raise ValueError(f"load_model: unknown model {name!r}: neither a file nor a built-in model ({', '.join(table)})")
    return fn(**kwargs)
