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
constraints (with a warning when they change by more than ``1e-6``): ``difflie.io.assembly``.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from .. import constraints as C
from ..body import RigidBody, check_bodies
from ..model import Model
from ..xla import at_load_time
from .assembly import consistent_initial_state
from .json_constraints import _constraint_rows
from .json_values import ModelFileError, _array, _get, _given, _id, _inertia, _known_keys, _nearest_rotation, _per_body, _show, _string

_TOP_KEYS = ("name", "gravity", "bodies", "constraints", "joints")
_BODY_KEYS = ("name", "id", "r", "r_dot", "A", "omega", "omega_dot", "mass", "inertia")  # omega_dot: C1 files, unused

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


@at_load_time
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

    ids, names, paths, state, file_mass, file_inertia = _read_bodies(bodies_raw)

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

    rows = _constraint_rows(cons_raw, joints_raw, ids, names, drivers, angle_drivers)

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


def _read_bodies(bodies_raw: list):
    """The file's bodies: their ids (to indices; the ground's to ``C.GROUND``), names, JSON
    paths, initial state, and the masses and inertias the file gives (``None`` where not)."""
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
    return ids, names, paths, state, file_mass, file_inertia


def _rigid_bodies(mass, inertia, names) -> RigidBody:
    return RigidBody(jnp.asarray(mass), jnp.asarray(inertia), names=names)


def _builtin(name: str, kwargs) -> Model:
    from .. import models

    table = dict(inspect.getmembers(models, inspect.isfunction))
    fn = table.get(name) if not name.startswith("_") else None
    if fn is None:
        raise ValueError(f"load_model: unknown model {name!r}: neither a file nor a built-in model ({', '.join(table)})")
    return fn(**kwargs)
