"""The body tree of a compiled robot file in difflie's terms: links welded into bodies and their
merged mass properties, the joints between bodies at the reference pose, their constraint rows,
and the initial state by forward kinematics (numpy, load time only)."""

from __future__ import annotations

from collections.abc import Mapping

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ... import constraints as C
from ...hinges import HingeGroups
from ..json_values import ModelFileError
from .compiler import _BALL, _FREE, _HINGE, _KIND, _SLIDE
from .frames import _normal, _quat_matrix, _rot, _unit
from .laws import _ball_friction, _friction, _inverse_mass, _limits


def _bodies(m, path: str, urdf: bool, R_rel: list, p_rel: list, joint_names_all: list[str], locked: list[str], q_of: Mapping):
    """Links welded into difflie bodies (fixed joints, and ``locked`` joints at their positions
    in ``q_of``): ``body_of[b]``, the body of link ``b`` (``C.GROUND``: welded to the world);
    ``R_in[b]``, ``p_in[b]``, its pose in that body's frame; ``groups``, the link whose frame
    each body takes (``rep[b]`` below); ``kind_of``, that link's joint type."""
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
    return body_of, R_in, p_in, groups, kind_of


def _mass_properties(m, path: str, body_names: list[str], body_of: list[int], groups: list[int], R_in: list, p_in: list):
    """Mass, COM and inertia about it of each body, in the frame of its link: its links' merged
    (parallel-axis theorem), a massless link's rotational inertia counted as Pinocchio counts
    it. A body that is not a rigid body (no mass, an inertia not positive definite or outside
    the triangle inequality) is a ``ModelFileError`` naming its links and the remedies."""
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
            links = [i for i in range(1, m.nbody) if body_of[i] == k]
            own = [i for i in links if len(links) > 1 and m.body_inertia[i].min() < 0]  # the welded links at fault
            given = "".join(f"; the file gives link {body_names[i]!r} the principal moments {[float(f'{x:.6g}') for x in sorted(m.body_inertia[i])]}"
                            for i in own)  # fmt: skip
            raise ModelFileError(f"{what(k, b)} has an inertia that is not positive definite (principal moments {e.tolist()}){given}{fix}")
        if not e[0] + e[1] >= e[2] * (1 - 1e-12):  # as RigidBody checks it
            raise ModelFileError(f"{what(k, b)}: its principal moments {e.tolist()} break the triangle inequality A + B >= C (no rigid "
                                 "body has such an inertia); balance_inertia=True (--balance-inertia) replaces a link's moments "
                                 "that do by their mean (MuJoCo's balanceinertia)")  # fmt: skip
    return mass_g, com, inertia_g


def _joint_tables(m, path: str, groups: list[int], kind_of: dict, body_of: list[int], R_in: list, p_in: list, R_rel: list, p_rel: list,
                  q_of: Mapping, qd_of: Mapping, joint_names_all: list[str], joint_limits: bool, joint_friction: bool):
    """The joints between bodies, one ``dict`` each: parent and child body, points and axes
    at the reference configuration (``q = qpos0``); the hinges of one body in order, ``slot``
    0 (first), 1 (middle of three), 2 (last). Ball joints apart (``binfo``); ``tree`` holds both
    kinds, parents before children."""
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
    return jinfo, binfo, tree


def _forward_kinematics(groups: list[int], kind_of: dict, R_rel: list, p_rel: list, tree: list[dict], q_of: Mapping, qd_of: Mapping,
                        base_velocity, com: np.ndarray):
    """The initial state at the joint positions and rates of ``q_of`` / ``qd_of`` (the
    reference and rest elsewhere): each body's rotation, COM position and velocity (world) and
    angular velocity (body axes), and the index of the floating base (-1: none). From each
    link-frame origin ``o``, its rotation ``R`` and the world velocities of ``o`` and angular,
    parents first: a later hinge of one body turns it from where the one before left it."""
    nb = len(groups)
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
    return R_w, r0, v0, omega0, base


def _joint_rows(jinfo: list[dict], binfo: list[dict]) -> list:
    """The constraint rows of the joints: a ball is a spherical joint, a body's two or three
    hinges about one point a spherical joint (a pair also keeping the angle of its axes), a
    lone hinge a revolute and a slide a prismatic joint."""
    rows = []
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
    return rows


def _check_hinges(m, b: int, path: str, body: str, joint_names: list[str]) -> None:
    """A body with several joints: two or three hinges about one point, their axes independent
    (a flex's vertex and a URDF planar joint, which MuJoCo gives slides, named as such)."""
    import mujoco

    js = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
    names = [joint_names[j] for j in js]
    kinds = [_KIND[int(m.jnt_type[j])] for j in js]
    what = f"{path}: body {body!r} has the joints {names}"
    flex = [f for f in range(m.nflex) if b in m.flex_vertbodyid[m.flex_vertadr[f] : m.flex_vertadr[f] + m.flex_vertnum[f]]]
    if flex:
        raise ModelFileError(f"{path}: link {body!r} is a vertex of the flex {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_FLEX, flex[0])!r}; "
                             "difflie reads rigid links, not flexible bodies (<flex>, <flexcomp>)")  # fmt: skip
    stem = names[-1].removesuffix("_RZ")
    if path.lower().endswith(".urdf") and kinds == ["slide", "slide", "hinge"] and names == [f"{stem}_TX", f"{stem}_TY", f"{stem}_RZ"]:
        raise ModelFileError(f"{path}: joint {stem!r} is a URDF planar joint, which difflie does not read (MuJoCo makes it two slides and a "
                             f"hinge, {names}); write it as prismatic, prismatic and revolute joints through links with mass, or lock it "
                             f"(locked_joints={names})")  # fmt: skip
    if len(js) > 3 or any(m.jnt_type[j] != _HINGE for j in js):
        raise ModelFileError(f"{what}; a body with several joints must have two or three hinges about one point, not {kinds}: split the "
                             f"body, one joint in each body with mass, or lock them (locked_joints={names})")  # fmt: skip
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
