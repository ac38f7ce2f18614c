"""BackwardEuler (rA / rp / re) and kinematic analysis on the driven single pendulum of Kissel,
Taves & Negrut, against its closed form: COM (0, L sin phi, -L cos phi), phi(t) = (pi/4) cos 2t, L = 2."""

import functools

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_float32

import difflie as dl
from difflie.kinematics import kinematics

L, AMP, FREQ = 2.0, np.pi / 4, 2.0


def closed_form(t):
    phi = AMP * np.cos(FREQ * t)
    dphi = -AMP * FREQ * np.sin(FREQ * t)
    pos = np.stack([0 * t, L * np.sin(phi), -L * np.cos(phi)], -1)
    vel = np.stack([0 * t, L * np.cos(phi) * dphi, L * np.sin(phi) * dphi], -1)
    return pos, vel


MODEL = dl.models.single_pendulum()


@functools.cache
def run(formulation, h, t1):
    sol = dl.simulate(MODEL, dl.BackwardEuler(formulation=formulation), 0.0, t1, h, saveat=dl.SaveAt(steps=True))
    return sol


@pytest.mark.parametrize(
    "formulation", ["rA", pytest.param("rp", marks=pytest.mark.slow), pytest.param("re", marks=pytest.mark.slow)]
)
def test_positions_exact_and_velocity_first_order(formulation):
    t1 = 0.3
    errs = []
    for h in (4e-3, 2e-3, 1e-3):
        sol = run(formulation, h, t1)
        ts = np.asarray(sol.ts)
        pos, vel = closed_form(ts)
        # zero degrees of freedom: positions come from the constraints, to Newton tolerance
        assert np.max(np.abs(np.asarray(sol.position[:, 0]) - pos)) < 1e-9
        res = dl.diagnostics.constraint_residual(MODEL, sol.ts, sol.states)
        assert float(jnp.max(res)) < 1e-10
        errs.append(np.max(np.abs(np.asarray(sol.velocity[1:, 0]) - vel[1:])))
    slope = np.polyfit(np.log([4e-3, 2e-3, 1e-3]), np.log(errs), 1)[0]
    assert 0.9 <= slope <= 1.1, (slope, errs)


def test_formulations_agree():
    sols = [run(f, 2e-3, 0.3) for f in ("rA", "rp", "re")]
    for s in sols[1:]:
        np.testing.assert_allclose(np.asarray(s.position), np.asarray(sols[0].position), atol=1e-9)
        np.testing.assert_allclose(np.asarray(s.rotation), np.asarray(sols[0].rotation), atol=1e-9)
        # velocities agree to the first-order error level, not to round-off
        assert np.max(np.abs(np.asarray(s.velocity) - np.asarray(sols[0].velocity))) < 1e-2


@pytest.mark.parametrize("formulation", ["rA", "rp", "re"])
def test_kinematics_matches_closed_form(formulation):
    ts = jnp.linspace(0.0, 1.0, 51)
    kin = kinematics(MODEL, ts, formulation)
    pos, vel = closed_form(np.asarray(ts))
    np.testing.assert_allclose(np.asarray(kin.position)[:, 0], pos, atol=1e-9)
    np.testing.assert_allclose(np.asarray(kin.velocity)[:, 0], vel, atol=1e-9)
    # the closed form at t = 0 (phi_dot = 0, phi_ddot = -pi): r_ddot(0) = (0, -4.442883, -4.442883)
    np.testing.assert_allclose(np.asarray(kin.acceleration)[0, 0], [0.0, -4.442883, -4.442883], atol=1e-6)


def test_float32_smoke():
    """With x64 off every formulation runs in float32 on its default stopping test (the paper's
    ``1e-11 / h^2`` is below float32's resolution of the accelerations, ``eps L / h^2``): positions
    on the closed form to a few ulps, velocities with the first-order error of float64 (2.5e-3
    at h = 1e-3, t = 0.3), under two Newton iterations per step (measured 1.7-1.8)."""
    code = (
        "import numpy as np, jax, jax.numpy as jnp\n"
        "import difflie as dl\n"
        "assert not jax.config.jax_enable_x64\n"
        "for f in ('rA', 'rp', 're'):\n"
        "    sol = dl.simulate(dl.models.single_pendulum(), dl.BackwardEuler(formulation=f), 0.0, 0.3, 1e-3)\n"
        "    assert sol.result == dl.RESULTS.successful and sol.position.dtype == jnp.float32, f\n"
        "    its = float(sol.stats.newton_iterations) / float(sol.stats.steps)\n"
        "    print(f, *np.asarray(sol.position[-1, 0]), *np.asarray(sol.velocity[-1, 0]), its)\n"
    )
    stdout = run_float32(code)
    pos, vel = closed_form(np.array([0.3]))
    for line in stdout.split("\n")[:3]:
        f, *values = line.split()
        values = np.array(values, float)
        assert np.abs(values[:3] - pos[0]).max() < 5e-6, (f, values)
        assert np.abs(values[3:6] - vel[0]).max() < 3e-3, (f, values)
        assert values[6] < 2.0, (f, values)


def test_free_body_without_multipliers_compiles_and_flies_straight():
    """A free body has no constraint rows, hence empty multipliers, in the rA step and its
    implicit derivatives (an empty operand of the derivative rule once broke XLA's compile of
    the step). Without forces its centre of mass moves at constant velocity, exactly."""
    model = dl.models.torque_free()
    sol = dl.simulate(model, dl.BackwardEuler(), 0.0, 5e-3, 1e-3, saveat=dl.SaveAt(steps=True))
    r0, v0 = np.asarray(model.r0), np.asarray(model.v0)
    np.testing.assert_allclose(sol.position, r0 + np.asarray(sol.ts)[:, None, None] * v0, rtol=0, atol=1e-14)
    R = np.asarray(sol.rotation[-1, 0])
    np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-13)
