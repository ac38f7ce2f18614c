"""Robot identification: the joint-space tools it needs (forward kinematics, new inertial
parameters, sampled torques), gradients through the simulator by multiple shooting, and the
Franka Panda study of ``benchmarks/robot_identification.py`` (classical base parameters of
Gautier & Khalil, 1990, against Pinocchio's regressor; the simulator fit, slow).

The Panda checks need ``pin`` and ``example-robot-data`` (the ``test`` extra) and are skipped,
saying so, without them.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_robots import TOY_URDF, _write

import difflie as dl
from difflie.forces import JointForce
from difflie.identify import InertiaParameters, JointMeasurements, residuals
from difflie.io import RobotModelWarning
from difflie.joint_space import LinearInterpolation, forward_kinematics, with_bodies, with_joint_state

try:
    import pinocchio as pin
except ImportError:  # pragma: no cover - depends on the environment
    pin = None

_spec = importlib.util.spec_from_file_location(
    "robot_identification", pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "robot_identification.py"
)
ri = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ri)

needs_pinocchio = pytest.mark.skipif(
    pin is None or ri.panda_urdf() is None,
    reason="the Panda identification needs `pin` and `example-robot-data` (pip install -e '.[test]')",
)


def _toy(tmp_path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)
        return dl.load_model(_write(tmp_path, "toy.urdf", TOY_URDF), **kwargs)


def _state(model):
    return dl.BodyState(model.r0, model.R0, model.v0, model.omega0)


Q = {"shoulder": 0.7, "slide": -0.04, "spin": 4.0}
QD = {"shoulder": -1.3, "slide": 0.25, "spin": 7.0}


def test_forward_kinematics_matches_the_loader(tmp_path):
    """Traced forward kinematics (revolute, prismatic and continuous joints) gives the loader's
    initial state (its own forward kinematics, in numpy) to rounding, and the joint readers
    return ``q`` and ``qd``."""
    rest = _toy(tmp_path)
    moved = _toy(tmp_path, joint_positions=Q, joint_velocities=QD)
    q = jnp.array([Q[n] for n in rest.joint_names])
    qd = jnp.array([QD[n] for n in rest.joint_names])
    s = jax.jit(forward_kinematics)(rest, q, qd)
    for a, b in zip(jax.tree.leaves(s), (moved.r0, moved.R0, moved.v0, moved.omega0)):
        np.testing.assert_allclose(a, b, atol=1e-14)
    m = with_joint_state(rest, q, qd)
    np.testing.assert_allclose(dl.joint_coordinates(m, _state(m)), q, atol=1e-13)
    np.testing.assert_allclose(dl.joint_velocities(m, _state(m)), qd, atol=1e-13)


def test_with_bodies_keeps_the_links(tmp_path):
    """New inertial parameters: link frames (origins ``r - R com``), joint positions and rates stay;
    the joint points of the JointForce stay at the same place on the link."""
    model = _toy(tmp_path, joint_positions=Q, joint_velocities=QD, joint_torques={"slide": 1.0})
    b = model.bodies
    new = dl.RigidBody(2.0 * b.mass, 1.5 * b.inertia, b.com + jnp.array([0.03, -0.02, 0.05]))
    m = with_bodies(model, new)
    origin = lambda mm: mm.r0 - jnp.einsum("bij,bj->bi", mm.R0, mm.bodies.com)  # noqa: E731
    np.testing.assert_allclose(origin(m), origin(model), atol=1e-15)
    np.testing.assert_allclose(dl.joint_velocities(m, _state(m)), dl.joint_velocities(model, _state(model)), atol=1e-14)
    (f0,), (f1,) = model.forces, m.forces
    assert isinstance(f1, JointForce)
    child = np.asarray(f0.child)
    np.testing.assert_allclose(f1.point + new.com[child], f0.point + b.com[child], atol=1e-15)
    np.testing.assert_allclose(m.bodies.mass, 2.0 * b.mass)


def test_linear_interpolation():
    ts = jnp.array([0.0, 0.1, 0.3])
    values = jnp.array([[0.0, 1.0], [1.0, 3.0], [3.0, -1.0]])
    u = LinearInterpolation(ts, values)
    np.testing.assert_allclose(u(0.1), [1.0, 3.0])
    np.testing.assert_allclose(u(0.2), [2.0, 1.0])
    np.testing.assert_allclose(u(-1.0), [0.0, 1.0])  # held outside
    np.testing.assert_allclose(u(0.5), [3.0, -1.0])
    np.testing.assert_allclose(jax.grad(lambda t: u(t)[0])(0.05), 10.0)
    with pytest.raises(ValueError, match="LinearInterpolation"):
        LinearInterpolation(ts, values[:2])


def test_gradient_through_the_simulator_matches_finite_differences(tmp_path):
    """Multiple-shooting residuals of the toy robot (2 windows of 0.1 s, generalized-alpha,
    driven by sampled torques): the forward-mode derivative along one log-Cholesky coordinate
    of each body (implicit-function theorem through the index-3 steps) equals central finite
    differences to 1e-6 relative; the residuals react to it (a derivative of zero would pass a
    wrong test).

    The derivative and the finite differences come from one compiled program, built with
    XLA's backend optimisations off (on CPU): the program runs for well under a second, and
    compiling it optimised took most of the test's time (24 s against 10 s unoptimised, back to
    back on a shared 2-core machine); it computes the same functions either way."""
    dt_s = 1e-2
    ts = np.arange(21) * dt_s
    torque = np.stack([0.5 * np.sin(5 * ts), 2.0 * np.cos(3 * ts), 0.1 * np.sin(7 * ts)], axis=-1)
    model = _toy(tmp_path, joint_positions=Q, joint_torques=LinearInterpolation(jnp.asarray(ts), jnp.asarray(torque)))
    q0 = np.array([[0.7, -0.04, 4.0], [0.75, -0.03, 4.2]])
    qd0 = np.array([[-1.3, 0.25, 7.0], [-1.0, 0.2, 6.5]])
    q_meas = np.zeros((21, 3)) + np.array([0.7, -0.04, 4.0])
    data = JointMeasurements(dt_s, 10, 5, jnp.asarray(q_meas), jnp.asarray(torque), jnp.asarray(q0), jnp.asarray(qd0), 0.01)
    params = InertiaParameters(functools.partial(with_bodies, model))
    theta = params.init(model.bodies)
    direction = jnp.zeros_like(theta).at[np.array([1, 12, 25])].set(1.0)  # one coordinate of each body
    F = lambda th: residuals(params(th), dl.GeneralizedAlpha(), data, dt=5e-3)  # noqa: E731
    options = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
    options = {**dl.xla.compiler_options(), **options} if jax.default_backend() == "cpu" else {}
    jvp = jax.jit(lambda th: jax.jvp(F, (th,), (direction,)), compiler_options=options or None)  # one program for both
    _, tangent = jvp(theta)
    h = 1e-5
    fd = (jvp(theta + h * direction)[0] - jvp(theta - h * direction)[0]) / (2 * h)
    scale = float(jnp.abs(tangent).max())
    assert scale > 1e-2, scale
    assert float(jnp.abs(fd - tangent).max()) < 1e-6 * scale, (float(jnp.abs(fd - tangent).max()), scale)


# -- the Panda --------------------------------------------------------------------------------------


@needs_pinocchio
def test_panda_base_parameters_and_noise_free_least_squares():
    """The Panda arm (fingers locked) has 43 base parameters of 70 (QR of Pinocchio's regressor
    at random states); the parameter conversion matches Pinocchio's ``toDynamicParameters``;
    least squares on exact states and torques recovers the true base parameters to 1e-9
    relative (the regressor is the exact model), and the prior-completed vector is then the
    truth in the base directions. A wrong dependency (too many base parameters) makes the
    regressor rank-deficient and the recovery fail."""
    path = ri.panda_urdf()
    pm = ri.pinocchio_arm(path)
    model = ri.difflie_arm(path)
    phi = ri.pin_parameters(model.bodies)
    np.testing.assert_allclose(phi, np.concatenate([pm.inertias[k].toDynamicParameters() for k in range(1, 8)]), atol=1e-12)
    base = ri.base_parameters()
    assert len(base) == 43
    traj = ri.exciting_trajectory(pm, 0, candidates=2)
    ts = np.linspace(0, ri.PERIOD, 400, endpoint=False)
    q, qd, qdd = traj(ts)
    tau = ri.inverse_dynamics(pm, q, qd, qdd) - np.asarray(pm.damping) * qd
    Y = ri.regressor(pm, q, qd, qdd)
    np.testing.assert_allclose(Y @ phi, tau.reshape(-1), atol=1e-10)
    phi_b = np.linalg.lstsq(Y[:, base.independent], tau.reshape(-1), rcond=None)[0]
    true_b = base.matrix @ phi
    assert np.linalg.norm(phi_b - true_b) < 1e-9 * np.linalg.norm(true_b)
    # the base combinations leave the torques unchanged: Y = Y_b P
    np.testing.assert_allclose(Y[:, base.independent] @ base.matrix, Y, atol=1e-9)
    # a physical vector's pseudo-inertias are positive definite
    assert np.all(ri.pseudo_inertia_min_eig(phi) > 0)


@needs_pinocchio
@pytest.mark.slow
def test_panda_simulator_fit_recovers_base_parameters():
    """Slow (several minutes on 2 cores): noise-free data (0.5 s used, 4 windows of 0.125 s), generalized-alpha
    at 5e-3 s, Levenberg-Marquardt (Levenberg damping) from the prior (20 % mass and inertia errors, COM off by up
    to 2 cm): the held-out torque error falls from the prior's by more than 10x and the
    base-parameter error by more than 5x (the integrator's own error at 5e-3 s keeps it from
    zero)."""
    settings = dict(duration=0.7, window=125, every=25, dt=5e-3, steps=4, held=0.5, held_window=250)
    out = ri.run(settings, seed=0, noise=False, verbose=False)
    rows = out["rows"]
    sim, prior = rows["simulator, log-Cholesky (a)"], rows["prior"]
    assert sim["torque_rel_rms"] < 0.1 * prior["torque_rel_rms"], rows
    assert sim["base_rel_err"] < 0.2 * prior["base_rel_err"], rows
    assert sim["nonphysical_links"] == 0
