"""MJCF equality constraints: ``connect`` and ``weld`` as the constraint rows that close loops,
joint couplings (``<equality><joint>``, URDF ``mimic``) as soft laws of the joints."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ... import constraints as C
from ...joint_laws import JointCouplings
from ..json_values import ModelFileError
from .compiler import _CONNECT, _JOINT, _SITE, _WELD
from .frames import _quat_matrix
from .laws import _solref_gains


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
