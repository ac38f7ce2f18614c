"""MJCF ball joints (``type="ball"``): spherical joints with MuJoCo's coordinates (a quaternion
and the relative angular velocity in the child's axes), their damping, rotor inertia and spring, checked
against MuJoCo (Todorov, Erez & Tassa, 2012) on the same file: its forward kinematics, and its
RK4 integration at ``1e-4`` s as the reference trajectory (contacts off)."""

from __future__ import annotations

import pathlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.cli.output import joint_arrays
from difflie.io import ModelFileError, RobotModelWarning
from helpers import assert_initial_state_is_mujocos

mujoco = pytest.importorskip("mujoco")

PATH = str(pathlib.Path(__file__).resolve().parent / "data" / "balls.xml")


def _quat(axis, angle):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.r_[np.cos(angle / 2), np.sin(angle / 2) * a]


# A hinge to the world, a ball (damped, sprung, with a rotor inertia), a hinge after it (rotor
# inertia) and a damped ball at the end: balls after hinges and hinges after balls.
Q0 = dict(root=0.4, shoulder=_quat([1, 2, 0.5], 0.9), elbow=-0.6, wrist=_quat([0.3, -1, 1], 2.8))
QD0 = dict(root=0.3, shoulder=np.array([0.5, -0.4, 0.8]), elbow=0.7, wrist=np.array([-1.0, 0.5, 0.3]))
TAU = dict(elbow=0.2, wrist=np.array([0.05, -0.02, 0.03]))  # a ball's torque in its child's axes


def _load(path=PATH, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)  # the geoms' contacts
        return dl.load_model(path, **kw)


def _mujoco(q, qd, tau=None):
    m = mujoco.MjModel.from_xml_path(PATH)
    d = mujoco.MjData(m)
    for name, value in (tau or {}).items():
        adr = m.jnt_dofadr[m.joint(name).id]
        d.qfrc_applied[adr : adr + np.size(value)] = value
    for name, value in q.items():
        adr = m.jnt_qposadr[m.joint(name).id]
        d.qpos[adr : adr + np.size(value)] = value
    for name, value in qd.items():
        adr = m.jnt_dofadr[m.joint(name).id]
        d.qvel[adr : adr + np.size(value)] = value
    mujoco.mj_forward(m, d)
    return m, d


@pytest.fixture(scope="module")
def model():
    return _load(joint_positions=Q0, joint_velocities=QD0, joint_torques=TAU)


def _balls(values, model):
    return jnp.asarray(np.stack([values[n] for n in model.ball_joint_names]))


def test_ball_joints_place_bodies_as_mujoco_and_read_back(model):
    """The loaded state is MuJoCo's forward kinematics at the same joint positions and rates
    (a wrist turned by 2.8 rad), the ball joints' readers give back the quaternions and relative
    angular velocities (MuJoCo's ``qpos``/``qvel`` of a ball) and the hinges their angles; the
    traced ``forward_kinematics`` and ``with_joint_state`` place the bodies as the loader does."""
    assert model.joint_names == ("root", "elbow") and model.ball_joint_names == ("shoulder", "wrist")
    assert model.constraints.num_constraints == 5 + 3 + 5 + 3
    m, d = _mujoco(Q0, QD0)
    assert_initial_state_is_mujocos(model, m, d)
    state = dl.BodyState(model.r0, model.R0, model.v0, model.omega0)
    np.testing.assert_allclose(dl.ball_joint_quaternions(model, state), _balls(Q0, model), atol=1e-14)
    np.testing.assert_allclose(dl.ball_joint_velocities(model, state), _balls(QD0, model), atol=1e-14)
    np.testing.assert_allclose(dl.joint_coordinates(model, state), [0.4, -0.6], atol=1e-14)
    np.testing.assert_allclose(dl.joint_velocities(model, state), [0.3, 0.7], atol=1e-14)
    at_rest = _load(joint_positions={"root": 0.1})
    again = dl.joint_space.with_joint_state(at_rest, jnp.array([0.4, -0.6]), jnp.array([0.3, 0.7]), _balls(Q0, model), _balls(QD0, model))
    for a, b in [(again.r0, model.r0), (again.R0, model.R0), (again.v0, model.v0), (again.omega0, model.omega0)]:
        np.testing.assert_allclose(a, b, atol=1e-14)
    np.testing.assert_allclose(again.joints.balls.initial, _balls(Q0, model), atol=1e-15)
    saved = joint_arrays(model, jax.tree.map(lambda x: jnp.stack([x, x]), state))  # what the command line's --out writes
    assert saved["ball_joint_names"].tolist() == ["shoulder", "wrist"] and saved["q"].shape == (2, 2)
    np.testing.assert_allclose(saved["ball_q"][1], _balls(Q0, model), atol=1e-14)
    np.testing.assert_allclose(saved["ball_qd"][1], _balls(QD0, model), atol=1e-14)


def test_ball_joint_rates_map_is_inverse(model):
    """``qd -> bodies -> qd`` through ``forward_kinematics`` and ``ball_joint_velocities`` has
    the identity as derivative, and its value is the identity map (a linear map of the rates)."""
    q, qd = jnp.array([0.4, -0.6]), jnp.array([0.3, 0.7])
    fk = dl.joint_space.forward_kinematics
    rates = jax.jit(lambda w: dl.ball_joint_velocities(model, fk(model, q, qd, _balls(Q0, model), w.reshape(2, 3))).reshape(-1))
    w = _balls(QD0, model).reshape(-1)
    np.testing.assert_allclose(rates(w), w, atol=1e-14)
    np.testing.assert_allclose(jax.jacfwd(rates)(w), np.eye(6), atol=1e-14)


@pytest.fixture(scope="module")
def reference(model):
    """MuJoCo's RK4 at 1e-4 s: COM positions and ball quaternions at ``SAVES``."""
    m, d = _mujoco(Q0, QD0, TAU)
    ids = [m.body(n).id for n in model.bodies.names]
    adr = [m.jnt_qposadr[m.joint(n).id] for n in model.ball_joint_names]
    ref, ref_q = [], []
    for ts in SAVES:
        while d.time < ts - 1e-9:
            mujoco.mj_step(m, d)
        ref.append(d.xipos[ids].copy())
        ref_q.append(np.stack([d.qpos[a : a + 4] for a in adr]))
    return np.array(ref), np.array(ref_q)


SAVES = np.linspace(0.03, 0.3, 10)


def _error(model, reference, h):
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, SAVES[-1], h, saveat=dl.SaveAt(ts=jnp.asarray(SAVES)))
    return float(np.abs(np.asarray(sol.position) - reference[0]).max()), sol


def test_ball_joints_follow_mujoco(model, reference):
    """Under gravity and constant joint torques (one on a ball, in its child's axes, as MuJoCo's
    generalized forces of its three degrees of freedom) for 0.3 s, with damping, rotor inertias
    and a spring on the ball joints: generalized-alpha at 5e-4 s follows MuJoCo's RK4 trajectory
    to 3.1e-7 m (5e-2 m with the balls' damping, rotor inertias and spring left out, 5e-2 m
    without the spring alone, 9e-3 m without the ball's torque), and the ball quaternions
    follow MuJoCo's
    ``qpos`` (up to the sign MuJoCo does not fix; continuous along the saves)."""
    error, sol = _error(model, reference, 5e-4)
    assert error < 5e-7, error
    q = np.asarray(dl.ball_joint_quaternions(model, sol))
    ref_q = reference[1] * np.sign(np.sum(reference[1] * q, -1, keepdims=True))
    np.testing.assert_allclose(q, ref_q, atol=1e-6)
    assert np.all(np.sum(q[1:] * q[:-1], -1) > 0.9)


@pytest.mark.slow
def test_ball_joints_converge_to_mujoco_at_second_order(model, reference):
    """Halving the step divides the error by 4 (1.2e-6 and 3.1e-7 m): a wrong frame, damping,
    rotor inertia, spring or torque gives no ratio of 4, but an error that stops falling."""
    errors = [_error(model, reference, h)[0] for h in (1e-3, 5e-4)]
    assert 3.5 < errors[0] / errors[1] < 4.5, errors


def test_ball_joint_input_errors(tmp_path):
    """A quaternion that is not one, a rate or a torque of the wrong shape and a ball among
    other joints of a body are refused, naming the joint; a ball's torque may be a function of
    ``t``; a locked ball joint welds its child at the given quaternion."""
    with pytest.raises(ValueError, match=r"joint_positions\['shoulder'\] \(qw, qx, qy, qz\) = \[1.0, 1.0, 0.0, 0.0\] has norm 1.41421, not 1"):
        _load(joint_positions={"shoulder": [1.0, 1.0, 0.0, 0.0]})
    with pytest.raises(ValueError, match=r"joint_velocities\['wrist'\] of a ball joint must be an angular velocity \(3,\)"):
        _load(joint_velocities={"wrist": 0.5})
    with pytest.raises(ValueError, match=r"joint_torques\['wrist'\] must be a 3-vector \(child axes\) or a function of t returning one, got 0.5"):
        _load(joint_torques={"wrist": 0.5})
    with pytest.raises(ValueError, match=r"joint_torques\['wrist'\] must return shape \(3,\) \(a ball joint's torque in its child's axes\), got \(\)"):
        _load(joint_torques={"wrist": lambda t: t})
    # A function of t gives the torque of its value: the same wrenches as the constant.
    of_t = _load(joint_positions=Q0, joint_torques={"wrist": lambda t: jnp.array([0.05, -0.02, 0.03]) * (1.0 + t)})
    constant = _load(joint_positions=Q0, joint_torques={"wrist": [0.1, -0.04, 0.06]})
    state = (of_t.r0, of_t.R0, of_t.v0, of_t.omega0)
    np.testing.assert_allclose(of_t.forces[-1](1.0, *state)[1], constant.forces[-1](1.0, *state)[1], atol=1e-15)
    assert np.abs(constant.forces[-1](1.0, *state)[1]).max() > 0.05
    mixed = tmp_path / "mixed.xml"
    mixed.write_text(pathlib.Path(PATH).read_text().replace('<joint name="wrist" type="ball" damping="0.05"/>',
                                                             '<joint name="twist" axis="1 0 0" pos="0.02 0 0" armature="0.01"/><joint name="wrist" type="ball"/>'))  # fmt: skip
    with pytest.raises(ModelFileError, match=r"body 'hand' has the joints \['twist', 'wrist'\].*not \['hinge', 'ball'\]"):
        _load(str(mixed))
    welded = _load(joint_positions=Q0, locked_joints=["wrist"])
    assert welded.ball_joint_names == ("shoulder",) and welded.num_bodies == 3
    full = _load(joint_positions=Q0)
    for a, b in zip(*(dl.link_pose(m, dl.BodyState(m.r0, m.R0, m.v0, m.omega0), "hand") for m in (welded, full))):
        np.testing.assert_allclose(a, b, atol=1e-14)
    hinges_only = _load(joint_positions=Q0, locked_joints=["wrist", "shoulder"])
    with pytest.raises(ValueError, match="the model has none"):
        dl.ball_joint_quaternions(hinges_only, dl.BodyState(hinges_only.r0, hinges_only.R0, hinges_only.v0, hinges_only.omega0))
