"""Joint limits, friction and fixed tendons of robot files. Limits as one-sided spring-dampers
(``difflie.joint_laws.JointLimits``): the law itself, the loader's stiffness from MuJoCo's
``solreflimit``, a rotor that hits its limit against a high-accuracy scipy integration of the
same law, and a pendulum against MuJoCo's own soft limit. Friction as a saturating damper
(``JointFriction``): a block on an incline that creeps or slides as under MuJoCo's soft
friction. Fixed tendons' springs and dampers (``Tendons``): against MuJoCo's RK4; their limits
as the joints'. Spatial tendons through sites and pulleys (``SpatialTendons``): against MuJoCo's
RK4."""

import pathlib
import re
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import difflie as dl
from difflie.io import RobotModelWarning
from difflie.joint_laws import BallFriction, JointFriction, JointLimits, Tendons
from helpers import mujoco_rollout, undeclared_couplings

# A rotor about z (inertia 0.5 about the axis) spinning at 2 rad/s into its upper limit 0.5 rad;
# no gravity. solreflimit (0.02 s, damping ratio 0.5): stiffness 0.5 / 0.01^2, damping 2 * 0.5 / 0.02.
ROTOR = """<mujoco><compiler angle="radian"/><option gravity="0 0 0"/><worldbody><body name="rotor">
<joint name="hinge" type="hinge" axis="0 0 1" limited="true" range="-1 0.5" solreflimit="0.02 0.5"/>
<inertial pos="0 0 0" mass="1" diaginertia="0.3 0.4 0.5"/></body></worldbody></mujoco>"""
I_ROTOR, K_ROTOR, B_ROTOR, WIDTH, UPPER, OMEGA0, T_ROTOR = 0.5, 5000.0, 50.0, 1e-3, 0.5, 2.0, 0.4


@pytest.fixture(scope="module")
def rotor_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("limits") / "rotor.xml"
    path.write_text(ROTOR)
    return str(path)


def law():
    """A hinge, a slide, and a hinge without limits."""
    arrays = dict(lower=[-1.0, -0.2, 0.0], upper=[0.5, 0.3, 0.0], stiffness=[100.0, 200.0, 300.0],
                  damping=[10.0, 20.0, 30.0], width=[0.01, 0.01, 0.01])  # fmt: skip
    return JointLimits(*(jnp.asarray(v, jnp.float64) for v in arrays.values()), revolute=(True, False, True),
                       has_lower=(True, True, False), has_upper=(True, True, False))  # fmt: skip


def test_law_pushes_back_only_beyond_a_limit():
    lim = law()
    zero = jnp.zeros(3)
    # within the range: nothing, whatever the rate
    np.testing.assert_array_equal(lim(0.0, jnp.array([0.0, 0.1, 5.0]), jnp.array([3.0, -3.0, 3.0])), zero)
    # beyond: spring, damping ramped over the width; the last joint has no limits
    u = lim(0.0, jnp.array([0.52, -0.205, 100.0]), jnp.array([1.0, -1.0, 1.0]))
    np.testing.assert_allclose(u, [-100 * 0.02 - 10 * 1.0, -200 * -0.005 - 20 * 0.5 * -1.0, 0.0], rtol=1e-12)
    # leaving fast: the damping would pull the joint back; the limit only stops pushing
    np.testing.assert_array_equal(lim(0.0, jnp.array([0.52, -0.205, 0.0]), jnp.array([-10.0, 10.0, 0.0])), zero)
    # a revolute angle one turn away is the same angle; a slide's coordinate is not an angle
    q, qd = jnp.array([0.52, -0.205, 0.0]), jnp.array([0.5, 0.0, 0.0])
    shifted = lim(0.0, q + jnp.array([2 * jnp.pi, 0.0, 0.0]), qd)
    np.testing.assert_allclose(shifted, lim(0.0, q, qd), atol=1e-12)
    assert float(lim(0.0, jnp.array([0.0, -0.205 + 2 * jnp.pi, 0.0]), qd)[1]) < 0  # far above the slide's upper limit
    # derivatives finite inside, outside, and for the joint without limits
    for q in (jnp.array([0.0, 0.0, 0.0]), jnp.array([0.6, -0.3, 1e3])):
        g = jax.jacfwd(lambda q, qd: lim(0.0, q, qd), argnums=(0, 1))(q, jnp.ones(3))
        assert all(bool(jnp.all(jnp.isfinite(x))) for x in g)


def test_loader_reads_the_limits_and_mujocos_softness(rotor_file):
    with pytest.warns(RobotModelWarning, match=r"joint limits \(1 joint; joint_limits=True enforces them\)"):
        dl.load_model(rotor_file)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left unmodelled
        model = dl.load_model(rotor_file, joint_limits=True)
    (element,) = model.forces
    lim = element.law
    assert isinstance(lim, JointLimits)
    np.testing.assert_allclose([lim.lower[0], lim.upper[0]], [-1.0, UPPER])
    np.testing.assert_allclose([lim.stiffness[0], lim.damping[0], lim.width[0]], [K_ROTOR, B_ROTOR, WIDTH], rtol=1e-10)
    with pytest.raises(ValueError, match="joint_limits= only for robot files"):
        dl.load_model("double-pendulum", joint_limits=True)


def rotor_reference():
    """The rotor's angle and rate at ``T_ROTOR`` by DOP853 at 1e-13, restarted at every kink
    of the law (entering the limit, the end of the damping's ramp, the release)."""

    def torque(q, qd):
        p = q - UPPER
        return min(-K_ROTOR * p - B_ROTOR * min(p / WIDTH, 1.0) * qd, 0.0) if p > 0 else 0.0

    def rhs(t, y):
        return [y[1], torque(*y) / I_ROTOR]

    def event(fn):
        fn.terminal = True
        return fn

    events = [event(lambda t, y: y[0] - UPPER), event(lambda t, y: y[0] - UPPER - WIDTH),
              event(lambda t, y: -K_ROTOR * (y[0] - UPPER) - B_ROTOR * min((y[0] - UPPER) / WIDTH, 1.0) * y[1])]  # fmt: skip
    t, y = 0.0, np.array([0.0, OMEGA0])
    while t < T_ROTOR:
        sol = solve_ivp(rhs, (t, T_ROTOR), y, method="DOP853", rtol=1e-13, atol=1e-14, events=events)
        t, y = sol.t[-1], sol.y[:, -1]
        if sol.status == 1:  # stopped at a kink: step past it
            t_next = min(t + 1e-12, T_ROTOR)
            y, t = y + np.array(rhs(t, y)) * (t_next - t), t_next
    return y


def test_rotor_rebounds_from_its_limit_as_the_law_says(rotor_file):
    """Generalized-alpha at h = 1e-4 s: 5.5e-6 rad and 4.8e-5 rad/s from the reference after the
    rebound (the rotor leaves at -0.61 rad/s); at 2e-4 s, 7.5e-5 and 6.5e-4 (no fixed order: the
    law's kinks fall anywhere in a step)."""
    model = dl.load_model(rotor_file, joint_limits=True, joint_velocities={"hinge": OMEGA0})
    q_ref, qd_ref = rotor_reference()
    assert -0.62 < qd_ref < -0.6  # it came back, slower
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, T_ROTOR, 1e-4, saveat=dl.SaveAt(t1=True))
    q, qd = float(dl.joint_coordinates(model, sol)[-1, 0]), float(dl.joint_velocities(model, sol)[-1, 0])
    assert abs(q - q_ref) < 1.1e-5 and abs(qd - qd_ref) < 1e-4, (q - q_ref, qd - qd_ref)


def pendulum_xml(tc, h, tendon=False):
    """A pendulum (1 kg at 0.5 m, inertia 0.27 about its hinge) released from the horizontal
    onto its upper limit 0.6 rad; MuJoCo's impedance near 1 (solimplimit), so that its soft
    limit holds the reference acceleration ``-b q_dot - k p`` while it pushes. With ``tendon``,
    the limit is that of a fixed tendon whose length is the hinge's angle."""
    soft = f'limited="true" range="-1 0.6" solreflimit="{tc} 1" solimplimit="0.9999 0.9999 0.001 0.5 2"'
    joint, tendon = ("", f'<tendon><fixed name="t" {soft}><joint joint="hinge" coef="1"/></fixed></tendon>') if tendon else (soft, "")
    return f"""<mujoco><compiler angle="radian"/><option timestep="{h}" integrator="RK4" gravity="0 0 -9.81"/>
<worldbody><body name="link"><joint name="hinge" type="hinge" axis="0 1 0" {joint}/>
<inertial pos="0.5 0 0" mass="1" diaginertia="0.01 0.02 0.02"/></body></worldbody>{tendon}</mujoco>"""


def test_pendulum_on_its_limit_approaches_mujocos_as_the_limit_stiffens(tmp_path):
    """MuJoCo's soft limit sets the acceleration while it pushes, so gravity does not press the
    pendulum into it; the spring-damper lets gravity compress it by ``m g L cos(0.6) /
    stiffness``, which is O(tc^2). Over 0.6 s (fall, rebound, rest) the largest gap between the
    two angles is 6.0e-3 rad at tc = 0.02 s and 2.0e-3 at 0.01 s (ratio 3.05), and at the end
    difflie's angle lies that compression beyond MuJoCo's (0.996 and 0.999 of it). The same
    limit on a fixed tendon that measures the hinge's angle gives the same motion in both
    codes."""
    mujoco = pytest.importorskip("mujoco")
    h, t1 = 2e-4, 0.6
    saves = np.arange(0, int(round(t1 / h)) + 1, 50)
    gaps, ends, runs = [], [], []
    for tc, tendon in ((0.02, False), (0.01, False), (0.01, True)):
        path = tmp_path / f"pendulum_{tc}_{tendon}.xml"
        path.write_text(pendulum_xml(tc, h, tendon))
        q_mj = mujoco_rollout(mujoco.MjModel.from_xml_path(str(path)), saves[-1], 50)[:, 0]
        model = dl.load_model(path, joint_limits=True)
        sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, t1, h, saveat=dl.SaveAt(ts=jnp.asarray(saves * h)))
        q = np.asarray(dl.joint_coordinates(model, sol))[:, 0]
        gaps.append(np.max(np.abs(q - q_mj)))
        sag = 1.0 * 9.81 * 0.5 * np.cos(0.6) / (0.27 / tc**2)
        ends.append((q[-1] - q_mj[-1]) / sag)
        runs.append((q, q_mj))
    assert gaps[0] < 7e-3 and gaps[0] / gaps[1] > 2.5, gaps
    np.testing.assert_allclose(ends, 1.0, atol=0.01)
    for a, b in zip(runs[1], runs[2]):  # the joint's limit and the tendon's, difflie then MuJoCo
        np.testing.assert_allclose(a, b, atol=1e-8)


@pytest.mark.slow
def test_rotor_limit_orders_and_gradient(rotor_file):
    """Backward Euler converges at first order through the limit (errors in q 2.4e-3 -> 1.25e-3
    rad from h = 2e-4 to 1e-4 s, ratio 1.94); generalized-alpha's error falls faster (7.5e-5
    -> 5.5e-6). The derivative of the final angle with respect to the limit's stiffness, through
    the implicit steps, matches central differences."""
    model = dl.load_model(rotor_file, joint_limits=True, joint_velocities={"hinge": OMEGA0})
    q_ref, _ = rotor_reference()

    def final_angle(m, solver, h):
        sol = dl.simulate(m, solver, 0.0, T_ROTOR, h, saveat=dl.SaveAt(t1=True))
        return dl.joint_coordinates(m, sol)[-1, 0]

    for solver, low, high in ((dl.BackwardEuler(), 1.8, 2.2), (dl.GeneralizedAlpha(), 3.0, np.inf)):
        e = [abs(float(final_angle(model, solver, h)) - q_ref) for h in (2e-4, 1e-4)]
        assert low < e[0] / e[1] < high, (type(solver).__name__, e)

    def angle_at(k):
        law = model.forces[0].law
        m = eqx.tree_at(lambda m: m.forces[0].law.stiffness, model, law.stiffness * k)
        return final_angle(m, dl.GeneralizedAlpha(), 2e-4)

    g = float(jax.grad(angle_at)(1.0))
    eps = 1e-5
    fd = (float(angle_at(1.0 + eps)) - float(angle_at(1.0 - eps))) / (2 * eps)
    assert abs(g) > 1e-3 and abs(g - fd) < 1e-5 * abs(fd) + 1e-9, (g, fd)


def block_xml(friction, h):
    """A 1 kg block on a slide inclined at 45 degrees (gravity's pull along it 9.81 / sqrt 2 N),
    with dry friction."""
    return f"""<mujoco><option timestep="{h}" integrator="RK4" gravity="0 0 -9.81"/><worldbody><body name="block">
<joint name="slide" type="slide" axis="1 0 -1" frictionloss="{friction}"/>
<inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/></body></worldbody></mujoco>"""


def test_friction_law_saturates():
    lim = JointFriction(jnp.array([2.0, 0.0]), jnp.array([100.0, 100.0]))
    np.testing.assert_allclose(lim(0.0, jnp.zeros(2), jnp.array([0.01, 1.0])), [-1.0, 0.0])
    np.testing.assert_allclose(lim(0.0, jnp.zeros(2), jnp.array([-0.5, -1.0])), [2.0, 0.0])


def test_block_creeps_and_slides_as_under_mujocos_friction(tmp_path):
    """Loaded below its friction (10 N) the block creeps as MuJoCo's does, at
    (1 - d) a0 / (d b) = 7.3221e-3 m/s (to 1e-9 relative), 7e-5 m ahead of it (MuJoCo's
    acceleration reaches the creep over 10 ms, the damper over 1 ms); loaded above (3 N) it
    slides at 9.81 / sqrt 2 - 3 m/s^2 in both, 4e-4 m ahead (the damper first saturates). The
    same friction on a fixed tendon that measures the slide gives the same motion."""
    mujoco = pytest.importorskip("mujoco")
    h, saves = 2e-4, np.arange(0, 2501, 250)
    a0 = 9.81 / np.sqrt(2)
    for friction, gap in ((10.0, 1e-4), (3.0, 6e-4)):
        path = tmp_path / f"block_{friction}.xml"
        path.write_text(block_xml(friction, h))
        x_mj = mujoco_rollout(mujoco.MjModel.from_xml_path(str(path)), saves[-1], 250)[:, 0]
        with pytest.warns(RobotModelWarning, match=r"joint friction \(1 joint; joint_friction=True enforces it\)"):
            dl.load_model(path)
        model = dl.load_model(path, joint_friction=True)
        np.testing.assert_allclose(model.forces[0].law.damping, 2 / (0.95 * 0.02) * 0.9 / 0.1, rtol=1e-12)
        sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, saves[-1] * h, h, saveat=dl.SaveAt(ts=jnp.asarray(saves * h)))
        x = np.asarray(dl.joint_coordinates(model, sol))[:, 0]
        assert np.max(np.abs(x - x_mj)) < gap, (friction, np.max(np.abs(x - x_mj)))
        late = slice(5, None)  # t = 0.25 ... 0.5 s
        if friction > a0:
            creep = (1 - 0.9) * a0 / (0.9 * 2 / (0.95 * 0.02))
            for xs in (x, x_mj):
                np.testing.assert_allclose(np.diff(xs[late]) / (250 * h), creep, rtol=1e-9)
        else:
            for xs in (x, x_mj):
                np.testing.assert_allclose(np.diff(xs[late], 2) / (250 * h) ** 2, a0 - friction, rtol=1e-9)
    tendon = tmp_path / "block_tendon.xml"
    tendon.write_text(block_xml(0.0, h).replace("</mujoco>", f'<tendon><fixed frictionloss="{friction}"><joint joint="slide" coef="1"/></fixed></tendon></mujoco>'))
    model = dl.load_model(tendon, joint_friction=True)
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, saves[-1] * h, h, saveat=dl.SaveAt(ts=jnp.asarray(saves * h)))
    np.testing.assert_allclose(np.asarray(dl.joint_coordinates(model, sol))[:, 0], x, atol=1e-10)


def ball_xml(tc, h):
    """A rod (1 kg, its centre 0.5 m below a ball joint) whose rotation from hanging is limited
    to 0.5 rad, MuJoCo's impedance near 1 and a narrow ramp (solimplimit), so that both limits
    are the spring-damper of the reference acceleration from the first touch."""
    return f"""<mujoco><compiler angle="radian"/><option timestep="{h}" integrator="RK4" gravity="0 0 -9.81"/>
<worldbody><body name="rod"><joint name="ball" type="ball" limited="true" range="0 0.5"
 solreflimit="{tc} 1" solimplimit="0.9999 0.9999 0.00001 0.5 2"/>
<inertial pos="0 0 -0.5" mass="1" diaginertia="0.02 0.02 0.005"/></body></worldbody></mujoco>"""


def test_ball_friction_follows_mujocos(tmp_path):
    """A rod on a ball joint with dry friction (MJCF ``frictionloss`` on its three axes), tilted
    and spun about all three axes: where the friction (0.5 N m) is below gravity's moment it
    slides, and difflie's centre of mass follows MuJoCo's RK4 over 0.5 s to 2.7e-3 m where the
    friction moves it by 5.5e-2 m; above it (3 N m) the rod comes to rest and creeps, to 1.2e-3
    m of a motion moved by 0.19 m. The law (``BallFriction``) acts on each axis of the child, as
    MuJoCo's; on world axes the gaps were 2.4e-2 and 7.4e-3 m. The rest of the gap is the law's
    transient, not the step (the same at h = 1e-4): MuJoCo's soft friction reaches the creep
    through the constraint's dynamics, the damper through the ball's inertia."""
    mujoco = pytest.importorskip("mujoco")
    h, every, t1 = 1e-4, 500, 0.5
    q0, w0 = [np.cos(0.15), np.sin(0.15), 0.0, 0.0], [2.0, 3.0, 0.5]

    def rollouts(friction):
        path = tmp_path / f"ball_{friction}.xml"
        path.write_text(f"""<mujoco><option timestep="{h}" integrator="RK4" gravity="0 0 -9.81"/>
<worldbody><body name="rod"><joint name="ball" type="ball" frictionloss="{friction}"/>
<inertial pos="0 0 -0.5" mass="1" diaginertia="0.02 0.025 0.01"/></body></worldbody></mujoco>""")
        x_mj = mujoco_rollout(mujoco.MjModel.from_xml_path(str(path)), int(round(t1 / h)), every, q0, w0,
                              read=lambda m, d: d.xipos[1].copy())  # fmt: skip
        if friction:
            with pytest.warns(RobotModelWarning, match=r"joint friction \(1 joint; joint_friction=True enforces it\)"):
                dl.load_model(path)
        model = dl.load_model(path, joint_friction=True, joint_positions={"ball": q0}, joint_velocities={"ball": w0})
        sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, t1, 2e-4, saveat=dl.SaveAt(ts=jnp.arange(len(x_mj)) * every * h))
        return x_mj, np.asarray(sol.position)[:, 0], model, sol

    x_free, _, _, _ = rollouts(0.0)
    for friction, gap, effect in ((0.5, 4e-3, 0.05), (3.0, 2e-3, 0.15)):
        x_mj, x, model, sol = rollouts(friction)
        assert isinstance(model.forces[-1], BallFriction)
        assert np.abs(x_mj - x_free).max() > effect
        assert np.abs(x - x_mj).max() < gap, (friction, np.abs(x - x_mj).max())
    assert dl.joint_velocities(model, sol).shape == dl.joint_coordinates(model, sol).shape == (len(x), 0)  # no 1-DOF joint
    w_end = np.asarray(dl.ball_joint_velocities(model, sol))[-1, 0]
    assert np.linalg.norm(w_end) < 0.1 and np.linalg.norm(np.asarray(w0)) > 3  # held: it creeps


def test_ball_limit_approaches_mujocos_as_the_limit_stiffens(tmp_path):
    """A rod on a ball joint swings out from 0.3 rad at 3 rad/s in a plane, bounces off its 0.5 rad
    limit, swings back and bounces off the other side: the largest gap between difflie's and
    MuJoCo's centres of mass over 0.6 s falls from 6.9e-3 m at tc = 0.02 s to 2.9e-3 at 0.01 s
    (the stiffness about the ball's axis from MuJoCo's inverse mass matrix,
    ``difflie.joint_laws.BallLimits``). Turned out of its plane, the rod follows MuJoCo's to 7e-10 m
    until it touches its limit (where the motion around the cone is too sensitive to the
    limit's softness for a closer comparison: 0.08 m between tc = 0.01 and 0.005 s, in both)."""
    mujoco = pytest.importorskip("mujoco")
    h, every, t1 = 1e-4, 100, 0.6
    q0 = [np.cos(0.15), np.sin(0.15), 0.0, 0.0]
    gaps = []
    for tc, w0 in ((0.02, [3.0, 0.0, 0.0]), (0.01, [3.0, 0.0, 0.0]), (0.01, [2.0, 3.0, 0.5])):
        path = tmp_path / "ball.xml"
        path.write_text(ball_xml(tc, h))
        x_mj = mujoco_rollout(mujoco.MjModel.from_xml_path(str(path)), int(round(t1 / h)), every, q0, w0,
                              read=lambda m, d: d.xipos[1].copy())  # fmt: skip
        model = dl.load_model(path, joint_limits=True, joint_positions={"ball": q0}, joint_velocities={"ball": w0})
        ts = jnp.arange(len(x_mj)) * every * h
        sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, t1, h, saveat=dl.SaveAt(ts=ts))
        gaps.append(np.max(np.abs(np.asarray(sol.position)[:, 0] - x_mj), axis=-1))
    assert gaps[0].max() < 8e-3 and gaps[0].max() / gaps[1].max() > 2.0, (gaps[0].max(), gaps[1].max())
    assert gaps[2][:4].max() < 1e-8, gaps[2][:4]  # up to 0.03 s, before the limit (the methods' own errors)


TENDON = str(pathlib.Path(__file__).resolve().parent / "data" / "tendon.xml")


def test_fixed_tendon_follows_mujoco():
    """Two hinges and a slide coupled by a fixed tendon (length ``j1 - 0.5 j2 + 2 j3``, a spring
    idle between 0.1 and 0.5, a damper): generalized-alpha at h = 1e-3 follows MuJoCo's RK4 at
    1e-4 s over 0.3 s to 9.2e-6 (2.3e-6 at 5e-4: second order, measured once), where without the
    tendon MuJoCo's own motion differs by 0.1. A locked joint's share of the length is a
    constant."""
    mujoco = pytest.importorskip("mujoco")
    q0, t1 = {"j1": 0.3, "j2": -0.5, "j3": 0.05}, 0.3
    mj = mujoco.MjModel.from_xml_path(TENDON)
    q_mj = mujoco_rollout(mj, int(round(t1 / 1e-4)), 500, list(q0.values()))
    mj.tendon_stiffness[:], mj.tendon_damping[:] = 0.0, 0.0
    assert np.abs(mujoco_rollout(mj, int(round(t1 / 1e-4)), 500, list(q0.values())) - q_mj).max() > 0.05  # the tendon matters
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left unmodelled
        model = dl.load_model(TENDON, joint_positions=q0)
    assert isinstance(model.forces[-1].law, Tendons)
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, t1, 1e-3, saveat=dl.SaveAt(ts=jnp.linspace(0.0, t1, len(q_mj))))
    assert np.abs(np.asarray(dl.joint_coordinates(model, sol)) - q_mj).max() < 1.2e-5
    locked = dl.load_model(TENDON, joint_positions=q0, locked_joints=["j3"]).forces[-1].law
    np.testing.assert_allclose(locked.offset, [2 * 0.05])
    np.testing.assert_allclose(locked.coefficients, [[1.0, -0.5]])


SPATIAL = """<mujoco><compiler angle="radian"/><option timestep="1e-4" integrator="RK4"/><worldbody>
<site name="anchor" pos="0.3 0 1.4"/>
<body name="upper" pos="0 0 1"><joint name="shoulder" type="hinge" axis="0 1 0"/>
  <inertial pos="0.2 0 0" mass="2" diaginertia="0.01 0.03 0.03"/><site name="s1" pos="0.3 0 0.05"/>
  <body name="lower" pos="0.4 0 0"><joint name="elbow" type="hinge" axis="0 0.6 0.8"/>
    <inertial pos="0.15 0 0.02" mass="1" diaginertia="0.005 0.01 0.01"/><site name="s2" pos="0.1 0.02 0.03"/>
    <body name="tool" pos="0.3 0 0"><inertial pos="0.05 0 0" mass="0.3" diaginertia="0.001 0.001 0.001"/>
      <site name="s3" pos="0.05 0.01 0"/>{geom}</body></body></body></worldbody>
<tendon>
  <spatial name="cable" stiffness="200" damping="2" springlength="0.5"><site site="anchor"/><site site="s1"/><site site="s2"/></spatial>
  <spatial name="pulley" stiffness="100" damping="1"><site site="anchor"/><site site="s1"/><pulley divisor="2"/>
    <site site="s1"/>{wrap}<site site="s3"/></spatial>
</tendon></mujoco>"""


def test_spatial_tendons_follow_mujoco(tmp_path):
    """Spatial tendons through sites (``difflie.forces.SpatialTendons``): a cable from a point
    of the world over two links (a spring of rest length 0.5 and a damper), and a second whose
    branch after a pulley (divisor 2) runs to a link fixed to the second (merged into its body);
    its rest length MuJoCo's at the reference pose. Generalized-alpha at h = 1e-3 follows
    MuJoCo's RK4 at 1e-4 s over 0.3 s to 5.0e-6 rad (1.25e-6 at 5e-4, measured: order two),
    where without the tendons MuJoCo's motion differs by 1.7 rad. A tendon couples all of its
    bodies (and the ground); ``with_bodies`` keeps the sites where they are; a tendon that wraps
    around a geom is named in the warning."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "spatial.xml"
    path.write_text(SPATIAL.format(geom="", wrap=""))
    q0, t1 = {"shoulder": 0.3, "elbow": 0.5}, 0.3
    mj = mujoco.MjModel.from_xml_path(str(path))
    q_mj = mujoco_rollout(mj, int(round(t1 / 1e-4)), 500, list(q0.values()))
    mj.tendon_stiffness[:], mj.tendon_damping[:] = 0.0, 0.0
    assert np.abs(mujoco_rollout(mj, int(round(t1 / 1e-4)), 500, list(q0.values())) - q_mj).max() > 1.0  # the tendons matter
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left unmodelled
        model = dl.load_model(str(path), joint_positions=q0)
    (tendons,) = model.forces
    assert isinstance(tendons, dl.forces.SpatialTendons) and tendons.coupling() == ((-1, 0), (-1, 1), (0, 1))
    assert undeclared_couplings(model) == set()
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, t1, 1e-3, saveat=dl.SaveAt(ts=jnp.linspace(0.0, t1, len(q_mj))))
    assert np.abs(np.asarray(dl.joint_coordinates(model, sol)) - q_mj).max() < 6e-6
    com = model.bodies.com + jnp.array([0.01, -0.02, 0.03])
    (moved,) = dl.joint_space.with_bodies(model, dl.RigidBody(model.bodies.mass, model.bodies.inertia, com)).forces
    for body, before, after in ((tendons.body_a, tendons.point_a, moved.point_a), (tendons.body_b, tendons.point_b, moved.point_b)):
        on = np.asarray(body) >= 0
        np.testing.assert_allclose((after - before)[on], (model.bodies.com - com)[np.asarray(body)[on]], atol=1e-15)
        np.testing.assert_allclose(after[~on], before[~on])  # the world's points
    wrapped = tmp_path / "wrapped.xml"
    wrapped.write_text(SPATIAL.format(geom='<geom name="drum" type="cylinder" size="0.02 0.01" contype="0" conaffinity="0"/>',
                                      wrap='<geom geom="drum"/>'))  # fmt: skip
    with pytest.warns(RobotModelWarning, match=r"spatial tendons that wrap around geoms \(1\)"):
        assert len(dl.load_model(str(wrapped)).forces[0].weight) == 2  # the cable alone


def test_actuators_on_spatial_tendons_follow_mujoco(tmp_path):
    """A position servo on the cable (its force clipped by ``forcerange``) and a motor on the
    pulley's tendon act along their paths (``Actuators`` over the tendons' lengths, in the
    ``SpatialTendons`` law), beside a motor on the elbow: generalized-alpha at h = 1e-3 follows
    MuJoCo's RK4 (controls set at each step's middle) to 5.5e-6 rad over 0.3 s (measured), where
    the tendons' actuators move the motion by 0.065. One function of t for all three controls,
    in the file's order, drives them the same."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "pulled.xml"
    path.write_text(SPATIAL.format(geom="", wrap="").replace("</tendon>", """</tendon><actuator>
        <position name="reel" tendon="cable" kp="50" kv="1" forcerange="-8 8"/><motor name="twist" joint="elbow" gear="0.5"/>
        <motor name="winch" tendon="pulley" gear="2"/></actuator>"""))
    q0 = {"shoulder": 0.3, "elbow": 0.5}
    model = dl.load_model(str(path), joint_positions=q0, controls={"reel": 0.55, "twist": "0.3*cos(5*t)", "winch": "0.5*sin(10*t)"})
    q = np.asarray(dl.joint_coordinates(model, dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.3, 1e-3, saveat=dl.SaveAt(ts=np.linspace(0, 0.3, 7)))))
    mj = mujoco.MjModel.from_xml_path(str(path))
    runs = []
    for on in (1.0, 0.0):  # with the tendons' actuators, and without them (no control, no bias)
        mj.actuator_biasprm[[0, 2]] *= on
        controls = lambda t, on=on: [0.55 * on, 0.3 * np.cos(5 * t), 0.5 * np.sin(10 * t) * on]  # noqa: E731
        runs.append(mujoco_rollout(mj, 3000, 500, list(q0.values()), ctrl=controls))
    assert np.abs(runs[0] - runs[1]).max() > 0.05
    assert np.abs(q - runs[0]).max() < 7e-6, np.abs(q - runs[0]).max()
    one = dl.load_model(str(path), joint_positions=q0, controls=lambda t: jnp.stack([0.55 + 0 * t, 0.3 * jnp.cos(5 * t), 0.5 * jnp.sin(10 * t)]))
    state = (jnp.asarray(0.1), model.r0, model.R0, model.v0 + 0.1, model.omega0 - 0.2)
    for a, b in zip(model.forces, one.forces):
        for x, y in zip(a(*state), b(*state)):
            np.testing.assert_allclose(y, x, rtol=1e-13, atol=1e-13)


def test_tendon_armature_follows_mujoco(tmp_path):
    """The fixed tendon with a rotor inertia along its length (``armature``: ``A^T I A`` added
    to the joint-space mass matrix, ``difflie.forces.JointInertia`` with the tendon's
    coefficients): generalized-alpha at h = 1e-3 follows MuJoCo's RK4 at 1e-4 s over 0.3 s to
    7.0e-6 (measured), where the armature alone moves MuJoCo's motion by 0.12; the tendon's
    three joints' bodies are coupled in the iteration matrix."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "geared.xml"
    path.write_text(pathlib.Path(TENDON).read_text().replace('springlength="0.1 0.5"', 'springlength="0.1 0.5" armature="0.05"'))
    q0, t1 = {"j1": 0.3, "j2": -0.5, "j3": 0.05}, 0.3
    mj = mujoco.MjModel.from_xml_path(str(path))
    q_mj = mujoco_rollout(mj, int(round(t1 / 1e-4)), 500, list(q0.values()))
    mj.tendon_armature[:] = 0.0
    moves = np.abs(mujoco_rollout(mj, int(round(t1 / 1e-4)), 500, list(q0.values())) - q_mj).max()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left unmodelled
        model = dl.load_model(str(path), joint_positions=q0)
    (geared,) = [f for f in model.forces if f.accelerated]
    np.testing.assert_allclose(geared.coefficients, [[1.0, -0.5, 2.0]])
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, t1, 1e-3, saveat=dl.SaveAt(ts=jnp.linspace(0.0, t1, len(q_mj))))
    error = np.abs(np.asarray(dl.joint_coordinates(model, sol)) - q_mj).max()
    assert error < 1e-5 and moves > 0.1
    assert undeclared_couplings(model) == set() and {(0, 2)} <= set(geared.coupling())


@pytest.mark.parametrize(
    "attributes, message",
    [
        ('limited="true" range="1 -1"', "joint 'h': range[0] should be smaller than range[1]"),  # MuJoCo's compiler's, by joint
        ('range="-1 1" solreflimit="0.02 0"', "joint 'h': its limit's solref (0.02, 0) has a time constant but no damping ratio > 0"),
        ('range="-1 1" solreflimit="0 1"', "joint 'h': its limit's solref (0, 1) gives no stiffness > 0 and damping >= 0"),
        ('frictionloss="1" solreffriction="-10 1"', "joint 'h': its friction's solref (-10, 1) gives no damping > 0"),
    ],
)
def test_limits_and_friction_that_cannot_hold_are_refused(attributes, message, tmp_path):
    """A softness without a positive stiffness (or with a negative damping) is refused when the
    model is loaded, naming the joint (MuJoCo's compiler takes it); a reversed range, by
    MuJoCo's compiler."""
    path = tmp_path / "bad.xml"
    path.write_text(f"""<mujoco><compiler angle="radian"/><worldbody><body name="b"><joint name="h" axis="0 0 1" {attributes}/>
<inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/></body></worldbody></mujoco>""")
    with pytest.raises(dl.ModelFileError, match=re.escape(message)):
        dl.load_model(path, joint_limits=True, joint_friction=True)


class _Coupling(eqx.Module):
    """Springs between the shoulder and the spin of the toy robot (two joints apart), which
    claim to couple nothing when ``honest`` is off: the check below must find it."""

    k: jax.Array
    honest: bool = eqx.field(static=True)

    def __call__(self, t, q, qd):
        return -self.k * jnp.array([q[0] - q[2], 0.0, q[2] - q[0]]) - 0.1 * qd

    def coupled_joints(self):
        return ((0, 2),) if self.honest else ()


@pytest.mark.parametrize("case", ["tendon", "lambda", "declared", "pd", "dishonest"])
def test_joint_laws_declare_the_bodies_they_couple(case):
    """The bodies whose forces a joint law ties together are in ``model.coupling()``, which the
    implicit solvers' block structure follows: a fixed tendon's joints, any law that does not
    say (a lambda: all joints), a law that names its joints, a PD controller (each joint its
    own); a law that hides a coupling is caught (the check can fail)."""
    toy = str(pathlib.Path(__file__).resolve().parent / "data" / "toy_robot.urdf")
    laws = {"lambda": lambda t, q, qd: -jnp.sum(q) * jnp.ones(3) - 0.1 * qd, "declared": _Coupling(jnp.asarray(3.0), True),
            "pd": dl.joint_laws.JointPD(jnp.asarray(2.0), jnp.asarray(0.1), jnp.zeros(3)), "dishonest": _Coupling(jnp.asarray(3.0), False)}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)
        if case == "tendon":
            model = dl.load_model(TENDON, joint_positions={"j1": 0.3, "j2": -0.4, "j3": 0.05})
        else:
            model = dl.load_model(toy, joint_positions={"shoulder": 0.3, "slide": 0.02, "spin": 0.5}, joint_feedback=laws[case])
    missing = undeclared_couplings(model)
    assert missing == ({(0, 2)} if case == "dishonest" else set())


def test_impedance_is_mujocos():
    """``impedance`` is MuJoCo's ``d(x)`` of a constraint violated by ``x`` (read off its
    ``efc_KBIP``) for several ``solimp``: the default, a cubic with its midpoint off centre, a
    linear one and a flat one; and its derivatives are finite, at zero violation too."""
    mujoco = pytest.importorskip("mujoco")
    xs = np.array([0.0, 3e-4, 7e-4, 4e-3, 2e-2, 0.1])
    for solimp in ([0.9, 0.95, 0.001, 0.5, 2], [0.5, 0.99, 0.01, 0.3, 3], [0.2, 0.8, 0.05, 0.5, 1], [0.9, 0.9, 0.01, 0.5, 2]):
        m = mujoco.MjModel.from_xml_string(coupled_pendulums_xml(0.02, 1e-3, solimp=" ".join(map(str, solimp))))
        d, expected = mujoco.MjData(m), []
        for x in xs:  # the follower turned by x off the leader (polynomial 0 + 1 x)
            d.qpos[:] = [0.1, 0.1 + x]
            mujoco.mj_forward(m, d)
            expected.append(d.efc_KBIP[0, 2])
        params = jnp.tile(jnp.asarray(solimp, float), (xs.size, 1))
        np.testing.assert_allclose(dl.joint_laws.impedance(jnp.asarray(xs), params), expected, atol=1e-15)
        assert np.isfinite(jax.jacfwd(lambda p: dl.joint_laws.impedance(jnp.asarray(xs), p))(params)).all()
        assert np.isfinite(jax.grad(lambda x: dl.joint_laws.impedance(x, params).sum())(jnp.asarray(xs))).all()


def coupled_pendulums_xml(tc, h, polycoef="0 1 0 0 0", solimp="0.9 0.95 0.001 0.5 2"):
    """Two rods on parallel hinges about y, the second following the first by a joint equality
    (``polycoef``) with the time constant ``tc``; MuJoCo's RK4 at ``h``."""
    return f"""<mujoco><compiler angle="radian"/><option timestep="{h}" integrator="RK4"/><worldbody>
<body name="a"><joint name="j1" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.02" mass="1" contype="0" conaffinity="0"/></body>
<body name="b" pos="0 0.3 0"><joint name="j2" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.7 0 0" size="0.02" mass="2" contype="0" conaffinity="0"/></body>
</worldbody><equality><joint joint1="j2" joint2="j1" polycoef="{polycoef}" solref="{tc} 1" solimp="{solimp}"/></equality></mujoco>"""


def test_coupled_pendulums_approach_the_rigid_coupling_and_mujoco(tmp_path, monkeypatch):
    """The second rod follows the first by ``q2 = 0.05 + 1.5 q1 + 0.3 q1^2`` (a joint equality):
    as the coupling's time constant halves, difflie's motion (generalized-alpha, h = 1e-3, from
    ``q1 = 0.3`` with the follower placed on its coupling) approaches the rigid coupling (the
    one-degree-of-freedom Lagrangian ``(I1 + I2 p'^2) q1'' + I2 p' p'' q1'^2 = -dV/dq1``, DOP853)
    and MuJoCo's soft equality (RK4, 1e-4 s), both by about tc^2, over 0.5 s. A ``solref``
    without stiffness is refused; MuJoCo's own warning about it reaches the caller as a
    ``RobotModelWarning``, not as a log file in the working directory."""
    mujoco = pytest.importorskip("mujoco")
    poly = np.array([0.05, 1.5, 0.3])
    p = lambda x: poly[0] + poly[1] * x + poly[2] * x**2  # noqa: E731
    mj = mujoco.MjModel.from_xml_string(coupled_pendulums_xml(0.02, 1e-4, "0.05 1.5 0.3 0 0"))
    mass, lever = mj.body_mass[1:], mj.body_ipos[1:, 0]
    inertia = mj.body_inertia[1:, 1] + mass * lever**2  # about each hinge
    g, t1, ts = 9.81, 0.5, np.linspace(0.0, 0.5, 11)

    def rigid(t, y):
        q, w = y
        slope, curve = poly[1] + 2 * poly[2] * q, 2 * poly[2]
        force = g * (mass[0] * lever[0] * np.cos(q) + mass[1] * lever[1] * np.cos(p(q)) * slope)  # -dV/dq1, z up
        return [w, (force - inertia[1] * slope * curve * w**2) / (inertia[0] + inertia[1] * slope**2)]

    q1 = solve_ivp(rigid, (0.0, t1), [0.3, 0.0], method="DOP853", rtol=1e-12, atol=1e-12, t_eval=ts).y[0]
    reference = np.stack([q1, p(q1)], axis=1)
    sim = dl.xla.jit(lambda m: dl.joint_coordinates(m, dl.simulate(m, dl.GeneralizedAlpha(), 0.0, t1, 1e-3, saveat=dl.SaveAt(ts=ts))))
    to_rigid, to_mujoco = [], []
    for tc in (0.02, 0.01, 0.005):
        path = tmp_path / f"coupled_{tc}.xml"
        path.write_text(coupled_pendulums_xml(tc, 1e-4, "0.05 1.5 0.3 0 0"))
        model = dl.load_model(str(path), joint_positions={"j1": 0.3}, joint_couplings=True)
        if tc == 0.02:
            np.testing.assert_allclose(model.joints.initial, [0.3, p(0.3)])  # placed on its coupling
        q = np.asarray(sim(model))
        q_mj = mujoco_rollout(mujoco.MjModel.from_xml_path(str(path)), int(round(t1 / 1e-4)), 500, np.asarray(model.joints.initial))
        to_rigid.append(np.abs(q - reference).max())
        to_mujoco.append(np.abs(q - q_mj).max())
    assert to_rigid[0] < 3e-3 and to_mujoco[0] < 1e-3
    stiffless = tmp_path / "stiffless.xml"
    stiffless.write_text(coupled_pendulums_xml(0, 1e-4))  # solref (0, 1): no stiffness
    monkeypatch.chdir(tmp_path)
    with pytest.raises(dl.ModelFileError, match=re.escape("joint coupling 'equality0': its solref (0, 1) gives no stiffness > 0")):
        with pytest.warns(RobotModelWarning, match="stiffless.xml: MuJoCo: mixed solref format, replacing with default"):
            dl.load_model(str(stiffless), joint_couplings=True)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert all(a > 3.0 * b for a, b in zip(to_rigid, to_rigid[1:])), to_rigid
    assert all(a > 3.0 * b for a, b in zip(to_mujoco, to_mujoco[1:])), to_mujoco


MIMIC = """<robot name="gripper"><link name="base"/>
<link name="left"><inertial><mass value="0.2"/><origin xyz="0 0 0.05"/><inertia ixx="2e-4" iyy="2e-4" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
<link name="right"><inertial><mass value="0.2"/><origin xyz="0 0 0.05"/><inertia ixx="2e-4" iyy="2e-4" izz="1e-5" ixy="0" ixz="0" iyz="0"/></inertial></link>
<joint name="left_slide" type="prismatic"><parent link="base"/><child link="left"/><origin xyz="0 0.02 0"/><axis xyz="0 1 0"/>
  <limit lower="0" upper="0.04" effort="10" velocity="1"/></joint>
<joint name="right_slide" type="prismatic"><parent link="base"/><child link="right"/><origin xyz="0 -0.02 0"/><axis xyz="0 1 0"/>
  <limit lower="-0.04" upper="0" effort="10" velocity="1"/><mimic joint="left_slide" multiplier="-1" offset="0.001"/></joint>
</robot>"""


def test_urdf_mimic_fingers_move_together(tmp_path):
    """A URDF gripper whose right finger mimics the left (``multiplier -1``, ``offset``): the
    loader names the mimic in its warning, or with ``joint_couplings=True`` holds it and starts
    the right finger on it; pushed by a force on the left finger alone, both open together, the left as
    in MuJoCo (RK4, 1e-4 s) to 3e-5 m over 0.05 s (generalized-alpha, h = 1e-3), the coupling
    lagging by MuJoCo's own 2.9e-4 m (its softness under that load) to 2 %, where without the
    coupling the left finger would be 4.5e-3 m further. Locking the follower alone is refused;
    locking the leader holds the follower."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "gripper.urdf"
    path.write_text(MIMIC)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dl.load_model(str(path))
        model = dl.load_model(str(path), joint_positions={"left_slide": 0.01}, joint_torques={"left_slide": 2.0}, gravity=[0, 0, 0],
                              joint_couplings=True)  # fmt: skip
    named = ["mimic joints (1; joint_couplings=True holds them)" in str(w.message) for w in caught]
    assert named == [True, False]
    law = model.forces[-1].law
    assert isinstance(law, dl.joint_laws.JointCouplings) and law.follower == (1,) and law.leader == (0,)
    np.testing.assert_allclose(law.polynomial[0], [0.001, -1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(model.joints.initial, [0.01, -0.009])
    ts = np.linspace(0.0, 0.05, 11)
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.05, 1e-3, saveat=dl.SaveAt(ts=ts))
    q = np.asarray(dl.joint_coordinates(model, sol))
    mj = mujoco.MjModel.from_xml_path(str(path))
    mj.opt.timestep, mj.opt.integrator = 1e-4, mujoco.mjtIntegrator.mjINT_RK4
    data, q_mj = mujoco.MjData(mj), []
    data.qpos[:] = np.asarray(model.joints.initial)
    for k in range(501):
        if k % 50 == 0:
            q_mj.append(data.qpos.copy())
        data.qfrc_applied[:] = [2.0, 0.0]
        mujoco.mj_step(mj, data)
    q_mj = np.array(q_mj)
    assert np.abs(q - q_mj).max() < 3e-5
    lag, lag_mj = (np.abs(x[:, 1] - (0.001 - x[:, 0])).max() for x in (q, q_mj))
    assert abs(lag - lag_mj) < 0.02 * lag_mj and lag_mj > 2e-4
    assert q[-1, 0] - (0.01 + 0.5 * 2.0 / 0.2 * 0.05**2) < -4e-3  # a finger alone would go further
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)  # the limits
        with pytest.raises(ValueError, match="joint 'right_slide' follows its leader 'left_slide'"):
            dl.load_model(str(path), locked_joints=["right_slide"], joint_couplings=True)
        held = dl.load_model(str(path), joint_positions={"left_slide": 0.02}, locked_joints=["left_slide"], joint_couplings=True)
    np.testing.assert_allclose(held.joints.initial, [-0.019])
    np.testing.assert_allclose(held.forces[-1].law.polynomial[0], [-0.019, 0.0, 0.0, 0.0, 0.0])


ACTUATED = """<mujoco><compiler angle="radian"/><option timestep="1e-4" integrator="RK4"/><worldbody>
<body name="a" pos="0 0 1"><joint name="j1" axis="0 1 0" actuatorfrcrange="-6 6" damping="0.05"/>
  <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03" mass="1" contype="0" conaffinity="0"/>
  <body name="b" pos="0.5 0 0"><joint name="j2" type="slide" axis="1 0 0"/>
    <geom type="box" size="0.05 0.03 0.03" mass="0.5" contype="0" conaffinity="0"/>
    <body name="c" pos="0.1 0 0"><joint name="j3" axis="0 0 1"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.3" contype="0" conaffinity="0"/></body></body></body>
</worldbody><actuator>
<position name="shoulder" joint="j1" kp="40" kv="2" gear="2" ctrlrange="-0.5 0.5"/>
<motor name="push" joint="j2" gear="3" forcerange="-0.3 0.3"/>
<velocity name="spin" joint="j3" kv="0.5"/>
<general name="extra" joint="j2" gaintype="affine" gainprm="1 0.5 0.2" biastype="affine" biasprm="0.1 -3 -0.4"/>
<position name="pull" tendon="pulley" kp="2" gear="2"/>
</actuator><tendon><fixed name="pulley"><joint joint="j1" coef="0.2"/><joint joint="j3" coef="0.1"/></fixed></tendon></mujoco>"""
CONTROLS = {"shoulder": 0.8, "push": "0.5*sin(20*t)", "spin": 3.0, "extra": 0.3, "pull": "0.2*cos(10*t)"}


def _driven_rollout(xml: str, qpos, extra: tuple = ()) -> np.ndarray:
    """MuJoCo's RK4 run (1e-4 s, 0.3 s, 11 saves) of an arm of ``ACTUATED`` from ``qpos``, its
    controls those of ``CONTROLS`` (and constant ``extra`` ones after them) set at each step's
    middle."""
    import mujoco

    controls = lambda t: [0.8, 0.5 * np.sin(20 * t), 3.0, 0.3, 0.2 * np.cos(10 * t), *extra]  # noqa: E731
    return mujoco_rollout(mujoco.MjModel.from_xml_string(xml), 3000, 300, np.asarray(qpos), ctrl=controls)


@pytest.fixture(scope="module")
def actuated_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("actuators") / "arm.xml"
    path.write_text(ACTUATED)
    return str(path)


def test_actuators_follow_mujoco(actuated_file):
    """An arm driven by MJCF actuators through ``controls``: a position servo (gear 2, its
    control clipped by ``ctrlrange``, its torque by the joint's ``actuatorfrcrange``), a motor
    clipped by ``forcerange`` under a control that is an expression of t, a velocity servo, a
    general actuator of affine gain and bias on the same slide as the motor, and a position
    servo on a fixed tendon over two hinges. Over 0.3 s (joints moving 0.3-0.9)
    generalized-alpha follows MuJoCo's RK4 at 1e-4 s (its control set at each step's middle) to
    5.0e-6 at h = 1e-3 and 2.7e-6 at 5e-4 (measured; the shoulder's torque clips make the order
    fall below two), where the tendon's servo alone moves MuJoCo's motion by 0.024. The tendon
    couples its two hinges' bodies in the iteration matrix. Without ``controls`` the actuators
    are named in the warning; a control for no actuator is refused."""
    pytest.importorskip("mujoco")
    model = dl.load_model(actuated_file, controls=CONTROLS, joint_positions={"j1": -0.3, "j2": 0.05})
    ts = np.linspace(0.0, 0.3, 11)
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.3, 1e-3, saveat=dl.SaveAt(ts=ts))
    q = np.asarray(dl.joint_coordinates(model, sol))
    q_mj = _driven_rollout(ACTUATED, model.joints.initial)
    assert np.abs(q_mj - q_mj[0]).max(axis=0).min() > 0.25  # every joint moves
    assert np.abs(q - q_mj).max() < 1e-5
    (law,) = [f.law for f in model.forces if isinstance(getattr(f, "law", None), dl.joint_laws.Actuators)]
    assert law.coupled_joints() == ((0, 2),) and undeclared_couplings(model) == set()
    with pytest.warns(RobotModelWarning, match=r"actuators \(5; controls=\{name: value\} drives them"):
        dl.load_model(actuated_file)
    with pytest.raises(ValueError, match=r"controls names unknown actuators \['elbow'\]; the modelled actuators are \['shoulder', 'push', 'spin', 'extra', 'pull'\]"):
        dl.load_model(actuated_file, controls={"elbow": 1.0})


def test_actuators_on_a_tendon_share_its_force_range(tmp_path):
    """A second actuator on the arm's fixed tendon, and the tendon's ``actuatorfrcrange`` (-0.25,
    0.25), which their summed force would leave by up to 3.8x: MuJoCo scales both by one factor
    to the bound, and so does ``Actuators``. Generalized-alpha at h = 1e-3 follows MuJoCo's RK4
    to 4.8e-6 rad over 0.3 s (1.5e-6 at 5e-4, measured), where the range moves the motion by
    0.02."""
    pytest.importorskip("mujoco")
    xml = ACTUATED.replace('<fixed name="pulley">', '<fixed name="pulley" actuatorfrcrange="-0.25 0.25">')
    xml = xml.replace("</actuator>", '<motor name="tug" tendon="pulley" gear="1.5"/></actuator>')
    path = tmp_path / "shared.xml"
    path.write_text(xml)
    model = dl.load_model(str(path), controls=dict(CONTROLS, tug=0.3), joint_positions={"j1": -0.3, "j2": 0.05})
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.3, 1e-3, saveat=dl.SaveAt(ts=np.linspace(0.0, 0.3, 11)))
    runs = [_driven_rollout(text, model.joints.initial, (0.3,)) for text in (xml, xml.replace(' actuatorfrcrange="-0.25 0.25"', ""))]
    assert np.abs(runs[0] - runs[1]).max() > 0.015
    assert np.abs(np.asarray(dl.joint_coordinates(model, sol)) - runs[0]).max() < 6e-6


@pytest.mark.slow
def test_gradient_through_actuator_controls(actuated_file):
    """The reverse-mode gradient of a joint angle after 0.05 s with respect to the constant
    controls (pytree leaves of the actuators' signal) against central differences."""
    model = dl.load_model(actuated_file, controls={"shoulder": 0.2, "spin": 1.0, "extra": 0.3}, joint_positions={"j1": -0.3})
    (law,) = [f.law for f in model.forces if isinstance(getattr(f, "law", None), dl.joint_laws.Actuators)]

    def angle(u):
        m = eqx.tree_at(lambda m: [f for f in m.forces if hasattr(f, "law")][0].law.controls.constant, model, u)
        sol = dl.simulate(m, dl.GeneralizedAlpha(), 0.0, 0.05, 1e-3, saveat=dl.SaveAt(t1=True))
        return dl.joint_coordinates(m, sol)[-1, 0] + dl.joint_coordinates(m, sol)[-1, 2]

    u = law.controls.constant
    g = dl.xla.jit(jax.grad(angle))(u)
    f = dl.xla.jit(angle)
    for k in range(4):
        e = jnp.zeros_like(u).at[k].set(1e-6)
        np.testing.assert_allclose(g[k], (f(u + e) - f(u - e)) / 2e-6, rtol=1e-5, atol=1e-9)
