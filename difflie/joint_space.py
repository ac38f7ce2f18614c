"""Joint space of a robot: joint coordinates and joint rates read off the absolute coordinates.

A 1-DOF joint ``k`` moves body ``c = child[k]`` relative to body ``p = parent[k]`` (``-1``: the
ground, at the identity pose). With body-frame origins ``o = r - R com`` (the link frames of the
file), the joint has the point ``s_p`` and the unit axis ``a`` in the parent's frame, the point
``s_c`` in the child's, and the relative rotation ``R_p^T R_c = C`` at ``q = q_ref``:

    revolute:   R_p^T R_c C^T = Rot(a, q - q_ref),
                q - q_ref = atan2((a x u) . M u, u . M u)   with M = R_p^T R_c C^T, u perpendicular to a
    prismatic:  (o_c + R_c s_c) - (o_p + R_p s_p) = (q - q_ref) R_p a

and the rates, with world angular velocities ``w = R omega`` and point velocities ``v(P)``:

    revolute:   q_dot = (R_p a) . (w_c - w_p)
    prismatic:  q_dot = (w_p x R_p a) . d + (R_p a) . (v_c(P_c) - v_p(P_p)),   d = P_c - P_p

Revolute angles are continuous along the saves (unwrapped) and on the branch nearest the initial
joint positions at the first save. A ball joint (MJCF) has MuJoCo's coordinates: the unit
quaternion of ``C^T R_p^T R_c`` (``ball_joint_quaternions``, continuous along the saves, on the
side of the initial one at the first) and ``omega_rel = R_c^T (w_c - w_p)``, the relative angular
velocity in the child's axes (``ball_joint_velocities``). Two or three hinges about one point of
a body (MJCF) are read as one relative rotation (``difflie.hinges``: generalised Euler angles,
the middle one on the branch of the initial joint positions). ``link_pose`` gives the world pose
of any link of the file (an end effector, a floating base).

The other way, ``forward_kinematics`` places the bodies at joint positions and rates (traced,
one ``lax.scan`` over the joints in tree order), ``with_joint_state`` makes it a model's
initial state (multiple shooting starts each window there) and ``with_bodies`` swaps a
robot's inertial parameters, keeping its link frames where they are. ``JointFeedback`` applies
joint torques that depend on the joint state (a controller). ``LinearInterpolation``
turns sampled joint torques into the ``t -> u`` signal that ``joint_torques`` takes.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .body import RigidBody
from .forces import AbstractForce, BallSpring, DeadLoad, JointForce, JointInertia, SpatialTendons, joint_group_pairs
from .hinges import HingeGroups, turn
from .joint_laws import coupled_joints
from .lie import SO3, cross
from .lie.ops import matrix_to_quat, mv, quat_to_matrix
from .results import BodyState


class BallJoints(eqx.Module):
    """The ball joints of a robot (MJCF ``type="ball"``): body indices ``parent`` (ground: -1)
    and ``child``, the joint point in the parent's and the child's body frames (from the
    body-frame origin), ``relative_rotation`` ``C = R_p^T R_c`` at the identity quaternion, and
    the loaded quaternions ``initial`` ``(qw, qx, qy, qz)``. ``after[b]``: how many of the 1-DOF
    joints of ``JointSpace`` precede ball ``b`` in the tree's order (parents first)."""

    names: tuple[str, ...] = eqx.field(static=True)
    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    after: tuple[int, ...] = eqx.field(static=True)
    parent_point: Float[Array, "nball 3"]
    child_point: Float[Array, "nball 3"]
    relative_rotation: Float[Array, "nball 3 3"]
    initial: Float[Array, "nball 4"]


class JointSpace(eqx.Module):
    """The movable (1-DOF) joints of a robot, in file order, and where the model came from.

    ``parent``/``child`` are body indices (ground: -1), ``prismatic`` the kind of each joint;
    ``parent_point``, ``axis``, ``normal`` (a unit vector perpendicular to ``axis``) are in the
    parent's body frame, ``child_point`` in the child's (both from the body-frame origin);
    ``relative_rotation`` is ``R_p^T R_c`` at ``q = reference``; ``initial`` holds the loaded
    joint positions. ``base`` is the body index of a floating base (``-1``: fixed base).
    ``links`` maps every link of the file to ``(name, body index, pose in that body's frame as
    (x, y, z, qw, qx, qy, qz))`` (merged links included; ground: -1) and ``meshes`` lists
    ``(link name, mesh file, pose in the link frame)`` for plots. ``hinges``: the bodies with
    two or three hinges (``difflie.hinges.HingeGroups``; ``None``: one joint per body).
    ``balls``: the ball joints (``BallJoints``; ``None``: none).
    """

    names: tuple[str, ...] = eqx.field(static=True)
    parent: tuple[int, ...] = eqx.field(static=True)
    child: tuple[int, ...] = eqx.field(static=True)
    prismatic: tuple[bool, ...] = eqx.field(static=True)
    parent_point: Float[Array, "nj 3"]
    child_point: Float[Array, "nj 3"]
    axis: Float[Array, "nj 3"]
    normal: Float[Array, "nj 3"]
    relative_rotation: Float[Array, "nj 3 3"]
    reference: Float[Array, " nj"]
    initial: Float[Array, " nj"]
    base: int = eqx.field(static=True, default=-1)
    links: tuple = eqx.field(static=True, default=())
    meshes: tuple = eqx.field(static=True, default=())
    hinges: HingeGroups | None = None
    balls: BallJoints | None = None

    @property
    def num_joints(self) -> int:
        return len(self.names)

    @property
    def ball_names(self) -> tuple[str, ...]:
        return () if self.balls is None else self.balls.names


def _joint_space(model) -> JointSpace:
    js = getattr(model, "joints", None)
    if not isinstance(js, JointSpace):
        raise ValueError(
            "joint_coordinates: the model has no joint-space description; load the robot from a "
            "URDF or MJCF file with difflie.load_model"
        )
    return js


def _extended(x: Array, fill: Array) -> Array:
    """Append the ground's row ``fill`` after the bodies (axis ``-1 - fill.ndim``)."""
    pad = jnp.broadcast_to(fill.astype(x.dtype), x.shape[: -1 - fill.ndim] + (1,) + fill.shape)
    return jnp.concatenate([x, pad], axis=-1 - fill.ndim)


def _poses(com: Float[Array, "nb 3"], states):
    """Origins and rotations of bodies and ground (index nb), world velocities of origins and
    world angular velocities (``None`` when ``states`` has no velocities); ``com`` in body axes."""
    r, R = jnp.asarray(states.position), jnp.asarray(states.rotation)
    com = com.astype(r.dtype)
    o = r - mv(R, com)
    o_ext = _extended(o, jnp.zeros(3))
    R_ext = _extended(R, jnp.eye(3))
    if getattr(states, "velocity", None) is None:
        return o_ext, R_ext, None, None
    w = mv(R, jnp.asarray(states.angular_velocity))
    v_o = jnp.asarray(states.velocity) - cross(w, mv(R, com))
    return o_ext, R_ext, _extended(v_o, jnp.zeros(3)), _extended(w, jnp.zeros(3))


def _indices(js: JointSpace, nb: int):
    par = np.asarray(js.parent, dtype=int)  # integers also when empty (a robot of ball joints only)
    return np.where(par < 0, nb, par), np.asarray(js.child, dtype=int)


def _unwrap(theta: Array, target: Array) -> Array:
    """Continuous along the leading (save) axis; the first row within pi of ``target``."""
    if theta.ndim > 1:
        theta = jnp.unwrap(theta, axis=0)
    first = theta if theta.ndim == 1 else theta[0]
    return theta + 2 * jnp.pi * jnp.round((target - first) / (2 * jnp.pi))


def joint_coordinates(model, solution) -> Float[Array, "*n nj"]:
    """Joint positions ``(n_saves, n_joints)`` (rad or m) in the order of ``model.joint_names``.

    ``solution`` is anything with ``position`` and ``rotation`` of the bodies: a
    ``Solution``, a ``BodyState`` or a kinematics solution, with a
    leading save axis or without (one state: ``(n_joints,)``).
    """
    return _coordinates(_joint_space(model), model.bodies.com, solution)


def _coordinates(js: JointSpace, com: Float[Array, "nb 3"], solution) -> Float[Array, "*n nj"]:
    o, R, _, _ = _poses(com, solution)
    p, c = _indices(js, com.shape[0])
    dtype = o.dtype
    Rp, Rc = R[..., p, :, :], R[..., c, :, :]
    # revolute: M = R_p^T R_c C^T = Rot(a, theta)
    M = jnp.einsum("...kji,...kjl,kml->...kim", Rp, Rc, js.relative_rotation.astype(dtype))
    u, a = js.normal.astype(dtype), js.axis.astype(dtype)
    theta = turn(a, u, mv(M, u))
    ref = js.reference.astype(dtype)
    if js.hinges is not None:
        theta = jnp.where(np.asarray(js.hinges.grouped), js.hinges.angles(M, js.initial.astype(dtype) - ref), theta)
    theta = _unwrap(theta, js.initial.astype(dtype) - ref)
    # prismatic: displacement of the child's joint point along the parent's axis
    d = (o[..., c, :] + mv(Rc, js.child_point.astype(dtype))) - (o[..., p, :] + mv(Rp, js.parent_point.astype(dtype)))
    slide = jnp.sum(mv(Rp, a) * d, axis=-1)
    return ref + jnp.where(np.asarray(js.prismatic), slide, theta)


def joint_velocities(model, solution) -> Float[Array, "*n nj"]:
    """Joint rates ``(n_saves, n_joints)`` (rad/s or m/s) in the order of ``model.joint_names``,
    from ``position``, ``rotation``, ``velocity`` (world COM) and ``angular_velocity`` (body
    axes) of ``solution`` (see ``joint_coordinates``)."""
    return _rates(_joint_space(model), model.bodies.com, solution)


def _rates(js: JointSpace, com: Float[Array, "nb 3"], solution) -> Float[Array, "*n nj"]:
    o, R, v, w = _poses(com, solution)
    if v is None:
        raise ValueError("joint_velocities: the solution has no velocities")
    p, c = _indices(js, com.shape[0])
    dtype = o.dtype
    Rp, Rc = R[..., p, :, :], R[..., c, :, :]
    a = mv(Rp, js.axis.astype(dtype))
    d = a if js.hinges is None else js.hinges.directions(Rp, Rc, a)
    revolute = jnp.sum(d * (w[..., c, :] - w[..., p, :]), axis=-1)
    sp, sc = mv(Rp, js.parent_point.astype(dtype)), mv(Rc, js.child_point.astype(dtype))
    d = (o[..., c, :] + sc) - (o[..., p, :] + sp)
    vp = v[..., p, :] + cross(w[..., p, :], sp)
    vc = v[..., c, :] + cross(w[..., c, :], sc)
    slide = jnp.sum(cross(w[..., p, :], a) * d, axis=-1) + jnp.sum(a * (vc - vp), axis=-1)
    return jnp.where(np.asarray(js.prismatic), slide, revolute)


def _balls(model) -> BallJoints:
    balls = _joint_space(model).balls
    if balls is None:
        raise ValueError("ball joints: the model has none (model.ball_joint_names is empty)")
    return balls


def ball_joint_quaternions(model, solution) -> Float[Array, "*n nball 4"]:
    """Ball joint positions ``(n_saves, n_ball, 4)``, MuJoCo's ``qpos`` of each ball: the unit
    quaternion ``(qw, qx, qy, qz)`` of ``C^T R_p^T R_c`` (the child's rotation from its reference
    orientation in the parent), in the order of ``model.ball_joint_names``. A quaternion and its
    negative are one rotation: the saves are continuous, the first on the side of the loaded
    one. ``solution`` as in ``joint_coordinates``."""
    balls = _balls(model)
    _, R, _, _ = _poses(model.bodies.com, solution)
    p, c = _indices(balls, model.num_bodies)
    M = jnp.einsum("kji,...klj,...klm->...kim", balls.relative_rotation.astype(R.dtype), R[..., p, :, :], R[..., c, :, :])
    q = matrix_to_quat(M)
    saves = q if q.ndim > 2 else q[None]  # one state: one save

    def side(prev, x):
        x = x * jnp.where(jnp.sum(x * prev, -1) < 0, -1.0, 1.0)[..., None]
        return x, x

    out = jax.lax.scan(side, jnp.broadcast_to(balls.initial.astype(q.dtype), saves.shape[1:]), saves)[1]
    return out if q.ndim > 2 else out[0]


def ball_joint_velocities(model, solution) -> Float[Array, "*n nball 3"]:
    """Ball joint rates ``(n_saves, n_ball, 3)``, MuJoCo's ``qvel`` of each ball: the angular
    velocity of the child relative to the parent in the child's axes, ``R_c^T (w_c - w_p)``."""
    balls = _balls(model)
    _, R, _, w = _poses(model.bodies.com, solution)
    if w is None:
        raise ValueError("ball_joint_velocities: the solution has no velocities")
    p, c = _indices(balls, model.num_bodies)
    return jnp.einsum("...kji,...kj->...ki", R[..., c, :, :], w[..., c, :] - w[..., p, :])


def link_pose(model, solution, link: str) -> tuple[Float[Array, "*n 3"], Float[Array, "*n 3 3"]]:
    """World position ``(n_saves, 3)`` and rotation ``(n_saves, 3, 3)`` of the frame of the
    file's link ``link`` (an end effector, a floating base's root link; merged links too):
    ``o_b + R_b p`` and ``R_b R_l`` with the link's pose ``(p, R_l)`` in its body's frame.
    ``solution`` as in ``joint_coordinates``. ``difflie.SE3.from_rotation_translation(R, p)``
    makes the poses a group element; ``difflie.UnitQuaternion.from_matrix(R)`` gives
    quaternions."""
    js = _joint_space(model)
    found = [(b, pose) for name, b, pose in js.links if name == link]
    if not found:
        raise ValueError(f"link_pose: no link {link!r}; the links are {[name for name, _, _ in js.links]}")
    b, pose = found[0]
    o, R, _, _ = _poses(model.bodies.com, solution)
    b = model.num_bodies if b < 0 else b
    dtype = o.dtype
    p = jnp.asarray(pose[:3], dtype)
    R_l = quat_to_matrix(jnp.asarray(pose[3:], dtype))
    Rb = R[..., b, :, :]
    return o[..., b, :] + mv(Rb, p), Rb @ R_l


def forward_kinematics(model, q: Float[Array, " nj"], qd: Float[Array, " nj"] | None = None,
                       ball_q: Float[Array, "nball 4"] | None = None, ball_qd: Float[Array, "nball 3"] | None = None) -> BodyState:
    """Body states at joint positions ``q`` and rates ``qd`` (order of ``model.joint_names``;
    ``None``: at rest), with the ground and a floating base where ``model`` has them; ball joints
    at the quaternions ``ball_q`` and relative angular velocities ``ball_qd`` (child axes; order
    of ``model.ball_joint_names``; ``None``: the loaded quaternions, at rest).

    One ``lax.scan`` over the joints in tree order (parents first, as the loader orders them),
    so it traces once whatever the number of bodies. For joint ``k`` from parent ``p`` (origin
    ``o_p``, rotation ``R_p``, world velocities ``v_p`` of the origin and ``w_p``) to child ``c``,
    with ``dq = q - q_ref``, ``a = R_p axis`` and the child-frame axis ``a_c = C^T axis``:

        revolute:   R_c = R_p C Rot(a_c, dq),  o_c = P - R_c s_c,  P = o_p + R_p s_p,
                    w_c = w_p + qd a,  v_c = v_p + w_p x (o_c - o_p) + qd a x (o_c - P)
        prismatic:  R_c = R_p C,  o_c = o_p + R_p (s_p - C s_c + dq axis),
                    w_c = w_p,  v_c = v_p + w_p x (o_c - o_p) + qd a

    A later hinge of a body's group turns the child about its own axis ``C^T axis`` and point
    ``s_c``, as a joint from the child (as the hinges before it left it) to itself. A ball
    joint is a revolute one with ``Rot(a_c, dq)`` replaced by ``Rot(ball_q)`` and ``qd a`` by
    ``R_c ball_qd``, in the tree's order among the others. The result satisfies the joint
    constraints to rounding, and ``joint_coordinates`` and ``joint_velocities`` (and the ball
    joints' readers) read ``q`` and ``qd`` back from it."""
    js = _joint_space(model)
    nb = model.num_bodies
    r0, R0 = jnp.asarray(model.r0), jnp.asarray(model.R0)
    dtype = jnp.result_type(r0.dtype, jnp.asarray(q).dtype)
    q = jnp.asarray(q, dtype)
    qd = jnp.zeros_like(q) if qd is None else jnp.asarray(qd, dtype)
    if q.shape != (js.num_joints,) or qd.shape != (js.num_joints,):
        raise ValueError(f"forward_kinematics: q and qd must have shape ({js.num_joints},), got {q.shape}, {qd.shape}")
    # start from the model's own state (ground at row nb; a floating base keeps its state)
    o, R, v, w = _poses(model.bodies.com, BodyState(r0.astype(dtype), R0.astype(dtype), jnp.asarray(model.v0, dtype), jnp.asarray(model.omega0, dtype)))
    p, c = _indices(js, nb)
    C = js.relative_rotation.astype(dtype)
    axis, sp, sc = js.axis.astype(dtype), js.parent_point.astype(dtype), js.child_point.astype(dtype)
    if js.hinges is not None:  # later hinges of a group: from the child to itself
        later = np.asarray(js.hinges.slot) > 0
        p = np.where(later, c, p)
        axis = jnp.where(later[:, None], jnp.einsum("kji,kj->ki", C, axis), axis)
        sp = jnp.where(later[:, None], sc, sp)
        C = jnp.where(later[:, None, None], jnp.eye(3, dtype=dtype), C)
    a_c = jnp.einsum("kji,kj->ki", C, axis)
    offset = sp - mv(C, sc)
    nj = js.num_joints
    xs = (jnp.asarray(p), jnp.asarray(c), jnp.asarray(np.asarray(js.prismatic)), q - js.reference.astype(dtype), qd,
          C, axis, sp, sc, a_c, offset, jnp.zeros((nj, 4), dtype).at[:, 0].set(1.0), jnp.zeros((nj, 3), dtype))  # fmt: skip
    if js.balls is not None:  # ball joints in the tree's order among the others
        xs = _with_balls(xs, js.balls, nb, dtype, ball_q, ball_qd)
    elif ball_q is not None or ball_qd is not None:
        raise ValueError("forward_kinematics: ball_q and ball_qd given, but the model has no ball joints")

    def joint(carry, x):
        o, R, v, w = carry
        pk, ck, pri, dq, qdk, Ck, ax, spk, sck, ack, off, qb, wb = x
        op, Rp, vp, wp = o[pk], R[pk], v[pk], w[pk]
        a = Rp @ ax
        Rr = Rp @ Ck @ SO3.exp(ack * dq).as_matrix() @ quat_to_matrix(qb)
        w_rel = qdk * a + Rr @ wb  # a 1-DOF joint's wb and a ball's qdk are 0
        pivot = op + Rp @ spk
        o_rev = pivot - Rr @ sck
        o_pri = op + Rp @ (off + dq * ax)
        oc = jnp.where(pri, o_pri, o_rev)
        Rc = jnp.where(pri, Rp @ Ck, Rr)
        wc = jnp.where(pri, wp, wp + w_rel)
        vc = vp + cross(wp, oc - op) + jnp.where(pri, qdk * a, cross(w_rel, oc - pivot))
        return (o.at[ck].set(oc), R.at[ck].set(Rc), v.at[ck].set(vc), w.at[ck].set(wc)), None

    (o, R, v, w), _ = jax.lax.scan(joint, (o, R, v, w), xs)
    o, R, v, w = o[:nb], R[:nb], v[:nb], w[:nb]
    rc = mv(R, model.bodies.com.astype(dtype))
    return BodyState(o + rc, R, v + cross(w, rc), jnp.einsum("kji,kj->ki", R, w))


def _with_balls(xs: tuple, balls: BallJoints, nb: int, dtype, ball_q, ball_qd) -> tuple:
    """The scan's joint table with the ball joints' rows inserted where the tree has them."""
    n = len(balls.names)
    qb = balls.initial.astype(dtype) if ball_q is None else jnp.asarray(ball_q, dtype)
    wb = jnp.zeros((n, 3), dtype) if ball_qd is None else jnp.asarray(ball_qd, dtype)
    if qb.shape != (n, 4) or wb.shape != (n, 3):
        raise ValueError(f"forward_kinematics: ball_q and ball_qd must have shapes ({n}, 4) and ({n}, 3), got {qb.shape}, {wb.shape}")
    qb = qb / jnp.linalg.norm(qb, axis=-1, keepdims=True)
    par, chi = _indices(balls, nb)
    x_axis = jnp.zeros((n, 3), dtype).at[:, 0].set(1.0)  # unused: no turn about an axis
    sp, sc, C = (x.astype(dtype) for x in (balls.parent_point, balls.child_point, balls.relative_rotation))
    rows = (jnp.asarray(par), jnp.asarray(chi), jnp.zeros(n, bool), jnp.zeros(n, dtype), jnp.zeros(n, dtype),
            C, x_axis, sp, sc, x_axis, sp - mv(C, sc), qb, wb)  # fmt: skip
    nj = xs[0].shape[0]
    keys = np.concatenate([np.arange(nj) * 2 + 1, np.asarray(balls.after) * 2])  # a ball before the joint it precedes
    order = np.argsort(keys, kind="stable")
    return tuple(jnp.concatenate([a.astype(b.dtype), b])[order] for a, b in zip(xs, rows))


class JointFeedback(AbstractForce):
    """Joint torques (forces) that depend on the joint state: ``u = law(t, q, q_dot)``, ``(nj,)``
    in the order of ``model.joint_names``, applied at the joints as ``JointForce`` applies its
    own (equal and opposite on the joint's two bodies). ``q`` and ``q_dot`` are read off the
    bodies' state as ``joint_coordinates`` and ``joint_velocities`` read them (a revolute angle
    on the branch nearest ``space.initial``). A PD controller, gravity compensation, a
    joint-space spring. ``law`` may be an ``eqx.Module`` whose arrays (gains, targets) are leaves
    to differentiate; the implicit solvers' iteration matrices take its derivatives like any
    force's, in blocks that join the bodies of the joints it couples: a law without a
    ``coupled_joints()`` method couples all joints (one block for a whole robot); one whose
    torques each read their own joint (``difflie.joint_laws.JointPD``) says ``()``.
    ``load_model(..., joint_feedback=law)`` adds one to a robot."""

    law: Callable
    space: JointSpace
    com: Float[Array, "nb 3"]
    joint: JointForce

    def coupling(self) -> tuple[tuple[int, int], ...]:
        """Each joint's two bodies, and every two bodies of the joints that the law couples
        (``difflie.joint_laws.coupled_joints``: all joints where the law does not say)."""
        groups = coupled_joints(self.law)
        if groups is None:
            groups = (range(len(self.joint.parent)),)
        return self.joint.coupling() + joint_group_pairs(self.joint.parent, self.joint.child, groups)

    def __call__(self, t, r, R, rdot, omega):
        q = _coordinates(self.space, self.com, BodyState(r, R, rdot, omega))
        return self.joint.apply(lambda qd: self.law(t, q, qd), r, R, rdot, omega)  # qd: the joint's rates


def with_joint_state(model, q: Float[Array, " nj"], qd: Float[Array, " nj"] | None = None,
                     ball_q: Float[Array, "nball 4"] | None = None, ball_qd: Float[Array, "nball 3"] | None = None):
    """``model`` with its initial state at joint positions ``q`` and rates ``qd``, and ball
    joints at ``ball_q``, ``ball_qd`` (see ``forward_kinematics``; ``joint_coordinates`` then
    reads revolute angles on the branch of ``q``); traceable, so windows can start from
    measured joint states inside one compiled program."""
    s = forward_kinematics(model, q, qd, ball_q, ball_qd)
    q = jnp.asarray(q, s.position.dtype)
    model = eqx.tree_at(lambda m: (m.r0, m.R0, m.v0, m.omega0, m.joints.initial), model,
                        (s.position, s.rotation, s.velocity, s.angular_velocity, q))  # fmt: skip
    if model.joints.balls is not None and ball_q is not None:
        ball_q = jnp.asarray(ball_q, s.position.dtype)
        model = eqx.tree_at(lambda m: m.joints.balls.initial, model, ball_q / jnp.linalg.norm(ball_q, axis=-1, keepdims=True))
    feedback = [k for k, f in enumerate(model.forces) if isinstance(f, JointFeedback)]
    model = eqx.tree_at(lambda m: [m.forces[k].space.initial for k in feedback], model, [q] * len(feedback))
    if model.joints.hinges is None:
        return model
    # the side of each middle hinge's axis, which the joint forces take without the angles
    sign = model.joints.hinges.signs(q - model.joints.reference.astype(q.dtype))
    return eqx.tree_at(lambda m: [h.sign for h in _hinge_groups(m)], model, [sign] * len(_hinge_groups(model)))


def _hinge_groups(model) -> list[HingeGroups]:
    """Every ``HingeGroups`` of a robot model: its joint space's and its joint forces'."""
    out = [model.joints.hinges]
    for f in model.forces:
        if isinstance(f, JointFeedback):
            out += [f.space.hinges, f.joint.hinges]
        elif isinstance(f, JointForce):
            out.append(f.hinges)
        elif isinstance(f, JointInertia):
            out.append(f.joints.hinges)
    return [h for h in out if h is not None]


def with_bodies(model, bodies: RigidBody):
    """``model`` with the inertial parameters of ``bodies`` (mass, COM in the link frame, inertia
    about the COM): link frames, joints and the initial state's link poses and velocities stay
    where they are. What depends on the COM moves with it: the initial COM positions and
    velocities, the joint points of ``JointForce`` and ``JointInertia`` and the points of a
    ``DeadLoad`` and of ``SpatialTendons`` (kept relative to the COM; a gravity compensation
    keeps the file's masses' forces). Traceable: ``bodies`` may come from parameters being fitted."""
    if bodies.mass.shape != model.bodies.mass.shape:
        raise ValueError(f"with_bodies: {bodies.mass.shape[0] if bodies.mass.ndim else 1} bodies for a model of {model.num_bodies}")
    others = [type(f).__name__ for f in model.forces
              if not isinstance(f, (JointForce, JointFeedback, JointInertia, BallSpring, DeadLoad, SpatialTendons))]  # fmt: skip
    if others:
        raise ValueError(f"with_bodies: cannot move the COM-relative points of force elements {others}")
    old, new = model.bodies.com, bodies.com.astype(model.bodies.com.dtype)
    R, w_body = model.R0, model.omega0
    shift = mv(R, new - old)
    r0 = model.r0 + shift
    v0 = model.v0 + mv(R, cross(w_body, new - old))

    def moved(f):
        if isinstance(f, JointFeedback):
            return eqx.tree_at(lambda f: (f.com, f.joint), f, (new, moved(f.joint)))
        if isinstance(f, JointInertia):
            return eqx.tree_at(lambda f: f.joints, f, moved(f.joints))
        if isinstance(f, BallSpring):  # no point of a body
            return f
        if isinstance(f, DeadLoad):  # a point of every body
            return eqx.tree_at(lambda f: f.point, f, f.point + old - new)
        if isinstance(f, SpatialTendons):  # the ends of each segment (the ground's stay)
            shift = jnp.concatenate([old - new, jnp.zeros((1, 3), old.dtype)])  # row -1: the ground
            return eqx.tree_at(lambda f: (f.point_a, f.point_b), f, (f.point_a + shift[np.asarray(f.body_a)], f.point_b + shift[np.asarray(f.body_b)]))
        return eqx.tree_at(lambda f: f.point, f, f.point + old[np.asarray(f.child)] - new[np.asarray(f.child)])

    forces = tuple(moved(f) for f in model.forces)
    named = RigidBody(bodies.mass, bodies.inertia, bodies.com, names=model.bodies.names, validate=model.bodies.validate)
    return eqx.tree_at(lambda m: (m.bodies, m.r0, m.v0, m.forces), model, (named, r0, v0, forces))


class LinearInterpolation(eqx.Module):
    """A sampled signal as a function of time: ``values`` (n, ...) at increasing ``ts`` (n,),
    linear in between and held constant outside ``[ts[0], ts[-1]]``. Both are pytree leaves, so
    shifted copies (``ts - t_start`` per window) batch under ``vmap``; pass one as
    ``joint_torques=`` (values ``(n, n_joints)``) to drive a robot with measured torques."""

    ts: Float[Array, " n"]
    values: Float[Array, "n ..."]

    def __check_init__(self):
        if self.ts.ndim != 1 or self.ts.shape[0] < 2 or self.values.shape[:1] != self.ts.shape:
            raise ValueError(f"LinearInterpolation: ts must be (n,) with n >= 2 and values (n, ...); got {self.ts.shape}, {self.values.shape}")

    def __call__(self, t):
        ts = self.ts
        i = jnp.clip(jnp.searchsorted(ts, t, side="right") - 1, 0, ts.shape[0] - 2)
        s = jnp.clip((t - ts[i]) / (ts[i + 1] - ts[i]), 0.0, 1.0)
        return self.values[i] + s * (self.values[i + 1] - self.values[i])


__all__ = [
    "BallJoints",
    "JointFeedback",
    "JointSpace",
    "LinearInterpolation",
    "ball_joint_quaternions",
    "ball_joint_velocities",
    "forward_kinematics",
    "joint_coordinates",
    "joint_velocities",
    "link_pose",
    "with_bodies",
    "with_joint_state",
]
