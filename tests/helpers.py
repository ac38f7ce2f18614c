"""Models shared by several test files (imported as ``helpers``: pytest puts tests/ on the path)."""

import importlib.metadata
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

from difflie.body import RigidBody
from difflie.forces import SpringDamper
from difflie.lie import SO3
from difflie.model import Model


def assert_initial_state_is_mujocos(model: Model, m, d) -> None:
    """A robot model's initial state (COM positions, rotations, COM velocities, angular
    velocities) is MuJoCo's forward kinematics ``d`` of its model ``m``, body by body (by name)."""
    import mujoco

    for b, name in enumerate(model.bodies.names):
        k = m.body(name).id
        np.testing.assert_allclose(model.r0[b], d.xipos[k], atol=1e-14)
        np.testing.assert_allclose(model.R0[b], d.xmat[k].reshape(3, 3), atol=1e-14)
        vel = np.zeros(6)  # (angular, linear) at the COM, world axes
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, k, vel, 0)
        np.testing.assert_allclose(model.v0[b], vel[3:] + np.cross(vel[:3], d.xipos[k] - d.xpos[k]), atol=1e-13)
        np.testing.assert_allclose(model.R0[b] @ model.omega0[b], vel[:3], atol=1e-13)


def flying_body(ulvc_lengths=None) -> Model:
    """Free body, COM offset from the frame, spring to ground at an off-COM point, gravity."""
    body = RigidBody(2.0, jnp.diag(jnp.array([0.3, 0.5, 0.6])), com=jnp.array([0.1, -0.2, 0.05]))
    spring = SpringDamper(0, [0.2, 0.1, 0.0], -1, [0.0, 0.0, 1.0], stiffness=50.0, damping=0.5, rest_length=0.3)
    extra = {} if ulvc_lengths is None else {"ulvc_lengths": ulvc_lengths}
    return Model(
        body,
        r0=[[0.1, 0.2, 0.3]],
        R0=SO3.exp(jnp.array([0.4, 0.1, -0.3])).matrix[None],
        v0=[[0.5, -0.2, 0.1]],
        omega0=[[1.0, 2.0, 3.0]],
        forces=(spring,),
        **extra,
    )


def run_float32(code: str) -> str:
    """Run ``code`` in a fresh interpreter with x64 off (JAX's default float32); its stdout."""
    env = {**os.environ, "JAX_ENABLE_X64": "0", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def as_model(constraints, com):
    """What :mod:`difflie.constraints.jacobians` reads of a model, from a bare constraint set
    and the bodies' centres of mass (to test the constraints without building bodies)."""
    from types import SimpleNamespace

    return SimpleNamespace(bodies=SimpleNamespace(com=com), constraint_residual=constraints.residual)


def robot_file(suffix: str) -> str | None:
    """Path of a file shipped by ``example-robot-data`` (under its install prefix)."""
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).endswith(suffix):
            return str(f.locate())
    return None


def undeclared_couplings(model: Model) -> set[tuple[int, int]]:
    """Pairs of bodies ``(a, b)``, ``a < b``, where the applied forces on one depend on the state
    (position, rotation, velocity, angular velocity) of the other but ``model.coupling()`` does
    not name them: the implicit solvers' block iteration matrices would leave that derivative
    out. By forward derivatives at the initial state with random rates."""
    nb = model.num_bodies
    r, R, v, w = model.initial_state()
    rng = np.random.default_rng(1)
    v, w = v + rng.normal(size=v.shape), w + rng.normal(size=w.shape)

    def forces(d):
        d = d.reshape(nb, 4, 3)
        R_d = jax.vmap(lambda Rb, x: Rb @ SO3.exp(x).matrix)(R, d[:, 1])
        f, tau = model.applied_forces(0.1, r + d[:, 0], R_d, v + d[:, 2], w + d[:, 3])
        return jnp.concatenate([f, tau], axis=1)

    J = np.abs(np.asarray(jax.jit(jax.jacfwd(forces))(jnp.zeros(12 * nb)))).reshape(nb, 6, nb, 12).max(axis=(1, 3))
    declared = np.eye(nb, dtype=bool)
    for a, b in np.asarray(model.coupling()).reshape(-1, 2):
        if a >= 0 and b >= 0:
            declared[a, b] = declared[b, a] = True
    found = (J + J.T > 1e-12 * J.max()) & ~declared
    return {(int(a), int(b)) for a, b in zip(*np.nonzero(found)) if a < b}


def mujoco_rollout(mj, steps: int, every: int, qpos=None, qvel=None, read=lambda m, d: d.qpos.copy(), ctrl=None) -> np.ndarray:
    """MuJoCo's own run of the model ``mj`` (its integrator and timestep) from ``qpos``,
    ``qvel`` (default: its reference, at rest), with the controls ``ctrl`` (constants, or a
    function of time set at each step's middle), over ``steps`` steps, ``read(m, d)`` every
    ``every`` steps from the first."""
    import mujoco

    data, out = mujoco.MjData(mj), []
    if qpos is not None:
        data.qpos[:] = qpos
    if qvel is not None:
        data.qvel[:] = qvel
    if ctrl is not None and not callable(ctrl):
        data.ctrl[:] = ctrl
    for k in range(steps + 1):
        if k % every == 0:
            mujoco.mj_forward(mj, data)
            out.append(read(mj, data))
        if callable(ctrl):
            data.ctrl[:] = ctrl(data.time + mj.opt.timestep / 2)
        mujoco.mj_step(mj, data)
    return np.array(out)
