"""Built-in rigid models: torque-free flip (Jacobi elliptic functions), heavy top, rotor."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import ellipk

from difflie import eom
from difflie.models import heavy_top, rotor, torque_free
from difflie.simulate import SaveAt, simulate
from difflie.solvers import RK67, RKMK4


@pytest.fixture(scope="module")
def flip():
    model = torque_free()
    return model, simulate(model, RKMK4(), 0.0, 1.0, 5e-5, saveat=SaveAt(steps=True))


def test_torque_free_invariants(flip):
    model, sol = flip
    E = jax.vmap(lambda s: eom.kinetic_energy(model, s))(sol.states)
    L = jax.vmap(lambda s: eom.angular_momentum(model, s))(sol.states)
    np.testing.assert_allclose(E[0], 21784.00026494, rtol=1e-11)  # Holzinger, Gerstmayr & Schöberl, Sect. 6
    np.testing.assert_allclose(L[0], [0.052988, 0.0, 435.68], rtol=1e-12)
    assert np.max(np.abs(E / E[0] - 1)) < 1e-10
    assert np.max(np.linalg.norm(L - L[0], axis=1)) / np.linalg.norm(L[0]) < 1e-10
    R = np.asarray(sol.rotation[:, 0])
    assert np.max(np.abs(np.linalg.det(R) - 1)) < 1e-13


def test_intermediate_axis_flip_period(flip):
    _, sol = flip
    # Euler's solution: A < B < C with the intermediate axis 3 (Holzinger, Gerstmayr & Schöberl, Sect. 6).
    A, B, C = 1.1775, 4.3568, 5.2988
    w0 = np.array([0.01, 0.0, 100.0])
    J = np.array([5.2988, 1.1775, 4.3568])
    two_T, L2 = np.sum(J * w0**2), np.sum((J * w0) ** 2)
    k2 = (B - A) * (two_T * C - L2) / ((C - B) * (L2 - two_T * A))
    omega_tau = np.sqrt((C - B) * (L2 - two_T * A) / (A * B * C))
    quarter = ellipk(k2) / omega_tau  # scipy's ellipk takes m = k^2
    expected = quarter * np.array([1, 3, 5])
    w3, ts = np.asarray(sol.angular_velocity[:, 0, 2]), np.asarray(sol.ts)
    i = np.nonzero(np.sign(w3[:-1]) != np.sign(w3[1:]))[0]
    crossings = ts[i] - w3[i] * (ts[i + 1] - ts[i]) / (w3[i + 1] - w3[i])
    assert crossings.shape == (3,)
    np.testing.assert_allclose(crossings, expected, atol=2e-6)
    np.testing.assert_allclose(4 * quarter, 0.598653170, rtol=1e-8)  # period from an independent float64 prototype
    # p = third column of R flips +1 -> -1 -> +1 -> -1 within 1 s.
    pz = np.asarray(sol.rotation[:, 0, 2, 2])
    assert pz[0] == 1.0 and np.sum(np.sign(pz[:-1]) != np.sign(pz[1:])) == 3
    # End state against the 40-digit value (the problem amplifies errors ~6e3x).
    np.testing.assert_allclose(sol.angular_velocity[-1, 0], [5.8621628326, 6.7690114392, -99.7287395031], atol=1e-4)


def test_heavy_top_reference_states_and_invariants():
    model = heavy_top()
    sol = simulate(model, RKMK4(), 0.0, 1.0, 2.5e-4, saveat=SaveAt(ts=np.array([0.0, 0.2, 1.0])))
    ref = {  # heavy top of Holzinger, Arnold & Gerstmayr 2024, §4.1
        1: ([0.605550561377, 0.598957681795, -0.523983027430], [-0.040163033611, -3.667823788207, -4.239053298846],
            [-2.691590912142, 150, 4.917260989895]),
        2: ([0.173343964098, 0.640088592070, -0.748490791134], [0.570825303421, -4.588728296337, -3.791955154709],
            [-0.822078101693, 150, -5.923291348116]),
    }  # fmt: skip
    for i, (x, v, w) in ref.items():
        np.testing.assert_allclose(sol.position[i, 0], x, atol=1e-6)
        np.testing.assert_allclose(sol.velocity[i, 0], v, atol=2e-4)
        np.testing.assert_allclose(sol.angular_velocity[i, 0], w, atol=2e-4)
    g = 9.81
    E = jax.vmap(lambda s: eom.kinetic_energy(model, s))(sol.states) + 15.0 * g * sol.position[:, 0, 2]
    np.testing.assert_allclose(E[0], 5435.696790865547, rtol=1e-9)
    assert np.max(np.abs(E / E[0] - 1)) < 1e-7
    Lz = jax.vmap(lambda s: eom.angular_momentum(model, s))(sol.states)[:, 2]
    np.testing.assert_allclose(Lz[0], -70.3124296875, rtol=1e-12)
    np.testing.assert_allclose(Lz, -70.3124296875, rtol=2e-6)  # RK4 drift at h = 2.5e-4


def test_heavy_top_formulations_agree():
    # so3xr3 takes the pivoted 3-vector path, ulvc the general 6x6 one with the pinned mass.
    a = simulate(heavy_top(), RKMK4(), 0.0, 0.1, 1e-3)
    b = simulate(heavy_top(), RKMK4(velocity="ulvc"), 0.0, 0.1, 1e-3)
    np.testing.assert_allclose(a.position, b.position, atol=1e-12)
    np.testing.assert_allclose(a.angular_velocity, b.angular_velocity, atol=1e-10)


@pytest.mark.slow
def test_rotor_converges_at_order_four():
    model = rotor()
    p1 = jnp.array([-0.2, 0.0, 0.0])

    def tip(solver, h):
        s = simulate(model, solver, 0.0, 0.05, h)
        return s.position[0, 0] + s.rotation[0, 0] @ p1

    ref = tip(RK67(), 1.25e-5)
    hs = np.array([1e-4, 5e-5])
    errs = [np.linalg.norm(tip(RKMK4(), h) - ref) for h in hs]
    assert 3.7 < np.log2(errs[0] / errs[1]) < 4.3, errs
    # The bearings hold it: the point stays within micrometres of its support.
    # Static tilt: torque 14.7 N m over 2 k (0.2 m)^2 = 8e4 N m/rad -> 3.7e-5 m at p1.
    assert 1e-5 < np.linalg.norm(ref - p1) < 5e-4


def test_model_parameters_are_traceable():
    f = jax.jit(jax.vmap(lambda J11: heavy_top(inertia=jnp.diag(jnp.stack([J11, 0.46875, 0.234375]))).bodies.inertia[0, 0, 0]))
    np.testing.assert_allclose(f(jnp.array([0.3, 0.4])), [0.3, 0.4])
