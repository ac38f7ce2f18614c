"""The laws a robot file gives its joints and tendons, read from the compiled MuJoCo model:
soft limits and friction (their constants from ``solref`` and ``solimp``), fixed and spatial
tendons, actuators, gravity compensation, and the ball joints' damping, rotor inertia,
springs, limits and friction."""

from __future__ import annotations

from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from ...forces import BallSpring, DeadLoad, JointForce, JointInertia, SpatialTendons
from ...joint_laws import Actuators, BallFriction, BallLimits, JointFriction, JointLaws, JointLimits, Tendons, TendonSpring
from ..json_values import ModelFileError
from .arguments import _checked, _signal
from .compiler import _BALL, _HINGE, _SLIDE, _TRN_JOINT, _TRN_TENDON, _WRAP_JOINT, _WRAP_PULLEY, _WRAP_SITE, _names


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
    angle)``). ``None`` for a joint without limits (a reversed range refused: ``_unreversed``)."""
    if not m.jnt_limited[j]:
        return _unreversed(m.jnt_range[j], f"{path}: joint {m.joint(j).name!r}")
    inertia = 1.0 if m.jnt_type[j] == _BALL else 1.0 / float(m.dof_invweight0[m.jnt_dofadr[j]])
    return _limit_law(m.jnt_solref[j], m.jnt_solimp[j], *(float(x) for x in m.jnt_range[j]), inertia, f"{path}: joint {m.joint(j).name!r}")


def _unreversed(limits, what: str) -> None:
    """``None`` for the ``range`` of a joint or tendon without limits; a reversed one, which
    MuJoCo reads as no limit (a URDF ``<limit>``, an MJCF ``range`` limited by ``autolimits``),
    raises a ``ModelFileError`` that ``what`` begins."""
    lower, upper = (float(x) for x in limits)
    if lower > upper:
        raise ModelFileError(f"{what}: its limit's lower {lower:g} is above its upper {upper:g} (MuJoCo reads that as no limit); swap them, "
                             "or joint_limits=False leaves the limits out")  # fmt: skip


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
    what = {k: f"{path}: tendon {m.tendon(k).name or k!r}" for k in rows}

    def inertia(k, law):
        """Tendon ``k``'s inertia, ``1 / tendon_invweight0``, which its ``law`` needs."""
        if not m.tendon_invweight0[k] > 0:
            raise ModelFileError(f"{what[k]}: its length does not change with any joint at the reference pose (zero inverse weight); "
                                 f"its {law} cannot act")  # fmt: skip
        return 1.0 / float(m.tendon_invweight0[k])

    if joint_limits and any(m.tendon_limited[k] for k in rows):
        values = [_limit_law(m.tendon_solref_lim[k], m.tendon_solimp_lim[k], *(float(x) for x in m.tendon_range[k]), inertia(k, "limit"),
                             what[k]) if m.tendon_limited[k] else None for k in rows]  # fmt: skip
        laws.append(_stacked_limits(values, [False] * len(rows)))
    if joint_friction and any(m.tendon_frictionloss[k] > 0 for k in rows):
        values = [_friction_law(float(m.tendon_frictionloss[k]), m.tendon_solref_fri[k], m.tendon_solimp_fri[k], inertia(k, "friction"),
                                what[k]) if m.tendon_frictionloss[k] > 0 else None for k in rows]  # fmt: skip
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


def _stacked(infos: list[dict], key: str):
    return jnp.asarray(np.stack([info[key] for info in infos]))


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
