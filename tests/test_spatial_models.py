"""The constrained spatial models of Holzinger, Arnold & Gerstmayr 2024: consistent initial states,
reference values, runs."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from difflie.models.spatial import (
    PUMA560_Q_GOAL,
    PUMA560_Q_INIT,
    bang_bang,
    heavy_top_spherical,
    puma560,
    puma560_forward_kinematics,
    puma560_joint_angles,
    spatial_slider_crank,
)
from difflie.results import RESULTS
from difflie.solvers.generalized_alpha import GeneralizedAlpha


def _phi(model, t, x, R):
    origins = x - jnp.einsum("bij,bj->bi", R, model.bodies.com)
    return model.constraints.residual(t, origins, R)


@eqx.filter_jit
def _velocity_residual(model):
    """``B v0`` with ``B`` the right-trivialised constraint Jacobian (jax.jacfwd)."""
    x, R = model.r0, model.R0

    def phi(z):
        Rz = jnp.einsum("bij,bjk->bik", R, jax.vmap(lambda w: jax.scipy.linalg.expm(jnp.cross(jnp.eye(3), w)))(z[:, 3:]))
        return _phi(model, 0.0, x + z[:, :3], Rz)

    v = jnp.concatenate([model.v0, model.omega0], axis=-1)
    B = jax.jacfwd(phi)(jnp.zeros_like(v))
    B = B.reshape(B.shape[0], -1)
    return B @ v.reshape(-1), B


@eqx.filter_jit
def integrate(solver, model, h, n):
    y, st = solver.init(model, 0.0, h)

    def body(k, carry):
        y, st, phi, ok = carry
        y, _, st, _, res = solver.step(model, k * h, (k + 1) * h, y, st)
        phi = jnp.maximum(phi, jnp.max(jnp.abs(_phi(model, (k + 1) * h, y.position, y.rotation))))
        return y, st, phi, ok & (res == RESULTS.successful)

    return jax.lax.fori_loop(0, n, body, (y, st, jnp.zeros((), h.dtype), jnp.array(True)))


def _energy(model, y):
    m, J = model.bodies.mass, model.bodies.inertia
    kin = 0.5 * jnp.sum(m * jnp.sum(y.velocity**2, -1)) + 0.5 * jnp.einsum(
        "bi,bij,bj->", y.angular_velocity, J, y.angular_velocity
    )
    return kin - jnp.sum(m * (y.position @ model.gravity))


@pytest.mark.parametrize("make", [heavy_top_spherical, spatial_slider_crank, puma560])
def test_initial_state_is_consistent(make):
    model = make()
    assert float(jnp.max(jnp.abs(_phi(model, 0.0, model.r0, model.R0)))) < 1e-15
    bv, B = _velocity_residual(model)
    assert float(jnp.max(jnp.abs(bv))) < 1e-14
    assert np.linalg.matrix_rank(np.asarray(B)) == B.shape[0]  # no redundant constraints
    R = np.asarray(model.R0)
    np.testing.assert_allclose(np.swapaxes(R, 1, 2) @ R, np.broadcast_to(np.eye(3), R.shape), atol=1e-15)


def test_heavy_top_spherical_matches_reference_setup():
    model = heavy_top_spherical()
    np.testing.assert_allclose(model.v0[0], [4.61538, 0.0, 0.0], rtol=1e-15)
    assert model.constraints.num_constraints == 3
    # Traced parameters: the builder runs under jit and grad.
    g = jax.grad(lambda c: heavy_top_spherical(com=jnp.stack([0.0 * c, c, 0.0 * c])).v0[0, 0])(1.0)
    assert abs(float(g) - 4.61538) < 1e-12


def test_slider_crank_initial_values_match_reference():
    """s0 = 0.2, s_dot0 = 0.24, rod COM (0.12, -0.24, 0), rod spin (1.92, -0.96, 0.48) (world)."""
    model = spatial_slider_crank()
    assert model.body_names == ("crank", "rod", "slider") and model.constraints.num_constraints == 17
    np.testing.assert_allclose(model.r0[2], [0.2, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(model.v0[2], [0.24, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(model.v0[1], [0.12, -0.24, 0.0], atol=1e-15)
    np.testing.assert_allclose(model.v0[0], [0.0, -0.24, 0.0], atol=1e-15)
    np.testing.assert_allclose(model.R0[1] @ model.omega0[1], [1.92, -0.96, 0.48], atol=1e-14)
    np.testing.assert_allclose(model.omega0[0], [6.0, 0.0, 0.0])


@pytest.fixture(scope="module")
def slider_runs():
    model = spatial_slider_crank()
    runs = {h: integrate(GeneralizedAlpha(), model, jnp.asarray(h), jnp.asarray(int(round(1.0 / h))))
            for h in (2e-3, 1e-3, 5e-4)}  # fmt: skip
    return model, runs


def test_slider_crank_runs_second_order(slider_runs):
    """Slider position at t = 1: differences shrink 4x per halving; joints hold to 1e-10."""
    model, runs = slider_runs
    s = {h: float(out[0].position[2, 0]) for h, out in runs.items()}
    d1, d2 = s[2e-3] - s[1e-3], s[1e-3] - s[5e-4]
    assert 3.6 < d1 / d2 < 4.4, (d1, d2)
    for out in runs.values():
        assert bool(out[3]) and float(out[2]) < 1e-10
        y = out[0]
        np.testing.assert_allclose(y.position[2, 1:], 0.0, atol=1e-10)  # slider stays on the x-axis
        np.testing.assert_allclose(y.rotation[2], np.eye(3), atol=1e-10)  # and does not turn


def test_slider_crank_energy(slider_runs):
    """Conservative mechanism: the energy drift of rho_inf = 0.9 is small and O(h^2)."""
    model, runs = slider_runs
    e0 = float(_energy(model, jax.jit(GeneralizedAlpha().init)(model, 0.0, 1e-3)[0]))
    drift = {h: abs(float(_energy(model, out[0])) - e0) for h, out in runs.items()}
    assert drift[5e-4] < 1e-4 * abs(e0) + 1e-6
    assert drift[1e-3] / drift[5e-4] > 3.0


def test_puma_kinematics_and_sizes():
    model = puma560()
    # 36 + 30, the Puma 560 of Holzinger, Arnold & Gerstmayr 2024, §4.4
    assert model.num_bodies == 6 and model.constraints.num_constraints == 30
    np.testing.assert_allclose(puma560_joint_angles(model.R0), PUMA560_Q_INIT, atol=1e-14)
    q = jnp.asarray(PUMA560_Q_GOAL)
    _, R = puma560_forward_kinematics(q)
    wrapped = np.angle(np.exp(1j * (np.asarray(puma560_joint_angles(R)) - PUMA560_Q_GOAL)))
    np.testing.assert_allclose(wrapped, 0.0, atol=1e-14)
    q_mid, qd_mid = bang_bang(0.5, 0.0, 2.0, 1.0)
    assert abs(float(q_mid) - 1.0) < 1e-15 and abs(float(qd_mid) - 4.0) < 1e-15  # v_max = 2 dq / T


def test_puma_point_to_point():
    """PD-tracked PTP motion: joint angles reach the goal, the 30 joint rows hold to 1e-10."""
    model = puma560()
    h = 2e-3
    y, _, phi, ok = integrate(GeneralizedAlpha(), model, jnp.asarray(h), jnp.asarray(750))
    assert bool(ok) and float(phi) < 1e-10
    err = np.angle(np.exp(1j * (np.asarray(puma560_joint_angles(y.rotation)) - PUMA560_Q_GOAL)))
    assert np.max(np.abs(err)) < np.deg2rad(0.1), np.rad2deg(err)
