"""The planar mechanisms of Kissel, Taves & Negrut (four link, slider crank, double pendulum)
against the paper's Table 9 and reference values from the paper's public codes.

Kinematics on the paper's grid (h = 1e-3 over 3 s, tol 1e-10) is the ground truth for the
zero-DOF models; the double pendulum is checked against an independent DOP853 reference.
"""

import functools

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.constraints import jacobians as jac
from difflie.constraints.formulations import get_formulation
from difflie.kinematics import kinematics

MODELS = {
    "single_pendulum": dl.models.single_pendulum(),
    "four_link": dl.models.four_link(),
    "slider_crank": dl.models.slider_crank(),
    "double_pendulum": dl.models.double_pendulum(),
}
# The paper's codes drive with a DP1 row and swap in the alternate DP1 near its singularity:
# Table 9's iteration counts are those of this driver (the default angle-row driver converges
# in fewer chord-Newton iterations on the slider crank: 4.38 instead of 4.70 in rA).
SWAP = {name: getattr(dl.models, name)(driver="swap") for name in ("four_link", "slider_crank")}
SLOW = pytest.mark.slow

# Table 9 (C1 = C2 for rp, rA, rE): average position-Newton iterations, h = 1e-3, tol 1e-10.
TABLE9 = {
    "single_pendulum": {"rp": 3.82, "rA": 3.80, "re": 3.80},
    "four_link": {"rp": 4.47, "rA": 4.50, "re": 4.77},
    "slider_crank": {"rp": 4.83, "rA": 4.70, "re": 4.79},
}

# COM states at t = 3 s: reference values from the paper's public codes (6-digit output).
T3 = {
    "four_link": {
        1: ((-0.437442, -4.25, 2.353865), (5.414567, 3.141593, -2.522634), (-17.738028, 0.0, 7.494873)),
        2: ((-2.437442, -8.5, 3.353865), (5.414567, 0.0, -2.522634), (-17.738028, 0.0, -2.374731)),
    },
    "slider_crank": {  # period 1 s: the t = 3 state is the (assembled) initial one
        1: ((0.1, 0.05, 0.1), (-0.125664, 0.251328, 0.0), (0.789569, 0.0, -1.579138)),
        2: ((0.2, 0.0, 0.0), (-0.251327, 0.0, 0.0), (1.579138, 0.0, 0.0)),
    },
}


@functools.cache
def kin(name, formulation, n=3001, tol=1e-10, driver="default"):
    """Kinematics on [0, 3] s (n grid points); the paper's protocol for n = 3001."""
    model = SWAP[name] if driver == "swap" else MODELS[name]
    sol = kinematics(model, jnp.linspace(0.0, 3.0, n), formulation, tol=tol)
    assert sol.result == dl.RESULTS.successful
    return sol


@functools.cache
def truth(name):
    """Tight kinematic ground truth at t = 3 (tol 1e-12; the grid only sets Newton's start)."""
    return kin(name, "rA", 301, 1e-12)


@functools.cache
def be(name, formulation, h, t1=3.0):
    sol = dl.simulate(
        MODELS[name], dl.BackwardEuler(formulation=formulation), 0.0, t1, h, saveat=dl.SaveAt(steps=True)
    )
    assert sol.result == dl.RESULTS.successful
    return sol


def slope(hs, errs):
    return np.polyfit(np.log(hs), np.log(errs), 1)[0]


# ---------------------------------------------------------------------------------- assembly


@eqx.filter_jit
def _initial_residuals(model, form):
    rot = form.from_rotation(model.R0)
    psi = jac.psi(model, form, 0.0, model.r0, rot)
    if form != get_formulation("rA"):
        return jnp.max(jnp.abs(psi)), None
    G = jac.jacobian(model, form, 0.0, model.r0, rot)
    vres = G @ jac.join(model.v0, model.omega0) - jac.nu(model, form, 0.0, model.r0, rot)
    return jnp.max(jnp.abs(psi)), jnp.max(jnp.abs(vres))


@pytest.mark.parametrize("formulation", ["rA", "rp", "re"])
def test_slider_crank_assembled_at_t0(formulation):
    model = MODELS["slider_crank"]
    psi, vres = _initial_residuals(model, get_formulation(formulation))
    assert float(psi) < 1e-12
    if formulation == "rA":  # the closed-form velocities satisfy G q_dot = nu (rates = omega)
        assert float(vres) < 1e-12
    # and they are the 9-digit values of the C1/C2 model files of the paper's public codes, rounded
    np.testing.assert_allclose(np.asarray(model.v0)[1], [-0.125663706, 0.251327412, 0.0], atol=1e-9)
    np.testing.assert_allclose(np.asarray(model.omega0)[1], [-1.34041287, 1.12397036, -1.49862714], atol=1e-8)
    np.testing.assert_allclose(np.asarray(model.R0)[1, :, 0], [0.666663941, -0.333335152, -0.66666755], atol=1e-5)


# -------------------------------------------------------------------------------- kinematics


def _check_t3(name, sol):
    for body, (r, v, a) in T3[name].items():
        np.testing.assert_allclose(np.asarray(sol.position[-1, body]), r, atol=2e-6)
        np.testing.assert_allclose(np.asarray(sol.velocity[-1, body]), v, atol=2e-6)
        np.testing.assert_allclose(np.asarray(sol.acceleration[-1, body]), a, atol=2e-6)
    assert float(jnp.max(jnp.abs(sol.residual[1:]))) < 1e-10


KIN_CASES = [
    pytest.param(
        name, f, driver, marks=() if (name, f, driver) == ("slider_crank", "rA", "swap") else SLOW, id=f"{name}-{f}-{driver}"
    )
    for name in ("four_link", "slider_crank")
    for driver in ("swap", "default")
    for f in ("rA", "rp", "re")
]


@pytest.mark.parametrize("name, formulation, driver", KIN_CASES)
def test_kinematics_t3_and_table9(name, formulation, driver):
    sol = kin(name, formulation, driver=driver)
    _check_t3(name, sol)
    if driver == "swap":
        assert abs(float(sol.mean_iterations) - TABLE9[name][formulation]) <= 0.3, float(sol.mean_iterations)
    if formulation != "rA":  # the formulations agree at every step
        ref = kin(name, "rA", driver=driver)
        for a, b in ((sol.position, ref.position), (sol.velocity, ref.velocity), (sol.acceleration, ref.acceleration)):
            assert float(jnp.max(jnp.abs(a - b))) < 1e-8


@SLOW
@pytest.mark.parametrize("formulation", ["rA", "rp", "re"])
def test_single_pendulum_table9(formulation):
    sol = kin("single_pendulum", formulation)
    assert abs(float(sol.mean_iterations) - TABLE9["single_pendulum"][formulation]) <= 0.3


# ------------------------------------------------------------------------ BackwardEuler order

ORDER_HS = (4e-3, 2e-3, 1e-3)
# ZXZ Euler angles are singular at theta = 0, pi: the four link's "rotated" pose keeps every body
# at theta = pi/2, but the slider crank's crank turns about global x with body z normal to it, so
# its theta passes 0 every half period. Without re-framing, Newton failed near t = 0.25 s
# (h = 2e-3); the re formulation re-centres such a body's chart between steps (RE.reframe).
ORDER_CASES = [
    pytest.param(
        name,
        f,
        marks=SLOW,  # 3 compiles each
        id=f"{name}-{f}",
    )
    for name in ("slider_crank", "four_link")
    for f in ("rA", "rp", "re")
]


@pytest.mark.parametrize("name, formulation", ORDER_CASES)
def test_backward_euler_first_order(name, formulation):
    ref = truth(name)
    errs = []
    for h in ORDER_HS:
        sol = be(name, formulation, h)
        assert abs(float(sol.ts[-1]) - 3.0) < 1e-12
        # zero DOF: positions are the kinematic ones to Newton tolerance
        assert float(jnp.max(jnp.abs(sol.position[-1] - ref.position[-1]))) < 1e-8
        errs.append(float(jnp.max(jnp.abs(sol.velocity[-1] - ref.velocity[-1]))))
        # position-level residual after every step
        assert float(jnp.max(dl.diagnostics.constraint_residual(MODELS[name], sol.ts, sol.states))) < 1e-10
    p = slope(ORDER_HS, errs)
    assert 0.9 <= p <= 1.1, (p, errs)


# ------------------------------------------------------------------------- double pendulum

Z_REF_T1 = -4.199769816  # body-2 COM z at t = 1 s, independent DOP853 reference, rtol = atol = 1e-12


def _dz(formulation, h):
    sol = be("double_pendulum", formulation, h, 1.0)
    assert abs(float(sol.ts[-1]) - 1.0) < 1e-12
    return abs(float(sol.position[-1, 1, 2]) - Z_REF_T1)


def test_double_pendulum_converges_rA():
    # backward Euler of the paper's public codes: |dz| at t = 1 is 8.5e-2 (h = 1e-2), 9.5e-3 (h = 1e-3)
    errs = [_dz("rA", h) for h in (1e-2, 1e-3)]
    assert 6.0 < errs[0] / errs[1] < 15.0, errs
    assert 5e-3 < errs[1] < 2e-2, errs


@SLOW
def test_double_pendulum_slope_rA():
    hs = (1e-2, 1e-3, 1e-4)
    errs = [_dz("rA", h) for h in hs]
    p = slope(hs, errs)
    assert 0.9 <= p <= 1.1, (p, errs)


@SLOW
@pytest.mark.parametrize("formulation", ["rp", "re"])
def test_double_pendulum_formulations_agree(formulation):
    ref, sol = be("double_pendulum", "rA", 1e-3, 1.0), be("double_pendulum", formulation, 1e-3, 1.0)
    diff = float(jnp.max(jnp.abs(sol.position - ref.position)))
    # "nearly identical" (Fig. 3): far below the discretisation error |dz| ~ 1e-2. Measured:
    # re = rA to 2e-14 (planar motion: BE in the angle is BE on SO(3)); rp differs by 2.5e-4
    # (BE on the Euler parameters is a different first-order discretisation).
    assert diff < 0.05 * _dz("rA", 1e-3), diff


# ---------------------------------------------------------------------- long-run invariants


@pytest.mark.parametrize("formulation", ["rA", pytest.param("rp", marks=SLOW), pytest.param("re", marks=SLOW)])
def test_double_pendulum_20s_invariants(formulation):
    model = MODELS["double_pendulum"]
    sol = be("double_pendulum", formulation, 1e-2, 20.0)
    assert abs(float(sol.ts[-1]) - 20.0) < 1e-9
    res = dl.diagnostics.constraint_residual(model, sol.ts, sol.states)
    assert res.shape == sol.ts.shape and float(jnp.max(res)) < 1e-10
    R = sol.rotation[-1]
    orth = jnp.max(jnp.linalg.norm(jnp.swapaxes(R, -1, -2) @ R - jnp.eye(3), axis=(-2, -1)))
    assert float(orth) < 1e-12, float(orth)
