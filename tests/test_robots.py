"""Robots from URDF and MJCF files (:mod:`difflie.io.robot`), joint space in and out
(:mod:`difflie.joint_space`), and the Franka Panda against Pinocchio (Carpentier et al., 2019):
its articulated-body algorithm (Featherstone, 2008) integrated by RK4 at ``1e-4`` s is the
reference, whose own error is far below 1e-9 rad.

The loader tests use small files written here; the Pinocchio comparisons need ``pin`` and
``example-robot-data`` (the ``test`` extra) and are skipped, saying so, without them.
"""

from __future__ import annotations

import functools
import math
import os
import pathlib
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.joint_laws import JointPD
from difflie.forces import JointForce
from difflie.io import ModelFileError, RobotModelWarning
from helpers import mujoco_rollout, robot_file

# -- small files -------------------------------------------------------------------------------

TOY_URDF = (pathlib.Path(__file__).resolve().parent / "data" / "toy_robot.urdf").read_text(encoding="utf-8")

TOY_MJCF = """<mujoco model="flyer">
  <compiler angle="radian"/>
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="torso" pos="0 0 1" quat="0.9238795 0 0 0.3826834">
      <freejoint name="root"/>
      <inertial pos="0 0 0" mass="3" diaginertia="0.05 0.04 0.03"/>
      <body name="arm" pos="0.2 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" pos="0 0 0" ref="0.3" damping="0.1"/>
        <inertial pos="0.1 0 0" mass="0.5" diaginertia="0.001 0.004 0.004"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _rpy(r, p, y):
    """URDF's fixed-axis roll-pitch-yaw: ``Rz(y) Ry(p) Rx(r)``."""
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def _state(model) -> dl.BodyState:
    return dl.BodyState(model.r0, model.R0, model.v0, model.omega0)


def _load(path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)
        return dl.load_model(path, **kwargs)


# -- the reader --------------------------------------------------------------------------------


def test_urdf_links_joints_and_one_warning(tmp_path):
    """Fixed links merge into their parent (mass, COM and inertia by the parallel-axis theorem,
    computed here independently from the URDF numbers); a massless link (``tcp``) merges too;
    the root link is the ground; one warning names the joint limits."""
    path = _write(tmp_path, "toy.urdf", TOY_URDF)
    with pytest.warns(RobotModelWarning, match=r"not modelled: joint limits \(2 joints; joint_limits=True enforces them\)") as record:
        model = dl.load_model(path)
    assert len([w for w in record if issubclass(w.category, RobotModelWarning)]) == 1
    assert model.body_names == ("upper", "slider", "rotor")
    assert model.joint_names == ("shoulder", "slide", "spin")
    assert model.num_constraints == 15 and model.constraints is not None

    # upper + tool: tool's frame in upper's is (Rz(0.5), (0, 0.05, 0.4))
    m1, c1, R1 = 1.5, np.array([0.01, 0, 0.2]), _rpy(0.1, 0.2, 0.3)
    J1 = R1 @ np.array([[0.02, 0.001, 0], [0.001, 0.03, 0.002], [0, 0.002, 0.015]]) @ R1.T
    m2, R2 = 0.5, _rpy(0, 0, 0.5)
    c2 = np.array([0, 0.05, 0.4]) + R2 @ np.array([0.01, 0, 0.02])
    J2 = R2 @ np.diag([0.001, 0.002, 0.0015]) @ R2.T
    c = (m1 * c1 + m2 * c2) / (m1 + m2)
    shift = lambda m, d: m * (d @ d * np.eye(3) - np.outer(d, d))  # noqa: E731
    J = J1 + shift(m1, c1 - c) + J2 + shift(m2, c2 - c)
    np.testing.assert_allclose(model.bodies.mass, [2.0, 0.3, 0.2], rtol=1e-12)
    np.testing.assert_allclose(model.bodies.com[0], c, atol=1e-12)
    np.testing.assert_allclose(model.bodies.inertia[0], J, atol=1e-12)
    # the base (root link) is the ground: the shoulder's world point and axis
    np.testing.assert_allclose(model.joints.parent_point[0], [0, 0, 0.1], atol=1e-12)
    np.testing.assert_allclose(model.joints.axis[0], _rpy(0, 0.3, 0) @ [0, 1, 0], atol=1e-12)
    # damping becomes one JointForce over the three joints
    (force,) = model.forces
    assert isinstance(force, JointForce) and force.prismatic == (False, True, False)
    np.testing.assert_allclose(force.damping, [0.05, 0.2, 0.0])
    assert force.coupling() == ((-1, 0), (0, 1), (1, 2))
    # links keep their place: tcp sits 5 cm up the rotor's z
    links = {name: (body, pose) for name, body, pose in model.joints.links}
    assert links["tcp"][0] == 2 and links["base"][0] == -1
    np.testing.assert_allclose(links["tcp"][1][:3], [0, 0, 0.05], atol=1e-12)


def test_forward_kinematics_round_trip(tmp_path):
    """``joint_positions`` / ``joint_velocities`` place the bodies by forward kinematics on the
    constraints (residual at rounding), and :func:`dl.joint_coordinates` /
    :func:`dl.joint_velocities` read the same values back, a continuous joint beyond pi
    included; the joint rates also match the velocity constraints (``Phi_q q_dot = 0``)."""
    path = _write(tmp_path, "toy.urdf", TOY_URDF)
    q = {"shoulder": 0.7, "slide": -0.04, "spin": 4.0}
    qd = {"shoulder": -1.3, "slide": 0.25, "spin": 7.0}
    model = _load(path, joint_positions=q, joint_velocities=qd)
    origins = model.r0 - jnp.einsum("bij,bj->bi", model.R0, model.bodies.com)
    assert float(jnp.max(jnp.abs(model.constraint_residual(0.0, origins, model.R0)))) < 1e-14
    np.testing.assert_allclose(dl.joint_coordinates(model, _state(model)), [0.7, -0.04, 4.0], atol=1e-13)
    np.testing.assert_allclose(dl.joint_velocities(model, _state(model)), [-1.3, 0.25, 7.0], atol=1e-13)

    # the velocity constraints: d/dt Phi along the state's velocities vanishes
    def phi(eps):
        R = jnp.einsum("bij,bjk->bik", model.R0, jax.vmap(dl.SO3.exp)(eps * model.omega0).matrix)
        r = model.r0 + eps * model.v0
        return model.constraint_residual(0.0, r - jnp.einsum("bij,bj->bi", R, model.bodies.com), R)

    assert float(jnp.max(jnp.abs(jax.jacfwd(phi)(0.0)))) < 1e-13
    # a trajectory of states: (n_saves, n_joints), angles continuous along the saves
    states = jax.tree.map(lambda x: jnp.stack([x, x]), _state(model))
    assert dl.joint_coordinates(model, states).shape == (2, 3)


def test_mjcf_floating_base(tmp_path):
    """An MJCF free joint is a floating base (no constraint rows for it); ``base_pose`` and
    ``base_velocity`` (world velocity of the base origin, body angular velocity) set its state;
    a hinge's ``ref`` is its zero; MuJoCo's gravity option is read."""
    path = _write(tmp_path, "flyer.xml", TOY_MJCF)
    model = dl.load_model(path)  # nothing unmodelled: no warning
    assert model.body_names == ("torso", "arm") and model.joint_names == ("elbow",)
    assert model.num_constraints == 5 and model.joints.base == 0
    np.testing.assert_allclose(dl.joint_coordinates(model, _state(model)), [0.3], atol=1e-14)
    pose = ([0.1, 0.2, 0.3], [1.0, 0.0, 0.0, 0.0])
    model = dl.load_model(path, base_pose=pose, base_velocity=([1.0, 0, 0], [0, 0, 2.0]), joint_positions={"elbow": 1.0})
    np.testing.assert_allclose(model.r0[0], [0.1, 0.2, 0.3], atol=1e-14)
    np.testing.assert_allclose(model.v0[0], [1.0, 0, 0], atol=1e-14)
    np.testing.assert_allclose(model.omega0[0], [0, 0, 2.0], atol=1e-14)
    np.testing.assert_allclose(dl.joint_coordinates(model, _state(model)), [1.0], atol=1e-14)
    np.testing.assert_allclose(dl.joint_velocities(model, _state(model)), [0.0], atol=1e-14)
    np.testing.assert_allclose(model.gravity, [0, 0, -9.81])
    # a URDF root is fixed unless floating_base=True
    urdf = _write(tmp_path, "toy.urdf", TOY_URDF)
    free = _load(urdf, floating_base=True)
    assert free.body_names == ("base", "upper", "slider", "rotor") and free.num_constraints == 15


def test_joint_force_is_an_equal_and_opposite_pair(tmp_path):
    """:class:`JointForce` at a random state: the forces and moments on all bodies sum to zero
    (the ground's share included) and their power is ``sum_k u_k q_dot_k`` with
    ``u = torque - c q_dot``."""
    path = _write(tmp_path, "toy.urdf", TOY_URDF)
    torque = {"shoulder": 1.5, "slide": lambda t: 3.0 * t, "spin": -0.7}
    model = _load(path, joint_positions={"shoulder": 0.4, "slide": 0.03, "spin": -1.0},
                  joint_velocities={"shoulder": 0.9, "slide": -0.2, "spin": 2.5}, joint_torques=torque)  # fmt: skip
    (force,) = model.forces
    t = 0.5
    r, R, v, w = model.r0, model.R0, model.v0, model.omega0
    f, tau = force(t, r, R, v, w)
    qd = dl.joint_velocities(model, _state(model))
    u = jnp.array([1.5, 1.5, -0.7]) - force.damping * qd
    w_world = jnp.einsum("bij,bj->bi", R, w)
    power = jnp.sum(f * v) + jnp.sum(tau * w)
    np.testing.assert_allclose(power, jnp.sum(u * qd), rtol=1e-12)
    # resultant and moment about the origin (what is missing acts on the ground, which
    # takes the shoulder's reaction: -u_0 a_0 as a couple)
    moment = jnp.sum(jnp.cross(r, f) + jnp.einsum("bij,bj->bi", R, tau), axis=0)
    np.testing.assert_allclose(jnp.sum(f, axis=0), 0.0, atol=1e-13)
    np.testing.assert_allclose(moment, u[0] * model.joints.axis[0], atol=1e-13)
    del w_world


def test_revolute_joint_forces_scatter_no_force():
    """Revolute joints only: the force part is exactly zero and no scatter computes it. XLA's GPU
    compiler constant-folds such a scatter of zeros at the size of a ``vmap`` batch (4096 G1s
    compiled in 55 s with it, 3.5 s without; benchmarks/RESULTS.md)."""
    force = JointForce(parent=(-1, 0, 1), child=(0, 1, 2), axis=np.eye(3), point=np.ones((3, 3)), damping=0.1,
                       torque=jnp.array([1.0, 2.0, 3.0]))  # fmt: skip
    args = (0.0, jnp.zeros((3, 3)), jnp.broadcast_to(jnp.eye(3), (3, 3, 3)), jnp.ones((3, 3)), jnp.ones((3, 3)))
    f, tau = force(*args)
    assert not np.any(f) and np.any(tau)
    eqns = jax.make_jaxpr(force)(*args).jaxpr.eqns
    assert sum(e.primitive.name.startswith("scatter") for e in eqns) == 2  # the couples on children and parents


def test_malformed_robot_files(tmp_path):
    """Clear errors naming the file and the element: a body with two hinges at different
    points, one angle for a ball joint, a moving link without mass, malformed XML with its line, an inertia no body has, unknown joint
    names in the keywords."""
    two = TOY_MJCF.replace('<joint name="elbow"', '<joint name="wrist" type="hinge" axis="1 0 0" pos="0.05 0 0"/>\n<joint name="elbow"')
    with pytest.raises(ModelFileError, match=r"body 'arm' has the joints \['wrist', 'elbow'\] at different points"):
        dl.load_model(_write(tmp_path, "two.xml", two))
    ball = TOY_MJCF.replace('type="hinge" axis="0 1 0" pos="0 0 0" ref="0.3"', 'type="ball"')
    with pytest.raises(ValueError, match=r"joint_positions\['elbow'\] of a ball joint must be a quaternion \(qw, qx, qy, qz\), got 0.5"):
        dl.load_model(_write(tmp_path, "ball.xml", ball), joint_positions={"elbow": 0.5})
    rotor = TOY_URDF[TOY_URDF.index('<link name="rotor">') : TOY_URDF.index('<link name="tcp"/>')]
    massless = TOY_URDF.replace(rotor, '<link name="rotor"/>\n  ')
    with pytest.raises(ModelFileError, match=r"massless.urdf: link 'rotor' \(welded to \['tcp'\]\) moves but has no mass; bound_mass="):
        _load(_write(tmp_path, "massless.urdf", massless))
    with pytest.raises(ValueError, match="bound_mass and bound_inertia must be >= 0"):
        _load(_write(tmp_path, "massless.urdf", massless), bound_inertia=-1.0)
    bad = _write(tmp_path, "bad.urdf", TOY_URDF.replace("</robot>", ""))
    with pytest.raises(ModelFileError, match="bad.urdf: malformed XML"):
        dl.load_model(bad)
    unclosed = _write(tmp_path, "unclosed.urdf", TOY_URDF.replace('</link>\n  <link name="tool">', '\n  <link name="tool">', 1))
    with pytest.raises(ModelFileError, match=r"unclosed.urdf: malformed XML, mismatched element at line \d+ \(element <link>\)"):
        dl.load_model(unclosed)
    flat = _write(tmp_path, "flat.urdf", TOY_URDF.replace('ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0.002" izz="0.015"',
                                                         'ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.5"'))  # fmt: skip
    with pytest.raises(ModelFileError, match=r"flat.urdf: link 'upper' \(welded to \['tool'\]\): .*triangle inequality A \+ B >= C"
                                             r".*balance_inertia=True"):  # fmt: skip
        _load(flat)
    # balanced: upper's own moments (0.01, 0.01, 0.5) become their mean, as if the file said so
    mean = 0.52 / 3
    even = _write(tmp_path, "even.urdf", TOY_URDF.replace('ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0.002" izz="0.015"',
                                                         f'ixx="{mean!r}" ixy="0" ixz="0" iyy="{mean!r}" iyz="0" izz="{mean!r}"'))  # fmt: skip
    balanced, expected = _load(flat, balance_inertia=True), _load(even)
    k = balanced.body_names.index("upper")
    np.testing.assert_allclose(balanced.bodies.inertia[k], expected.bodies.inertia[k], rtol=1e-12, atol=1e-15)
    path = _write(tmp_path, "toy.urdf", TOY_URDF)
    with pytest.raises(ValueError, match=r"unknown joints \['elbow'\]"):
        _load(path, joint_positions={"elbow": 1.0})
    with pytest.raises(ValueError, match=r"locked joints \['spin'\]"):
        _load(path, locked_joints=["spin"], joint_torques={"spin": 1.0})
    free = _write(tmp_path, "flyer.xml", TOY_MJCF)
    for pose, message in [(([0, 0, 1], [2.0, 0, 0, 0]), "has norm 2, not 1"), (([0, 0, 1], [0.0, 0, 0, 0]), "has norm 0, not 1"),
                          ([0, 0, 1, 1, 0, 0], "must be a 4x4 matrix, a 7-vector"),
                          (([0, 0, 1], np.diag([1.0, 1.0, 2.0])), "not a rotation matrix")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            _load(free, base_pose=pose)
    typed = _load(free, base_pose=([0, 0, 1], [0.7071, 0, 0, 0.7071]))  # typed digits: normalised
    np.testing.assert_allclose(typed.R0[0] @ typed.R0[0].T, np.eye(3), atol=1e-14)
    with pytest.raises(ValueError, match="base_velocity is for a floating base"):
        _load(path, base_velocity=([0, 0, 0], [0, 0, 0]))
    with pytest.raises(ValueError, match="mass= is for the JSON model files"):
        _load(path, mass={"upper": 1.0})


TENDON_ON_AXIS = """<mujoco>
  <worldbody>
    <site name="s0" pos="0 0 0"/>
    <body name="arm">
      <joint name="hinge" type="hinge" axis="0 1 0" pos="0 0 0"/>
      <inertial pos="0.1 0 0" mass="0.5" diaginertia="0.001 0.004 0.004"/>
      <site name="s1" pos="0 0.5 0"/>
    </body>
  </worldbody>
  <tendon><spatial name="t1" limited="true" range="0 1" stiffness="1"><site site="s0"/><site site="s1"/></spatial></tendon>
</mujoco>
"""

CLOTH = """<mujoco>
  <worldbody>
    <body name="arm"><joint name="hinge" axis="0 1 0"/><inertial pos="0.1 0 0" mass="0.5" diaginertia="0.001 0.004 0.004"/></body>
    <flexcomp name="cloth" type="grid" count="3 3 1" spacing="0.1 0.1 0.1" mass="1" radius="0.01" dim="2" pos="0 0 1">
      <edge equality="true"/>
    </flexcomp>
  </worldbody>
</mujoco>
"""

TOOL_INERTIA = 'ixx="0.001" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.0015"'
MJCF_HINGE = '<joint name="elbow" type="hinge" axis="0 1 0" pos="0 0 0" ref="0.3" damping="0.1"/>'

# file, its text, load_model keywords, what the message must say
BAD_FILES = {
    "negative_mass": ("arm.urdf", TOY_URDF.replace('<mass value="1.5"/>', '<mass value="-1.5"/>'), {},
                      r"arm.urdf: link 'upper': mass must be positive \(or zero for a massless frame\), got -1.5$"),
    "negative_mass_mjcf": ("arm.xml", TOY_MJCF.replace('mass="0.5"', 'mass="-0.5"'), {},
                           r"arm.xml: link 'arm': mass must be positive \(or zero for a massless frame\), got -0.5$"),
    "negative_moment_welded": ("arm.urdf", TOY_URDF.replace(TOOL_INERTIA, TOOL_INERTIA.replace('ixx="0.001"', 'ixx="-1"')), {},
                               (r"link 'upper' \(welded to \['tool'\]\) has an inertia that is not positive definite .*; the file gives "
                                r"link 'tool' the principal moments \[-1.0, 0.0015, 0.002\]")),
    "reversed_limit": ("arm.urdf", TOY_URDF.replace('lower="-2" upper="2"', 'lower="1" upper="-1"'), {"joint_limits": True},
                       r"arm.urdf: joint 'shoulder': its limit's lower 1 is above its upper -1 \(MuJoCo reads that as no limit\)"),
    "reversed_range_mjcf": ("arm.xml", TOY_MJCF.replace('damping="0.1"', 'damping="0.1" range="1 -1" limited="true"'), {},
                            r"arm.xml: joint 'elbow': range\[0\] should be smaller than range\[1\]$"),
    "reversed_range_autolimits": ("arm.xml", TOY_MJCF.replace('damping="0.1"', 'damping="0.1" range="1 -1"'), {"joint_limits": True},
                                  r"arm.xml: joint 'elbow': its limit's lower 1 is above its upper -1"),
    "reversed_tendon_range": ("arm.xml", TENDON_ON_AXIS.replace('limited="true" range="0 1"', 'range="1 -1"'), {"joint_limits": True},
                              r"arm.xml: tendon 't1': its limit's lower 1 is above its upper -1 \(MuJoCo reads that as no limit\)"),
    "still_tendon": ("arm.xml", TENDON_ON_AXIS, {"joint_limits": True},
                     (r"arm.xml: tendon 't1': its length does not change with any joint at the reference pose \(zero inverse weight\); "
                      r"its limit cannot act")),
    "zero_axis": ("arm.urdf", TOY_URDF.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/>'), {}, r"arm.urdf: joint 'spin': axis too small$"),
    "unknown_weld_body": ("arm.xml", TOY_MJCF.replace("</worldbody>", '</worldbody><equality><weld body1="arm" body2="nosuch"/></equality>'),
                          {}, r"arm.xml: equality 0 \(weld\): no body 'nosuch' in the file$"),
    "repeated_link": ("arm.urdf", TOY_URDF.replace('<link name="tcp"/>', '<link name="tcp"/><link name="tool"/>'), {},
                      r"arm.urdf: the link name 'tool' is used more than once \(URDF link names are unique\)$"),
    "repeated_joint": ("arm.urdf", TOY_URDF.replace('name="slide"', 'name="spin"'), {}, r"arm.urdf: the joint name 'spin' is used more than once$"),
    "planar": ("arm.urdf", TOY_URDF.replace('type="continuous"', 'type="planar"'), {},
               (r"arm.urdf: joint 'spin' is a URDF planar joint, which difflie does not read \(MuJoCo makes it two slides and a hinge, "
                r"\['spin_TX', 'spin_TY', 'spin_RZ'\]\); write it as prismatic, prismatic and revolute joints through links with mass, "
                r"or lock it \(locked_joints=\['spin_TX', 'spin_TY', 'spin_RZ'\]\)")),
    "slide_and_hinge": ("arm.xml", TOY_MJCF.replace(MJCF_HINGE, '<joint name="push" type="slide" axis="1 0 0"/>' + MJCF_HINGE), {},
                        (r"arm.xml: body 'arm' has the joints \['push', 'elbow'\]; a body with several joints must have two or three hinges "
                         r"about one point, not \['slide', 'hinge'\]: split the body, one joint in each body with mass, or lock them")),
    "flex": ("arm.xml", CLOTH, {}, r"arm.xml: link 'cloth_0' is a vertex of the flex 'cloth'; difflie reads rigid links, not flexible bodies"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_robot_files_say_what_and_where(tmp_path, case):
    """Errors in a robot file name the file and the element by its kind (link, joint, tendon,
    equality) and give the value at fault: a negative mass, a welded link's negative principal
    moments, a reversed limit (URDF, MJCF, a tendon's), a tendon no joint moves, a zero axis,
    an unknown body, a repeated link or joint name, a URDF planar joint, mixed joints in one body, a
    flexible body."""
    name, text, kwargs, message = BAD_FILES[case]
    assert text.strip() not in (TOY_URDF.strip(), TOY_MJCF.strip())
    with pytest.raises(ModelFileError, match=message):
        _load(_write(tmp_path, name, text), **kwargs)


def test_reversed_limit_and_locked_planar_joint_load(tmp_path):
    """A reversed URDF limit is an error only where limits are modelled; a URDF planar joint
    locked loads (its link welded to its parent)."""
    _load(_write(tmp_path, "reversed.urdf", BAD_FILES["reversed_limit"][1]))
    model = _load(_write(tmp_path, "planar.urdf", BAD_FILES["planar"][1]), locked_joints=["spin_TX", "spin_TY", "spin_RZ"])
    assert model.joint_names == ("shoulder", "slide")


def test_joint_torques_are_checked_when_loaded(tmp_path):
    """``joint_torques`` entries: an expression string of t is read as in the model files (the
    same motion as the same function), and a malformed string, a function of the wrong shape
    or one that fails, a list, or a text where a number belongs are refused by ``load_model``,
    naming the entry, before anything is compiled."""
    path = _write(tmp_path, "toy.urdf", TOY_URDF)
    by_text = _load(path, joint_torques={"shoulder": "0.5*sin(3*t)", "slide": "0.2"})
    by_fn = _load(path, joint_torques={"shoulder": lambda t: 0.5 * jnp.sin(3 * t), "slide": 0.2})
    for t in (0.0, 0.3):
        np.testing.assert_allclose(by_text.forces[0].torque(t), by_fn.forces[0].torque(t), rtol=1e-15)
    for torques, message in [
        ({"shoulder": "0.5*sin(3*t"}, r"joint_torques\['shoulder'\]: cannot parse"),
        ({"shoulder": "x"}, r"joint_torques\['shoulder'\]: unknown name 'x'"),
        ({"shoulder": lambda t: jnp.ones(2)}, r"joint_torques\['shoulder'\] must return shape \(\), got \(2,\)"),
        ({"shoulder": lambda t: 1.0 / 0.0}, r"joint_torques\['shoulder'\] fails at t = 0: float division by zero"),
        ({"shoulder": [1.0, 2.0]}, r"joint_torques\['shoulder'\] must be a number"),
        (lambda t: jnp.ones(2), r"one function of t for all joints\) must return shape \(3,\), got \(2,\)"),
    ]:
        with pytest.raises(ValueError, match=message):
            _load(path, joint_torques=torques)
    with pytest.raises(ValueError, match=r"joint_positions\['shoulder'\] must be a number, got '0.3'"):
        _load(path, joint_positions={"shoulder": "0.3"})


def test_traced_joint_positions_point_to_with_joint_state(tmp_path):
    """A batch of initial joint positions cannot go through ``load_model`` (the file's forward
    kinematics runs in NumPy): the error names ``with_joint_state``, which does trace and gives
    the same initial state as loading at those positions."""
    path = _write(tmp_path, "toy.urdf", TOY_URDF)
    qs = jnp.array([0.1, 0.4])
    with pytest.raises(ValueError, match=r"joint_positions\['shoulder'\] is traced .*with_joint_state"):
        jax.vmap(lambda q: _load(path, joint_positions={"shoulder": q}).r0)(qs)
    model = _load(path)
    q0 = dl.joint_coordinates(model, _state(model))
    batch = jax.vmap(lambda q: dl.joint_space.with_joint_state(model, q0.at[0].set(q)).r0)(qs)
    np.testing.assert_allclose(batch[1], _load(path, joint_positions={"shoulder": 0.4}).r0, atol=1e-14)


GRAVCOMP = """<mujoco><compiler angle="radian"/><option timestep="1e-4" integrator="RK4"/><worldbody>
<body name="upper" pos="0 0 1" gravcomp="1"><joint name="shoulder" type="hinge" axis="0 1 0"/>
  <inertial pos="0.2 0 0" mass="2" diaginertia="0.01 0.03 0.03"/>
  <body name="lower" pos="0.4 0 0" gravcomp="0.5"><joint name="elbow" type="hinge" axis="0 1 0"/>
    <inertial pos="0.15 0 0.02" mass="1" diaginertia="0.005 0.01 0.01"/>
    <body name="tool" pos="0.3 0 0"><inertial pos="0.05 0.01 0" mass="0.5" diaginertia="0.001 0.002 0.002"/>
      <body name="hand" pos="0.1 0 0" gravcomp="0.8"><joint name="wrist" type="hinge" axis="1 0 0" actuatorgravcomp="{clip}"/>
        <inertial pos="0 0.05 0" mass="0.3" diaginertia="0.001 0.001 0.001"/></body></body></body></body>
</worldbody></mujoco>"""


def test_gravity_compensation_follows_mujoco(tmp_path):
    """MJCF ``gravcomp``: ``-c m g`` at each link's COM (a ``DeadLoad``), here 1, 0.5 and 0.8 on
    three hinged links and none on a link fixed to the second (so its body's load is not at its
    COM). Generalized-alpha at h = 1e-3 follows MuJoCo's RK4 at 1e-4 s over 0.3 s to 1.4e-5
    rad, converging at order two (5.7e-5, 1.4e-5, 3.6e-6, 8.9e-7 at h = 2e-3 ... 2.5e-4,
    measured), where the compensation moves MuJoCo's motion by more than 0.1 rad. ``with_bodies`` keeps the
    loads where they act; compensation through actuators (``actuatorgravcomp``) is
    named in the warning (MuJoCo clips it with the actuators' forces, or drops it in a file
    without actuators; here it is a passive force)."""
    mujoco = pytest.importorskip("mujoco")
    path = _write(tmp_path, "gravcomp.xml", GRAVCOMP.format(clip="false"))
    q0 = {"shoulder": 0.3, "elbow": -0.5, "wrist": 0.4}
    model = _load(path, joint_positions=q0)
    (load,) = [f for f in model.forces if isinstance(f, dl.forces.DeadLoad)]
    ts = np.linspace(0.0, 0.3, 7)
    q = np.asarray(dl.joint_coordinates(model, dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.3, 1e-3, saveat=dl.SaveAt(ts=ts))))
    mj = mujoco.MjModel.from_xml_path(path)
    runs = []
    for scale in (1.0, 0.0):
        mj.body_gravcomp[:] *= scale
        runs.append(mujoco_rollout(mj, 3000, 500, list(q0.values())))
    assert np.abs(runs[0] - runs[1]).max() > 0.1
    assert np.abs(q - runs[0]).max() < 2e-5, np.abs(q - runs[0]).max()
    # with_bodies moves the COM, not where the loads act
    com = model.bodies.com + jnp.array([0.01, -0.02, 0.03])
    moved = dl.joint_space.with_bodies(model, dl.RigidBody(model.bodies.mass, model.bodies.inertia, com))
    (moved_load,) = [f for f in moved.forces if isinstance(f, dl.forces.DeadLoad)]
    np.testing.assert_allclose(moved_load.point + com, load.point + model.bodies.com, atol=1e-15)
    through = _write(tmp_path, "through.xml", GRAVCOMP.format(clip="true"))
    with pytest.warns(RobotModelWarning, match=r"gravity compensation through actuators \(1 joint: applied as a passive force"):
        dl.load_model(through)


FLAGS = """<mujoco><compiler angle="radian"/><option timestep="1e-4" integrator="RK4">
<flag gravity="disable" spring="disable" limit="disable" clampctrl="disable"{more}/></option><worldbody>
<body name="upper" pos="0 0 1"><joint name="shoulder" type="hinge" axis="0 1 0" stiffness="50" damping="0.3" limited="true" range="-0.1 0.1"/>
  <inertial pos="0.2 0 0" mass="2" diaginertia="0.01 0.03 0.03"/>
  <body name="lower" pos="0.4 0 0"><joint name="elbow" type="hinge" axis="0 0 1" stiffness="20" damping="0.1"/>
    <inertial pos="0.15 0 0.05" mass="1" diaginertia="0.005 0.01 0.01"/></body></body></worldbody>
<equality><joint joint1="elbow" joint2="shoulder" polycoef="0 0.5 0 0 0"/></equality>
<actuator><motor name="push" joint="shoulder" ctrllimited="true" ctrlrange="-0.1 0.1"/></actuator></mujoco>"""


def test_what_the_file_switches_off_is_off(tmp_path):
    """``<option><flag gravity spring limit clampctrl equality="disable"/>``: no gravity, no
    joint springs, no limit (though ``joint_limits=True``), a control beyond ``ctrlrange``
    unclipped and no joint coupling (though ``joint_couplings=True``), none of them named in a
    warning: generalized-alpha at h = 1e-3 follows MuJoCo's RK4 to 1.2e-7 rad over 0.3 s (3.0e-8
    at 5e-4, measured), where MuJoCo
    without the flags moves differently by more than 0.1 rad. With actuation disabled the
    controls have no effect, and the warning says so, as it names fluid forces and the
    override flag."""
    mujoco = pytest.importorskip("mujoco")
    path = _write(tmp_path, "flags.xml", FLAGS.format(more=' equality="disable"'))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = dl.load_model(path, controls={"push": 2.0}, joint_limits=True, joint_couplings=True, joint_positions={"elbow": 0.2})
    assert float(jnp.linalg.norm(model.gravity)) == 0.0
    laws = [type(f.law).__name__ for f in model.forces if hasattr(f, "law")]
    assert laws == ["Actuators"], laws  # no springs, limits nor couplings
    ts = np.linspace(0.0, 0.3, 7)
    q = np.asarray(dl.joint_coordinates(model, dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.3, 1e-3, saveat=dl.SaveAt(ts=ts))))
    mj = mujoco.MjModel.from_xml_path(path)
    runs = []
    for flags in (mj.opt.disableflags, 0):
        mj.opt.disableflags = flags
        runs.append(mujoco_rollout(mj, 3000, 500, [0.0, 0.2], ctrl=[2.0]))
    assert np.abs(runs[0] - runs[1]).max() > 0.1 and np.abs(runs[0][:, 0]).max() > 0.15  # past its range
    assert np.abs(q - runs[0]).max() < 5e-7, np.abs(q - runs[0]).max()
    idle = _write(tmp_path, "idle.xml", FLAGS.format(more=' actuation="disable"'))
    with pytest.warns(RobotModelWarning, match=r"actuators \(1\): the file disables actuation, and the controls have no effect"):
        model = dl.load_model(idle, controls={"push": 2.0}, joint_couplings=True)
    assert not any(isinstance(getattr(f, "law", None), dl.joint_laws.Actuators) for f in model.forces)
    fluid = _write(tmp_path, "fluid.xml", FLAGS.format(more="").replace("<flag ", '<flag override="enable" ').replace('<option ', '<option density="1.2" '))
    with pytest.warns(RobotModelWarning, match=r"not modelled: .*fluid forces \(the option's density, viscosity or wind\); the override flag's solref"):
        dl.load_model(fluid, controls={"push": 2.0})


def test_locked_joints_merge_at_their_position(tmp_path):
    """A locked joint welds its child where ``joint_positions`` puts it: the rotor merges into
    the slider and the slider (locked at 5 cm) into the upper arm."""
    path = _write(tmp_path, "toy.urdf", TOY_URDF)
    model = _load(path, locked_joints=("slide", "spin"), joint_positions={"slide": 0.05})
    assert model.body_names == ("upper",) and model.joint_names == ("shoulder",)
    np.testing.assert_allclose(model.bodies.mass, [2.5], rtol=1e-12)
    links = {name: (body, pose) for name, body, pose in model.joints.links}
    np.testing.assert_allclose(links["slider"][1][:3], [0.05, 0, 0.3], atol=1e-12)


# -- the Franka Panda against Pinocchio ---------------------------------------------------------


try:
    import pinocchio as pin
except ImportError:  # pragma: no cover - depends on the environment
    pin = None
PANDA = robot_file("panda_description/urdf/panda.urdf")
needs_pinocchio = pytest.mark.skipif(
    pin is None or PANDA is None,
    reason="the Pinocchio comparisons need `pin` and `example-robot-data` (pip install -e '.[test]')",
)

# A bent pose (mid-range, elbow bent) with the fingers half open.
PANDA_Q0 = {"panda_joint1": 0.3, "panda_joint2": -0.5, "panda_joint3": 0.2, "panda_joint4": -2.0,
            "panda_joint5": 0.4, "panda_joint6": 1.5, "panda_joint7": 0.7,
            "panda_finger_joint1": 0.01, "panda_finger_joint2": 0.02}  # fmt: skip
PANDA_QD0 = {"panda_joint1": 0.5, "panda_joint4": -0.8, "panda_joint7": 2.0}


# Links that MuJoCo's compiler refuses and Pinocchio reads as written (example-robot-data):
# a massless root whose inertia is a placeholder that is not positive definite (Go1, with a
# floating base: welded to the trunk), a link whose moments break the triangle inequality
# welded to its tip (Allegro hand), a massless link with a rotational inertia (Bolt's feet), a
# placeholder antenna and continuous joints (TIAGo).
PLACEHOLDERS = {"go1_description/urdf/go1.urdf": True, "allegro_hand_description/urdf/allegro_right_hand.urdf": False,
                "bolt_description/robots/bolt.urdf": False, "tiago_description/robots/tiago_no_hand.urdf": False}  # fmt: skip


def _pinocchio_q(pm, x):
    """Pinocchio's coordinates of the 1-DOF joints at angles ``x`` (a continuous joint's are
    ``(cos, sin)``)."""
    joints = [j for j in list(pm.joints)[1:] if j.nv == 1]
    return np.concatenate([[np.cos(a), np.sin(a)] if j.nq == 2 else [a] for j, a in zip(joints, x)])


def _matches_pinocchio(path: str, floating: bool, seed: int = 0, **kwargs) -> float:
    """Largest difference of poses, COM velocities and merged inertias from Pinocchio's at a
    random joint state (``floating``: a free-flyer root at a random pose and velocity)."""
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
    rng = np.random.default_rng(seed)
    names = [n for n in pm.names[1:] if n != "root_joint"]
    x, xd = rng.uniform(-0.5, 0.5, len(names)), rng.uniform(-1, 1, len(names))
    q, v = _pinocchio_q(pm, x), xd
    if floating:
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        v_local, w_local = rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 3)
        q = np.concatenate([[0.1, 0.2, 0.5], quat[1:], quat[:1], q])
        v = np.concatenate([v_local, w_local, xd])
        kwargs.update(floating_base=True, base_pose=([0.1, 0.2, 0.5], quat), base_velocity=(_quat_matrix_test(quat) @ v_local, w_local))
    model = _load(path, joint_positions=dict(zip(names, x)), joint_velocities=dict(zip(names, xd)), **kwargs)
    return _compare_kinematics(model, pm, q, v, base_joint="root_joint" if floating else None)


@needs_pinocchio
@pytest.mark.parametrize("file", sorted(PLACEHOLDERS))
def test_placeholder_links_read_as_pinocchio_reads_them(file):
    """Robot files whose links MuJoCo's compiler refuses load, each group of welded links one
    rigid body: poses, COM velocities and merged inertias equal Pinocchio's (< 1e-12)."""
    path = robot_file(file)
    assert _matches_pinocchio(path, PLACEHOLDERS[file]) < 1e-12


@needs_pinocchio
def test_placeholder_inertia_in_turned_axes(tmp_path):
    """A link whose inertia is not positive definite, given in axes turned from the link's
    (``<origin rpy>``), welded to a moving link: the group's inertia is Pinocchio's (< 1e-12)."""
    tool = TOY_URDF.replace('<inertial><origin xyz="0.01 0 0.02"/><mass value="0.5"/>\n      <inertia ixx="0.001" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.0015"/>',
                            '<inertial><origin xyz="0.01 0 0.02" rpy="0.3 -0.2 0.5"/><mass value="0.5"/>\n      '
                            '<inertia ixx="0.001" ixy="0.002" ixz="0.0005" iyy="0.001" iyz="0" izz="0.0015"/>')  # fmt: skip
    assert tool != TOY_URDF
    assert _matches_pinocchio(_write(tmp_path, "tool.urdf", tool), False) < 1e-12


# The files of example-robot-data that need a keyword, and which.
BOUNDS = dict(bound_mass=1e-3, bound_inertia=1e-6)
NEEDS = {"icub.urdf": BOUNDS, "icub_reduced.urdf": BOUNDS, "romeo.urdf": BOUNDS,
         "romeo_laas_small.urdf": dict(BOUNDS, balance_inertia=True), "romeo_small.urdf": dict(balance_inertia=True),
         "quadrotor_base.urdf": dict(floating_base=True), "iris_simple.urdf": dict(floating_base=True)}  # fmt: skip


@pytest.mark.slow
@needs_pinocchio
def test_every_robot_of_example_robot_data():
    """Every URDF of example-robot-data (69 files: arms, hands, quadrupeds, humanoids, drones)
    loads as Pinocchio reads it (poses, COM velocities, merged inertias < 1e-12), or, where a
    link is a placeholder no rigid body has (``NEEDS``), is refused naming the link and the
    keyword that takes it, and loads with that keyword; the one file without links is refused."""
    import importlib.metadata

    files = sorted(str(f.locate()) for f in importlib.metadata.files("example-robot-data") if str(f).endswith(".urdf"))
    assert len(files) >= 60
    read = 0
    for path in files:
        name = os.path.basename(path)
        if name == "ur3.urdf":  # an empty <robot>
            with pytest.raises(ModelFileError, match="no link moves"):
                _load(path)
            continue
        if name in NEEDS:
            with pytest.raises(ModelFileError, match="|".join(f"{keyword}=" for keyword in NEEDS[name])):
                _load(path)
            assert _load(path, **NEEDS[name]).num_bodies >= 1
            continue
        assert _matches_pinocchio(path, False) < 1e-12, path
        read += 1
    assert read >= 55


LEG = """<?xml version="1.0"?>
<robot name="leg">
  <link name="pelvis">
    <inertial><mass value="3"/><inertia ixx="0.03" ixy="0" ixz="0" iyy="0.03" iyz="0" izz="0.03"/></inertial>
  </link>
  <link name="hip_virtual"/>
  <link name="thigh">
    <inertial><origin xyz="0.02 0 -0.2"/><mass value="1.2"/>
      <inertia ixx="0.012" ixy="0.001" ixz="0" iyy="0.011" iyz="0" izz="0.004"/></inertial>
  </link>
  <link name="shank">
    <inertial><origin xyz="0 0.01 -0.2"/><mass value="0.6"/>
      <inertia ixx="0.004" ixy="0" ixz="0" iyy="0.005" iyz="0" izz="0.002"/></inertial>
  </link>
  <joint name="hip_roll" type="revolute">
    <parent link="pelvis"/><child link="hip_virtual"/><origin xyz="0 0.1 0" rpy="0.2 0 0"/><axis xyz="1 0 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="1"/><dynamics damping="0.05"/>
  </joint>
  <joint name="hip_pitch" type="revolute">
    <parent link="hip_virtual"/><child link="thigh"/><origin xyz="0 0 0" rpy="0 0 0.3"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="1"/>
  </joint>
  <joint name="knee" type="revolute">
    <parent link="thigh"/><child link="shank"/><origin xyz="0 0 -0.4"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="1"/>
  </joint>
</robot>
"""
LEG_Q0, LEG_QD0 = {"hip_roll": 0.3, "hip_pitch": -0.4, "knee": 0.8}, {"hip_roll": 2.0, "hip_pitch": -1.0, "knee": 3.0}


def _rk4_positions(acc, q, v, h: float, steps: int, every: int) -> np.ndarray:
    """Positions of ``q'' = acc(t, q, q')`` from ``(q, v)`` at t = 0 by the classical RK4 at step
    ``h`` (Pinocchio's references), over ``steps`` steps: ``q`` at the start and after every
    ``every`` steps."""
    qs = [q]
    for i in range(steps):
        t = i * h
        k1q, k1v = v, acc(t, q, v)
        k2q, k2v = v + h / 2 * k1v, acc(t + h / 2, q + h / 2 * k1q, v + h / 2 * k1v)
        k3q, k3v = v + h / 2 * k2v, acc(t + h / 2, q + h / 2 * k2q, v + h / 2 * k2v)
        k4q, k4v = v + h * k3v, acc(t + h, q + h * k3q, v + h * k3v)
        q, v = q + h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q), v + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        if (i + 1) % every == 0:
            qs.append(q)
    return np.array(qs)


def _pinocchio_run(path: str, q0: dict, qd0: dict, t1: float, ts, h: float = 1e-4) -> np.ndarray:
    """Joint positions at the evenly spaced ``ts`` from 0 (multiples of ``h``) by Pinocchio's
    ABA and RK4 at ``h``, fixed base, 1-DOF joints, the URDF damping as ``-D v``."""
    pm = pin.buildModelFromUrdf(path)
    pd, names, damping = pm.createData(), list(pm.names)[1:], np.asarray(pm.damping)
    acc = lambda t, q, v: pin.aba(pm, pd, q, v, -damping * v)  # noqa: E731
    q, v = np.array([q0[n] for n in names]), np.array([qd0.get(n, 0.0) for n in names])
    return _rk4_positions(acc, q, v, h, int(round(t1 / h)), int(round((ts[1] - ts[0]) / h)))


@needs_pinocchio
def test_massless_links_between_hinges_fold_as_pinocchio_reads_them(tmp_path):
    """A hip written as two revolute joints through a massless link (as URDF files write
    two- and three-axis joints), which MuJoCo refuses: the thigh carries both hinges, one body
    on a universal joint, the massless link has no pose of its own, and the motion is
    Pinocchio's (ABA, RK4 at 1e-4 s): over 0.3 s from a swing, generalized-alpha at 2.5e-4 s
    within 1e-5 rad (2.7e-6; 1.1e-5 at 5e-4 s). The same chain through a massive link is not
    folded."""
    path = _write(tmp_path, "leg.urdf", LEG)
    model = _load(path, joint_positions=LEG_Q0, joint_velocities=LEG_QD0)
    assert model.body_names == ("thigh", "shank") and model.joint_names == ("hip_roll", "hip_pitch", "knee")
    with pytest.raises(ValueError, match="no link 'hip_virtual'"):
        dl.link_pose(model, _state(model), "hip_virtual")
    assert _matches_pinocchio(path, False) < 1e-12
    ts = np.linspace(0.0, 0.3, 7)
    ours, theirs = _difflie_run(model, dl.GeneralizedAlpha(), 0.3, 2.5e-4, ts), _pinocchio_run(path, LEG_Q0, LEG_QD0, 0.3, ts)
    assert np.abs(ours - theirs).max() < 1e-5, np.abs(ours - theirs).max()
    heavy = LEG.replace('<link name="hip_virtual"/>', '<link name="hip_virtual"><inertial><mass value="0.2"/><inertia ixx="1e-4" '
                                                      'ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial></link>')  # fmt: skip
    assert _load(_write(tmp_path, "heavy.urdf", heavy)).body_names == ("hip_virtual", "thigh", "shank")


# A toe of no mass on a hinge at the end (nothing to fold it into) and a shank of no rotational
# inertia (a point mass).
TOE = """<?xml version="1.0"?>
<robot name="leg">
  <link name="pelvis"/>
  <link name="thigh">
    <inertial><origin xyz="0.02 0 -0.2"/><mass value="1.2"/>
      <inertia ixx="0.012" ixy="0.001" ixz="0" iyy="0.011" iyz="0" izz="0.004"/></inertial>
  </link>
  <link name="shank">
    <inertial><origin xyz="0 0.01 -0.2"/><mass value="0.6"/><inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial>
  </link>
  <link name="toe">
    <inertial><mass value="0"/><inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial>
  </link>
  <joint name="hip" type="revolute">
    <parent link="pelvis"/><child link="thigh"/><origin xyz="0 0.1 0" rpy="0.2 0 0.3"/><axis xyz="0 1 0"/>
  </joint>
  <joint name="knee" type="revolute">
    <parent link="thigh"/><child link="shank"/><origin xyz="0 0 -0.4"/><axis xyz="0.3 1 0"/>
  </joint>
  <joint name="ankle" type="revolute">
    <parent link="shank"/><child link="toe"/><origin xyz="0.05 0 -0.4"/><axis xyz="0 1 0.2"/>
  </joint>
</robot>
"""


def test_bound_mass_and_inertia_follow_mujoco(tmp_path):
    """Links no rigid body can be (a point mass that moves, a massless toe at the end) are
    refused, naming the link and the remedy; with ``bound_mass`` / ``bound_inertia`` they take
    MuJoCo's least mass and moments, and the motion follows MuJoCo's of the same file with
    ``<compiler boundmass boundinertia>`` (RK4 at 1e-4 s): over 0.3 s from a swing,
    generalized-alpha at 2.5e-4 s within 5e-6 rad (1.0e-6; 4.1e-6 at 5e-4 s), where bounds twice
    as large move the joints by 0.2 rad."""
    import mujoco

    path = _write(tmp_path, "toe.urdf", TOE)
    with pytest.raises(ModelFileError, match=r"link 'shank' has an inertia that is not positive definite .*bound_inertia="):
        _load(path)
    with pytest.raises(ModelFileError, match=r"link 'toe' moves but has no mass; bound_mass="):
        _load(path, bound_inertia=2e-3)
    q0, qd0 = {"hip": 0.3, "knee": 0.8, "ankle": 0.2}, {"hip": 2.0, "knee": 3.0, "ankle": -1.0}
    t1, every, ts, order = 0.3, 500, np.linspace(0.0, 0.3, 7), ("hip", "knee", "ankle")

    def mujoco_run(bound_mass, bound_inertia):
        text = TOE.replace('<robot name="leg">', f'<robot name="leg"><mujoco><compiler boundmass="{bound_mass}" '
                                                 f'boundinertia="{bound_inertia}"/></mujoco>')  # fmt: skip
        mj = mujoco.MjModel.from_xml_string(text)
        mj.opt.integrator, mj.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, 1e-4
        names = [mj.joint(j).name for j in range(mj.njnt)]
        out = mujoco_rollout(mj, int(round(t1 / 1e-4)), every, [q0[n] for n in names], [qd0[n] for n in names])
        return out[:, [names.index(n) for n in order]]

    model = _load(path, joint_positions=q0, joint_velocities=qd0, bound_mass=0.05, bound_inertia=2e-3)
    k = model.body_names.index("toe")
    assert float(model.bodies.mass[k]) == 0.05
    np.testing.assert_allclose(model.bodies.inertia[k], 2e-3 * np.eye(3), rtol=1e-12)
    assert model.joint_names == order
    ours, theirs = _difflie_run(model, dl.GeneralizedAlpha(), t1, 2.5e-4, ts), mujoco_run(0.05, 2e-3)
    assert np.abs(ours - theirs).max() < 5e-6, np.abs(ours - theirs).max()
    assert np.abs(theirs - mujoco_run(0.1, 4e-3)).max() > 0.1


@pytest.mark.skipif(PANDA is None, reason="needs `example-robot-data` (pip install -e '.[test]')")
def test_locked_joints_leave_the_warning():
    """The Panda with its fingers locked: their limits and the second finger's mimic act on
    nothing, and the warning names the arm's seven limits alone."""
    fingers = ["panda_finger_joint1", "panda_finger_joint2"]
    for locked, named in (([], "joint limits (9 joints"), (fingers, "joint limits (7 joints")):
        with pytest.warns(RobotModelWarning) as caught:
            dl.load_model(PANDA, locked_joints=locked)
        (message,) = [str(w.message) for w in caught]
        assert named in message and ("mimic joints (1" in message) == (not locked), message


class Sinusoids(eqx.Module):
    """Joint torques ``u(t) = amplitude sin(omega t + phase)``: arrays, so a passive run (zero
    amplitudes) and an actuated one share one compiled program."""

    amplitude: jax.Array
    omega: jax.Array
    phase: jax.Array

    def __call__(self, t):
        return self.amplitude * jnp.sin(self.omega * t + self.phase)


AMPLITUDE = np.array([6.0, 10.0, 4.0, 8.0, 1.5, 1.0, 0.5, 0.02, -0.02])
OMEGA = np.array([5.0, 7.0, 3.0, 4.0, 9.0, 6.0, 11.0, 8.0, 8.0])
PHASE = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 0.0, 0.0])


def _panda(actuated: bool, moving: bool = True):
    amp = AMPLITUDE if actuated else np.zeros(9)
    signal = Sinusoids(jnp.asarray(amp), jnp.asarray(OMEGA), jnp.asarray(PHASE))
    qd0 = PANDA_QD0 if moving else {}
    return _load(PANDA, joint_positions=PANDA_Q0, joint_velocities=qd0, joint_torques=signal)


@functools.cache
def _pinocchio_reference(actuated: bool, t1: float, moving: bool = True, h: float = 1e-4, every: int = 100, mimic: bool = False):
    """Pinocchio ABA + RK4 at step ``h``: times and joint positions every ``every`` steps.
    URDF damping enters as ``tau - D v`` (Pinocchio's ABA leaves ``model.damping`` to the caller).
    ``mimic``: the second finger held on the first by the URDF's mimic (Pinocchio's mimic joint,
    eight coordinates; ``M(q) q_ddot = tau - b`` by CRBA, which takes mimics where ABA does not),
    both fingers' torques and dampings on the one coordinate; the second finger's positions are
    the first's."""
    pm = pin.buildModelFromUrdf(PANDA)
    names, damping = list(pm.names)[1:], np.asarray(pm.damping)
    amp = AMPLITUDE if actuated else np.zeros(9)
    if mimic:  # finger2 = finger1: generalised forces on finger1's coordinate add up
        pm, fold = pin.buildModelFromUrdf(PANDA, mimic=True), np.eye(9)[:8] + np.eye(9)[8] * (np.arange(8) == 7)[:, None]
    else:
        fold = np.eye(9)
    pd = pm.createData()

    def acc(t, q, v):
        tau = fold @ (amp * np.sin(OMEGA * t + PHASE)) - (fold @ damping) * v
        if not mimic:
            return pin.aba(pm, pd, q, v, tau)
        M = pin.crba(pm, pd, q)
        return np.linalg.solve(np.triu(M) + np.triu(M, 1).T, tau - pin.nonLinearEffects(pm, pd, q, v))

    keep = np.eye(9)[: fold.shape[0]]  # the coordinates: the first finger's stands for both
    q = keep @ np.array([PANDA_Q0[n] for n in names])
    v = keep @ np.array([PANDA_QD0.get(n, 0.0) if moving else 0.0 for n in names])
    qs = _rk4_positions(acc, q, v, h, int(round(t1 / h)), every)
    return np.arange(len(qs)) * every * h, qs @ fold, names


def _difflie_run(model, solver, t1, h, ts):
    sol = dl.simulate(model, solver, 0.0, t1, h, saveat=dl.SaveAt(ts=jnp.asarray(ts)))
    return np.asarray(dl.joint_coordinates(model, sol))


G1 = robot_file("g1_description/urdf/g1_29dof_rev_1_0.urdf")


def _compare_kinematics(model, pm, q, v, base_joint=None):
    """Largest difference of link poses, COM velocities and inertias from Pinocchio's."""
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, q, v)
    child_joint = {c: name for name, c in zip(model.joint_names, model.joints.child)}
    com, R0 = np.asarray(model.bodies.com), np.asarray(model.R0)
    w = np.einsum("bij,bj->bi", R0, model.omega0)
    err = 0.0
    for k in range(model.num_bodies):
        jid = pm.getJointId(child_joint.get(k, base_joint))
        oMi, inertia = pd.oMi[jid], pm.inertias[jid]
        vel = pin.getVelocity(pm, pd, jid, pin.LOCAL_WORLD_ALIGNED)
        err = max(
            err,
            np.abs(oMi.rotation - R0[k]).max(),
            np.abs(oMi.translation + oMi.rotation @ inertia.lever - model.r0[k]).max(),
            np.abs(vel.angular - w[k]).max(),
            np.abs(vel.linear + np.cross(vel.angular, oMi.rotation @ com[k]) - model.v0[k]).max(),
            abs(inertia.mass - model.bodies.mass[k]),
            np.abs(inertia.lever - com[k]).max(),
            np.abs(inertia.inertia - model.bodies.inertia[k]).max(),
        )
    return err


@pytest.mark.skipif(pin is None or G1 is None, reason="needs `pin` and `example-robot-data` (pip install -e '.[test]')")
def test_humanoid_floating_base_matches_pinocchio():
    """Unitree G1 (29 joints, 30 bodies) with ``floating_base=True``, a base pose and velocity
    (world velocity of the pelvis origin, pelvis-frame angular velocity) and random joint
    positions and rates: poses, COM velocities and (merged) inertias equal Pinocchio's with a
    free-flyer root to rounding (< 1e-12)."""
    rng = np.random.default_rng(1)
    pm = pin.buildModelFromUrdf(G1, pin.JointModelFreeFlyer())
    names = list(pm.names)[2:]
    q_j, v_j = rng.uniform(-0.5, 0.5, len(names)), rng.uniform(-1, 1, len(names))
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    R = _quat_matrix_test(quat)
    v_local, w_local = np.array([0.3, -0.2, 0.1]), np.array([0.5, 1.0, -0.7])
    model = _load(G1, floating_base=True, base_pose=([0.1, 0.2, 0.9], quat), base_velocity=(R @ v_local, w_local),
                  joint_positions=dict(zip(names, q_j)), joint_velocities=dict(zip(names, v_j)))  # fmt: skip
    assert model.num_bodies == 30 and model.num_constraints == 145 and model.joints.base == 0
    q = np.concatenate([[0.1, 0.2, 0.9], quat[1:], quat[:1], q_j])  # Pinocchio: (x, y, z, w)
    v = np.concatenate([v_local, w_local, v_j])
    assert _compare_kinematics(model, pm, q, v, base_joint="root_joint") < 1e-12
    np.testing.assert_allclose(dl.joint_coordinates(model, _state(model)), [dict(zip(names, q_j))[n] for n in model.joint_names], atol=1e-12)


def _quat_matrix_test(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])  # fmt: skip


@needs_pinocchio
def test_panda_model_matches_pinocchio():
    """Link poses and COM velocities by forward kinematics, and the merged inertias (link 7
    with link 8, the hand and its TCP frame), equal Pinocchio's to rounding (< 1e-12)."""
    model = _panda(False)
    pm = pin.buildModelFromUrdf(PANDA)
    assert model.joint_names == tuple(pm.names)[1:]
    q = np.array([PANDA_Q0[n] for n in model.joint_names])
    v = np.array([PANDA_QD0.get(n, 0.0) for n in model.joint_names])
    assert _compare_kinematics(model, pm, q, v) < 1e-12
    # frames of links, merged ones included (the hand and the TCP on link 7), along saves
    pd = pm.createData()
    pin.framesForwardKinematics(pm, pd, q)
    states = jax.tree.map(lambda x: jnp.stack([x, x]), _state(model))  # a save axis
    for link in ("panda_link3", "panda_hand", "panda_hand_tcp", "panda_link0"):
        p, R = dl.link_pose(model, states, link)
        oMf = pd.oMf[pm.getFrameId(link)]
        assert p.shape == (2, 3) and R.shape == (2, 3, 3)
        np.testing.assert_allclose(p[1], oMf.translation, atol=1e-12)
        np.testing.assert_allclose(R[1], oMf.rotation, atol=1e-12)
    with pytest.raises(ValueError, match="no link 'hand'"):
        dl.link_pose(model, states, "hand")


# Steps of the default run (0.2 s): generalized-alpha is second order; measured errors against
# Pinocchio at 0.2 s (passive, at rest): 1.0e-5 rad at h = 1e-3, 2.5e-6 at 5e-4 (ratio 4).
GA_STEP_FAST = 2e-4


@needs_pinocchio
@pytest.mark.parametrize("actuated", [pytest.param(False, marks=pytest.mark.slow), True], ids=["passive", "torques"])
def test_panda_generalized_alpha_matches_pinocchio(actuated):
    """Panda (7 arm joints + 2 prismatic fingers, 9 bodies, 45 constraint rows) from a bent
    pose with initial joint rates, passive under gravity or driven by sinusoidal joint torques,
    with URDF joint damping: ``GeneralizedAlpha`` at h = 2e-4 s follows Pinocchio's joint
    trajectories to < 1e-6 rad (and m) over 0.2 s. Measured: 7.0e-7 passive, 2.9e-7 with
    torques. The 1 s comparisons are ``test_panda_one_second_*`` (slow)."""
    t1 = 0.2
    ts, q_ref, names = _pinocchio_reference(actuated, t1)
    model = _panda(actuated)
    assert model.joint_names == tuple(names)
    q = _difflie_run(model, dl.GeneralizedAlpha(), t1, GA_STEP_FAST, ts)
    err = np.abs(q - q_ref).max()
    assert err < 1e-6, err
    # a wrong model (no damping, a dropped torque, a mis-merged link) is off by far more
    assert np.abs(q_ref[-1] - q_ref[0]).max() > 0.05


@needs_pinocchio
@pytest.mark.slow
def test_panda_backward_euler_converges_to_pinocchio():
    """Slow (the humanoid's test shows the same in the fast run). ``BackwardEuler`` (first
    order) on the actuated Panda over 0.2 s: the error against
    Pinocchio halves with the step (measured 9.52e-3 rad at h = 1e-3, 4.76e-3 at 5e-4), and the
    Richardson extrapolate ``2 q(h/2) - q(h)`` agrees to 1.2e-5 rad; with a third level
    (h = 2.5e-4, in ``test_panda_one_second_torques``) to 3e-8. For 1e-6 rad directly, a
    first-order method needs h ~ 1e-7 s here, which no test can afford; the extrapolation shows
    that it converges to Pinocchio's trajectory."""
    t1 = 0.2
    ts, q_ref, _ = _pinocchio_reference(True, t1)
    model = _panda(True)
    q1 = _difflie_run(model, dl.BackwardEuler(), t1, 1e-3, ts)
    q2 = _difflie_run(model, dl.BackwardEuler(), t1, 5e-4, ts)
    e1, e2 = np.abs(q1 - q_ref).max(), np.abs(q2 - q_ref).max()
    assert 1.9 < e1 / e2 < 2.1, (e1, e2)
    assert np.abs(2 * q2 - q1 - q_ref).max() < 2e-5


@needs_pinocchio
@needs_pinocchio
def test_panda_mimic_finger_matches_pinocchios_mimic_joint():
    """The Panda's URDF makes its second finger mimic the first. With ``joint_couplings=True``
    (the second finger placed on the first by the loader) the driven Panda follows Pinocchio's
    model with the mimic joint (the fingers one coordinate, CRBA, RK4 at 1e-4 s) over 0.2 s to
    1.7e-5 rad at the arm and 1.5e-4 m at the fingers, the lag of a coupling as soft as MuJoCo's
    (the file's mimic takes MuJoCo's default ``solref``, 0.02 s); with the time constant halved,
    4.8e-6 rad and 4.6e-5 m, a third. Without the coupling the fingers part: 2.4e-2 m off."""
    t1 = 0.2
    ts, q_ref, names = _pinocchio_reference(True, t1, mimic=True)
    q0 = {k: v for k, v in PANDA_Q0.items() if k != "panda_finger_joint2"}
    signal = Sinusoids(jnp.asarray(AMPLITUDE), jnp.asarray(OMEGA), jnp.asarray(PHASE))
    model = _load(PANDA, joint_positions=q0, joint_velocities=PANDA_QD0, joint_torques=signal, joint_couplings=True)
    assert model.joint_names == tuple(names) and model.joints.initial[8] == q0["panda_finger_joint1"]
    run = dl.xla.jit(lambda m: dl.joint_coordinates(m, dl.simulate(m, dl.GeneralizedAlpha(), 0.0, t1, GA_STEP_FAST, saveat=dl.SaveAt(ts=ts))))
    law = model.forces[-1].law
    assert isinstance(law, dl.joint_laws.JointCouplings)
    errors = []
    for stiffer in (1.0, 2.0):  # the time constant over stiffer: k * stiffer^2, b * stiffer
        stiffened = eqx.tree_at(lambda m: (m.forces[-1].law.stiffness, m.forces[-1].law.damping), model,
                                (law.stiffness * stiffer**2, law.damping * stiffer))  # fmt: skip
        err = np.abs(np.asarray(run(stiffened)) - q_ref)
        errors.append((err[:, :7].max(), err[:, 7:].max()))
    assert errors[0][0] < 3e-5 and errors[0][1] < 3e-4, errors
    assert errors[1][1] < 0.4 * errors[0][1], errors
    apart = _load(PANDA, joint_positions=dict(q0, panda_finger_joint2=q0["panda_finger_joint1"]), joint_velocities=PANDA_QD0,
                  joint_torques=signal)  # fmt: skip
    assert np.abs(_difflie_run(apart, dl.GeneralizedAlpha(), t1, GA_STEP_FAST, ts) - q_ref)[:, 7:].max() > 1e-2


@pytest.mark.slow
def test_panda_one_second_passive():
    """Slow (32000 steps): the Panda released at rest from the bent pose, passive, over 1 s.
    ``GeneralizedAlpha`` at h = 1/32000 s stays within 1e-6 rad of Pinocchio's joint
    trajectories. The step comes from the measured second-order error at 1 s: 1.56e-4 rad at
    h = 5e-4, 3.9e-5 at 2.5e-4 (ratio 4.0), so ~6e-7 at 1/32000 (measured: see below)."""
    ts, q_ref, _ = _pinocchio_reference(False, 1.0, moving=False)
    q = _difflie_run(_panda(False, moving=False), dl.GeneralizedAlpha(), 1.0, 1.0 / 32000, ts)
    err = np.abs(q - q_ref).max()
    assert err < 1e-6, err


@needs_pinocchio
@pytest.mark.slow
def test_panda_one_second_torques():
    """Slow: the actuated Panda from rest over 1 s. ``GeneralizedAlpha`` is second order against
    Pinocchio (measured 5.11e-4 rad at h = 5e-4, 1.28e-4 at 2.5e-4) and its Richardson
    extrapolate ``(4 q(h/2) - q(h)) / 3`` agrees to 3.8e-8 rad (1e-6 directly would take
    h ~ 2e-5, 50000 steps). ``BackwardEuler``: three-level Richardson extrapolation from
    h = 1e-3, 5e-4, 2.5e-4 over 0.2 s (with initial joint rates) agrees to 3.1e-8."""
    ts, q_ref, _ = _pinocchio_reference(True, 1.0, moving=False)
    model = _panda(True, moving=False)
    q1, q2 = (_difflie_run(model, dl.GeneralizedAlpha(), 1.0, h, ts) for h in (5e-4, 2.5e-4))
    e1, e2 = np.abs(q1 - q_ref).max(), np.abs(q2 - q_ref).max()
    assert 3.6 < e1 / e2 < 4.4, (e1, e2)
    assert np.abs((4 * q2 - q1) / 3 - q_ref).max() < 1e-7
    ts, q_ref, _ = _pinocchio_reference(True, 0.2)
    model = _panda(True)
    q1, q2, q3 = (_difflie_run(model, dl.BackwardEuler(), 0.2, h, ts) for h in (1e-3, 5e-4, 2.5e-4))
    r1, r2 = 2 * q2 - q1, 2 * q3 - q2
    assert np.abs((4 * r2 - r1) / 3 - q_ref).max() < 1e-7


# -- the Unitree G1 humanoid, flying, against Pinocchio ----------------------------------------

needs_g1 = pytest.mark.skipif(pin is None or G1 is None, reason="needs `pin` and `example-robot-data` (pip install -e '.[test]')")


@functools.cache
def _g1_scenario():
    """The G1 with a free-flyer root in flight (gravity, no contact) from a random pose
    (joints uniform in +-0.4 rad, rates in +-0.3 rad/s, a tilted base moving and turning),
    driven by ``u_j = a_j sin(omega_j t + phase_j)`` with ``a_j = 2 / (M^-1)_jj``: about
    2 rad/s^2 on every joint whatever its effective inertia (the wrists' is ~1e-3 of the hips').
    Pinocchio's configuration is ``(x, y, z, qx, qy, qz, qw, joints)``, its base velocity
    ``(v, omega)`` in the base frame."""
    pm = pin.buildModelFromUrdf(G1, pin.JointModelFreeFlyer())
    names = tuple(pm.names)[2:]
    rng = np.random.default_rng(2)
    q_j, v_j = rng.uniform(-0.4, 0.4, len(names)), rng.uniform(-0.3, 0.3, len(names))
    omega, phase = rng.uniform(3.0, 11.0, len(names)), rng.uniform(0.0, 2 * np.pi, len(names))
    quat = np.array([0.9, 0.1, -0.2, 0.3]) / np.linalg.norm([0.9, 0.1, -0.2, 0.3])  # (w, x, y, z)
    q0 = np.concatenate([[0.1, -0.2, 0.8], quat[1:], quat[:1], q_j])
    v0 = np.concatenate([[0.3, -0.2, 0.5], [0.12, -0.24, 0.18], v_j])
    pd = pm.createData()
    pin.computeMinverse(pm, pd, q0)
    amplitude = 2.0 / np.diag(pd.Minv)[6:]  # Minv's upper triangle holds the diagonal
    return pm, names, q0, v0, amplitude, omega, phase


@functools.cache
def _g1_reference(t1: float, h: float = 1e-4, every: int = 100):
    """Pinocchio ABA integrated by the Lie-group RK4 of Munthe-Kaas (1998): the increment
    ``u`` of ``q(t) = q_n (+) u`` obeys ``u' = dexp_u^-1 v`` (Pinocchio's ``dIntegrate`` is
    ``dexp_u``); plain RK4 through ``pin.integrate`` would be second order on the base. Its own
    error is far below 1e-12 here (measured 8e-13 between h = 5e-4 and 2.5e-4 over 1 s).
    Returns the times and configurations every ``every`` steps."""
    pm, _, q0, v, amplitude, omega, phase = _g1_scenario()
    pd = pm.createData()

    def rates(t, q, u, v):
        tau = np.concatenate([np.zeros(6), amplitude * np.sin(omega * t + phase)])
        du = np.linalg.solve(pin.dIntegrate(pm, q, u, pin.ArgumentPosition.ARG1), v)
        return du, pin.aba(pm, pd, pin.integrate(pm, q, u), v, tau)

    q, qs, zero = q0, [q0], np.zeros(pm.nv)
    for i in range(int(round(t1 / h))):
        t = i * h
        k1u, k1v = rates(t, q, zero, v)
        k2u, k2v = rates(t + h / 2, q, h / 2 * k1u, v + h / 2 * k1v)
        k3u, k3v = rates(t + h / 2, q, h / 2 * k2u, v + h / 2 * k2v)
        k4u, k4v = rates(t + h, q, h * k3u, v + h * k3v)
        q = pin.integrate(pm, q, h / 6 * (k1u + 2 * k2u + 2 * k3u + k4u))
        v = v + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        if (i + 1) % every == 0:
            qs.append(q)
    return np.arange(len(qs)) * every * h, np.array(qs)


def _g1():
    pm, names, q0, v0, amplitude, omega, phase = _g1_scenario()
    base = pin.XYZQUATToSE3(q0[:7])
    quat = np.concatenate([q0[6:7], q0[3:6]])
    torques = Sinusoids(jnp.asarray(amplitude), jnp.asarray(omega), jnp.asarray(phase))
    model = _load(G1, floating_base=True, base_pose=(q0[:3], quat), base_velocity=(base.rotation @ v0[:3], v0[3:6]),
                  joint_positions=dict(zip(names, q0[7:])), joint_velocities=dict(zip(names, v0[6:])),
                  joint_torques=torques)  # fmt: skip
    assert model.joint_names == names and model.num_bodies == 30
    return model


def _g1_errors(model, solver, t1, h, ts, q_ref):
    """Largest differences from Pinocchio's over the saves: joint angles (rad), base origin
    (m) and base rotation (rad, the angle of ``R_ref^T R``)."""
    sol = dl.simulate(model, solver, 0.0, t1, h, saveat=dl.SaveAt(ts=ts))
    q = np.asarray(dl.joint_coordinates(model, sol))
    b = model.joints.base
    R = np.asarray(sol.rotation[:, b])
    origin = np.asarray(sol.position[:, b]) - R @ np.asarray(model.bodies.com[b])
    angle = max(np.linalg.norm(pin.log3(pin.XYZQUATToSE3(r[:7]).rotation.T @ Rk)) for r, Rk in zip(q_ref, R))
    return q, np.abs(q - q_ref[:, 7:]).max(), np.abs(origin - q_ref[:, :3]).max(), angle


# Generalized-alpha against Pinocchio over 0.1 s (joints / base origin / base rotation):
# 4.76e-7 rad / 5.4e-9 m / 1.13e-7 rad at h = 1e-3, 1.19e-7 / 1.3e-9 / 2.8e-8 at 5e-4 (ratio 4).
G1_STEP = 1e-3


@needs_g1
def test_humanoid_generalized_alpha_matches_pinocchio():
    """Unitree G1 (29 joints, 30 bodies, 145 constraint rows) flying with a floating base,
    moving its joints under sinusoidal torques: ``GeneralizedAlpha`` at h = 1e-3 s follows
    Pinocchio's joint angles to < 1e-6 rad over 0.1 s (measured 4.76e-7), and its base pose to
    5.4e-9 m and 1.1e-7 rad. The 1 s comparison is ``test_humanoid_one_second`` (slow)."""
    t1 = 0.1
    ts, q_ref = _g1_reference(t1)
    _, e_joint, e_origin, e_rotation = _g1_errors(_g1(), dl.GeneralizedAlpha(), t1, G1_STEP, ts, q_ref)
    assert e_joint < 1e-6 and e_origin < 1e-7 and e_rotation < 1e-6, (e_joint, e_origin, e_rotation)
    # the joints move by far more than that (measured 0.041 rad: a dropped torque is seen)
    assert np.abs(q_ref[-1, 7:] - q_ref[0, 7:]).max() > 0.03


@needs_g1
def test_humanoid_backward_euler_converges_to_pinocchio():
    """``BackwardEuler`` (first order) on the flying G1 over 0.1 s: the joint-angle error
    against Pinocchio halves with the step (measured 6.77e-4 rad at h = 1e-3, 3.38e-4 at 5e-4;
    the base origin's, 4.9e-4 m = g h t / 2, is the free fall's), and the Richardson
    extrapolate ``2 q(h/2) - q(h)`` agrees to 9.7e-7 rad."""
    t1 = 0.1
    ts, q_ref = _g1_reference(t1)
    model = _g1()
    q1, e1, _, _ = _g1_errors(model, dl.BackwardEuler(), t1, 1e-3, ts, q_ref)
    q2, e2, _, _ = _g1_errors(model, dl.BackwardEuler(), t1, 5e-4, ts, q_ref)
    assert 1.9 < e1 / e2 < 2.1, (e1, e2)
    richardson = np.abs(2 * q2 - q1 - q_ref[:, 7:]).max()
    assert richardson < 2e-6, richardson


@needs_g1
@pytest.mark.slow
def test_humanoid_one_second():
    """Slow (4000 steps): the actuated, flying G1 over 1 s. Generalized-alpha is second order
    against Pinocchio (joint angles: 1.14e-5 rad at h = 1e-3, 2.85e-6 at 5e-4), so h = 2.5e-4
    gives < 1e-6 (measured 7.13e-7 rad; base 4.5e-9 m, 1.37e-7 rad), here with the
    structured iteration matrix (a block per link, eliminated from the hands and feet to the
    pelvis), which agrees with the dense one to the digits above at 0.05 s."""
    t1 = 1.0
    ts, q_ref = _g1_reference(t1)
    _, e_joint, e_origin, e_rotation = _g1_errors(_g1(), dl.GeneralizedAlpha(), t1, 2.5e-4, ts, q_ref)
    assert e_joint < 1e-6 and e_origin < 1e-7 and e_rotation < 1e-6, (e_joint, e_origin, e_rotation)


PD_LAW = JointPD(jnp.array([20.0, 50.0, 0.5]), jnp.array([2.0, 5.0, 0.05]), jnp.array([0.8, -0.05, 1.5]))
PD_Q0 = {"shoulder": 0.3, "slide": 0.02, "spin": 0.5}


def _pd_toy(tmp_path):
    """The toy robot (its continuous joint made revolute, which Pinocchio stores as an angle)
    under the PD law, from ``PD_Q0`` at rest."""
    text = TOY_URDF.replace('type="continuous">', 'type="revolute">').replace(
        '<axis xyz="0 0 1"/>\n  </joint>', '<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/>\n  </joint>')
    path = _write(tmp_path, "pd_toy.urdf", text)
    return path, _load(path, joint_positions=PD_Q0, joint_feedback=PD_LAW)


@needs_pinocchio
def test_joint_feedback_pd_matches_pinocchio(tmp_path):
    """A PD controller on every joint (revolute, prismatic) as ``joint_feedback``, with URDF
    damping, against Pinocchio's ABA + RK4 at h = 1e-4 s with the same law: generalized-alpha's
    joint trajectories converge to Pinocchio's at second order over 0.1 s (measured 5.0e-5 rad
    at h = 1e-3, 1.25e-5 at 5e-4) while the joints move by 0.05-0.9. The law is checked when
    loaded; ``with_joint_state`` moves its branch with the joints' initial state."""
    path, model = _pd_toy(tmp_path)
    pm = pin.buildModelFromUrdf(path)
    assert tuple(pm.names)[1:] == model.joint_names
    pd = pm.createData()
    kp, kd, target = (np.asarray(x) for x in (PD_LAW.kp, PD_LAW.kd, PD_LAW.target))

    def acc(t, q, v):
        return pin.aba(pm, pd, q, v, kp * (target - q) - kd * v - np.asarray(pm.damping) * v)

    reference = _rk4_positions(acc, np.array([PD_Q0[n] for n in model.joint_names]), np.zeros(3), 1e-4, 1000, 100)
    assert np.abs(reference[-1] - reference[0]).min() > 0.04
    ts = jnp.linspace(0.0, 0.1, 11)
    errors = []
    for t1, step in ((0.2, 1e-3), (0.1, 5e-4)):  # 200 steps each: one compiled program
        sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, t1, step, saveat=dl.SaveAt(ts=ts))
        errors.append(np.abs(np.asarray(dl.joint_coordinates(model, sol)) - reference).max())
    assert errors[1] < 1.5e-5 and 3.5 < errors[0] / errors[1] < 4.5, errors
    moved = dl.joint_space.with_joint_state(model, jnp.array([0.3, 0.0, 4.0]))
    np.testing.assert_array_equal(moved.forces[-1].space.initial, [0.3, 0.0, 4.0])
    for law, message in [
        (lambda t, q, qd: q[:2], r"joint_feedback must return shape \(3,\) \(one torque per joint\), got \(2,\)"),
        (lambda t, q: q, "joint_feedback fails at t = 0, q = qd = 0"),
        (np.ones(3), "joint_feedback must be a function"),
    ]:
        with pytest.raises(ValueError, match=message):
            _load(path, joint_feedback=law)


@pytest.mark.slow
def test_joint_feedback_gradient_matches_finite_differences(tmp_path):
    """The derivative of a joint angle after 50 steps with respect to the PD gains (leaves of
    the law) through generalized-alpha's implicit steps equals central differences (measured
    agreement 1e-7 relative; compiling the gradient takes about 30 s)."""
    _, model = _pd_toy(tmp_path)

    def angle(kp):
        m = eqx.tree_at(lambda m: m.forces[-1].law.kp, model, kp)
        return dl.joint_coordinates(m, dl.simulate(m, dl.GeneralizedAlpha(), 0.0, 0.05, 1e-3))[-1, 0]

    grad = dl.xla.jit(jax.grad(angle))(PD_LAW.kp)
    f, e = dl.xla.jit(angle), 1e-5
    fd = np.array([(f(PD_LAW.kp.at[i].add(e)) - f(PD_LAW.kp.at[i].add(-e))) / (2 * e) for i in range(3)])
    assert np.all(np.abs(grad) > 1e-5)
    np.testing.assert_allclose(grad, fd, rtol=1e-5)


@pytest.mark.skipif(PANDA is None, reason="the README's robot example needs `example-robot-data` (pip install -e '.[test]')")
def test_readme_robot_examples_run():
    """The README's Panda example and its batch of initial joint states run as written and give
    the shapes their comments say; the batch's first system equals a run from its own state."""
    import re

    text = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    robot = next(b for b in re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M) if "panda.urdf" in b)
    batch = re.search(r"^  ```python\n(.*?)^  ```$", text[text.index("**Gradients and batches.**") :], flags=re.S | re.M)
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)
        exec(compile(robot, "README.md[robots]", "exec"), ns)
    assert ns["q"].shape == (501, 7) and ns["qd"].shape == (501, 7)
    exec(compile("\n".join(line[2:] for line in batch.group(1).splitlines()), "README.md[robot batch]", "exec"), ns)
    assert ns["final"].shape == (8, 7)
    np.testing.assert_allclose(ns["final"][0], ns["run"](ns["qs"][0]), atol=1e-10)
