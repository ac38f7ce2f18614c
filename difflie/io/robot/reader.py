"""``load_robot``: the body tree MuJoCo compiled from a robot file, as a difflie ``Model``
(the package's docstring says what becomes what)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping

import jax.numpy as jnp
import numpy as np

from ... import constraints as C
from ...body import RigidBody
from ...forces import BallTorque, JointForce, JointInertia
from ...joint_laws import JointLaws, JointSpring
from ...joint_space import BallJoints, JointFeedback, JointSpace
from ...model import Model
from ...xla import at_load_time
from ..assembly import consistent_initial_state
from ..json_values import ModelFileError
from .arguments import _ball_value, _by_name, _feedback_law, _float, _guess, _torques
from .compiler import _BALL, _FREE, _HINGE, _SLIDE, RobotModelWarning, _compile, _hearing_mujoco, _names, _switch_off
from .equalities import _closes_loop, _coupled_joints, _couples_joints, _equalities, _follow, _joint_couplings
from .frames import _base_pose, _normal, _pose_tuple, _quat_matrix
from .laws import (
    _acting_tendons,
    _actuators,
    _ball_forces,
    _fixed_tendons,
    _gravity_compensation,
    _is_fixed,
    _is_spatial,
    _modelled_actuator,
    _spatial_tendons,
    _stacked,
    _stacked_friction,
    _stacked_limits,
    _tendon_inertia,
    _unreversed,
)
from .tree import _bodies, _check_hinges, _forward_kinematics, _hinge_groups, _joint_rows, _joint_tables, _mass_properties

ROBOT_EXTENSIONS = (".urdf", ".xml")


def _not_modelled(m, collision: int, urdf: bool, joint_limits: bool, joint_friction: bool, joint_couplings: bool, controls,
                  off: frozenset[str] = frozenset(), locked: list[str] = ()) -> list[str]:
    """What the file has and difflie does not model (or was not asked to), one phrase each;
    ``off``: what the file switches off (``_switch_off``), which MuJoCo does not apply either;
    a ``locked`` joint's limits, friction and coupling (as its follower) do not act."""
    import mujoco

    items = []
    dof = m.jnt_dofadr
    movable = [j for j in range(m.njnt) if m.jnt_type[j] in (_HINGE, _SLIDE) and m.joint(j).name not in locked]
    balls = [j for j in range(m.njnt) if m.jnt_type[j] == _BALL and m.joint(j).name not in locked]

    def count(what, n, hint=""):
        if n:
            items.append(f"{what} ({n} joint{'s' if n > 1 else ''}{hint})")

    if not joint_limits:
        count("joint limits", sum(int(m.jnt_limited[j]) for j in movable + balls), "; joint_limits=True enforces them")
    if not joint_friction:
        count("joint friction", sum(int(np.any(m.dof_frictionloss[dof[j] : dof[j] + (3 if m.jnt_type[j] == _BALL else 1)] > 0))
                                    for j in movable + balls), "; joint_friction=True enforces it")  # fmt: skip
    count("friction of free joints", sum(int(np.any(m.dof_frictionloss[dof[j] : dof[j] + 6] > 0)) for j in range(m.njnt) if m.jnt_type[j] == _FREE))
    count("armature of free joints", sum(int(m.dof_armature[dof[j]] > 0) for j in range(m.njnt) if m.jnt_type[j] == _FREE))
    count("springs of free joints", sum(int(m.jnt_stiffness[j] > 0) for j in range(m.njnt) if m.jnt_type[j] == _FREE))
    if collision:
        items.append(f"contacts ({collision} collision geometr{'ies' if collision > 1 else 'y'})")
    read = [k for k in range(m.ntendon) if _is_fixed(m, k) or _is_spatial(m, k)]
    if m.ntendon - len(read):
        items.append(f"spatial tendons that wrap around geoms ({m.ntendon - len(read)})")
    for what, n in (("tendon limits" + ("" if joint_limits else " (joint_limits=True enforces them)"),
                     0 if joint_limits else sum(int(m.tendon_limited[k]) for k in read)),
                    ("tendon friction" + ("" if joint_friction else " (joint_friction=True enforces it)"),
                     0 if joint_friction else sum(int(m.tendon_frictionloss[k] > 0) for k in read)),
                    ("nonlinear or plastic tendon springs", sum(int(np.any(m.tendon_stiffnesspoly[k] != 0) or np.any(m.tendon_dampingpoly[k] != 0)
                                                                   or m.tendon_plasticadr[k] >= 0) for k in read)),
                    ("armature of spatial tendons", sum(int(_is_spatial(m, k) and m.tendon_armature[k] > 0) for k in read))):  # fmt: skip
        if n:
            items.append(f"{what} ({n} tendon{'s' if n > 1 else ''})")
    couplings = sum(_couples_joints(m, e) for e in range(m.neq))
    free = sum(_couples_joints(m, e) and m.joint(int(m.eq_obj1id[e])).name not in locked for e in range(m.neq))
    if free and not joint_couplings:
        what = "mimic joints" if urdf else "joint equality constraints"
        items.append(f"{what} ({free}; joint_couplings=True holds them)")
    others = m.neq - couplings - sum(_closes_loop(m, e) for e in range(m.neq))
    if others and "equality" not in off:
        items.append(f"equality constraints other than active connect, weld and joint ({others})")
    if "actuation" in off:
        if m.nu and controls is not None:
            items.append(f"actuators ({m.nu}): the file disables actuation, and the controls have no effect")
    elif m.nu and controls is None:
        items.append(f"actuators ({m.nu}; controls={{name: value}} drives them, or give joint_torques)")
    elif m.nu:
        other = [a for a in range(m.nu) if _modelled_actuator(m, a) is None]
        if other:
            items.append(f"actuators of other transmissions or dynamics ({len(other)})")

    if m.opt.density != 0 or m.opt.viscosity != 0 or np.any(m.opt.wind != 0):
        items.append("fluid forces (the option's density, viscosity or wind)")
    if m.nflex:
        items.append(f"flexible bodies ({m.nflex})")
    if m.nplugin:
        items.append(f"plugins ({m.nplugin})")
    if int(m.opt.enableflags) & int(mujoco.mjtEnableBit.mjENBL_OVERRIDE):
        items.append("the override flag's solref and solimp (limits, friction and couplings keep their own)")
    if np.any(m.body_gravcomp != 0) and np.any(m.opt.gravity != 0):
        count("gravity compensation through actuators", int(np.sum(m.jnt_actgravcomp)),
              ": applied as a passive force, never clipped by actuatorfrcrange nor dropped without actuators")  # fmt: skip
    return items


@at_load_time
@_hearing_mujoco
def load_robot(
    path: str | os.PathLike,
    *,
    joint_positions: Mapping[str, float] | None = None,
    joint_velocities: Mapping[str, float] | None = None,
    joint_torques: Mapping[str, float | Callable] | Callable | None = None,
    joint_feedback: Callable | None = None,
    joint_limits: bool = False,
    joint_friction: bool = False,
    joint_couplings: bool = False,
    controls: Mapping[str, float | str | Callable] | Callable | None = None,
    base_pose=None,
    base_velocity=None,
    floating_base: bool | None = None,
    locked_joints=(),
    gravity=None,
    redundant: str = "error",
    bound_mass: float = 0.0,
    bound_inertia: float = 0.0,
    balance_inertia: bool = False,
    mass=None,
    inertia=None,
    drivers=None,
    angle_drivers=None,
    default_mass=None,
    default_inertia=None,
) -> Model:
    """A ``Model`` of the robot in a URDF or MJCF file (see the module docstring).

    ``joint_positions`` / ``joint_velocities``: ``{joint name: value}`` (rad, m; rad/s, m/s;
    a ball joint: its quaternion ``(qw, qx, qy, qz)`` and its relative angular velocity in the
    child's axes), the initial state by forward kinematics (others at the file's reference, at
    rest).
    ``joint_torques``: ``{joint name: number, expression string of t (as in the model files)
    or function of t}`` (N m or N; a ball joint: a 3-vector in its child's axes, or a function
    of t returning one), or one callable ``t -> (n_joints,)`` in the order of
    ``model.joint_names``; equal and opposite on the two bodies of each joint; each function's
    shape is checked here. Numbers, and the arrays of an ``eqx.Module`` signal, are pytree
    leaves (traceable, differentiable); a function is part of the compiled program, so a new
    function object (a new ``lambda`` at every call) compiles again. ``joint_feedback``: a
    function ``(t, q, qd) -> (n_joints,)`` of the joint coordinates and rates, torques added to
    ``joint_torques`` (a PD controller, gravity compensation; ``JointFeedback``).
    ``joint_limits``: ``True`` enforces the limits of hinges, slides and balls (MJCF ``range``
    of a limited joint, URDF ``<limit lower upper>``) as one-sided spring-dampers as soft as
    MuJoCo's (``difflie.joint_laws.JointLimits``, ``BallLimits``, from each joint's
    ``solreflimit``); ``False`` (the
    default) leaves them out and names them in the warning. ``joint_friction``: ``True`` makes
    the ``frictionloss`` of hinges, slides and balls (URDF ``<dynamics friction>``) dry friction
    that creeps as MuJoCo's soft friction does (``difflie.joint_laws.JointFriction``,
    ``BallFriction``); ``False`` names
    it in the warning. ``joint_couplings``: ``True`` holds the joint couplings (URDF ``mimic``,
    MJCF ``<equality><joint>``) as softly as MuJoCo does (``difflie.joint_laws.JointCouplings``)
    and starts a follower that ``joint_positions`` leaves out on its coupling; ``False`` names
    them in the warning (Pinocchio's URDF reader also leaves mimics out unless asked).
    ``controls``: the MJCF file's actuators on hinges, slides and tendons (``motor``,
    ``position``, ``velocity``, ``general`` without activation dynamics;
    ``difflie.joint_laws.Actuators``) act, with these controls: ``{actuator name: number,
    expression of t or function of t}`` (others 0, as MuJoCo's ``ctrl``) or one function ``t ->
    (n_actuators,)`` in the file's order of those actuators; ``None`` (the default) leaves the
    actuators out and names them in the warning. ``base_pose``: the world pose
    of the root link (4x4 matrix, ``(x, y, z, qw, qx, qy, qz)`` or ``(position, quaternion or
    rotation)``), ``base_velocity``: ``(v, omega)`` of a floating base, ``v`` the world velocity
    of its link-frame origin and ``omega`` its angular velocity in its own axes (MuJoCo's free
    joint convention). ``floating_base``: ``None`` keeps the file's (MJCF free joints; a URDF
    root is fixed), ``True`` frees the root links, ``False`` fixes them where they start.
    ``locked_joints``: names of movable joints welded at their ``joint_positions`` (merged into
    the parent, as Pinocchio's ``buildReducedModel``). ``gravity`` overrides the file's.
    With loops (``connect``, ``weld``) the initial state is assembled and its velocities
    projected (``difflie.io.consistent_initial_state``, warning when they move), and
    ``redundant`` says what to do with rows that depend on the others (a planar loop closed by a
    ``connect``): ``"error"`` or ``"remove"``.

    Links are read as the file writes them, as Pinocchio reads them, even where MuJoCo's
    compiler refuses them (a placeholder inertia that is not positive definite, a massless
    link between hinges about one point, folded: such links have no ``link_pose``): each group
    of links welded together must be a rigid body (positive mass, inertia
    positive definite and within the triangle inequality), else a ``ModelFileError`` names
    its links. ``bound_mass`` / ``bound_inertia``: least mass (kg) and least principal moment
    (kg m^2) of every link; ``balance_inertia=True``: a link whose principal moments break the
    triangle inequality takes their mean. These are MuJoCo's ``boundmass``, ``boundinertia``
    and ``balanceinertia``, which the file's ``<compiler>`` can also set; the larger bound
    applies.
    """
    path = os.fspath(path)
    json_only = dict(mass=mass, inertia=inertia, drivers=drivers, angle_drivers=angle_drivers,
                     default_mass=default_mass, default_inertia=default_inertia)  # fmt: skip
    for name, value in json_only.items():
        if value is not None:
            raise ValueError(f"load_model: {name}= is for the JSON model files; a robot file carries its own")
    if not os.path.exists(path):
        raise ModelFileError(f"{path}: no such file")
    import mujoco

    bounds = (_float(bound_mass, "bound_mass"), _float(bound_inertia, "bound_inertia"), bool(balance_inertia))
    if bounds[0] < 0 or bounds[1] < 0:
        raise ValueError(f"load_model: bound_mass and bound_inertia must be >= 0, got {bounds[0]} and {bounds[1]}")
    m, meshes, collision, folded = _compile(path, floating_base, bounds)
    off = _switch_off(m)
    urdf = path.lower().endswith(".urdf")
    body_names = _names(m, mujoco.mjtObj.mjOBJ_BODY, m.nbody)
    joint_names_all = _names(m, mujoco.mjtObj.mjOBJ_JOINT, m.njnt)

    # Joints: one per body, or two or three hinges about one point; hinge, slide, ball or free.
    movable = [j for j in range(m.njnt) if m.jnt_type[j] in (_HINGE, _SLIDE)]
    movable_names = [joint_names_all[j] for j in movable]
    ball_names_all = [joint_names_all[j] for j in range(m.njnt) if m.jnt_type[j] == _BALL]
    for b in range(1, m.nbody):
        n = int(m.body_jntnum[b])
        kind = m.jnt_type[m.body_jntadr[b]] if n else None
        if kind == _FREE and m.body_parentid[b] != 0:
            raise ModelFileError(f"{path}: body {body_names[b]!r} has a free joint but is not a child of the world")
    locked = list(locked_joints) if not isinstance(locked_joints, str) else [locked_joints]
    unknown = [k for k in locked if k not in movable_names + ball_names_all]
    if unknown:
        known = movable_names + ball_names_all
        raise ValueError(f"load_model: locked_joints names unknown joints {unknown}{_guess(unknown, known)}; movable joints are {known}")
    for b in range(1, m.nbody):
        names = joint_names_all[m.body_jntadr[b] : m.body_jntadr[b] + m.body_jntnum[b]]
        if len(names) > 1 and not all(k in locked for k in names):  # a locked body's joints weld it as they are
            _check_hinges(m, b, path, body_names[b], joint_names_all)
        if len(names) > 1 and 0 < sum(k in locked for k in names) < len(names):
            raise ValueError(f"load_model: locked_joints: the hinges {names} of body {body_names[b]!r} turn about one point; lock all of them or none")
    free_names = [k for k in movable_names + ball_names_all if k not in locked]
    q_given = _by_name(joint_positions, movable_names + ball_names_all, "joint_positions")
    qd_given = _by_name(joint_velocities, movable_names + ball_names_all, "joint_velocities", set(free_names))
    q_of = {k: _ball_value(v, f"joint_positions[{k!r}]", 4) if k in ball_names_all else _float(v, f"joint_positions[{k!r}]")
            for k, v in q_given.items()}  # fmt: skip
    qd_of = {k: _ball_value(v, f"joint_velocities[{k!r}]", 3) if k in ball_names_all else _float(v, f"joint_velocities[{k!r}]")
             for k, v in qd_given.items()}  # fmt: skip
    couplings = _coupled_joints(m, locked) if joint_couplings else []
    _follow(m, couplings, q_of, qd_of, locked)

    roots = [b for b in range(1, m.nbody) if m.body_parentid[b] == 0]
    R_rel = [_quat_matrix(q) for q in m.body_quat]
    p_rel = [np.asarray(p, float) for p in m.body_pos]
    if base_pose is not None:
        if len(roots) != 1:
            raise ValueError(f"load_model: base_pose needs one root link, the file has {[body_names[b] for b in roots]}")
        R_rel[roots[0]], p_rel[roots[0]] = _base_pose(base_pose)

    body_of, R_in, p_in, groups, kind_of = _bodies(m, path, urdf, R_rel, p_rel, joint_names_all, locked, q_of)
    nb = len(groups)
    mass_g, com, inertia_g = _mass_properties(m, path, body_names, body_of, groups, R_in, p_in)
    jinfo, binfo, tree = _joint_tables(m, path, groups, kind_of, body_of, R_in, p_in, R_rel, p_rel, q_of, qd_of, joint_names_all,
                                       joint_limits, joint_friction)
    joint_names = [ji["name"] for ji in jinfo]  # MuJoCo's tree order (the file's), locked ones out
    R_w, r0, v0, omega0, base = _forward_kinematics(groups, kind_of, R_rel, p_rel, tree, q_of, qd_of, base_velocity, com)

    # Constraints, forces, joint space.
    rows = _equalities(m, path, body_of, R_in, p_in, body_names)
    closing = bool(rows)
    rows += _joint_rows(jinfo, binfo)
    forces = []
    damping = np.array([ji["damping"] for ji in jinfo])
    torque, ball_torque = _torques(joint_torques, joint_names, [k for k in movable_names + ball_names_all if k in locked], [bi["name"] for bi in binfo])
    if joint_feedback is not None and not jinfo:
        raise ValueError("load_model: joint_feedback needs movable joints; this robot has none")
    geometry = dict(
        parent=[ji["parent"] for ji in jinfo],
        child=[ji["child"] for ji in jinfo],
        axis=jnp.asarray(np.stack([ji["a_p"] for ji in jinfo])) if jinfo else None,
        point=jnp.asarray(np.stack([ji["s_c"] - com[ji["child"]] for ji in jinfo])) if jinfo else None,
        prismatic=[ji["prismatic"] for ji in jinfo],
        hinges=_hinge_groups(jinfo, q_of),
    )
    if jinfo and (np.any(damping != 0) or torque is not None):
        forces.append(JointForce(**geometry, damping=jnp.asarray(damping), torque=torque))
    names = tuple(body_names[b] for b in groups)
    links = tuple((body_names[b], body_of[b], _pose_tuple(R_in[b], p_in[b])) for b in range(1, m.nbody) if body_names[b] not in folded)
    mesh_list = tuple(
        (body_names[m.geom_bodyid[g]], file, tuple(float(x) for x in m.geom_pos[g]) + tuple(float(x) for x in m.geom_quat[g]))
        for g, file in sorted(meshes.items())
    )
    stack = lambda key, shape: jnp.asarray(np.stack([ji[key] for ji in jinfo]) if jinfo else np.zeros((0,) + shape))  # noqa: E731
    space = JointSpace(
        names=tuple(joint_names),
        parent=tuple(ji["parent"] for ji in jinfo),
        child=tuple(ji["child"] for ji in jinfo),
        prismatic=tuple(ji["prismatic"] for ji in jinfo),
        parent_point=stack("s_p", (3,)),
        child_point=stack("s_c", (3,)),
        axis=stack("a_p", (3,)),
        normal=jnp.asarray(np.stack([_normal(ji["a_p"]) for ji in jinfo]) if jinfo else np.zeros((0, 3))),
        relative_rotation=stack("C", (3, 3)),
        reference=jnp.asarray(np.array([ji["ref"] for ji in jinfo])),
        initial=jnp.asarray(np.array([q_of.get(ji["name"], ji["ref"]) for ji in jinfo])),
        base=base,
        links=links,
        meshes=mesh_list,
        hinges=geometry["hinges"],
        balls=_ball_joints(binfo),
    )
    laws = []  # of the joint state: a controller, springs, limits, tendons, friction (one element reads it for all)
    if joint_feedback is not None:
        laws.append(_feedback_law(joint_feedback, len(jinfo)))
    stiffness = np.array([ji["stiffness"] for ji in jinfo])
    if np.any(stiffness != 0):
        laws.append(JointSpring(jnp.asarray(stiffness), jnp.asarray(np.array([ji["spring"] for ji in jinfo]))))
    if any(ji["limits"] is not None for ji in jinfo):
        laws.append(_stacked_limits([ji["limits"] for ji in jinfo], [not ji["prismatic"] for ji in jinfo]))
    welded = {k: q_of.get(k, float(m.qpos0[m.jnt_qposadr[m.joint(k).id]])) for k in locked if k in movable_names}
    tendons = _fixed_tendons(m, jinfo, welded, joint_limits, joint_friction, path)
    if tendons is not None:
        laws.append(tendons)
    if any(ji["friction"] is not None for ji in jinfo):
        laws.append(_stacked_friction([ji["friction"] for ji in jinfo]))
    coupling = _joint_couplings(m, couplings, jinfo, welded, path) if couplings else None
    if coupling is not None:
        laws.append(coupling)
    for k in range(m.ntendon) if joint_limits else ():
        if not m.tendon_limited[k]:
            _unreversed(m.tendon_range[k], f"{path}: tendon {m.tendon(k).name or k!r}")
    actuated = controls is not None and "actuation" not in off
    pulled = _acting_tendons(m, _is_spatial, joint_limits, joint_friction, actuated)  # the spatial tendons that act
    actuators, tendon_actuators = _actuators(m, controls, jinfo, welded, pulled) if actuated else (None, None)
    if actuators is not None:
        laws.append(actuators)
    if laws:
        law = laws[0] if len(laws) == 1 else JointLaws(tuple(laws))
        forces.append(JointFeedback(law, space, jnp.asarray(com), JointForce(**geometry)))
    armature = np.array([ji["armature"] for ji in jinfo])
    if np.any(armature != 0):
        forces.append(JointInertia(JointForce(**geometry), jnp.asarray(armature)))
    geared = _tendon_inertia(m, jinfo)
    if geared is not None:
        forces.append(JointInertia(JointForce(**geometry), *geared))
    forces += _ball_forces(binfo, com)
    if ball_torque is not None:
        forces.append(BallTorque(tuple(bi["parent"] for bi in binfo), tuple(bi["child"] for bi in binfo), ball_torque))
    g = np.asarray(m.opt.gravity, float) if gravity is None else np.asarray(gravity, float)
    compensation = _gravity_compensation(m, body_of, R_in, p_in, com, g)
    if compensation is not None:
        forces.append(compensation)
    spatial = _spatial_tendons(m, pulled, body_of, R_in, p_in, com, joint_limits, joint_friction, tendon_actuators, path)
    if spatial is not None:
        forces.append(spatial)
    model = Model(
        RigidBody(jnp.asarray(mass_g), jnp.asarray(inertia_g), jnp.asarray(com), names=names),
        r0=jnp.asarray(r0),
        R0=jnp.asarray(R_w),
        v0=jnp.asarray(v0),
        omega0=jnp.asarray(omega0),
        gravity=jnp.asarray(g),
        forces=tuple(forces),
        constraints=C.ConstraintSet(rows, nb) if rows else None,
        body_names=names,
        joints=space,
    )
    items = _not_modelled(m, collision, urdf, joint_limits, joint_friction, joint_couplings, controls, off, locked)
    if items:
        warnings.warn(f"{path}: not modelled: " + "; ".join(items), RobotModelWarning, stacklevel=4)
    if closing:
        return consistent_initial_state(model, label=path, redundant=redundant)
    if redundant not in ("error", "remove"):
        raise ValueError(f"{path}: redundant must be 'error' or 'remove', got {redundant!r}")
    return model


def _ball_joints(binfo: list[dict]) -> BallJoints | None:
    if not binfo:
        return None
    return BallJoints(
        names=tuple(bi["name"] for bi in binfo), parent=tuple(bi["parent"] for bi in binfo),
        child=tuple(bi["child"] for bi in binfo), after=tuple(bi["after"] for bi in binfo),
        parent_point=_stacked(binfo, "s_p"), child_point=_stacked(binfo, "s_c"),
        relative_rotation=_stacked(binfo, "C"), initial=_stacked(binfo, "q"),
    )  # fmt: skip
