"""Gradients through ``simulate`` for every solver, against central finite differences.

Each case maps a parameter vector ``p`` (mass, inertia, COM, initial angular velocity, initial
rotation vector, ...) to a fixed random linear functional of the final state. Reverse mode
(``jax.grad``) and forward mode (``jax.jvp`` along each coordinate) are compared with central
differences of the same discrete map in float64 (relative error < 1e-6 per parameter group), at
a generic point and at zero angular velocity with the identity rotation (where the Lie-group
maps take their Taylor branches: a NaN there would show up in the gradient). One compiled
value-and-jvp function serves both the finite differences and forward mode.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from difflie.body import RigidBody
from difflie.lie import SO3
from difflie.model import Model
from difflie.models.rigid import heavy_top
from difflie.simulate import PIDController, simulate
from difflie.solvers.backward_euler import BackwardEuler
from difflie.solvers.generalized_alpha import GeneralizedAlpha
from difflie.solvers.rkmk import RKMK4, Dopri5
from difflie.solvers.variational import DQVI


RTOL = 1e-6
_rng = np.random.default_rng(7)
WEIGHTS = tuple(jnp.asarray(_rng.normal(size=s)) for s in ((1, 3), (1, 3, 3), (1, 3), (1, 3)))


def sym(v):
    """Symmetric 3x3 from ``(J11, J22, J33, J12, J13, J23)``."""
    return jnp.array([[v[0], v[3], v[4]], [v[3], v[1], v[5]], [v[4], v[5], v[2]]])


def functional(sol) -> jax.Array:
    """A fixed random linear functional of the final body state."""
    s = (sol.position[-1], sol.rotation[-1], sol.velocity[-1], sol.angular_velocity[-1])
    return sum(jnp.sum(w * x) for w, x in zip(WEIGHTS, s))


# -- parameterised models --------------------------------------------------------------------

# p = (mass, J11, J22, J33, J12, J13, J23, com (3), omega0 (3), rotation vector of R0 (3))
GROUPS = {"mass": slice(0, 1), "inertia": slice(1, 7), "com": slice(7, 10), "omega0": slice(10, 13), "R0": slice(13, 16)}
P_TOP = np.array([15.0, 0.30, 0.47, 0.25, 0.01, -0.02, 0.015, 0.05, 1.0, 0.02, 0.5, 20.0, -1.0, 0.1, -0.2, 0.05])


def zero_motion(p):
    """The same parameters with zero angular velocity and the identity rotation."""
    q = np.array(p)
    q[GROUPS["omega0"]] = 0.0
    q[GROUPS["R0"]] = 0.0
    return q


def top(p):
    return heavy_top(
        mass=p[0], inertia=sym(p[1:7]), com=p[7:10], omega0=p[10:13], R0=SO3.exp(p[13:16]).matrix
    )


# p = (mass, J (6), com (3), omega0 (3), R0 rotation vector (3), v0 (3)): a free body in gravity
P_FREE = np.array([2.0, 0.9, 0.6, 0.4, 0.02, 0.01, -0.03, 0.1, -0.05, 0.2, 3.0, -1.0, 2.0, 0.3, 0.1, -0.2, 0.4, 0.0, 1.5])


def free_body(p):
    body = RigidBody(p[0], sym(p[1:7]), p[7:10])
    R0 = SO3.exp(p[13:16]).matrix
    return Model(body, r0=jnp.zeros((1, 3)), R0=R0[None], omega0=p[10:13][None], v0=p[16:19][None])


def make_functional(build, solver, t1, dt, **kwargs):
    def f(p):
        return functional(simulate(build(p), solver, 0.0, t1, dt, **kwargs))

    return f


# p = (rod mass, rod principal inertias (3)): Haug's slider crank driven by a known crank torque
# instead of its angle driver (so the motion depends on the masses), see tests/test_identify.py
P_CRANK = np.array([0.5, 4e-3, 4e-4, 4e-3])
CRANK_GROUPS = {"mass": slice(0, 1), "inertia": slice(1, 4)}


def crank(p):
    from test_identify import crank_model

    return crank_model(p[0], jnp.diag(p[1:4]))


def crank_functional(solver):
    def f(p):
        sol = simulate(crank(p), solver, 0.0, 0.05, 5e-3)
        return sum(jnp.sum(w * x[-1]) for w, x in zip(CRANK_WEIGHTS, (sol.position, sol.rotation, sol.velocity, sol.angular_velocity)))

    return f


CRANK_WEIGHTS = tuple(jnp.asarray(_rng.normal(size=s)) for s in ((3, 3), (3, 3, 3), (3, 3), (3, 3)))


# -- checking machinery ----------------------------------------------------------------------


def central_differences(value, p, rel=1e-5):
    g = np.zeros_like(p)
    for i in range(p.size):
        h = rel * max(abs(p[i]), 1.0)
        e = np.zeros_like(p)
        e[i] = h
        g[i] = (float(value(p + e)) - float(value(p - e))) / (2 * h)
    return g


def group_errors(g, g_ref, groups):
    """Relative error per group; a group whose derivative vanishes physically (the COM offset of
    a free body does not change its motion) is measured against 1e-4 of the whole gradient."""
    floor = 1e-4 * np.linalg.norm(g_ref)
    return {
        name: np.linalg.norm(g[sl] - g_ref[sl]) / max(np.linalg.norm(g_ref[sl]), floor, 1e-300)
        for name, sl in groups.items()
    }


class Case:
    """Compiled value+jvp and value+grad of one functional; the FD and both modes at ``p``."""

    def __init__(self, f, forward=True, groups=GROUPS, fd_step=1e-5):
        self.forward = forward
        self.groups = groups
        self.fd_step = fd_step
        if forward:
            self.jvp = jax.jit(lambda p, d: jax.jvp(f, (p,), (d,)))
        self.value = jax.jit(f) if not forward else (lambda p: self.jvp(p, jnp.zeros_like(p))[0])
        self.grad = jax.jit(jax.grad(f))

    def check(self, p):
        p = np.asarray(p, float)
        g_rev = np.asarray(self.grad(p))
        assert np.all(np.isfinite(g_rev)), g_rev
        g_fd = central_differences(self.value, p, self.fd_step)
        errors = {"reverse": group_errors(g_rev, g_fd, self.groups)}
        if self.forward:
            g_fwd = np.array([float(self.jvp(p, e)[1]) for e in np.eye(p.size)])
            assert np.all(np.isfinite(g_fwd)), g_fwd
            errors["forward"] = group_errors(g_fwd, g_fd, self.groups)
        for mode, errs in errors.items():
            for name, err in errs.items():
                assert err < RTOL, f"{mode} mode, d/d{name}: relative error {err:.2e} (all: {errors})"
        print("max relative error:", {m: f"{max(e.values()):.1e}" for m, e in errors.items()})
        return errors


@pytest.fixture(scope="module")
def rkmk4_top():
    return Case(make_functional(top, RKMK4(), 0.1, 5e-3))


@pytest.fixture(scope="module")
def dopri5_top():
    controller = PIDController(rtol=1e-8, atol=1e-8)
    f = make_functional(top, Dopri5(), 0.1, 1e-2, stepsize_controller=controller, max_steps=64)
    return Case(f, forward=False)


@pytest.fixture(scope="module")
def galpha_top():
    # Newton to rounding level: finite differences of a map with a 1e-8 stopping tolerance
    # would measure the tolerance, not the derivative.
    solver = GeneralizedAlpha(rtol=1e-13, atol=1e-13, ctol=1e-14)
    # The Newton solves leave rounding-level noise in the value that a step of 1e-5 turns into
    # ~1e-6 of d/dmass at zero motion (1e-6: 2e-5; both AD modes agree to 1e-14 throughout); at
    # 1e-4 the truncation error is still ~1e-8.
    return Case(make_functional(top, solver, 0.05, 5e-3), fd_step=1e-4)


@pytest.fixture(scope="module")
def dqvi_free():
    return Case(make_functional(free_body, DQVI(), 0.1, 1e-2), groups=dict(GROUPS, v0=slice(16, 19)))


@pytest.fixture(scope="module")
def backward_euler_crank():
    # full Newton to near rounding level (see galpha_top): the multipliers stall near 1e-9 below that
    return Case(crank_functional(BackwardEuler("rA", tol=1e-9, newton="full")), groups=CRANK_GROUPS)


@pytest.fixture(scope="module")
def galpha_crank():
    return Case(crank_functional(GeneralizedAlpha(rtol=1e-13, atol=1e-13, ctol=1e-14)), groups=CRANK_GROUPS)


# -- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["generic", "zero_motion"])
def test_rkmk4_heavy_top(rkmk4_top, point):
    p = P_TOP if point == "generic" else zero_motion(P_TOP)
    rkmk4_top.check(p)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["generic", "zero_motion"])
def test_dopri5_adaptive_heavy_top(dopri5_top, point):
    p = P_TOP if point == "generic" else zero_motion(P_TOP)
    dopri5_top.check(p)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["generic", "zero_motion"])
def test_generalized_alpha_heavy_top(galpha_top, point):
    """The pivot is an index-3 constraint here; gradients come from the IFT per step."""
    p = P_TOP if point == "generic" else zero_motion(P_TOP)
    galpha_top.check(p)


@pytest.mark.parametrize("point", ["generic", "zero_motion"])
def test_dqvi_free_body(dqvi_free, point):
    p = P_FREE if point == "generic" else zero_motion(P_FREE)
    dqvi_free.check(p)


@pytest.mark.slow
def test_backward_euler_slider_crank(backward_euler_crank):
    """Backward Euler (rA) differentiates each step by the IFT (``newton.newton_solve``)."""
    backward_euler_crank.check(P_CRANK)


@pytest.mark.slow
def test_generalized_alpha_slider_crank(galpha_crank):
    galpha_crank.check(P_CRANK)


@pytest.mark.parametrize("solver", [RKMK4(), GeneralizedAlpha(), DQVI()], ids=["RKMK4", "GeneralizedAlpha", "DQVI"])
def test_zero_motion_gradient_is_analytic(solver):
    """Torque-free body at rest at the identity: to first order R(T) = exp(w) exp(T omega0),
    so d R(T) / d omega0_i = T hat(e_i) and d R(T) / d w_i = hat(e_i) (independent check of
    the Taylor branches' derivatives), for an explicit, an implicit and a variational solver."""
    T = 0.1
    W = np.asarray(WEIGHTS[1][0])
    hats = np.stack([np.cross(np.eye(3), e) for e in np.eye(3)])  # hats[i] @ x = e_i x x
    expected_w = np.array([np.sum(W * hats[i]) for i in range(3)])
    body = RigidBody(1.5, jnp.diag(jnp.array([0.5, 0.7, 0.9])))

    def rotation_functional(solver, x):
        model = Model(body, R0=SO3.exp(x[3:]).matrix[None], omega0=x[:3][None], gravity=jnp.zeros(3))
        sol = simulate(model, solver, 0.0, T, T / 4)
        return jnp.sum(W * sol.rotation[-1, 0])

    g = jax.jit(jax.grad(lambda x: rotation_functional(solver, x)))(jnp.zeros(6))
    np.testing.assert_allclose(g[:3], T * expected_w, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(g[3:], expected_w, rtol=1e-10, atol=1e-13)


def test_dopri5_forward_mode():
    kwargs = dict(stepsize_controller=PIDController(rtol=1e-8, atol=1e-8), max_steps=64, adjoint="forward")
    f = make_functional(top, Dopri5(), 0.1, 1e-2, **kwargs)
    p = jnp.asarray(P_TOP)
    d = jnp.asarray(np.random.default_rng(1).normal(size=P_TOP.size))
    jvp = jax.jit(lambda p: jax.jvp(f, (p,), (d,)))  # one program for the derivative and the differences
    _, df = jvp(p)
    h = 1e-6
    fd = (jvp(p + h * d)[0] - jvp(p - h * d)[0]) / (2 * h)
    assert abs(float(df) - float(fd)) < 1e-6 * abs(float(fd))


@pytest.mark.slow
def test_reverse_mode_memory_grows_sublinearly():
    """``simulate`` nests its fixed-step scan in rematerialised chunks of ~sqrt(n) steps, so the
    compiled gradient's temporary memory grows like sqrt(n): 16x the steps, < 8x the memory
    (without checkpointing it grows ~16x)."""

    def temp_bytes(steps, checkpoint):
        def f(p):
            sol = simulate(heavy_top(inertia=jnp.diag(p)), RKMK4(), 0.0, steps * 1e-3, 1e-3, checkpoint=checkpoint)
            return jnp.sum(sol.rotation[-1, 0])

        return jax.jit(jax.grad(f)).lower(jnp.array([0.3, 0.47, 0.25])).compile().memory_analysis().temp_size_in_bytes

    small, large = temp_bytes(256, True), temp_bytes(4096, True)
    plain_small, plain_large = temp_bytes(256, False), temp_bytes(4096, False)
    assert large < 8 * small, (small, large)
    assert plain_large > 12 * plain_small, (plain_small, plain_large)  # the control grows linearly
    # checkpoint="steps" keeps one state per step: linear too, but far below every residual.
    steps_small, steps_large = temp_bytes(256, "steps"), temp_bytes(4096, "steps")
    assert steps_large > 8 * steps_small and steps_large < plain_large / 8, (steps_small, steps_large)


@pytest.mark.parametrize(
    "formulation", ["rA", pytest.param("rp", marks=pytest.mark.slow), pytest.param("re", marks=pytest.mark.slow)]
)
def test_backward_euler_geometry_gradient(formulation):
    """Reverse mode through a constrained model's geometry: the double pendulum's second rod
    length sets its mass, inertia, initial position and joint vectors, and ``init`` assembles
    the configuration (``kinematics.assemble``: its iterations run without derivatives, one
    differentiable step attaches them)."""
    from difflie.models import double_pendulum

    @jax.jit
    @jax.value_and_grad
    def final_z(length2):  # one program for the gradient and the differences
        sol = simulate(double_pendulum(length2=length2), BackwardEuler(formulation=formulation), 0.0, 0.02, 1e-3)
        return sol.position[-1, 1, 2]

    grad = final_z(2.0)[1]
    fd = (final_z(2.0 + 1e-5)[0] - final_z(2.0 - 1e-5)[0]) / 2e-5
    np.testing.assert_allclose(grad, fd, rtol=1e-6)
