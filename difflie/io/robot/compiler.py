"""A robot file through MuJoCo's model compiler: the compiled model and its meshes, the link
inertials MuJoCo refuses (a stand-in for the compiler, the file's own put back after it), the
massless links between hinges folded, the file's switches, and MuJoCo's messages in the words
of a robot file."""

from __future__ import annotations

import functools
import os
import re
import warnings

import numpy as np

from ..json_values import ModelFileError
from .frames import _matrix_quat, _quat_matrix

_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3


_CONNECT, _WELD, _JOINT = 0, 1, 2  # mjtEq


_WRAP_JOINT, _WRAP_PULLEY, _WRAP_SITE = 1, 2, 3  # mjtWrap


_TRN_JOINT, _TRN_TENDON = 0, 3  # mjtTrn


_SITE = 6  # mjtObj


_KIND = {_FREE: "free", _BALL: "ball", _SLIDE: "slide", _HINGE: "hinge"}


class RobotModelWarning(UserWarning):
    """A robot file has elements difflie does not model (named in the message)."""


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
        raise ModelFileError(f"{path}: {_mujoco_error(err, path)}") from None
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
    try:  # reading a body's joints, MuJoCo refuses a repeated joint name that its URDF parser took
        if floating_base is not None:
            for root in spec.worldbody.bodies:
                free = [j for j in root.joints if j.type == mujoco.mjtJoint.mjJNT_FREE]
                if floating_base and not root.joints:
                    root.add_freejoint()
                elif not floating_base:
                    for j in free:
                        spec.delete(j)
        folded = _fold_massless_hinges(spec) if urdf else []
    except ValueError as err:
        raise ModelFileError(f"{path}: {_mujoco_error(err, path, spec)}") from None
    c = spec.compiler
    c.boundmass, c.boundinertia = max(c.boundmass, bounds[0]), max(c.boundinertia, bounds[1])
    c.balanceinertia = bool(c.balanceinertia or bounds[2])
    own = _stand_in_inertials(spec, urdf, path)
    try:
        model = spec.compile()
    except Exception as err:
        raise ModelFileError(f"{path}: {_mujoco_error(err, path, spec)}") from None
    _restore_inertials(model, own, c.boundmass, c.boundinertia, c.balanceinertia)
    meshes = {}
    for name, file in marked.items():
        gid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name)
        if gid >= 0:
            meshes[gid] = file
    return model, meshes, collision, folded


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


def _stand_in_inertials(spec, urdf: bool, path: str) -> dict[str, tuple[float, np.ndarray, np.ndarray, np.ndarray]]:
    """Give MuJoCo's compiler a valid stand-in for each link inertial it refuses, and return
    the file's own ``{link: (mass, COM, principal moments, principal axes)}`` for them.

    MuJoCo refuses a link whose inertia is not positive definite, breaks the triangle
    inequality of principal moments, or that moves without mass; robot files have such links
    (massless frames whose inertia is a placeholder, sensors, links of a multi-axis joint).
    Pinocchio takes them as written, and so does difflie: what must be a rigid body is each
    group of links welded together, checked when the groups are merged. The stand-in (the
    moments lifted to positive values that meet the triangle inequality, a massless moving
    link given 1e-9 kg) only enters MuJoCo's own derived quantities: the ``dof_invweight0``
    from which the soft limits and friction of the nearby joints take their constants. A
    negative mass, which MuJoCo's parser takes and a stand-in would hide, is refused."""
    import mujoco

    own = {}
    if spec.compiler.inertiafromgeom == mujoco.mjtInertiaFromGeom.mjINERTIAFROMGEOM_TRUE:
        return own  # the file's inertials give way to its geometry
    for body in spec.bodies:
        if body.explicitinertial and body.mass < 0:
            raise ModelFileError(f"{path}: link {body.name!r}: mass must be positive (or zero for a massless frame), got {body.mass:g}")
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


# The kinds of element MuJoCo's messages are about, in a robot file's words where they differ
_ELEMENTS = {"body": "link", "equality constraint": "equality", "flexcomp": "flex", "key": "keyframe"}
_ABOUT = re.compile(r"^(.*?) (?:in|for) (body|joint|geom|site|tendon|actuator|equality constraint|sensor|camera|light|mesh|skin|flexcomp|flex"
                    r"|hfield|texture|material|keyframe|key|pair|exclude)(?: id =)?(?: (\d+))?(, wrap \d+)?$")  # fmt: skip


def _mujoco_error(err: Exception, path: str, spec=None) -> str:
    """MuJoCo's parser or compiler message in the words of a robot file: the XML error and its
    line, or the element (by its kind: link, joint, geom, tendon, equality, ...; from the
    compiler's ``spec`` where the message gives only its number) and what is wrong with it."""
    text = str(err)
    xml = re.search(r"Error=XML_ERROR_(\w+).*?Line number=(\d+)(?:: XMLElement name=(\w+))?", text, re.S)
    if xml:
        kind, line, element = xml.groups()
        at = f" (element <{element}>)" if element else ""
        return f"malformed XML, {kind.lower().replace('_', ' ')} at line {line}{at}"
    if "repeated URDF name" in text:
        return _repeated_urdf_name(path) or _one_line(err)
    what = re.sub(r"^(XML Error: )?(Error: )?", "", text.strip().splitlines()[0]) if text.strip() else type(err).__name__
    element = re.search(r"Element name '([^']*)'(?:, id (\d+))?", text)
    line = re.search(r"line (\d+)", text)
    at = f" (line {line.group(1)})" if line else ""
    unsaid = "body" if "bod" in what or "inertia" in what else "sensor" if "sensor" in what else "element"  # where no kind is named
    if "A + B >= C" in what:
        what = "its principal moments of inertia break the triangle inequality A + B >= C (no rigid body has such an inertia)"
    elif "mjMINVAL" in what:
        what = "it moves but has no positive mass and inertia (a missing or zero <inertial>)"
    what = re.sub(r" in wrap \d+$", " in a tendon's path", re.sub(r"^error '(.*)' in (\w+)$", r"\1 in \2", what))
    about = _ABOUT.match(what)
    repeated = re.match(r"repeated name '(.*)'$", about.group(1)) if about else None
    if repeated:
        return f"the {_ELEMENTS.get(about.group(2), about.group(2))} name {repeated.group(1)!r} is used more than once{at}"
    if about:
        what, kind, number, wrap = about.groups()
        name = element.group(1) if element and not wrap else ""
        number = number or (element.group(2) if element else None)
        if wrap and spec is not None and number is not None:  # the element named is the tendon's joint or site
            name = spec.tendons[int(number)].name
        if kind == "equality constraint" and spec is not None and number is not None and what.startswith("unknown element"):
            return _unknown_in_equality(spec.equalities[int(number)], number, what)
    elif element and f"'{element.group(1)}'" in what:  # the message names it
        return what + at
    elif element:
        kind, name, number = unsaid, element.group(1), element.group(2)
    else:
        return _one_line(err)
    label = _ELEMENTS.get(kind, kind)
    return f"{label} {name!r}: {what}" if name else f"{label} {number}: {what}" if number is not None else f"{what} ({label})"


def _unknown_in_equality(equality, number: str, what: str) -> str:
    """An equality constraint that names an element the file does not have."""
    import mujoco

    kind = equality.type.name.removeprefix("mjEQ_").lower()
    target = "site" if equality.objtype == mujoco.mjtObj.mjOBJ_SITE else {"connect": "body", "weld": "body"}.get(kind, kind)
    missing = re.search(r"'([^']*)'", what)
    label = repr(equality.name) if equality.name else number
    return f"equality {label} ({kind}): no {target} {missing.group(1) if missing else '?'!r} in the file"


def _repeated_urdf_name(path: str) -> str | None:
    """The link (or joint) name a URDF gives twice, which MuJoCo's parser refuses without naming it."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    for tag in ("link", "joint"):
        names = [e.get("name") for e in root.iter(tag)]
        twice = [n for n in dict.fromkeys(names) if names.count(n) > 1]
        if twice:
            return f"the {tag} name {twice[0]!r} is used more than once (URDF {tag} names are unique)"
    return None


def _names(m, objtype, n) -> list[str]:
    import mujoco

    return [mujoco.mj_id2name(m, objtype, i) or f"{'body' if objtype == mujoco.mjtObj.mjOBJ_BODY else 'joint'}{i}" for i in range(n)]


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
