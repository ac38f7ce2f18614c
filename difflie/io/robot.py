"""Robots from URDF and MJCF files, read through MuJoCo's model compiler (Todorov, Erez & Tassa,
2012), which parses both formats and resolves their frames (URDF origins and ``rpy``; MJCF
``pos``/``quat``/``euler``/``axisangle``, defaults and includes).

From the compiled body tree:

- a link with a hinge (URDF ``revolute``/``continuous``) or slide (``prismatic``) joint becomes
  a difflie body whose frame is the link frame: ``com`` is the centre of mass in the link frame
  and ``inertia`` the full inertia about it in link axes; the joint becomes a revolute or
  prismatic constraint (5 rows) to its parent;
- an MJCF body with two or three hinges about one point is one body on a spherical joint
  (three hinges; 3 rows) or a universal joint that keeps the angle of its axes (two; 4 rows),
  its hinges read as MuJoCo applies them, one after the other (``difflie.hinges``); so is a
  URDF chain of two or three revolute joints about one point through massless links (the URDF
  way of writing such a joint), the massless links folded into the link with mass;
- an MJCF ball joint is a spherical joint (3 rows); its coordinates are MuJoCo's: the
  quaternion of the child's rotation relative to its reference orientation in the parent, and
  the angular velocity of child relative to parent in the child's axes
  (``difflie.joint_space.BallJoints``). Its damping ``-c omega_rel`` and rotor inertia
  (``armature``: the kinetic energy ``I |omega_rel|^2 / 2``) are those of three 1-DOF joints
  about orthonormal axes fixed in the parent, which sum to the same torque; its ``stiffness``
  a ``BallSpring``, its ``joint_torques`` (a 3-vector in the child's axes) a ``BallTorque``;
- a link without a joint (URDF ``fixed``) is merged rigidly into its parent: masses add, the
  COM is the mass-weighted mean and inertias move to it by the parallel-axis theorem
  ``J = sum R_b J_b R_b^T + m_b (|d_b|^2 I - d_b d_b^T)``; links merged into the world are the
  ground. Each link's inertial is the file's, as Pinocchio reads it, also where MuJoCo's
  compiler refuses it (a placeholder inertia that is not positive definite, a massless link);
  each merged group must be a rigid body, and MuJoCo's corrections (``boundmass``,
  ``boundinertia``, ``balanceinertia``) apply where the file or ``load_robot`` asks;
- MJCF equality constraints ``connect`` (a point of one body on a point of another: a
  spherical joint, 3 rows) and ``weld`` (their relative pose fixed: 6 rows), between bodies or
  sites, close loops; they hold exactly, where MuJoCo keeps them softly (``solref``,
  ``solimp``). A body ``connect`` keeps MuJoCo's anchors (the second computed at ``qpos0``), a
  body ``weld`` its ``relpose`` (body 2 in body 1's frame; a ``torquescale`` of 0 leaves the
  rotation free, as MuJoCo's limit); site constraints make the sites (their frames, for a weld)
  coincide. Joint positions that open a loop are closed by the solvers' consistent start;
- a free joint (MJCF) or ``floating_base=True`` (URDF, which has no notation for it: like
  Pinocchio and MuJoCo, a URDF's root link is fixed unless asked) gives a floating base: no
  constraint;
- URDF ``<dynamics damping>`` and MJCF joint ``damping`` become viscous joint damping, MJCF
  joint ``stiffness`` (about ``springref``) linear joint springs (``JointSpring``), MJCF
  ``armature`` the joints' rotor inertias (``JointInertia``), and ``joint_torques`` the
  actuation (``JointForce``);
- with ``joint_limits=True``, the limits of hinges and slides become one-sided
  spring-dampers (``JointLimits``) with the stiffness and damping of MuJoCo's soft limits, those
  of balls (their largest angle) the same law of the ball's angle (``BallLimits``), and
  with ``joint_friction=True`` their ``frictionloss`` saturating dampers (``JointFriction``)
  that creep as MuJoCo's soft friction does, on each of a ball's three axes in the child
  (``BallFriction``);
- the springs and dampers of fixed tendons (MJCF ``<tendon><fixed>``: a length that is a linear
  combination of joint coordinates) act on their joints as MuJoCo applies them (``Tendons``),
  their ``armature`` as a rotor inertia along their length (``JointInertia``), and with
  ``joint_limits`` / ``joint_friction`` their limits and friction as the joints'; spatial
  tendons through sites and pulleys (MJCF ``<tendon><spatial>``) the same laws of their path's
  length, as forces along its segments (``SpatialTendons``);
- with ``joint_couplings=True``, joint couplings (URDF ``mimic``, MJCF ``<equality><joint>``:
  a joint's position a polynomial of another's) hold as softly as MuJoCo holds them
  (``JointCouplings``, from ``solref`` and ``solimp``), and a follower that
  ``joint_positions`` / ``joint_velocities`` leave out starts on its coupling;
- with ``controls``, an MJCF file's actuators on hinges, slides and tendons
  (``motor``, ``position``, ``velocity``, ``general`` without activation dynamics) drive their
  joints as MuJoCo's do (``Actuators``: gear, gain and bias, control and force ranges, the
  joints' and tendons' ``actuatorfrcrange``);
- MJCF gravity compensation (``gravcomp``: ``-c m g`` at a link's COM) is a constant world
  force at a point of each body (``difflie.forces.DeadLoad``), routed through actuators
  (``actuatorgravcomp``) or not;
- what the file's ``<option><flag .../>`` disables (gravity, springs, dampers, limits,
  friction, equality constraints, actuation, the clipping of controls) is off, as in MuJoCo;
- what is not modelled (joint and tendon limits, friction and joint couplings unless asked,
  actuators without ``controls`` and those of other transmissions or dynamics, contacts,
  spatial tendons that wrap around geoms and the armature of spatial tendons, tendon
  equalities, inactive equality constraints, fluid forces, flexible bodies, plugins, the
  override flag) is named in one ``RobotModelWarning``, as are MuJoCo's own warnings.

Joints keep the order of the compiled tree, which is the file's order where the file lists
parents before children. The initial state comes from forward kinematics at
``joint_positions`` / ``joint_velocities`` (by joint name; the file's reference pose
elsewhere), so it satisfies the constraints exactly. Meshes do not enter the dynamics; their
file names and poses are kept in ``model.joints``.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import warnings
from collections.abc import Callable, Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import constraints as C
from ..body import RigidBody
from ..expr import Expression, ExpressionError
from ..forces import BallSpring, BallTorque, DeadLoad, JointForce, JointInertia, JointTorques, SpatialTendons
from ..hinges import HingeGroups
from ..joint_laws import Actuators, BallFriction, BallLimits, JointCouplings, JointFriction, JointLaws, JointLimits, JointSpring, Tendons, TendonSpring
from ..joint_space import BallJoints, JointFeedback, JointSpace
from ..model import Model
from .model_file import ModelFileError, consistent_initial_state

ROBOT_EXTENSIONS = (".urdf", ".xml")
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_CONNECT, _WELD, _JOINT = 0, 1, 2  # mjtEq
_WRAP_JOINT, _WRAP_PULLEY, _WRAP_SITE = 1, 2, 3  # mjtWrap
_TRN_JOINT, _TRN_TENDON = 0, 3  # mjtTrn
_SITE = 6  # mjtObj
_KIND = {_FREE: "free", _BALL: "ball", _SLIDE: "slide", _HINGE: "hinge"}


class RobotModelWarning(UserWarning):
    """A robot file has elements difflie does not model (named in the message)."""


# -- small numpy helpers (load time only) --------------------------------------------------------


def _quat_matrix(q) -> np.ndarray:
    """Rotation matrix of the scalar-first quaternion ``q`` (normalised)."""
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _matrix_quat(R) -> tuple[float, ...]:
    import mujoco

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, float).reshape(-1))
    return tuple(float(x) for x in q)


def _rot(axis, angle) -> np.ndarray:
    """``Rot(axis, angle)`` (Rodrigues)."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _normal(a) -> np.ndarray:
    """A unit vector perpendicular to ``a``."""
    e = np.zeros(3)
    e[np.argmin(np.abs(a))] = 1.0
    u = np.cross(a, e)
    return u / np.linalg.norm(u)


def _pose_tuple(R, p) -> tuple[float, ...]:
    return tuple(float(x) for x in p) + _matrix_quat(R)


def _unit(q, what: str = "base_pose quaternion") -> np.ndarray:
    """A quaternion ``(qw, qx, qy, qz)``, normalised if its norm is 1 to within typed digits
    (1e-3)."""
    q = np.asarray(q, float)
    norm = np.linalg.norm(q)
    if not abs(norm - 1.0) < 1e-3:
        raise ValueError(f"load_model: {what} (qw, qx, qy, qz) = {q.tolist()} has norm {norm:.6g}, not 1")
    return q / norm


def _base_pose(value) -> tuple[np.ndarray, np.ndarray]:
    """``(R, p)`` from a 4x4 matrix, a 7-vector ``(x, y, z, qw, qx, qy, qz)`` or a pair
    ``(position, quaternion or rotation matrix)``."""
    try:
        if isinstance(value, (tuple, list)) and len(value) == 2:
            p = np.asarray(value[0], float).reshape(3)
            rot = np.asarray(value[1], float)
            rot = rot if rot.shape == (4,) else rot.reshape(3, 3)
        else:
            arr = np.asarray(value, float)
            if arr.shape == (4, 4):
                rot, p = arr[:3, :3], arr[:3, 3]
            elif arr.shape == (7,):
                rot, p = arr[3:], arr[:3]
            else:
                raise ValueError
    except (TypeError, ValueError):
        raise ValueError(
            "load_model: base_pose must be a 4x4 matrix, a 7-vector (x, y, z, qw, qx, qy, qz) or a "
            f"pair (position, quaternion or 3x3 rotation), got {value!r}"
        ) from None
    R = _quat_matrix(_unit(rot)) if rot.shape == (4,) else rot
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))) or np.abs(R.T @ R - np.eye(3)).max() > 1e-6 or np.linalg.det(R) < 0:
        raise ValueError(f"load_model: base_pose rotation is not a rotation matrix: {R.tolist()}")
    return R, p


# -- compiling the file ------------------------------------------------------------------------


def _compile(path: str, floating_base: bool | None, bounds: tuple[float, float, bool] = (0.0, 0.0, False)):
    """MuJoCo model of the file, the mesh geoms ``{geom id: mesh file}`` and the number of
    collision geoms. URDF meshes are replaced by markers (their files are ``package://`` paths
    that MuJoCo cannot open and URDF inertias never come from geometry). ``bounds``: the
    ``(bound_mass, bound_inertia, balance_inertia)`` of ``load_robot``, added to the file's
    ``<compiler>`` attributes of those names."""
    try:
        import mujoco
    except ImportError:  # pragma: no cover - mujoco is a dependency of this reader
        raise ImportError("reading URDF and MJCF files needs MuJoCo: pip install mujoco") from None
    try:
        spec = mujoco.MjSpec.from_file(path)
    except Exception as err:  # MuJoCo's parser errors carry the element and line
        raise ModelFileError(f"{path}: {_mujoco_error(err)}") from None
    urdf = path.lower().endswith(".urdf")
    spec.compiler.fusestatic = False  # merging is ours: it keeps every link's frame
    mesh_files = {m.name: m.file for m in spec.meshes}
    marked: dict[str, str] = {}
    collision = 0
    for k, g in enumerate(spec.geoms):
        collision += int(g.contype != 0 or g.conaffinity != 0)
        if g.type == mujoco.mjtGeom.mjGEOM_MESH:
            if not g.name:
                g.name = f"_difflie_mesh_{k}"
            marked[g.name] = mesh_files.get(g.meshname, g.meshname)
            if urdf:
                g.type = mujoco.mjtGeom.mjGEOM_SPHERE
                g.size = [0.01, 0.0, 0.0]
                g.meshname = ""
    if urdf:
        for m in list(spec.meshes):
            spec.delete(m)
        spec.compiler.inertiafromgeom = mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_FALSE
    if floating_base is not None:
        for root in spec.worldbody.bodies:
            free = [j for j in root.joints if j.type == mujoco.mjtJoint.mjJNT_FREE]
            if floating_base and not root.joints:
                root.add_freejoint()
            elif not floating_base:
                for j in free:
                    spec.delete(j)
    folded = _fold_massless_hinges(spec) if urdf else []
    c = spec.compiler
    c.boundmass, c.boundinertia = max(c.boundmass, bounds[0]), max(c.boundinertia, bounds[1])
    c.balanceinertia = bool(c.balanceinertia or bounds[2])
    own = _stand_in_inertials(spec, urdf)
    try:
        model = spec.compile()
    except Exception as err:
        raise ModelFileError(f"{path}: {_mujoco_error(err)}") from None
    _restore_inertials(model, own, c.boundmass, c.boundinertia, c.balanceinertia)
    meshes = {}
    for name, file in marked.items():
        gid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name)
        if gid >= 0:
            meshes[gid] = file
    return model, meshes, collision, folded


# Attributes of a joint that ``_fold_massless_hinges`` carries to its new body.
_JOINT_ATTRIBUTES = ("type", "axis", "pos", "ref", "range", "limited", "damping", "armature", "frictionloss", "stiffness",
                     "springref", "solref_limit", "solimp_limit", "solref_friction", "solimp_friction", "margin",
                     "actfrcrange", "actfrclimited", "actgravcomp", "group")  # fmt: skip


def _massless(body) -> bool:
    """A link with no mass, no inertia and no geometry (a URDF's frame between two hinges)."""
    if len(body.geoms) or len(body.sites):
        return False
    if not body.explicitinertial:
        return body.mass <= 0
    given = _file_inertial(body)
    return given is not None and given[0] == 0 and not np.any(given[2])


def _fold_massless_hinges(spec) -> list[str]:
    """Fold the hinge of a massless link into the next moving link, where the two turn about
    one point: the URDF way of writing a joint of two or three axes (a hip, a wrist) as a chain
    of revolute joints through massless links. MuJoCo refuses the massless links; Pinocchio
    reads them, massless. Folded, the child carries the hinges in their order, each about its
    axis in the child's frame at the reference pose (``R^T a`` and ``R^T (s - p)`` with ``(p,
    R)`` the child's pose in the massless link), which is how MuJoCo applies the hinges of one
    body: the same motion, one body on a spherical or universal joint (``difflie.hinges``). The
    massless links stay, welded at the reference pose; their names are returned (they have no
    pose of their own)."""
    import mujoco

    hinge = mujoco.mjtJoint.mjJNT_HINGE
    folded: list[str] = []
    again = True
    while again:  # from the leaves up: a massless link folds into a link with mass
        again = False
        for body in spec.bodies:
            lead = list(body.joints)
            if body.name == "world" or not lead or any(j.type != hinge for j in lead) or not _massless(body):
                continue
            R, p, between, child = np.eye(3), np.zeros(3), [], body
            while len(child.bodies) == 1:
                child = child.bodies[0]
                p, R = p + R @ np.asarray(child.pos, float), R @ _quat_matrix(child.quat)
                if len(child.joints) or not _massless(child):
                    break
                between.append(child.name)
            own = list(child.joints)
            if child is body or _massless(child) or not own or any(j.type != hinge for j in own) or len(lead) + len(own) > 3:
                continue
            points = [R.T @ (np.asarray(j.pos, float) - p) for j in lead] + [np.asarray(j.pos, float) for j in own]
            if np.abs(np.array(points) - points[0]).max() > 1e-9 * max(1.0, np.abs(points[0]).max()):
                continue
            values = [{a: getattr(j, a) for a in _JOINT_ATTRIBUTES} | {"name": j.name} for j in lead + own]
            for v, point in zip(values, points):
                v["pos"] = point
            for v in values[: len(lead)]:
                v["axis"] = R.T @ np.asarray(v["axis"], float)
            for j in lead + own:
                spec.delete(j)
            for v in values:
                child.add_joint(**v)
            folded += [body.name, *between]
            again = True
            break
    return list(dict.fromkeys(folded))


def _file_inertial(body) -> tuple[float, np.ndarray, np.ndarray] | None:
    """A link's ``(mass, COM, inertia about the COM in link axes)`` as its file writes it (URDF
    ``<inertial>``; MJCF ``<inertial>`` oriented by ``quat``: ``R F R^T`` with ``F`` from
    ``fullinertia`` or ``diaginertia``); ``None`` where MuJoCo derives it."""
    import mujoco

    if not body.explicitinertial or body.ialt.type != mujoco.mjtOrientation.mjORIENTATION_QUAT:
        return None
    f = np.asarray(body.fullinertia, float)
    F = np.diag(body.inertia) if np.isnan(f[0]) else np.array([[f[0], f[3], f[4]], [f[3], f[1], f[5]], [f[4], f[5], f[2]]])
    R = _quat_matrix(body.iquat)
    return float(body.mass), np.array(body.ipos, float), R @ F @ R.T


def _principal(J: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Principal moments (ascending, negative ones kept) and axes (the columns of a rotation) of
    the symmetric part of ``J``."""
    e, V = np.linalg.eigh(0.5 * (J + J.T))
    if np.linalg.det(V) < 0:
        V[:, 0] = -V[:, 0]
    return e, V


def _stand_in_inertials(spec, urdf: bool) -> dict[str, tuple[float, np.ndarray, np.ndarray, np.ndarray]]:
    """Give MuJoCo's compiler a valid stand-in for each link inertial it refuses, and return
    the file's own ``{link: (mass, COM, principal moments, principal axes)}`` for them.

    MuJoCo refuses a link whose inertia is not positive definite, breaks the triangle
    inequality of principal moments, or that moves without mass; robot files have such links
    (massless frames whose inertia is a placeholder, sensors, links of a multi-axis joint).
    Pinocchio takes them as written, and so does difflie: what must be a rigid body is each
    group of links welded together, checked when the groups are merged. The stand-in (the
    moments lifted to positive values that meet the triangle inequality, a massless moving
    link given 1e-9 kg) only enters MuJoCo's own derived quantities: the ``dof_invweight0``
    from which the soft limits and friction of the nearby joints take their constants."""
    import mujoco

    own = {}
    if spec.compiler.inertiafromgeom == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE:
        return own  # the file's inertials give way to its geometry
    for body in spec.bodies:
        given = _file_inertial(body)
        moves = len(body.joints) > 0
        if given is None:
            if not (urdf and moves and body.mass <= 0):
                continue
            given = (0.0, np.array(body.ipos, float) if np.all(np.isfinite(body.ipos)) else np.zeros(3), np.zeros((3, 3)))
        mass, com, J = given
        e, V = _principal(J)
        if mass > 0 and e[0] > 1e-12 * max(e[2], 1e-12) and e[0] + e[1] > e[2] * (1 + 1e-9):
            continue
        own[body.name] = (mass, com, e, V)
        lifted = np.maximum(e, max(1e-9 * e[2], 1e-9))
        short = lifted[2] - lifted[0] - lifted[1]
        lifted[:2] += max(short, 0.0) / 2 + 1e-6 * lifted[2]
        body.explicitinertial = True
        body.mass = max(mass, 1e-9)
        body.ipos = com
        body.fullinertia = [np.nan] * 6
        body.inertia = lifted
        body.iquat = _matrix_quat(V)
    return own


def _restore_inertials(m, own: dict[str, tuple[float, np.ndarray, np.ndarray, np.ndarray]], bound_mass: float,
                       bound_inertia: float, balance: bool) -> None:
    """Put the file's own inertials (``_stand_in_inertials``) back into the compiled model
    ``m``: principal moments and axes, negative moments kept, after MuJoCo's
    corrections where asked (``boundmass``, ``boundinertia``: lower bounds of the mass and of
    the principal moments; ``balanceinertia``: moments that break the triangle inequality
    replaced by their mean)."""
    import mujoco

    for name, (mass, com, e, V) in own.items():
        b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
        e = np.maximum(e, bound_inertia) if bound_inertia > 0 else e
        if balance and e[0] + e[1] < e[2]:
            e = np.full(3, e.mean())
        mass = max(mass, bound_mass)
        m.body_mass[b], m.body_ipos[b], m.body_inertia[b], m.body_iquat[b] = mass, com, e, _matrix_quat(V)


def _switch_off(m) -> frozenset[str]:
    """Apply the file's ``<option><flag .../>`` switches (``disableflags``) to the compiled model
    ``m``, before anything reads it, as MuJoCo applies them: with ``gravity``, ``spring`` or
    ``damper`` disabled the gravity, the joints' and tendons' stiffness or damping are zero; with
    ``limit`` or ``frictionloss`` (or all ``constraint``) disabled no joint or tendon has limits
    or friction; with ``equality`` (or ``constraint``) disabled no equality constraint is
    active; with ``clampctrl`` disabled no control is clipped. The names switched off, and
    ``actuation`` where actuators apply no force."""
    import mujoco

    flags = int(m.opt.disableflags)
    bit = lambda name: bool(flags & int(getattr(mujoco.mjtDisableBit, f"mjDSBL_{name.upper()}")))  # noqa: E731
    off = {name for name in ("gravity", "spring", "damper", "limit", "frictionloss", "equality", "clampctrl", "actuation") if bit(name)}
    if bit("constraint"):
        off |= {"limit", "frictionloss", "equality"}
    zeroed = {
        "gravity": [m.opt.gravity],
        "spring": [m.jnt_stiffness, m.tendon_stiffness, m.tendon_stiffnesspoly],
        "damper": [m.dof_damping, m.tendon_damping, m.tendon_dampingpoly],
        "limit": [m.jnt_limited, m.tendon_limited],
        "frictionloss": [m.dof_frictionloss, m.tendon_frictionloss],
        "equality": [m.eq_active0],
        "clampctrl": [m.actuator_ctrllimited],
    }
    for name in off - {"actuation"}:
        for array in zeroed[name]:
            array[...] = 0
    return frozenset(off)


def _one_line(err: Exception) -> str:
    return "; ".join(line.strip() for line in str(err).splitlines() if line.strip())


def _mujoco_error(err: Exception) -> str:
    """MuJoCo's parser or compiler message in the words of a robot file: the XML error and its
    line, or the element (link) and what is wrong with it."""
    text = str(err)
    xml = re.search(r"Error=XML_ERROR_(\w+).*?Line number=(\d+)(?:: XMLElement name=(\w+))?", text, re.S)
    if xml:
        kind, line, element = xml.groups()
        at = f" (element <{element}>)" if element else ""
        return f"malformed XML, {kind.lower().replace('_', ' ')} at line {line}{at}"
    element = re.search(r"Element name '([^']*)'", text)
    what = re.sub(r"^Error:\s*", "", text.strip().splitlines()[0]) if text.strip() else type(err).__name__
    if "A + B >= C" in what:
        what = "its principal moments of inertia break the triangle inequality A + B >= C (no rigid body has such an inertia)"
    elif "mjMINVAL" in what:
        what = "it moves but has no positive mass and inertia (a missing or zero <inertial>)"
    what = re.sub(r"^error '(.*)' in (\w+)$", r"\1 (\2)", what)
    return f"link {element.group(1)!r}: {what}" if element else _one_line(err)


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


# -- the reader --------------------------------------------------------------------------------


def _names(m, objtype, n) -> list[str]:
    import mujoco

    return [mujoco.mj_id2name(m, objtype, i) or f"{'body' if objtype == mujoco.mjtObj.mjOBJ_BODY else 'joint'}{i}" for i in range(n)]


def _by_name(value, joints: list[str], what: str, allowed: set[str] | None = None) -> dict[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"load_model: {what} must be a mapping {{joint name: value}}, got {type(value).__name__}")
    unknown = [k for k in value if k not in joints]
    if unknown:
        raise ValueError(f"load_model: {what} names unknown joints {unknown}{_guess(unknown, joints)}; movable joints are {joints}")
    if allowed is not None:
        bad = [k for k in value if k not in allowed]
        if bad:
            raise ValueError(f"load_model: {what} names locked joints {bad}")
    return dict(value)


def _guess(unknown: list, known: list[str]) -> str:
    """``" (did you mean 'x' for 'y'?)"`` for the first unknown name close to a known one, else ``""``."""
    for name in unknown:
        close = difflib.get_close_matches(str(name), known, n=1)
        if close:
            return f" (did you mean {close[0]!r} for {name!r}?)"
    return ""


def _float(value, what: str) -> float:
    if isinstance(value, jax.core.Tracer):
        raise ValueError(
            f"load_model: {what} is traced (inside jit, vmap or grad), but the initial state is computed "
            "when the file is read: load the model once, then set a traced joint state with "
            "difflie.joint_space.with_joint_state(model, q, qd)"
        )
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        x = float(np.asarray(value))
    except (TypeError, ValueError):
        raise ValueError(f"load_model: {what} must be a number, got {value!r}") from None
    if not np.isfinite(x):
        raise ValueError(f"load_model: {what} must be finite, got {x}")
    return x


def _hearing_mujoco(load):
    """``load(path, ...)`` with MuJoCo's warnings (a ``solref`` its parser or its constraint code
    replaces by the default) turned into one ``RobotModelWarning`` each, naming the file,
    instead of lines in ``MUJOCO_LOG.TXT`` in the working directory."""

    @functools.wraps(load)
    def wrapper(path, *args, **kwargs):
        import mujoco

        heard: list[str] = []
        previous = mujoco.get_mju_user_warning()
        mujoco.set_mju_user_warning(lambda text: heard.append(" ".join(str(text).split())))
        try:
            return load(path, *args, **kwargs)
        finally:
            mujoco.set_mju_user_warning(previous)
            for text in dict.fromkeys(heard):
                warnings.warn(f"{os.fspath(path)}: MuJoCo: {text}", RobotModelWarning, stacklevel=3)

    return wrapper


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
    projected (``difflie.io.model_file.consistent_initial_state``, warning when they move), and
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
        if n > 1:
            _check_hinges(m, b, path, body_names[b], joint_names_all)
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

    # Groups of links moving as one body: rep[b] is the link whose frame the group uses.
    rep = np.zeros(m.nbody, int)  # world: 0
    R_in = [np.eye(3)] * m.nbody  # pose of link b in its group's frame
    p_in = [np.zeros(3)] * m.nbody
    groups: list[int] = []
    kind_of: dict[int, int] = {}
    for b in range(1, m.nbody):
        j = m.body_jntadr[b] if m.body_jntnum[b] else -1
        par = m.body_parentid[b]
        Rb, pb = R_rel[b], p_rel[b]
        if j >= 0 and joint_names_all[j] in locked:  # welded at its given positions
            for i in range(j, j + m.body_jntnum[b]):
                name, adr = joint_names_all[i], m.jnt_qposadr[i]
                if m.jnt_type[i] == _BALL:
                    Rj = _quat_matrix(q_of.get(name, m.qpos0[adr : adr + 4]))
                else:
                    dq = q_of.get(name, m.qpos0[adr]) - m.qpos0[adr]
                    if m.jnt_type[i] == _SLIDE:
                        pb = pb + dq * (Rb @ m.jnt_axis[i])
                        continue
                    Rj = _rot(m.jnt_axis[i], dq)
                pivot = m.jnt_pos[i]  # a turn about the joint's point
                pb, Rb = pb + Rb @ (pivot - Rj @ pivot), Rb @ Rj
            j = -1
        if j < 0:
            rep[b] = rep[par]
            R_in[b], p_in[b] = R_in[par] @ Rb, R_in[par] @ pb + p_in[par]
        else:
            rep[b] = b
            groups.append(b)
            kind_of[b] = int(m.jnt_type[j])
    index = {b: k for k, b in enumerate(groups)}
    index[0] = C.GROUND
    body_of = [index[rep[b]] for b in range(m.nbody)]
    if not groups:
        hint = "; a URDF's root link is fixed to the world unless floating_base=True (--floating-base)" if urdf and m.nbody > 1 else ""
        raise ModelFileError(f"{path}: no link moves (no hinge, slide or free joint){hint}")

    # Mass, COM and inertia of each group, in the frame of its representative link.
    nb = len(groups)
    mass_g, first_moment, second = np.zeros(nb), np.zeros((nb, 3)), np.zeros((nb, 3, 3))
    for b in range(1, m.nbody):
        k = body_of[b]
        if k < 0:  # a massless link's rotational inertia still counts, as in Pinocchio
            continue
        c = p_in[b] + R_in[b] @ m.body_ipos[b]
        Ri = R_in[b] @ _quat_matrix(m.body_iquat[b])
        J = Ri @ np.diag(m.body_inertia[b]) @ Ri.T
        mb = m.body_mass[b]
        mass_g[k] += mb
        first_moment[k] += mb * c
        second[k] += J + mb * (c @ c * np.eye(3) - np.outer(c, c))  # about the link origin
    com = np.zeros((nb, 3))
    inertia_g = np.zeros((nb, 3, 3))
    fix = ("; bound_mass= and bound_inertia= (--bound-mass, --bound-inertia) give every link a least mass and principal "
           "moment (MuJoCo's boundmass and boundinertia, for placeholder links), or lock its joint (locked_joints=, --lock)")  # fmt: skip

    def what(k: int, b: int) -> str:
        """Group ``k`` of link ``b`` in an error: the link and the links welded to it."""
        welded = [body_names[i] for i in range(1, m.nbody) if body_of[i] == k and i != b]
        return f"{path}: link {body_names[b]!r}" + (f" (welded to {welded})" if welded else "")

    for k, b in enumerate(groups):
        if not mass_g[k] > 0:
            raise ModelFileError(f"{what(k, b)} moves but has no mass{fix}")
        com[k] = first_moment[k] / mass_g[k]
        c = com[k]
        J = second[k] - mass_g[k] * (c @ c * np.eye(3) - np.outer(c, c))
        inertia_g[k] = 0.5 * (J + J.T)
        e = np.linalg.eigvalsh(inertia_g[k])
        if not e[0] > 0:
            raise ModelFileError(f"{what(k, b)} has an inertia that is not positive definite (principal moments {e.tolist()}){fix}")
        if not e[0] + e[1] >= e[2] * (1 - 1e-12):  # as RigidBody checks it
            raise ModelFileError(f"{what(k, b)}: its principal moments {e.tolist()} break the triangle inequality A + B >= C (no rigid "
                                 "body has such an inertia); balance_inertia=True (--balance-inertia) replaces a link's moments "
                                 "that do by their mean (MuJoCo's balanceinertia)")  # fmt: skip

    # Joints: parent body, points and axes at the reference configuration (q = qpos0); the
    # hinges of one body in order, slot 0 (first), 1 (middle of three), 2 (last). Ball joints
    # apart (``binfo``); ``tree`` holds both kinds, parents before children.
    jinfo, binfo, tree = [], [], []
    inverse_mass = _inverse_mass(m) if joint_limits and any(m.jnt_limited[j] for j in range(m.njnt) if m.jnt_type[j] == _BALL) else None
    for k, b in enumerate(groups):
        if kind_of[b] == _FREE:
            continue
        par = m.body_parentid[b]
        R_pb = R_in[par] @ R_rel[b]  # link b in its parent group's frame
        p_pb = R_in[par] @ p_rel[b] + p_in[par]
        n = int(m.body_jntnum[b])
        if kind_of[b] == _BALL:
            j = m.body_jntadr[b]
            s_c, name = np.asarray(m.jnt_pos[j], float), joint_names_all[j]
            adr = m.jnt_qposadr[j]
            binfo.append(
                dict(
                    name=name, ball=True, parent=body_of[par], child=k, s_p=p_pb + R_pb @ s_c, s_c=s_c, C=R_pb,
                    q=q_of.get(name, _unit(m.qpos0[adr : adr + 4], f"the reference of ball joint {name!r}")),
                    qd=qd_of.get(name, np.zeros(3)), after=len(jinfo),
                    damping=float(m.dof_damping[m.jnt_dofadr[j]]), armature=float(m.dof_armature[m.jnt_dofadr[j]]),
                    stiffness=float(m.jnt_stiffness[j]), rest=_quat_matrix(m.qpos_spring[adr : adr + 4]),
                    limits=_limits(m, j, path) if joint_limits else None,
                    friction=_ball_friction(m, j, path) if joint_friction else None,
                    inverse_inertia=inverse_mass[m.jnt_dofadr[j] : m.jnt_dofadr[j] + 3, m.jnt_dofadr[j] : m.jnt_dofadr[j] + 3]
                    if joint_limits and m.jnt_limited[j] else None,
                )
            )  # fmt: skip
            tree.append(binfo[-1])
            continue
        for i, j in enumerate(range(m.body_jntadr[b], m.body_jntadr[b] + n)):
            s_c = np.asarray(m.jnt_pos[j], float)
            a_c = np.asarray(m.jnt_axis[j], float) / np.linalg.norm(m.jnt_axis[j])
            jinfo.append(
                dict(
                    name=joint_names_all[j], joint=j, parent=body_of[par], child=k, prismatic=kind_of[b] == _SLIDE,
                    s_p=p_pb + R_pb @ s_c, a_p=R_pb @ a_c, s_c=s_c, a_c=a_c, C=R_pb, p_pb=p_pb,
                    ref=float(m.qpos0[m.jnt_qposadr[j]]), damping=float(m.dof_damping[m.jnt_dofadr[j]]),
                    stiffness=float(m.jnt_stiffness[j]), spring=float(m.qpos_spring[m.jnt_qposadr[j]]),
                    armature=float(m.dof_armature[m.jnt_dofadr[j]]),
                    limits=_limits(m, j, path) if joint_limits else None,
                    friction=_friction(m, j, path) if joint_friction else None,
                    slot=0 if i == 0 else (2 if i == n - 1 else 1), group=len(jinfo) - i, size=n,
                )
            )  # fmt: skip
            tree.append(jinfo[-1])
    joint_names = [ji["name"] for ji in jinfo]  # MuJoCo's tree order (the file's), locked ones out

    # Forward kinematics: origin o, rotation R, world velocities of the origin and angular.
    R_w, o_w = np.zeros((nb, 3, 3)), np.zeros((nb, 3))
    v_w, w_w = np.zeros((nb, 3)), np.zeros((nb, 3))
    base = -1
    for k, b in enumerate(groups):
        if kind_of[b] == _FREE:
            base = k if base < 0 else base
            R_w[k], o_w[k] = R_rel[b], p_rel[b]
            if base_velocity is not None:
                try:
                    v, w = (np.asarray(x, float).reshape(3) for x in base_velocity)
                except (TypeError, ValueError):
                    raise ValueError(f"load_model: base_velocity must be a pair (v (3,), omega (3,)), got {base_velocity!r}") from None
                v_w[k], w_w[k] = v, R_w[k] @ w
    for ji in tree:  # parents first; a later hinge turns its child from where the one before left it
        k, ball = ji["child"], ji.get("ball", False)
        P, C_j, s_p = ji["parent"], ji["C"], ji["s_p"]
        if not ball and ji["slot"] > 0:
            P, C_j, s_p = k, np.eye(3), ji["s_c"]
        RP, oP, vP, wP = (np.eye(3), np.zeros(3), np.zeros(3), np.zeros(3)) if P < 0 else (R_w[P].copy(), o_w[P].copy(), v_w[P].copy(), w_w[P].copy())
        if not ball:
            dq = q_of.get(ji["name"], ji["ref"]) - ji["ref"]
            qd = qd_of.get(ji["name"], 0.0)
            a_p = ji["a_c"] if ji["slot"] > 0 else ji["a_p"]
            a = RP @ a_p
        if not ball and ji["prismatic"]:
            R_w[k] = RP @ C_j
            o_w[k] = oP + RP @ (ji["p_pb"] + dq * a_p)
            w_w[k] = wP
            v_w[k] = vP + np.cross(wP, o_w[k] - oP) + qd * a
            continue
        # A turn about the joint's point: Rot(a_c, dq) at rate qd a (revolute), or the ball's.
        R_w[k] = RP @ C_j @ (_quat_matrix(ji["q"]) if ball else _rot(ji["a_c"], dq))
        pivot = oP + RP @ s_p
        o_w[k] = pivot - R_w[k] @ ji["s_c"]
        w_rel = R_w[k] @ ji["qd"] if ball else qd * a
        w_w[k] = wP + w_rel
        v_w[k] = vP + np.cross(wP, o_w[k] - oP) + np.cross(w_rel, o_w[k] - pivot)
    if base_velocity is not None and base < 0:
        raise ValueError("load_model: base_velocity is for a floating base; this robot's base is fixed")
    rc = np.einsum("kij,kj->ki", R_w, com)
    r0, v0 = o_w + rc, v_w + np.cross(w_w, rc)
    omega0 = np.einsum("kji,kj->ki", R_w, w_w)

    # Constraints, forces, joint space.
    rows = _equalities(m, path, body_of, R_in, p_in, body_names)
    closing = bool(rows)
    for bi in binfo:
        rows += C.spherical(bi["parent"], bi["s_p"], bi["child"], bi["s_c"], name=bi["name"])
    for ji in jinfo:
        P, K = ji["parent"], ji["child"]
        if ji["size"] > 1:
            if ji["slot"] == 0:  # one point; a pair also keeps the angle of its two axes
                group = jinfo[ji["group"] : ji["group"] + ji["size"]]
                name = "+".join(g["name"] for g in group)
                rows += C.spherical(P, ji["s_p"], K, ji["s_c"], name=name)
                if ji["size"] == 2:
                    a_last = group[-1]["a_c"]
                    rows.append(C.dp1(P, ji["a_p"], K, a_last, float(ji["a_c"] @ a_last), name=f"{name}_DP1"))
        elif ji["prismatic"]:
            u = _normal(ji["a_p"])
            ref_j = ji["C"].T @ np.cross(ji["a_p"], u)
            rows += C.prismatic(P, ji["s_p"], ji["a_p"], K, ji["s_c"], ji["a_c"], u, ref_j, name=ji["name"])
        else:
            rows += C.revolute(P, ji["s_p"], ji["a_p"], K, ji["s_c"], ji["a_c"], name=ji["name"])
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


def _gravity_compensation(m, body_of: list[int], R_in: list, p_in: list, com: np.ndarray, g: np.ndarray) -> DeadLoad | None:
    """MJCF ``gravcomp``: ``-c m g`` at each link's COM (MuJoCo's ``qfrc_gravcomp``), summed over
    the links of each body and applied at their ``c m``-weighted centre, as a ``DeadLoad`` of
    the file's masses (``with_bodies`` moves its points with the COM, not its forces)."""
    nb = com.shape[0]
    weight, moment = np.zeros(nb), np.zeros((nb, 3))
    for b in range(1, m.nbody):
        k, w = body_of[b], float(m.body_gravcomp[b] * m.body_mass[b])
        if k < 0 or w == 0:
            continue
        weight[k] += w
        moment[k] += w * (p_in[b] + R_in[b] @ m.body_ipos[b])
    if not np.any(weight != 0) or not np.any(g != 0):
        return None
    centre = np.where(weight[:, None] != 0, moment / np.where(weight == 0, 1.0, weight)[:, None], com)
    return DeadLoad(jnp.asarray(-weight[:, None] * g[None, :]), jnp.asarray(centre - com))


def _limit_law(solref, solimp, lower: float, upper: float, inertia: float, what: str) -> tuple[float, float, float, float, float]:
    """A limit's range and the stiffness, damping and damping width of ``JointLimits``: from
    its ``solref``, a time constant and damping ratio ``(tc, zeta)`` (or, both negative,
    MuJoCo's direct ``(-k, -b)`` per unit inertia), at the ``inertia`` it moves, and the width of
    its ``solimp``. A softness without a positive stiffness and a damping >= 0 raises a
    ``ModelFileError`` naming ``what`` (MuJoCo's compiler refuses reversed ranges itself)."""
    k, b = _solref_gains(solref, 1.0, f"{what}: its limit's")
    return lower, upper, inertia * k, inertia * b, float(solimp[2])


def _solref_gains(solref, dmax: float, what: str) -> tuple[float, float]:
    """MuJoCo's stiffness and damping per unit inertia of a soft constraint's reference
    acceleration, from its ``solref``: a time constant and damping ratio ``(tc, zeta)`` give
    ``1 / (dmax tc zeta)^2`` and ``2 / (dmax tc)``, both negative the direct ``-tc / dmax^2``
    and ``-zeta / dmax`` (``dmax``: the impedance they are scaled by). A ``solref`` without a
    positive stiffness and a damping >= 0 raises a ``ModelFileError`` that ``what`` begins."""
    tc, zeta = (float(x) for x in solref)
    if tc > 0 and zeta <= 0:
        raise ModelFileError(f"{what} solref ({tc:g}, {zeta:g}) has a time constant but no damping ratio > 0")
    k, b = (-tc / dmax**2, -zeta / dmax) if tc <= 0 else (1.0 / (dmax * tc * zeta) ** 2, 2.0 / (dmax * tc))
    if not (k > 0 and b >= 0):
        raise ModelFileError(f"{what} solref ({tc:g}, {zeta:g}) gives no stiffness > 0 and damping >= 0 "
                             "(a time constant and damping ratio > 0, or both negative: -stiffness, -damping)")  # fmt: skip
    return k, b


def _friction_law(friction: float, solref, solimp, inertia: float, what: str) -> tuple[float, float]:
    """A ``frictionloss`` and the damping of ``JointFriction`` that creeps as fast as MuJoCo's
    soft friction: ``I b d / (1 - d)``, ``b = 2 / (d_max tc)`` from its ``solref`` (or,
    negative, ``-b`` itself) and ``d``, ``d_max`` its ``solimp``'s impedances at zero and full
    width, at the ``inertia`` it moves. A ``solref`` that gives no damping > 0 raises a
    ``ModelFileError`` naming ``what``."""
    tc = float(solref[0])
    d, d_max = (min(float(x), 0.9999) for x in solimp[:2])  # MuJoCo's own cap
    b = -float(solref[1]) if tc <= 0 else 2.0 / (d_max * tc)
    if not b > 0:
        raise ModelFileError(f"{what}: its friction's solref ({tc:g}, {float(solref[1]):g}) gives no damping > 0")
    return friction, inertia * b * d / (1.0 - d)


def _limits(m, j: int, path: str) -> tuple[float, float, float, float, float] | None:
    """Joint ``j``'s ``_limit_law`` (its ``solreflimit``, ``solimplimit``, ``range``) at its
    inertia at the reference pose, ``1 / dof_invweight0`` (a ball's per unit inertia: its
    ``BallLimits`` take the inertia about the axis it turns; its range is ``(0, largest
    angle)``). ``None`` for a joint without limits."""
    if not m.jnt_limited[j]:
        return None
    inertia = 1.0 if m.jnt_type[j] == _BALL else 1.0 / float(m.dof_invweight0[m.jnt_dofadr[j]])
    return _limit_law(m.jnt_solref[j], m.jnt_solimp[j], *(float(x) for x in m.jnt_range[j]), inertia, f"{path}: joint {m.joint(j).name!r}")


def _friction(m, j: int, path: str) -> tuple[float, float] | None:
    """Joint ``j``'s ``_friction_law`` (its ``frictionloss``, ``solreffriction``,
    ``solimpfriction``) at ``1 / dof_invweight0``. ``None`` without friction."""
    dof = m.jnt_dofadr[j]
    if m.dof_frictionloss[dof] <= 0:
        return None
    return _friction_law(float(m.dof_frictionloss[dof]), m.dof_solref[dof], m.dof_solimp[dof], 1.0 / float(m.dof_invweight0[dof]),
                         f"{path}: joint {m.joint(j).name!r}")  # fmt: skip


def _ball_friction(m, j: int, path: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Ball joint ``j``'s ``_friction_law`` per degree of freedom (``(3,)`` frictions and
    dampings, each at its ``1 / dof_invweight0``). ``None`` without friction."""
    dofs = range(m.jnt_dofadr[j], m.jnt_dofadr[j] + 3)
    if not any(m.dof_frictionloss[d] > 0 for d in dofs):
        return None
    laws = [_friction_law(float(m.dof_frictionloss[d]), m.dof_solref[d], m.dof_solimp[d], 1.0 / float(m.dof_invweight0[d]),
                          f"{path}: ball joint {m.joint(j).name!r}") for d in dofs]  # fmt: skip
    return np.array([f for f, _ in laws]), np.array([c for _, c in laws])


def _is_fixed(m, k: int) -> bool:
    """Whether tendon ``k`` is a fixed one (a linear combination of joint coordinates)."""
    adr, num = m.tendon_adr[k], m.tendon_num[k]
    return bool(np.all(m.wrap_type[adr : adr + num] == _WRAP_JOINT))


def _is_spatial(m, k: int) -> bool:
    """Whether tendon ``k`` is a spatial one that difflie reads: a path of sites, with pulleys
    (no geom it wraps around)."""
    adr, num = m.tendon_adr[k], m.tendon_num[k]
    return bool(np.all(np.isin(m.wrap_type[adr : adr + num], (_WRAP_SITE, _WRAP_PULLEY))))


def _acting_tendons(m, kind, joint_limits: bool, joint_friction: bool, actuated: bool = False) -> list[int]:
    """The tendons of a ``kind`` (``_is_fixed``, ``_is_spatial``) whose springs, dampers, or
    (asked for) limits or friction act, or (``actuated``) an actuator of their own."""
    pulled = {int(m.actuator_trnid[a, 0]) for a in range(m.nu) if actuated and _modelled_actuator(m, a) == "spatial"}

    def acts(k):
        return (m.tendon_stiffness[k] > 0 or m.tendon_damping[k] > 0 or (joint_limits and m.tendon_limited[k])
                or (joint_friction and m.tendon_frictionloss[k] > 0) or k in pulled)  # fmt: skip

    return [k for k in range(m.ntendon) if kind(m, k) and acts(k)]


def _tendon_law(m, rows: list[int], joint_limits: bool, joint_friction: bool, path: str):
    """The law of tendons ``rows``' lengths: their springs and dampers (``TendonSpring``), and
    with ``joint_limits`` / ``joint_friction`` their limits and friction, as the joints' (at the
    tendon's inertia ``1 / tendon_invweight0``)."""
    laws = [TendonSpring(*(jnp.asarray(np.asarray(x, float)) for x in (m.tendon_stiffness[rows], m.tendon_damping[rows],
                                                                    m.tendon_lengthspring[rows, 0], m.tendon_lengthspring[rows, 1])))]  # fmt: skip
    inertia = [1.0 / float(m.tendon_invweight0[k]) for k in rows]
    if joint_limits and any(m.tendon_limited[k] for k in rows):
        values = [_limit_law(m.tendon_solref_lim[k], m.tendon_solimp_lim[k], *(float(x) for x in m.tendon_range[k]), i,
                             f"{path}: tendon {m.tendon(k).name or k!r}") if m.tendon_limited[k] else None
                  for k, i in zip(rows, inertia)]  # fmt: skip
        laws.append(_stacked_limits(values, [False] * len(rows)))
    if joint_friction and any(m.tendon_frictionloss[k] > 0 for k in rows):
        values = [_friction_law(float(m.tendon_frictionloss[k]), m.tendon_solref_fri[k], m.tendon_solimp_fri[k], i,
                                f"{path}: tendon {m.tendon(k).name or k!r}") for k, i in zip(rows, inertia)]  # fmt: skip
        laws.append(_stacked_friction(values))
    return laws[0] if len(laws) == 1 else JointLaws(tuple(laws))


def _fixed_tendons(m, jinfo: list[dict], locked: dict[str, float], joint_limits: bool, joint_friction: bool, path: str) -> Tendons | None:
    """``Tendons`` of the fixed tendons that act (``None``: none): each tendon's coefficients
    over the movable joints and the locked joints' share of its length at the positions they
    are welded at (``locked``: name -> position), and their law (``_tendon_law``)."""
    rows = _acting_tendons(m, _is_fixed, joint_limits, joint_friction)
    if not rows:
        return None
    A, offset = _tendon_rows(m, rows, jinfo, locked)
    return Tendons(jnp.asarray(A), jnp.asarray(offset), _tendon_law(m, rows, joint_limits, joint_friction, path))


def _spatial_tendons(m, rows: list[int], body_of: list[int], R_in: list, p_in: list, com: np.ndarray, joint_limits: bool,
                     joint_friction: bool, actuators: Actuators | None, path: str) -> SpatialTendons | None:
    """``SpatialTendons`` of the spatial tendons ``rows`` (through sites and pulleys; ``None``:
    none): a segment between each two sites in a row, a pulley starting a branch counted
    ``1 / divisor``, the sites as points of their bodies (from the COM; the ground's in the
    world), and their law (``_tendon_law``, and their ``actuators``)."""
    if not rows:
        return None

    def point(site):
        b = int(m.site_bodyid[site])
        k = body_of[b]
        p = p_in[b] + R_in[b] @ np.asarray(m.site_pos[site], float)  # in the body's frame (the ground's: the world)
        return k, p if k < 0 else p - com[k]

    segments = []  # (tendon, weight, site a, site b)
    for t, k in enumerate(rows):
        weight, previous = 1.0, None
        for w in range(m.tendon_adr[k], m.tendon_adr[k] + m.tendon_num[k]):
            if m.wrap_type[w] == _WRAP_PULLEY:
                weight, previous = 1.0 / float(m.wrap_prm[w]), None
                continue
            site = int(m.wrap_objid[w])
            if previous is not None:
                segments.append((t, weight, previous, site))
            previous = site
    ends = [(point(a), point(b)) for _, _, a, b in segments]
    law = _tendon_law(m, rows, joint_limits, joint_friction, path)
    return SpatialTendons(
        body_a=tuple(int(a[0]) for a, _ in ends), body_b=tuple(int(b[0]) for _, b in ends), tendon=tuple(s[0] for s in segments),
        point_a=jnp.asarray(np.stack([a[1] for a, _ in ends])), point_b=jnp.asarray(np.stack([b[1] for _, b in ends])),
        weight=jnp.asarray(np.array([s[1] for s in segments])), law=law if actuators is None else JointLaws((law, actuators)),
    )  # fmt: skip


def _tendon_rows(m, rows: list[int], jinfo: list[dict], locked: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """The coefficients ``A`` of fixed tendons ``rows`` over the movable joints, and their
    locked joints' share of the lengths at the positions they are welded at (``locked``)."""
    column = {ji["joint"]: i for i, ji in enumerate(jinfo)}
    A, offset = np.zeros((len(rows), len(jinfo))), np.zeros(len(rows))
    for r, k in enumerate(rows):
        for w in range(m.tendon_adr[k], m.tendon_adr[k] + m.tendon_num[k]):
            j, coef = int(m.wrap_objid[w]), float(m.wrap_prm[w])
            if j in column:
                A[r, column[j]] += coef
            else:  # a locked joint
                offset[r] += coef * locked.get(m.joint(j).name, 0.0)
    return A, offset


def _tendon_inertia(m, jinfo: list[dict]) -> tuple | None:
    """``(inertia, coefficients)`` of the fixed tendons' ``armature`` over the movable joints
    (``JointInertia``; ``None``: none has one, or none moves)."""
    rows = [k for k in range(m.ntendon) if _is_fixed(m, k) and m.tendon_armature[k] > 0]
    A = _tendon_rows(m, rows, jinfo, {})[0] if rows else np.zeros((0, len(jinfo)))
    moving = np.any(A != 0, axis=1)
    if not moving.any():
        return None
    return jnp.asarray(np.asarray(m.tendon_armature[rows], float)[moving]), jnp.asarray(A[moving])


def _inverse_mass(m) -> np.ndarray:
    """MuJoCo's inverse mass matrix at the reference pose (``qpos0``), over its degrees of
    freedom (a ball's three: angular velocity in the child's axes)."""
    import mujoco

    data = mujoco.MjData(m)
    mujoco.mj_forward(m, data)
    dense = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, data, dense)
    return np.linalg.inv(dense)


def _stacked_limits(values: list, revolute: list[bool], one_sided: bool = False) -> JointLimits:
    """``JointLimits`` of one ``_limit_law`` per joint, tendon or ball (``None``: no limits);
    ``one_sided``: upper limits only (a ball's largest angle)."""
    limited = tuple(v is not None for v in values)
    lower, upper, k, b, width = (jnp.asarray(np.array(x)) for x in zip(*(v or (0.0, 0.0, 0.0, 0.0, 1.0) for v in values)))
    return JointLimits(lower, upper, k, b, width, revolute=tuple(revolute), has_lower=tuple(x and not one_sided for x in limited),
                       has_upper=limited)  # fmt: skip


def _stacked_friction(values: list) -> JointFriction:
    """``JointFriction`` of one ``_friction_law`` per joint or tendon (``None``: none)."""
    friction, damping = (jnp.asarray(np.array(x)) for x in zip(*(v or (0.0, 0.0) for v in values)))
    return JointFriction(friction, damping)


def _ball_value(value, what: str, size: int) -> np.ndarray:
    """A ball joint's quaternion ``(qw, qx, qy, qz)`` (``size`` 4, normalised) or angular
    velocity (3, in the child's axes)."""
    if isinstance(value, jax.core.Tracer):
        _float(value, what)  # the message on traced initial states
    try:
        x = np.asarray(value, float).reshape(size)
    except (TypeError, ValueError):
        kind = "a quaternion (qw, qx, qy, qz)" if size == 4 else "an angular velocity (3,) in the child's axes"
        raise ValueError(f"load_model: {what} of a ball joint must be {kind}, got {value!r}") from None
    if not np.all(np.isfinite(x)):
        raise ValueError(f"load_model: {what} must be finite, got {x.tolist()}")
    return _unit(x, what) if size == 4 else x


def _stacked(infos: list[dict], key: str):
    return jnp.asarray(np.stack([info[key] for info in infos]))


def _ball_joints(binfo: list[dict]) -> BallJoints | None:
    if not binfo:
        return None
    return BallJoints(
        names=tuple(bi["name"] for bi in binfo), parent=tuple(bi["parent"] for bi in binfo),
        child=tuple(bi["child"] for bi in binfo), after=tuple(bi["after"] for bi in binfo),
        parent_point=_stacked(binfo, "s_p"), child_point=_stacked(binfo, "s_c"),
        relative_rotation=_stacked(binfo, "C"), initial=_stacked(binfo, "q"),
    )  # fmt: skip


def _ball_forces(binfo: list[dict], com: np.ndarray) -> list:
    """Damping and rotor inertia of the ball joints that have them: three 1-DOF joints each
    about the parent's axes, ``sum_k e_k e_k^T = I`` (module docstring); their springs
    (``BallSpring``, about MuJoCo's ``qpos_spring``); their limits (``BallLimits``); their
    friction (``BallFriction``)."""
    def triads(key):
        """The 1-DOF joints of the balls whose ``key`` is not 0, and its value on each."""
        some = [bi for bi in binfo if bi[key] != 0]
        joints = dict(
            parent=np.repeat([bi["parent"] for bi in some], 3), child=np.repeat([bi["child"] for bi in some], 3),
            axis=np.tile(np.eye(3), (len(some), 1)), point=np.repeat([bi["s_c"] - com[bi["child"]] for bi in some], 3, axis=0),
        )  # fmt: skip
        return some, joints, jnp.asarray(np.repeat([bi[key] for bi in some], 3))

    out = []
    damped, joints, damping = triads("damping")
    if damped:
        out.append(JointForce(**joints, damping=damping))
    rotors, joints, inertia = triads("armature")
    if rotors:
        out.append(JointInertia(JointForce(**joints), inertia))
    limited = [bi for bi in binfo if bi["limits"] is not None]
    if limited:
        law = _stacked_limits([bi["limits"] for bi in limited], [False] * len(limited), one_sided=True)
        out.append(BallLimits(tuple(bi["parent"] for bi in limited), tuple(bi["child"] for bi in limited),
                              _stacked(limited, "C"), _stacked(limited, "inverse_inertia"), law))  # fmt: skip
    rubbing = [bi for bi in binfo if bi["friction"] is not None]
    if rubbing:
        out.append(BallFriction(tuple(bi["parent"] for bi in rubbing), tuple(bi["child"] for bi in rubbing),
                                jnp.asarray(np.stack([bi["friction"][0] for bi in rubbing])),
                                jnp.asarray(np.stack([bi["friction"][1] for bi in rubbing]))))  # fmt: skip
    sprung = [bi for bi in binfo if bi["stiffness"] != 0]
    if sprung:
        out.append(BallSpring(tuple(bi["parent"] for bi in sprung), tuple(bi["child"] for bi in sprung),
                              _stacked(sprung, "C"), _stacked(sprung, "rest"), _stacked(sprung, "stiffness")))  # fmt: skip
    return out


def _closes_loop(m, e: int) -> bool:
    """Whether equality ``e`` is one difflie reads: an active ``connect`` or ``weld``."""
    return bool(m.eq_active0[e]) and int(m.eq_type[e]) in (_CONNECT, _WELD)


def _equalities(m, path: str, body_of: list[int], R_in: list, p_in: list, body_names: list[str]) -> list:
    """The rows of the active ``connect`` and ``weld`` equality constraints (module docstring),
    their points in the frames of difflie's bodies (a link's pose in its group: ``R_in``,
    ``p_in``)."""
    import mujoco

    rows = []
    for e in range(m.neq):
        if not _closes_loop(m, e):
            continue
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_EQUALITY, e) or f"equality{e}"
        ids, data = (int(m.eq_obj1id[e]), int(m.eq_obj2id[e])), np.asarray(m.eq_data[e], float)
        if m.eq_objtype[e] == _SITE:  # the sites' points, and frames, coincide
            links = [int(m.site_bodyid[i]) for i in ids]
            points = [np.asarray(m.site_pos[i], float) for i in ids]
            frames = [_quat_matrix(m.site_quat[i]) for i in ids]
            relative = frames[0] @ frames[1].T  # body 2's rotation in body 1's frame
        else:
            links = list(ids)
            if m.eq_type[e] == _CONNECT:
                points = [data[0:3], data[3:6]]
                relative = None
            else:  # relpose: body 2's pose (p, Q) in body 1's frame; the anchor on body 2
                p, relative = data[3:6], _quat_matrix(data[6:10])
                points = [p + relative @ data[0:3], data[0:3]]
        g1, g2 = (body_of[b] for b in links)
        if g1 == g2:
            raise ModelFileError(f"{path}: equality {name!r} joins {body_names[links[0]]!r} and {body_names[links[1]]!r}, which move as one body")
        s1, s2 = (p_in[b] + R_in[b] @ x for b, x in zip(links, points))
        if m.eq_type[e] == _CONNECT or data[10] == 0:  # a weld without torque is a connect
            rows += C.spherical(g1, s1, g2, s2, name=name)
        else:
            rows += C.fixed(g1, s1, g2, s2, R_in[links[0]] @ relative @ R_in[links[1]].T, name=name)
    return rows


def _couples_joints(m, e: int) -> bool:
    """Whether equality ``e`` is an active joint coupling (MJCF ``<joint>``, URDF ``mimic``)."""
    return bool(m.eq_active0[e]) and int(m.eq_type[e]) == _JOINT


def _coupled_joints(m, locked: list[str]) -> list[tuple[int, int, int]]:
    """``(equality, follower, leader)`` joint ids of the active joint couplings (leader -1:
    none; MuJoCo's compiler takes hinges and slides only); one whose follower is locked but not
    its leader is refused (the leader would be held where the polynomial meets the lock)."""
    import mujoco

    out = []
    for e in range(m.neq):
        if not _couples_joints(m, e):
            continue
        f, l = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_EQUALITY, e) or f"equality{e}"
        if m.joint(f).name in locked and (l < 0 or m.joint(l).name not in locked):
            leader = f"its leader {m.joint(l).name!r}" if l >= 0 else "the constant it is held at"
            raise ValueError(f"load_model: locked_joints: joint {m.joint(f).name!r} follows {leader} (coupling {name!r}); "
                             "lock the leader (with it) instead")  # fmt: skip
        out.append((e, f, l))
    return out


def _polynomial(m, e: int, x: float) -> tuple[float, float]:
    """A joint coupling's polynomial ``p(x)`` and its slope ``p'(x)`` (``polycoef``)."""
    c = np.asarray(m.eq_data[e][:5], float)
    return float(np.polyval(c[::-1], x)), float(np.polyval((c[1:] * np.arange(1, 5))[::-1], x))


def _follow(m, couplings: list, q_of: dict, qd_of: dict, locked: list[str]) -> None:
    """Place each coupled follower that ``joint_positions`` / ``joint_velocities`` leave out
    where its coupling puts it (``q_f0 + p(q_l - q_l0)``, ``p' q_dot_l``), so the model starts
    on its couplings (in file order: a follower may lead the next)."""
    for e, f, l in couplings:
        name_f = m.joint(f).name
        x, rate = 0.0, 0.0
        if l >= 0:
            name_l, q0_l = m.joint(l).name, float(m.qpos0[m.jnt_qposadr[l]])
            x, rate = q_of.get(name_l, q0_l) - q0_l, qd_of.get(name_l, 0.0)
        p, slope = _polynomial(m, e, x)
        q_of.setdefault(name_f, float(m.qpos0[m.jnt_qposadr[f]]) + p)
        if name_f not in locked:
            qd_of.setdefault(name_f, slope * rate)


def _joint_couplings(m, couplings: list, jinfo: list[dict], locked: dict[str, float], path: str) -> JointCouplings | None:
    """``JointCouplings`` of the active joint couplings, their softness from ``eq_solref`` and
    ``eq_solimp`` at MuJoCo's inertia of each (``1 / efc_diagA`` at the reference pose; a
    softness without stiffness refused, naming it in ``path``); a locked leader becomes a
    constant of the polynomial, and couplings whose joints are both locked drop out (``None``:
    all did)."""
    import mujoco

    data = mujoco.MjData(m)
    mujoco.mj_forward(m, data)
    row = {int(i): k for k, (kind, i) in enumerate(zip(data.efc_type, data.efc_id)) if kind == mujoco.mjtConstraint.mjCNSTR_EQUALITY}
    column = {ji["joint"]: i for i, ji in enumerate(jinfo)}
    follower, leader, reference, polynomial, stiffness, damping, impedance = [], [], [], [], [], [], []
    for e, f, l in couplings:
        if f not in column:  # both locked
            continue
        c = np.asarray(m.eq_data[e][:5], float)
        q0_l = float(m.qpos0[m.jnt_qposadr[l]]) if l >= 0 else 0.0
        if l >= 0 and l not in column:  # a locked leader: a constant
            c = np.array([_polynomial(m, e, locked[m.joint(l).name] - q0_l)[0], 0.0, 0.0, 0.0, 0.0])
        solimp = np.asarray(m.eq_solimp[e], float)
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_EQUALITY, e) or f"equality{e}"
        k, b = _solref_gains(m.eq_solref[e], solimp[1], f"{path}: joint coupling {name!r}: its")
        inertia = 1.0 / float(data.efc_diagA[row[e]])
        follower.append(column[f])
        leader.append(column[l] if l in column else -1)
        reference.append([float(m.qpos0[m.jnt_qposadr[f]]), q0_l])
        polynomial.append(c)
        stiffness.append(inertia * k)
        damping.append(inertia * b)
        impedance.append(solimp)
    if not follower:
        return None
    return JointCouplings(*(jnp.asarray(np.array(x, float)) for x in (reference, polynomial, stiffness, damping, impedance)),
                          follower=tuple(follower), leader=tuple(leader))  # fmt: skip


def _modelled_actuator(m, a: int) -> str | None:
    """What actuator ``a`` moves, where ``Actuators`` models it (without activation dynamics,
    its gain fixed or affine and its bias none or affine): ``"joint"``, a hinge, a slide or a
    fixed tendon; ``"spatial"``, a spatial tendon through sites; ``None``: not modelled."""
    if int(m.actuator_dyntype[a]) != 0 or int(m.actuator_gaintype[a]) not in (0, 1) or int(m.actuator_biastype[a]) not in (0, 1):
        return None
    trn, target = int(m.actuator_trntype[a]), int(m.actuator_trnid[a, 0])
    if (trn == _TRN_JOINT and m.jnt_type[target] in (_HINGE, _SLIDE)) or (trn == _TRN_TENDON and _is_fixed(m, target)):
        return "joint"
    return "spatial" if trn == _TRN_TENDON and _is_spatial(m, target) else None


def _actuators(m, controls, jinfo: list[dict], locked: dict[str, float], spatial: list[int]) -> tuple[Actuators | None, Actuators | None]:
    """``Actuators`` of the file's actuators that move movable hinges and slides, directly or
    through a fixed tendon (a locked joint's share of a tendon is a constant; an actuator that
    moves only locked joints does nothing), over the joints; and of those on the spatial tendons
    ``spatial``, over those tendons' lengths (``SpatialTendons``' law). Their controls from
    ``controls``, in the file's order of all of them (``None``: none of a kind)."""
    import mujoco

    column = {ji["joint"]: i for i, ji in enumerate(jinfo)}
    names = _names(m, mujoco.mjtObj.mjOBJ_ACTUATOR, m.nu)
    kinds = {"joint": ([], [], []), "spatial": ([], [], [])}  # rows, moment, offset
    for a in range(m.nu):
        kind = _modelled_actuator(m, a)
        if kind is None:
            continue
        target, gear = int(m.actuator_trnid[a, 0]), float(m.actuator_gear[a, 0])
        if kind == "spatial":
            row, shift = np.zeros(len(spatial)), 0.0
            row[spatial.index(target)] = gear
        elif int(m.actuator_trntype[a]) == _TRN_JOINT:
            row, shift = np.zeros(len(jinfo)), 0.0
            if target in column:
                row[column[target]] = gear
        else:
            A, shares = _tendon_rows(m, [target], jinfo, locked)
            row, shift = gear * A[0], gear * shares[0]
        if np.any(row != 0):
            for part, x in zip(kinds[kind], (a, row, shift)):
                part.append(x)
    rows = sorted(kinds["joint"][0] + kinds["spatial"][0])
    used = [names[a] for a in rows]
    one = callable(controls) and not isinstance(controls, Mapping)
    if one:
        controls = _checked(controls, f"controls (one function of t for the actuators {used})", (len(used),))
    elif isinstance(controls, Mapping):
        bad = [k for k in controls if k not in used]
        if bad:
            others = [k for k in bad if k in names]
            why = f"actuators difflie does not model or on locked joints {others}" if others else f"unknown actuators {bad}"
            raise ValueError(f"load_model: controls names {why}; the modelled actuators are {used}")
    else:
        raise ValueError(f"load_model: controls must be {{actuator name: number, expression of t or function of t}} or one "
                         f"function t -> (n_actuators,), got {type(controls).__name__}")  # fmt: skip

    def made(kind, ranges, limited):
        mine, moment, offset = kinds[kind]
        if not mine:
            return None
        own = [names[a] for a in mine]
        signal = controls if one else _signal({k: v for k, v in controls.items() if k in own}, own, (), "controls")
        gain = np.array([m.actuator_gainprm[a, :3] * ((1, 1, 1) if m.actuator_gaintype[a] == 1 else (1, 0, 0)) for a in mine], float)
        bias = np.array([m.actuator_biasprm[a, :3] * (m.actuator_biastype[a] == 1) for a in mine], float)
        on = [int(m.actuator_trnid[a, 0]) if int(m.actuator_trntype[a]) == _TRN_TENDON else -1 for a in mine]
        bounded = sorted({k for k in on if k >= 0 and m.tendon_actfrclimited[k]})  # tendons whose actuators' sum is bounded
        arrays = (np.array(moment), np.array(offset), gain, bias, m.actuator_ctrlrange[mine], m.actuator_forcerange[mine], ranges,
                  m.tendon_actfrcrange[bounded].reshape(-1, 2))  # fmt: skip
        return Actuators(
            signal, *(jnp.asarray(np.asarray(x, float)) for x in arrays),
            ctrl_limited=[bool(m.actuator_ctrllimited[a]) for a in mine], force_limited=[bool(m.actuator_forcelimited[a]) for a in mine],
            joint_limited=limited, names=own, tendon=[bounded.index(k) if k in bounded else -1 for k in on],
            select=[rows.index(a) for a in mine] if one else None,
        )  # fmt: skip

    joints = [ji["joint"] for ji in jinfo]
    return (made("joint", m.jnt_actfrcrange[joints], [bool(m.jnt_actfrclimited[j]) for j in joints]),
            made("spatial", np.zeros((len(spatial), 2)), [False] * len(spatial)))  # fmt: skip


def _check_hinges(m, b: int, path: str, body: str, joint_names: list[str]) -> None:
    """A body with several joints: two or three hinges about one point, their axes independent."""
    js = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    names = [joint_names[j] for j in js]
    what = f"{path}: body {body!r} has the joints {names}"
    if len(js) > 3 or any(m.jnt_type[j] != _HINGE for j in js):
        raise ModelFileError(f"{what}; difflie reads two or three hinges about one point as one joint, not {[_KIND[int(m.jnt_type[j])] for j in js]}")
    pos = np.array([m.jnt_pos[j] for j in js])
    if np.abs(pos - pos[0]).max() > 1e-9 * max(1.0, np.abs(pos).max()):
        raise ModelFileError(f"{what} at different points {pos.tolist()}; difflie reads hinges of one body about one point only (split the body)")
    axes = np.array([m.jnt_axis[j] / np.linalg.norm(m.jnt_axis[j]) for j in js])
    first_last = np.linalg.norm(np.cross(axes[0], axes[-1]))
    if first_last < 1e-6 or (len(js) == 3 and abs(np.linalg.det(axes)) < 1e-6):
        raise ModelFileError(f"{what} with dependent axes {axes.tolist()} at the reference pose (gimbal lock)")


def _hinge_groups(jinfo: list[dict], q_of: Mapping[str, float]) -> HingeGroups | None:
    """The ``HingeGroups`` of the bodies with several hinges (``None``: none has)."""
    if not any(ji["size"] > 1 for ji in jinfo):
        return None
    axes, last = [], []
    for ji in jinfo:
        if ji["size"] > 1:
            group = jinfo[ji["group"] : ji["group"] + ji["size"]]
            a1, a3 = group[0]["a_p"], group[-1]["a_p"]
            a2 = group[1]["a_p"] if ji["size"] == 3 else np.cross(a1, a3) / np.linalg.norm(np.cross(a1, a3))
            axes.append(np.stack([a1, a2, a3]))
            last.append(group[-1]["a_c"])
        else:  # alone on its body: the frame (a, a x u, u) of its axis, unused
            a, u = ji["a_p"], _normal(ji["a_p"])
            axes.append(np.stack([a, np.cross(a, u), u]))
            last.append(ji["C"].T @ u)
    middle = tuple(ji["group"] + 1 if ji["size"] == 3 else -1 for ji in jinfo)
    hinges = HingeGroups(
        slot=tuple(ji["slot"] for ji in jinfo), middle=middle, grouped=tuple(ji["size"] > 1 for ji in jinfo),
        axes=jnp.asarray(np.stack(axes)), last=jnp.asarray(np.stack(last)), sign=jnp.ones(len(jinfo)),
    )  # fmt: skip
    q = jnp.asarray([q_of.get(ji["name"], ji["ref"]) - ji["ref"] for ji in jinfo])
    return eqx.tree_at(lambda h: h.sign, hinges, hinges.signs(q))


def _checked(fn, what: str, shape: tuple[int, ...], nj: int | None = None, per: str = ""):
    """``fn`` of ``t`` (or, with ``nj``, of ``(t, q, qd)``) as a pytree-safe function, its
    value's shape checked now (abstractly, by ``jax.eval_shape``): a wrong shape or a failing
    function is an error of ``load_model``, not of a later ``simulate``."""
    fn = C.basic.as_driver(fn)
    args, at = ((jnp.zeros(()),), "t = 0") if nj is None else ((jnp.zeros(()), jnp.zeros((nj,)), jnp.zeros((nj,))), "t = 0, q = qd = 0")
    try:
        out = jax.eval_shape(lambda *a: jnp.asarray(fn(*a)), *args)
    except Exception as err:  # noqa: BLE001 - the user's function, whatever it raises
        raise ValueError(f"load_model: {what} fails at {at}: {_one_line(err) or type(err).__name__}") from None
    if out.shape != shape:
        raise ValueError(f"load_model: {what} must return shape {shape}{per}, got {out.shape}")
    return fn


def _feedback_law(law, nj: int):
    """``law(t, q, qd) -> (nj,)``, its shape checked now."""
    if not callable(law):
        raise ValueError(f"load_model: joint_feedback must be a function (t, q, qd) -> (n_joints,), got {type(law).__name__}")
    return _checked(law, "joint_feedback", (nj,), nj, per=" (one torque per joint)")


def _torques(value, joints: list[str], locked: list[str], balls: list[str] = ()):
    """The signals of the 1-DOF joints (``None``, a callable ``t -> (nj,)`` or a
    ``JointTorques``) and of the ball joints (``None`` or a ``JointTorques`` of 3-vectors in
    the children's axes) from ``{name: value}`` (a number, an expression string of ``t`` as in
    the model files, or a function of ``t``; for a ball, a 3-vector or a function of ``t``
    returning one)."""
    if value is None:
        return None, None
    if callable(value) and not isinstance(value, Mapping):
        return _checked(value, "joint_torques (one function of t for all joints)", (len(joints),)), None
    if not isinstance(value, Mapping):
        raise ValueError(
            "load_model: joint_torques must be {joint name: number, expression of t or function of t} or one "
            f"function t -> (n_joints,), got {type(value).__name__}"
        )
    bad = [k for k in value if k not in joints and k not in balls]
    if bad:
        where = "locked" if all(k in locked for k in bad) else "unknown"
        guess = _guess(bad, joints + list(balls)) if where == "unknown" else ""
        raise ValueError(f"load_model: joint_torques names {where} joints {bad}{guess}; movable joints are {joints + list(balls)}")
    ones = {k: u for k, u in value.items() if k in joints}
    threes = {k: u for k, u in value.items() if k in balls}
    return (_signal(ones, joints, ()) if ones else None), (_signal(threes, list(balls), (3,)) if threes else None)


def _signal(value: Mapping, names: list[str], shape: tuple[int, ...], kwarg: str = "joint_torques") -> JointTorques:
    """A ``JointTorques`` over ``names`` from ``{name: value}``, each value of ``shape``
    (``kwarg``: the keyword that gave it, for the messages)."""
    kind = "a number, an expression of t or a function of t" if not shape else "a 3-vector (child axes) or a function of t returning one"
    constants, functions, index = {}, [], []
    for name, u in value.items():
        k = names.index(name)
        what = f"{kwarg}[{name!r}]"
        if isinstance(u, str) and not shape:
            try:
                u = Expression(u)
            except ExpressionError as err:
                raise ValueError(f"load_model: {what}: {err}") from None
        if callable(u):
            functions.append(_checked(u, what, shape, per=" (a ball joint's torque in its child's axes)" if shape else ""))
            index.append(k)
            continue
        try:
            constants[k] = jnp.asarray(u)
        except TypeError:
            raise ValueError(f"load_model: {what} must be {kind}, got {u!r}") from None
        if constants[k].shape != shape or not jnp.issubdtype(constants[k].dtype, jnp.number):
            raise ValueError(f"load_model: {what} must be {kind}, got {u!r}")
    dtype = jnp.result_type(float, *constants.values())
    values = [jnp.asarray(constants.get(k, np.zeros(shape)), dtype) for k in range(len(names))]
    return JointTorques(jnp.stack(values), tuple(functions), tuple(index))
