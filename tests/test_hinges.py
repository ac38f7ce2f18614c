"""Bodies with two or three hinges about one point, as MJCF writes shoulders and hips
(:mod:`difflie.hinges`), checked against MuJoCo (Todorov, Erez & Tassa, 2012) on the same file:
its forward kinematics, and its RK4 integration in joint coordinates at ``1e-4`` s as the
reference trajectory (contacts off, no limits)."""

from __future__ import annotations

import pathlib
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.io import ModelFileError, RobotModelWarning
from helpers import assert_initial_state_is_mujocos

mujoco = pytest.importorskip("mujoco")

# A pelvis hung from the world by a pair of hinges, a leg with a hip of three perpendicular
# hinges, a knee and an ankle pair of oblique axes, and an arm on three skew hinges; damping
# and springs on some of them.
HINGES_MJCF = (pathlib.Path(__file__).resolve().parent / "data" / "hinges.xml").read_text(encoding="utf-8")

Q0 = dict(waist_z=0.3, waist_y=-0.2, hip_x=0.4, hip_z=-0.3, hip_y=0.5, knee=-0.7, ankle_a=0.3, ankle_b=-0.4, sh_1=0.5, sh_2=-0.6, sh_3=0.7)
QD0 = dict(waist_z=0.2, hip_x=-0.3, hip_y=0.3, ankle_a=0.4, sh_2=0.5, sh_3=-0.2)
TAU = dict(waist_y=0.5, hip_z=0.2, knee=0.3, sh_1=-0.1, ankle_b=0.05)


@pytest.fixture(scope="module")
def path():
    return str(pathlib.Path(__file__).resolve().parent / "data" / "hinges.xml")


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)  # the geoms' contacts
        return dl.load_model(path, **kw)


def _mujoco(path, q, qd, tau=None):
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    for name, value in q.items():
        d.qpos[m.jnt_qposadr[m.joint(name).id]] = value
    for name, value in qd.items():
        d.qvel[m.jnt_dofadr[m.joint(name).id]] = value
    for name, value in (tau or {}).items():
        d.qfrc_applied[m.jnt_dofadr[m.joint(name).id]] = value
    mujoco.mj_forward(m, d)
    return m, d


def _vector(model, values):
    return jnp.array([values.get(n, 0.0) for n in model.joint_names])


def test_hinge_groups_place_bodies_as_mujoco_and_read_back():
    """The loaded state is MuJoCo's forward kinematics (COM positions, rotations, COM velocities,
    angular velocities) at the same joint positions and rates, and ``joint_coordinates`` /
    ``joint_velocities`` read them back, also for a middle hinge beyond 90 degrees (the branch of
    the given positions); ``with_joint_state`` places the bodies as the loader does, and moves
    the joint forces (torques, damping, a PD law, rotor inertias) to that branch: the same
    motion follows."""
    path = str(pathlib.Path(__file__).resolve().parent / "data" / "armature.xml")
    q = dict(Q0, hip_z=2.0)  # the hip's middle angle on the far branch
    law = lambda t, q, qd: -2.0 * (q - 0.1) - 0.5 * qd  # noqa: E731
    model = _load(path, joint_positions=q, joint_velocities=QD0, joint_torques=TAU, joint_feedback=law)
    assert model.joint_names == tuple(Q0)
    m, d = _mujoco(path, q, QD0)
    assert_initial_state_is_mujocos(model, m, d)
    state = dl.BodyState(model.r0, model.R0, model.v0, model.omega0)
    np.testing.assert_allclose(dl.joint_coordinates(model, state), _vector(model, q), atol=1e-12)
    np.testing.assert_allclose(dl.joint_velocities(model, state), _vector(model, QD0), atol=1e-12)
    loaded = _load(path, joint_positions=Q0, joint_torques=TAU, joint_feedback=law)
    again = dl.joint_space.with_joint_state(loaded, _vector(model, q), _vector(model, QD0))
    for a, b in [(again.r0, model.r0), (again.R0, model.R0), (again.v0, model.v0), (again.omega0, model.omega0)]:
        np.testing.assert_allclose(a, b, atol=1e-13)
    ends = [dl.simulate(m, dl.GeneralizedAlpha(), 0.0, 0.02, 1e-3).position[-1] for m in (model, again)]
    np.testing.assert_allclose(ends[0], ends[1], atol=1e-12)


def test_joint_space_maps_of_hinge_groups_are_inverse(path):
    """``q -> bodies -> q`` and ``qd -> bodies -> qd`` have the identity as derivative, at the
    reference (all angles zero) and away from it."""
    model = _load(path)
    fk = dl.joint_space.forward_kinematics

    @jax.jit
    def jacobians(q, qd):
        dq = jax.jacfwd(lambda x: dl.joint_coordinates(model, fk(model, x, qd)))(q)
        dqd = jax.jacfwd(lambda x: dl.joint_velocities(model, fk(model, q, x)))(qd)
        return dq, dqd

    for q in (jnp.zeros(11), _vector(model, Q0)):
        for jac in jacobians(q, _vector(model, QD0)):
            np.testing.assert_allclose(jac, np.eye(11), atol=1e-12)


@pytest.fixture(scope="module")
def rotor_tree():
    """The tree with rotor inertias, its state, torques and MuJoCo's joint angles at ``SAVES``
    (RK4 at 1e-4 s)."""
    path = str(pathlib.Path(__file__).resolve().parent / "data" / "armature.xml")
    model = _load(path, joint_positions=Q0, joint_velocities=QD0, joint_torques=TAU)
    m, d = _mujoco(path, Q0, QD0, TAU)
    adr = [m.jnt_qposadr[m.joint(n).id] for n in model.joint_names]
    ref = []
    for ts in SAVES:
        while d.time < ts - 1e-9:
            mujoco.mj_step(m, d)
        ref.append(d.qpos[adr].copy())
    return model, m, np.array(ref)


SAVES = np.linspace(0.03, 0.3, 10)


def _rotor_run(model, h):
    return dl.simulate(model, dl.GeneralizedAlpha(), 0.0, SAVES[-1], h, saveat=dl.SaveAt(ts=jnp.asarray(SAVES)))


def test_hinge_groups_follow_mujoco(rotor_tree):
    """The same tree with rotor inertias on seven of its joints (``armature``, read as
    ``difflie.forces.JointInertia``), passive, damped, on joint springs and driven by constant
    joint torques for 0.3 s: generalized-alpha's joint angles at h = 5e-4 s follow MuJoCo's RK4
    trajectory to 9.8e-6 rad (2.3 rad with the rotor inertias left out), so the hinges'
    kinematics, their torques, damping, springs (``stiffness`` about ``springref``) and rotor
    inertias are MuJoCo's. The kinetic energy counts the rotors' ``I q_dot^2 / 2``."""
    model, m, ref = rotor_tree
    (rotors,) = [f for f in model.forces if f.accelerated]
    np.testing.assert_array_equal(rotors.inertia, [m.dof_armature[m.jnt_dofadr[m.joint(n).id]] for n in model.joint_names])
    sol = _rotor_run(model, 5e-4)
    error = float(np.abs(np.asarray(dl.joint_coordinates(model, sol)) - ref).max())
    assert error < 2e-5, error
    qd = np.asarray(dl.joint_velocities(model, sol))
    b = sol.states
    bodies = 0.5 * np.sum(np.asarray(model.bodies.mass) * np.sum(np.asarray(b.velocity) ** 2, -1), -1) + 0.5 * np.sum(
        np.einsum("sbi,bij,sbj->sb", np.asarray(b.angular_velocity), np.asarray(model.bodies.inertia), np.asarray(b.angular_velocity)), -1)  # fmt: skip
    np.testing.assert_allclose(dl.diagnostics.kinetic_energy(model, b), bodies + 0.5 * qd**2 @ np.asarray(rotors.inertia), rtol=1e-12)


@pytest.mark.slow
def test_hinge_groups_converge_to_mujoco_at_second_order(rotor_tree):
    """Halving the step divides the error by 4 (3.9e-5 and 9.8e-6 rad): a wrong force, frame or
    inertia gives no ratio of 4."""
    model, _, ref = rotor_tree
    errors = [float(np.abs(np.asarray(dl.joint_coordinates(model, _rotor_run(model, h))) - ref).max()) for h in (1e-3, 5e-4)]
    assert 3.5 < errors[0] / errors[1] < 4.5, errors


def test_hinge_groups_that_difflie_does_not_read(path, tmp_path):
    """Hinges at different points, a slide among hinges, four hinges, dependent axes and a lock of
    some hinges of a body are refused, naming the body and its joints."""
    cases = {
        "points": (HINGES_MJCF.replace('<joint name="waist_y" axis="0 1 0" pos="0 0 0.05"', '<joint name="waist_y" axis="0 1 0" pos="0 0 0.1"'), "at different points"),
        "slide": (HINGES_MJCF.replace('<joint name="hip_z" axis="0 0 1"/>', '<joint name="hip_z" type="slide" axis="0 0 1"/>'), "not \\['hinge', 'slide', 'hinge'\\]"),
        "four": (HINGES_MJCF.replace('<joint name="hip_z" axis="0 0 1"/>', '<joint name="hip_z" axis="0 0 1"/><joint name="hip_w" axis="1 1 0"/>'), "two or three hinges"),
        "parallel": (HINGES_MJCF.replace('<joint name="waist_y" axis="0 1 0"', '<joint name="waist_y" axis="0 0 2"'), "dependent axes"),
    }  # fmt: skip
    for name, (text, message) in cases.items():
        p = tmp_path / f"{name}.xml"
        p.write_text(text)
        with warnings.catch_warnings(), pytest.raises(ModelFileError, match=f"body '(pelvis|thigh)' has the joints .*{message}"):
            warnings.simplefilter("ignore", UserWarning)  # MuJoCo's own, on the dependent axes
            _load(str(p))
    with pytest.raises(ValueError, match=r"the hinges \['hip_x', 'hip_z', 'hip_y'\] of body 'thigh' turn about one point; lock all of them or none"):
        _load(path, locked_joints=["hip_z"])
    welded = _load(path, joint_positions=Q0, locked_joints=["hip_x", "hip_z", "hip_y"])
    assert "hip_z" not in welded.joint_names and welded.num_bodies == 4  # the thigh moves with the pelvis
    full = _load(path, joint_positions=Q0)
    for link in ("thigh", "foot"):
        for a, b in zip(*(dl.link_pose(m, dl.BodyState(m.r0, m.R0, m.v0, m.omega0), link) for m in (welded, full))):
            np.testing.assert_allclose(a, b, atol=1e-14)


@pytest.mark.slow
def test_gradient_with_respect_to_rotor_inertias():
    """The rotor inertias are leaves of the model: the reverse-mode gradient of a joint angle
    after 20 steps with respect to them (by the implicit-function theorem through every step)
    matches central differences."""
    path = str(pathlib.Path(__file__).resolve().parent / "data" / "armature.xml")
    model = _load(path, joint_positions=Q0, joint_velocities=QD0, joint_torques=TAU)
    k = [i for i, f in enumerate(model.forces) if f.accelerated][0]
    knee = model.joint_names.index("knee")

    @jax.jit
    def angle(inertia):
        forces = model.forces[:k] + (eqx.tree_at(lambda f: f.inertia, model.forces[k], inertia),) + model.forces[k + 1 :]
        m = eqx.tree_at(lambda m: m.forces, model, forces)
        sol = dl.simulate(m, dl.GeneralizedAlpha(), 0.0, 0.02, 1e-3, saveat=dl.SaveAt(t1=True))
        return dl.joint_coordinates(m, sol)[-1, knee]

    I0 = model.forces[k].inertia
    g = np.asarray(jax.grad(angle)(I0))
    eps = 1e-6
    fd = np.array([(angle(I0.at[i].add(eps)) - angle(I0.at[i].add(-eps))) / (2 * eps) for i in range(I0.shape[0])])
    assert np.abs(fd).max() > 1e-4  # the knee's angle feels the rotors
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-9)



def test_with_bodies_moves_the_rotor_inertias_joint_points():
    """``with_bodies`` (identification's parameter map) keeps the joints' points where they are
    when a COM moves: those of the rotor inertias as those of the joint torques."""
    path = str(pathlib.Path(__file__).resolve().parent / "data" / "armature.xml")
    model = _load(path, joint_positions=Q0, joint_torques=TAU)
    com = model.bodies.com.at[2].add(jnp.array([0.01, -0.02, 0.03]))
    moved = dl.joint_space.with_bodies(model, dl.RigidBody(model.bodies.mass, model.bodies.inertia, com))
    rotors = [f for f in moved.forces if f.accelerated][0].joints
    torques = [f for f in moved.forces if isinstance(f, dl.forces.JointForce)][0]
    np.testing.assert_array_equal(rotors.point, torques.point)
    j = [k for k, c in enumerate(torques.child) if c == 2][0]  # a joint of body 2
    np.testing.assert_allclose(rotors.point[j] - [f for f in model.forces if f.accelerated][0].joints.point[j],
                               [-0.01, 0.02, -0.03], atol=1e-15)  # fmt: skip
