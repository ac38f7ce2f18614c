"""Inertia identification: parameterisation, noise-free recovery, noise at the predicted level.

The heavy top turns about a fixed pivot under gravity and a known constant body torque, with
a known mass (a pivoted body's mass never shows in its motion, and without a non-gravitational
force the scale of ``(m c, J_O)`` does not either: see :mod:`difflie.identify`). Its COM and
inertia (nine numbers) are fitted to sampled rotations and the positions of a marker at the tip.
"""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from difflie.body import RigidBody
from difflie.constraints import GROUND, ConstraintSet, d, dp1, dp2, spherical
from difflie.forces import Wrench
from difflie.identify import (
    InertiaParameters,
    Measurements,
    body_from_log_cholesky,
    fit,
    log_cholesky,
    measure,
    physical,
    physical_covariance,
    physical_std,
)
from difflie.lie import SO3
from difflie.model import Model
from difflie.models.planar import slider_crank
from difflie.solvers.backward_euler import BackwardEuler
from difflie.solvers.rkmk import RKMK4
from difflie.step_size import PIDController


MASS = 15.0
COM = np.array([0.05, 0.3, -0.03])
INERTIA = np.array([[0.30, 0.01, -0.02], [0.01, 0.47, 0.015], [-0.02, 0.015, 0.25]])
OMEGA0 = np.array([2.0, 5.0, -3.0])
TORQUE = np.array([[20.0, -10.0, 15.0]])
MARKER = np.array([[0.0, 0.5, 0.0]])
TS = tuple(np.linspace(0.1, 2.0, 20))
DT = 5e-3


def make_top(bodies: RigidBody) -> Model:
    """Heavy top about the world origin, spun by ``TORQUE`` (body axes)."""
    c = bodies.com[0]
    return Model(
        bodies,
        r0=c[None],
        omega0=jnp.asarray(OMEGA0)[None],
        v0=jnp.cross(jnp.asarray(OMEGA0), c)[None],
        forces=(Wrench(jnp.zeros((1, 3)), jnp.asarray(TORQUE)),),
        fixed_origin=True,
    )


TRUE = RigidBody(MASS, INERTIA, COM)
_SCALE = np.array([1.1, 0.9, 1.05])
GUESS = RigidBody(MASS, INERTIA * np.sqrt(np.outer(_SCALE, _SCALE)), COM + np.array([0.02, -0.05, 0.01]))
PARAMS = InertiaParameters(make_top, mass=jnp.array([MASS]))


def test_log_cholesky_round_trip_and_physical():
    b = RigidBody(jnp.array([2.0, 0.7]), jnp.stack([jnp.asarray(INERTIA), jnp.diag(jnp.array([1.0, 2.0, 2.5]))]),
                  jnp.array([[0.1, -0.2, 0.3], [0.0, 0.0, 0.0]]))
    theta = log_cholesky(b)
    back = body_from_log_cholesky(theta)
    np.testing.assert_allclose(physical(back), physical(b), rtol=1e-12, atol=1e-14)
    # any real theta is a physical body: positive mass, J > 0 with the triangle inequalities
    th = jax.random.normal(jax.random.PRNGKey(0), (200, 10)) * 2.0
    rb = body_from_log_cholesky(th)
    eig = np.linalg.eigvalsh(np.asarray(rb.inertia))
    assert np.all(np.asarray(rb.mass) > 0)
    assert np.all(eig[:, 0] > 0) and np.all(eig[:, 0] + eig[:, 1] >= eig[:, 2] * (1 - 1e-9))
    # mass first: theta_0 = log(m) / 2
    np.testing.assert_allclose(theta[:, 0], 0.5 * np.log([2.0, 0.7]), rtol=1e-14)


def test_known_mass_parameters():
    theta = PARAMS.init(TRUE)
    assert theta.shape == (9,)
    np.testing.assert_allclose(physical(PARAMS.bodies(theta)), physical(TRUE), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="known mass"):
        PARAMS.init(RigidBody(MASS + 1.0, INERTIA, COM))


def test_measurements_validation():
    with pytest.raises(ValueError, match="strictly increasing"):
        Measurements((0.2, 0.1), (0,), rotation=jnp.zeros((2, 1, 3, 3)))
    with pytest.raises(ValueError, match="position must have shape"):
        Measurements((0.1, 0.2), (0,), position=jnp.zeros((3, 1, 3)))
    with pytest.raises(ValueError, match="position and/or rotation"):
        Measurements((0.1, 0.2), (0,))


@pytest.fixture(scope="module")
def clean_data():
    return measure(make_top(TRUE), RKMK4(), TS, dt=DT, markers=MARKER)


def test_noise_free_recovery(clean_data, capsys):
    """(a) Adam from a 10 % wrong guess, then Gauss-Newton: COM and inertia to 1e-6."""
    res = fit(PARAMS, PARAMS.init(GUESS), clean_data, RKMK4(), dt=DT, adam_steps=20, learning_rate=5e-3,
              refine_steps=30, report_every=10)
    out = capsys.readouterr().out
    assert "adam" in out and "gauss_newton" in out and "|grad|" in out  # the progress report
    assert res.history[0][2] > 1e3 * res.loss  # the loss fell
    est, true = np.asarray(physical(PARAMS.bodies(res.theta)))[0], np.asarray(physical(TRUE))[0]
    rel = np.abs(est - true) / np.abs(true)
    assert np.all(rel < 1e-6), rel
    assert res.loss < 1e-16


def test_noise_at_predicted_level(clean_data):
    """(b) 1 % noise (0.01 rad on rotations, 5 mm on a marker 0.5 m from the pivot): the error of
    COM and inertia is within the standard deviations predicted by ``s^2 (J^T J)^-1``, and
    the residual variance ``s^2`` is about 1 (the noise model is right)."""
    sig_r, sig_p = 0.01, 0.005
    trials = []
    for seed in range(3):
        kp, kr = jax.random.split(jax.random.PRNGKey(seed))
        data = Measurements(
            TS,
            (0,),
            clean_data.position + sig_p * jax.random.normal(kp, clean_data.position.shape),
            clean_data.rotation @ SO3.exp(sig_r * jax.random.normal(kr, clean_data.rotation.shape[:-1])).matrix,
            jnp.asarray(MARKER),
            sigma_position=sig_p,
            sigma_rotation=sig_r,
        )
        res = fit(PARAMS, PARAMS.init(GUESS), data, RKMK4(), dt=DT, adam_steps=20, learning_rate=5e-3,
                  refine_steps=30, callback=None)
        assert 0.5 < res.residual_variance < 2.0, res.residual_variance  # sigmas are consistent
        est = np.asarray(physical(PARAMS.bodies(res.theta)))[0, 1:]
        true = np.asarray(physical(TRUE))[0, 1:]
        std = np.asarray(physical_std(PARAMS, res.theta, res.covariance))[0, 1:]
        cov = np.asarray(physical_covariance(PARAMS, res.theta, res.covariance))[1:, 1:]
        err = est - true
        assert np.all(np.abs(err) < 4.0 * std), (err, std)
        chi2 = float(err @ np.linalg.solve(cov, err))
        assert chi2 < scipy.stats.chi2.ppf(0.999, 9), chi2
        assert np.all(std < 0.1 * np.abs(true) + 0.01), std  # the data do pin the parameters down
        trials.append((err, std, chi2))
    print("heavy-top noise fit: |err|/std per trial:", [np.round(np.abs(e) / s, 2) for e, s, _ in trials])


@pytest.mark.slow
def test_lbfgs_refinement(clean_data):
    """optax L-BFGS from a mildly perturbed start decreases the loss by orders of magnitude
    (more slowly than Gauss-Newton on this ill-conditioned least-squares problem)."""
    theta0 = PARAMS.init(TRUE) + 0.02 * jnp.arange(9) / 9
    res = fit(PARAMS, theta0, clean_data, RKMK4(), dt=DT, refine="lbfgs", refine_steps=40, callback=None)
    assert res.loss < 1e-3 * res.history[0][2]


# -- (c) a constrained mechanism: the slider crank's rod from the slider's motion -------------

CRANK_TORQUE = 0.05  # N m about the crank axis (global -x), known
ROD_MASS, ROD_INERTIA = 0.5, np.array([4e-3, 4e-4, 4e-3])


def _free_crank_constraints() -> ConstraintSet:
    """Haug's spatial slider crank (``difflie.models.slider_crank``) without its angle driver."""
    X, Y, Z, O = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.0, 0.0, 0.0)
    rows = (
        spherical(GROUND, (0.0, 0.1, 0.12), 0, O)
        + [dp1(GROUND, Y, 0, X), dp1(GROUND, Z, 0, X)]
        + spherical(1, (-0.15, 0.0, 0.0), 0, (0.0, 0.08, 0.0))
        + [dp1(1, Y, 2, Z), dp2(1, Y, (0.15, 0.0, 0.0), 2, O), dp2(1, Z, (0.15, 0.0, 0.0), 2, O)]
        + [dp1(2, (-1.0, 0.0, 0.0), GROUND, X), dp1(2, Y, GROUND, X)]
        + [dp2(2, (-1.0, 0.0, 0.0), O, GROUND, (0.2, 0.0, 0.0)), dp2(2, Y, O, GROUND, (0.2, 0.0, 0.0))]
        + [dp1(2, (-1.0, 0.0, 0.0), GROUND, Y), d(1, (0.15, 0.0, 0.0), 2, Z, 1.0)]
    )
    return ConstraintSet(rows, 3)


def crank_model(rod_mass, rod_inertia) -> Model:
    """The slider crank with the given rod mass and inertia, driven by ``CRANK_TORQUE``."""
    base = slider_crank()
    bodies = eqx.tree_at(
        lambda b: (b.mass, b.inertia),
        base.bodies,
        (base.bodies.mass.at[1].set(rod_mass), base.bodies.inertia.at[1].set(rod_inertia)),
    )
    torque = jnp.zeros((3, 3)).at[0, 0].set(-CRANK_TORQUE)
    return Model(
        bodies, r0=base.r0, R0=base.R0, v0=base.v0, omega0=base.omega0, gravity=base.gravity,
        constraints=_free_crank_constraints(), forces=(Wrench(jnp.zeros((3, 3)), torque),),
        body_names=base.body_names,
    )


class RodParameters(eqx.Module):
    """``theta = (log m_rod, log kappa)``: rod mass and a scale of its principal inertias; the
    crank is driven by a known torque instead of the angle driver."""

    def __call__(self, theta):
        return crank_model(jnp.exp(theta[0]), jnp.exp(theta[1]) * jnp.diag(jnp.asarray(ROD_INERTIA)))


@pytest.mark.slow
def test_slider_crank_rod_from_slider_motion():
    """(c) Rod mass and inertia scale from the slider's x-coordinate alone (BackwardEuler rA),
    noise-free: recovered to 1e-6 from a 30 % wrong start."""
    params = RodParameters()
    truth = jnp.log(jnp.array([ROD_MASS, 1.0]))
    ts = tuple(np.linspace(0.025, 0.5, 20))
    solver = BackwardEuler("rA")
    data = measure(params(truth), solver, ts, dt=5e-3, bodies=(2,))
    data = Measurements(data.ts, (2,), position=data.position, axes=(0,), sigma_position=1e-3)
    res = fit(params, truth + jnp.log(jnp.array([1.3, 0.7])), data, solver, dt=5e-3, refine_steps=30)
    np.testing.assert_allclose(jnp.exp(res.theta), [ROD_MASS, 1.0], rtol=1e-6)


def _run_lm(residual, theta0, damping, steps=50):
    """The Levenberg-Marquardt stage of :func:`fit` on a plain residual function."""
    from difflie.identify import _levenberg_marquardt

    resjac = jax.jit(lambda th: (residual(th), jax.jacfwd(residual)(th)))
    loss = jax.jit(lambda th: 0.5 * jnp.sum(residual(th) ** 2))
    iterations = {"gauss_newton": 0}

    def check(value, stage, it):
        assert all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree.leaves(value)), (stage, it)

    theta, _, _ = _levenberg_marquardt(jnp.asarray(theta0), resjac, loss, steps, 1e-12, 1e-14, lambda *a: None, check,
                                 iterations, damping)  # fmt: skip
    return theta, iterations["gauss_newton"]


@pytest.mark.parametrize("damping", ["marquardt", "levenberg"])
def test_levenberg_marquardt_steps_with_a_coordinate_the_residuals_ignore(damping):
    """A coordinate that no residual depends on (a zero Jacobian column, like the mass of a
    robot's first link, which turns about a vertical axis) makes Marquardt's ``J^T J + lam
    diag(J^T J)`` singular for every ``lam``: without the floor on the scaling the step was
    non-finite at every damping and the fit took no step. Now both dampings converge to the
    least-squares value and leave the ignored coordinate exactly where it was."""
    def residual(th):
        return jnp.stack([th[0] - 1.0, 0.5 * (th[0] - 2.0), jnp.exp(th[0]) - 2.0, 0.0 * th[1]])

    theta, its = _run_lm(residual, [0.0, 0.3], damping)
    assert its >= 3
    assert float(theta[1]) == 0.3
    g = jax.grad(lambda th: 0.5 * jnp.sum(residual(th) ** 2))(theta)
    assert abs(float(g[0])) < 1e-10, g


def test_levenberg_damping_leaves_unidentifiable_combinations_alone():
    """Rank-deficient linear least squares ``|M theta - b|`` with columns of scales 1 and 1e-2
    (only ``theta_0 + theta_1`` of the first two coordinates is seen): Levenberg's damping
    converges to the minimum-norm change from the start (the steps stay in the row space of
    ``M``), so the unseen combination ``theta_0 - theta_1`` keeps its start value."""
    M = jnp.array([[1.0, 1.0, 0.0], [2.0, 2.0, 1e-2], [0.0, 0.0, 1e-2], [1.0, 1.0, 3e-2]])
    b = jnp.array([1.0, 2.5, -1e-2, 0.3])
    theta0 = jnp.array([0.4, -0.7, 2.0])
    theta, its = _run_lm(lambda th: M @ th - b, theta0, "levenberg", steps=200)
    assert its >= 1
    expected = theta0 + jnp.linalg.pinv(M) @ (b - M @ theta0)
    np.testing.assert_allclose(theta, expected, rtol=1e-10, atol=1e-12)
    assert abs(float(theta[0] - theta[1]) - float(theta0[0] - theta0[1])) < 1e-12


def top_of_mass(theta):
    """The built-in heavy top with the mass ``theta[0]``; not physical for a mass <= 0."""
    from difflie.models import heavy_top

    return heavy_top(mass=theta[0], omega0=(0.0, 15.0, -4.6))


def test_a_trial_where_the_run_fails_is_rejected_and_adaptive_runs_fit():
    """A trial ``theta`` whose simulation fails gives a NaN loss (Levenberg-Marquardt raises
    its damping) instead of an error that ends the fit; an adaptive run's Jacobian is taken in
    forward mode without being told (``adjoint="forward"``: reverse mode is its default)."""
    from difflie.identify import _loss
    from difflie.solvers.rkmk import Dopri5

    controller = PIDController(rtol=1e-9, atol=1e-9)
    data = measure(top_of_mass(jnp.array([15.0])), Dopri5(), (0.1, 0.2), dt=1e-2, stepsize_controller=controller)
    args = (top_of_mass, Dopri5(), data, 1e-2, 0.0, {"stepsize_controller": controller})
    assert np.isnan(float(_loss(jnp.array([-3.0]), *args)))  # a negative mass: the run fails at step 0
    assert float(_loss(jnp.array([15.0]), *args)) < 1e-12
    res = fit(top_of_mass, jnp.array([12.0]), data, Dopri5(), dt=1e-2, refine_steps=20, callback=None,
              simulate_kwargs={"stepsize_controller": controller})  # fmt: skip
    assert abs(float(res.theta[0]) - 15.0) < 1e-5, res.theta


def free_body_of_mass(theta):
    """A spinning body without forces: its motion does not depend on its mass ``theta[0]``."""
    from difflie.models import torque_free

    return torque_free(mass=theta[0], omega0=(0.5, 0.0, 3.0))


def test_a_parameter_the_data_do_not_see_is_named():
    """The motion of a free body is the same for every mass: ``fit`` says that the data do not
    determine it (its Jacobian column is zero: the pseudo-inverse gives it no variance, so the
    covariance alone would not show it); a mass that the motion does depend on is not named."""
    data = measure(free_body_of_mass(jnp.array([1.0])), RKMK4(), (0.1, 0.2), dt=1e-2)
    with pytest.warns(UserWarning, match=r"fit: the data hardly determine theta\[0\] = 2"):
        res = fit(free_body_of_mass, jnp.array([2.0]), data, RKMK4(), dt=1e-2, refine_steps=3, callback=None)
    assert float(res.theta[0]) == 2.0 and float(res.covariance[0, 0]) == 0.0
    data = measure(top_of_mass(jnp.array([15.0])), RKMK4(), (0.1, 0.2), dt=1e-2, sigma_position=1e-3, key=jax.random.PRNGKey(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit(top_of_mass, jnp.array([12.0]), data, RKMK4(), dt=1e-2, refine_steps=10, callback=None)


def test_lbfgs_at_a_failing_run_says_why():
    """L-BFGS's losses run with ``throw=False`` (a failed trial is NaN); where the current
    ``theta`` itself fails, the run's own error is raised, not only "non-finite loss"."""
    data = measure(top_of_mass(jnp.array([15.0])), RKMK4(), (0.1, 0.2), dt=1e-2)
    with pytest.raises(Exception, match="not physical"):
        fit(top_of_mass, jnp.array([-1.0]), data, RKMK4(), dt=1e-2, refine="lbfgs", refine_steps=2, callback=None)
