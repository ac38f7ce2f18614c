"""Integrating absolute-coordinate models through the LGT (Müller's Algorithms A and B)."""

import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from difflie.coords import (
    AbsoluteModel,
    EulerAngles,
    EulerParameters,
    LGTGeneralizedAlpha,
    LGTRungeKutta,
    LGTSolver,
    Rodrigues,
    RotationMatrix,
    RotationVector,
    WienerMilenkovic,
    integrate,
)
from difflie.lie import SO3, ops as _ops
from difflie.simulate import PIDController, SaveAt, simulate
from difflie.results import RESULTS
from difflie.solvers.generalized_alpha import alpha_coefficients
from difflie.solvers.tableaux import BOSH3, DOPRI5

CHARTS = [
    EulerAngles("xyz"),
    EulerAngles("zxz"),
    RotationMatrix(),
    EulerParameters(),
    RotationVector(),
    Rodrigues(),
    WienerMilenkovic(),
]
IDS = [type(c).__name__ + getattr(c, "seq", "") for c in CHARTS]

# -- heavy top about its fixed point, written in absolute rotation coordinates -----------------

MASS, GRAVITY = 15.0, jnp.array([0.0, 0.0, -9.81])
COM = jnp.array([0.0, 1.0, 0.0])
J_PIVOT = jnp.diag(jnp.array([15.234375, 0.46875, 15.234375]))
OMEGA0 = jnp.array([0.0, 150.0, -4.61538])
H_TOP, N_TOP = 1e-3, 100  # 0.1 s: the top spins 15 rad, the Cardan angles pass gimbal lock


def top_omega_dot(R, w):
    """Euler's equation about the pivot: J w_dot = COM x (m R^T g) - w x J w."""
    tau = jnp.cross(COM, MASS * R.T @ GRAVITY)
    return jnp.linalg.solve(J_PIVOT, tau - jnp.cross(w, J_PIVOT @ w))


@functools.cache
def top_model(chart):
    """One model object per chart, so jitted runs compile once per chart."""

    def acceleration(t, q, V, args):  # the user's model, in the chart's coordinates
        return jax.vmap(top_omega_dot)(chart.to_rotation(q), V)

    return AbsoluteModel(chart, acceleration, chart.from_rotation(jnp.eye(3))[None], OMEGA0[None])


@jax.jit
def top_reference_so3():
    """The same top integrated directly on SO(3) by RKMK4 (group matrices, no chart)."""

    def step(y, _):
        R, w = y
        h = H_TOP
        kx, kw = [], []
        for a, x_prev, w_prev in [(0.0, None, None), (0.5, 0, 0), (0.5, 1, 1), (1.0, 2, 2)]:
            x = jnp.zeros(3) if x_prev is None else a * h * kx[x_prev]
            wi = w if w_prev is None else w + a * h * kw[w_prev]
            kw.append(top_omega_dot(R @ SO3.exp(x).matrix, wi))
            kx.append(SO3.dexpinv(x) @ wi)
        X = h / 6 * (kx[0] + 2 * kx[1] + 2 * kx[2] + kx[3])
        y1 = (R @ SO3.exp(X).matrix, w + h / 6 * (kw[0] + 2 * kw[1] + 2 * kw[2] + kw[3]))
        return y1, y1[0]

    return jax.lax.scan(step, (jnp.eye(3), OMEGA0), None, length=N_TOP)[1]


@eqx.filter_jit
def run_lgt(model, solver):
    return integrate(model, solver, 0.0, H_TOP, N_TOP)


@eqx.filter_jit
def run_naive_rk4(model):
    """Classical RK4 on the legacy ODE q_dot = H(q)^-1 V (vector space, no LGT)."""

    def step(y, _):
        f = lambda y_: model.vector_field(0.0, y_, None)  # noqa: E731
        k1 = f(y)
        k2 = f(jax.tree.map(lambda a, b: a + 0.5 * H_TOP * b, y, k1))
        k3 = f(jax.tree.map(lambda a, b: a + 0.5 * H_TOP * b, y, k2))
        k4 = f(jax.tree.map(lambda a, b: a + H_TOP * b, y, k3))
        y1 = jax.tree.map(lambda a, b1, b2, b3, b4: a + H_TOP / 6 * (b1 + 2 * b2 + 2 * b3 + b4), y, k1, k2, k3, k4)
        return y1, y1[0]

    return jax.lax.scan(step, (model.q0, model.V0), None, length=N_TOP)[1]


@pytest.fixture(scope="module")
def top_reference():
    return top_reference_so3()


@pytest.fixture(scope="module")
def top_accurate():
    """The top by DOP853 at rtol = atol = 1e-12 on (Q, omega), numpy only (independent)."""
    J, Jinv = np.asarray(J_PIVOT), np.linalg.inv(np.asarray(J_PIVOT))
    mg, c = MASS * np.asarray(GRAVITY), np.asarray(COM)

    def rhs(t, y):
        Q, w = y[:4] / np.linalg.norm(y[:4]), y[4:]
        p0, p = Q[0], Q[1:]
        R = (p0 * p0 - p @ p) * np.eye(3) + 2 * np.outer(p, p) + 2 * p0 * np.array(
            [[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]]
        )
        w_dot = Jinv @ (np.cross(c, R.T @ mg) - np.cross(w, J @ w))
        return np.concatenate([0.5 * np.concatenate([[-p @ w], p0 * w + np.cross(p, w)]), w_dot])

    ts = H_TOP * np.arange(1, N_TOP + 1)
    y0 = np.concatenate([[1.0, 0.0, 0.0, 0.0], np.asarray(OMEGA0)])
    sol = solve_ivp(rhs, (0.0, ts[-1]), y0, method="DOP853", rtol=1e-12, atol=1e-12, t_eval=ts)
    Q = sol.y[:4].T / np.linalg.norm(sol.y[:4].T, axis=-1, keepdims=True)
    return np.asarray(_ops.quat_to_matrix(jnp.asarray(Q)))


def _rotation_error(chart, q, R_ref):
    return float(jnp.max(jnp.abs(chart.to_rotation(q[:, 0]) - R_ref)))


@pytest.mark.parametrize("chart", CHARTS, ids=IDS)
def test_heavy_top_every_chart_equals_so3(chart, top_reference):
    """RKMK4 through the LGT gives the SO(3) trajectory to round-off, whatever the chart."""
    _, q, _ = run_lgt(top_model(chart), LGTRungeKutta())
    assert _rotation_error(chart, q[1:], top_reference) < 1e-9
    if isinstance(chart, EulerAngles):  # the run did go through (or next to) the gimbal lock
        middle = q[:, 0, 1]
        closeness = jnp.abs(jnp.sin(middle)) if chart.proper else jnp.abs(jnp.cos(middle))
        assert float(closeness.min()) < 0.1


def test_heavy_top_matches_difflie_rkmk4(top_reference):
    """The Cardan-angle model through the LGT against difflie's own RKMK4 heavy top."""
    from difflie.models import heavy_top
    from difflie.solvers.rkmk import RKMK4

    sol = simulate(heavy_top(), RKMK4(), t0=0.0, t1=H_TOP * N_TOP, dt=H_TOP, saveat=SaveAt(steps=True))
    chart = EulerAngles("xyz")
    _, q, _ = run_lgt(top_model(chart), LGTRungeKutta(RKMK4()))
    assert _rotation_error(chart, q, sol.rotation[:, :1].reshape(-1, 3, 3)) < 1e-9


@pytest.mark.parametrize("pinned", [True, False], ids=["heavy-top", "flying-body"])
def test_absolute_model_from_model_equals_rkmk4(pinned):
    """``AbsoluteModel.from_model`` reads the model's own dynamics: RKMK4 through the LGT (Euler
    angles, and Euler parameters) gives the trajectory of RKMK4 on the model itself (a pinned top;
    a free body with a COM offset, a spring and gravity) to round-off, positions included."""
    from difflie.models import heavy_top
    from difflie.solvers.rkmk import RKMK4
    from helpers import flying_body

    model = heavy_top() if pinned else flying_body()
    h, t1 = 1e-3, 0.1
    ref = simulate(model, RKMK4(), 0.0, t1, h, saveat=SaveAt(t1=True))
    for chart in (EulerAngles("zxz"), EulerParameters()):
        sol = simulate(AbsoluteModel.from_model(model, chart), LGTRungeKutta(RKMK4()), 0.0, t1, h, saveat=SaveAt(t1=True))
        for field in ("position", "rotation", "velocity", "angular_velocity"):
            a, b = getattr(sol.states, field), getattr(ref.states, field)
            assert float(jnp.max(jnp.abs(a - b))) < 1e-9 * (1 + float(jnp.max(jnp.abs(b)))), (type(chart).__name__, field)


def test_absolute_model_from_model_refuses_constraints():
    from difflie.models import four_link

    with pytest.raises(ValueError, match="constraints"):
        AbsoluteModel.from_model(four_link(), EulerAngles("xyz"))


@pytest.mark.parametrize("chart", [EulerAngles("xyz"), EulerAngles("zxz"), RotationVector()], ids=str)
def test_naive_angle_ode_fails_where_lgt_does_not(chart, top_reference):
    """The same RK4 on q_dot = H^-1 omega loses the trajectory at the singularity (or NaNs)."""
    model = top_model(chart)
    q_naive = run_naive_rk4(model)
    err_naive = float(jnp.nan_to_num(jnp.max(jnp.abs(chart.to_rotation(q_naive[:, 0]) - top_reference)), nan=np.inf))
    _, q, _ = run_lgt(model, LGTRungeKutta())
    assert err_naive > 1e-3
    assert _rotation_error(chart, q[1:], top_reference) < 1e-9


# -- a free body with chart-dependent forces: convergence orders -------------------------------

INERTIA = jnp.diag(jnp.array([0.3, 0.5, 0.7]))
DIPOLE = jnp.array([0.1, -0.2, 0.3])
T_END = 1.0


def free_force(R, w):
    """Torque of a body-fixed dipole in a field, a body-fixed thrust and gravity (frame at COM)."""
    tau = jnp.cross(DIPOLE, 2.0 * R.T @ GRAVITY)
    w_dot = jnp.linalg.solve(INERTIA, tau - jnp.cross(w, INERTIA @ w))
    a = GRAVITY + 3.0 * R[:, 0]
    return a, w_dot


def free_acceleration(chart):
    def acceleration(t, q, V, args):  # V = (r_dot, omega_body): mixed velocity
        a, w_dot = jax.vmap(free_force)(chart.rotation(q, "SO3xR3"), V[:, 3:])
        return jnp.concatenate([a, w_dot], -1)

    return acceleration


R0 = SO3.exp(jnp.array([0.3, 1.2, -0.4])).matrix
V0 = jnp.array([0.5, 0.2, 4.0, 1.0, -2.0, 3.0])


@functools.cache
def free_model(chart):
    q0 = jnp.concatenate([jnp.array([0.1, 0.2, 0.3]), chart.from_rotation(R0)])[None]
    return AbsoluteModel(chart, free_acceleration(chart), q0, V0[None])


@pytest.fixture(scope="module")
def free_reference():
    """DOP853 at rtol = atol = 1e-13 on (Q, r, r_dot, omega) with numpy (independent)."""

    def rhs(t, y):
        Q, v, w = y[:4], y[7:10], y[10:]  # r = y[4:7] does not enter the forces
        R = np.asarray(_ops.quat_to_matrix(jnp.asarray(Q / np.linalg.norm(Q))))
        a, w_dot = (np.asarray(x) for x in free_force(jnp.asarray(R), jnp.asarray(w)))
        p0, p = Q[0], Q[1:]
        Q_dot = 0.5 * np.concatenate([[-p @ w], p0 * w + np.cross(p, w)])
        return np.concatenate([Q_dot, v, a, w_dot])

    y0 = np.concatenate([np.asarray(_ops.matrix_to_quat(R0)), [0.1, 0.2, 0.3], np.asarray(V0)])
    sol = solve_ivp(rhs, (0.0, T_END), y0, method="DOP853", rtol=1e-13, atol=1e-13)
    y = sol.y[:, -1]
    return np.asarray(_ops.quat_to_matrix(jnp.asarray(y[:4] / np.linalg.norm(y[:4])))), y[4:7]


def pose_error(chart, q, reference):
    R_ref, r_ref = reference
    return float(np.abs(np.asarray(chart.rotation(q, "SO3xR3")) - R_ref).max() + np.abs(np.asarray(q[:3]) - r_ref).max())


def fitted_order(hs, errors):
    return float(np.polyfit(np.log(hs), np.log(errors), 1)[0])


STEPS = [0.1, 0.05, 0.025, 0.0125]


@eqx.filter_jit
def final_lgt_rk(model, solver, dt, n):
    """State after ``n`` (traced) steps of ``solver``: one compilation for every step size."""

    def body(k, y):
        return solver.step(model, k * dt, (k + 1) * dt, y, None)[0]

    return jax.lax.fori_loop(0, n, body, (model.q0, model.V0))[0][0]


@pytest.mark.parametrize("group", ["SO3xR3", pytest.param("SE3", marks=pytest.mark.slow)])
def test_order_rk4_through_lgt(group, free_reference):
    """RKMK4 through the LGT with Cardan angles converges at order 4 (fitted slope)."""
    chart = EulerAngles("zyx")
    model, solver = free_model(chart), LGTRungeKutta(group=group)
    errors = [
        pose_error(chart, final_lgt_rk(model, solver, jnp.asarray(h), jnp.asarray(round(T_END / h))), free_reference)
        for h in STEPS
    ]
    slope = fitted_order(STEPS, errors)
    assert 3.7 < slope < 4.5, (slope, errors)
    assert errors[-1] < 1e-5


@pytest.mark.parametrize(
    "solver, order",
    [(diffrax.Tsit5(), 5), pytest.param(diffrax.Bosh3(), 3, marks=pytest.mark.slow)],
    ids=["Tsit5", "Bosh3"],
)
def test_order_diffrax_through_lgt(solver, order, free_reference):
    """Algorithm B: a diffrax solver on the local system keeps its order (SE(3) local coords)."""
    chart = EulerAngles("zyx")
    model = free_model(chart)
    wrapped = LGTSolver(solver, chart, group="SE3", velocity="mixed")

    @eqx.filter_jit
    def final(model, dt):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(model.vector_field), wrapped, 0.0, T_END, dt, (model.q0, model.V0), max_steps=128
        )
        return sol.ys[0][-1, 0]

    errors = [pose_error(chart, final(model, jnp.asarray(h)), free_reference) for h in STEPS]  # one compilation
    slope = fitted_order(STEPS, errors)  # measured: Tsit5 5.6 (pre-asymptotic), Bosh3 2.99
    assert order - 0.3 < slope < order + 0.8, (slope, errors)


def test_diffrax_adaptive_dopri5(free_reference):
    """Adaptive Dopri5 with error control in local coordinates reaches the tolerance."""
    chart = EulerParameters()
    model = free_model(chart)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(model.vector_field),
        LGTSolver(diffrax.Dopri5(), chart, group="SO3xR3"),
        0.0,
        T_END,
        0.01,
        (model.q0, model.V0),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
    )
    q = sol.ys[0][-1, 0]
    assert pose_error(chart, q, free_reference) < 1e-7
    assert abs(float(jnp.linalg.norm(q[3:])) - 1.0) < 1e-14  # no renormalisation needed
    assert int(sol.stats["num_accepted_steps"]) < 400


def test_diffrax_gimbal_lock_contrast(top_accurate, top_reference):
    """Same diffrax term: plain Tsit5 in Cardan angles fails at gimbal lock, LGTSolver does not."""
    chart = EulerAngles("xyz")
    model = top_model(chart)
    ts = H_TOP * jnp.arange(1, N_TOP + 1)
    term = diffrax.ODETerm(model.vector_field)
    kw = dict(t0=0.0, t1=ts[-1], dt0=H_TOP, y0=(model.q0, model.V0), saveat=diffrax.SaveAt(ts=ts))
    lgt = diffrax.diffeqsolve(term, LGTSolver(diffrax.Tsit5(), chart, group="SO3"), **kw)
    plain = diffrax.diffeqsolve(term, diffrax.Tsit5(), throw=False, **kw)
    err_lgt = _rotation_error(chart, lgt.ys[0], top_accurate)
    err_plain = float(jnp.nan_to_num(jnp.max(jnp.abs(chart.to_rotation(plain.ys[0][:, 0]) - top_accurate)), nan=np.inf))
    err_rkmk4 = float(jnp.max(jnp.abs(top_reference - top_accurate)))
    assert err_lgt < 0.1 * err_rkmk4  # order 5 beats RKMK4 (about 1e-5 here) at the same step
    assert err_plain > 1e-3


def test_embedded_error_estimate():
    """With DOPRI5's embedded pair, the estimate (dX, dV) is O(h^5) and drives adaptivity."""
    chart = EulerAngles("zyx")
    model = free_model(chart)
    solver = LGTRungeKutta(DOPRI5, method_order=5, group="SE3")
    assert solver.adaptive and not LGTRungeKutta(BOSH3, 3).tableau.b_error is None
    step = eqx.filter_jit(lambda model, h: solver.step(model, 0.0, h, (model.q0, model.V0), None)[1])
    errs = []
    for h in (0.02, 0.01):
        err = step(model, h)
        errs.append(float(jnp.max(jnp.abs(jnp.concatenate([err[0], err[1]], -1)))))
    assert 4.5 < np.log2(errs[0] / errs[1]) < 5.5, errs


def test_gradient_through_lgt_matches_finite_differences():
    """d(final rotation)/d(initial spin) through the LGT (Cardan angles) vs central FD."""
    chart = EulerAngles("xyz")

    @jax.jit
    @jax.value_and_grad
    def loss(w0):  # one program for the gradient and the differences
        model = top_model(chart)
        model = eqx.tree_at(lambda m: m.V0, model, w0[None])
        _, q, _ = integrate(model, LGTRungeKutta(), 0.0, 1e-3, 12)
        return jnp.sum(chart.to_rotation(q[-1, 0]) * jnp.arange(9.0).reshape(3, 3))

    g = np.asarray(loss(OMEGA0)[1])
    eps = 1e-5
    fd = np.array([(loss(OMEGA0.at[i].add(eps))[0] - loss(OMEGA0.at[i].add(-eps))[0]) / (2 * eps) for i in range(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_identity_start_no_nan_and_vmap():
    """From the identity (X = 0 every stage start; zxz is even locked there) gradients are finite;
    vmap over initial spins equals separate runs."""
    chart = EulerAngles("zxz")

    @jax.jit
    def final(w0):
        model = eqx.tree_at(lambda m: m.V0, top_model(chart), w0[None])
        return integrate(model, LGTRungeKutta(), 0.0, 1e-3, 5)[1][-1, 0]

    g = jax.jit(jax.jacfwd(final))(jnp.zeros(3))
    assert np.all(np.isfinite(np.asarray(g)))
    W = jnp.stack([OMEGA0, 0.5 * OMEGA0, jnp.array([1.0, 2.0, 3.0])])
    batched = jax.jit(jax.vmap(final))(W)
    for i in range(3):
        np.testing.assert_allclose(chart.to_rotation(batched[i]), chart.to_rotation(final(W[i])), atol=1e-14)


def test_bad_model_input():
    chart = EulerAngles("xyz")
    with pytest.raises(ValueError, match="needs q0 of width 6"):
        AbsoluteModel(chart, free_acceleration(chart), jnp.zeros((1, 7)), jnp.zeros((1, 6)))
    with pytest.raises(ValueError, match="velocity must be"):
        AbsoluteModel(chart, free_acceleration(chart), jnp.zeros((1, 6)), jnp.zeros((1, 6)), velocity="world")
    with pytest.raises(ValueError, match="needs q"):
        LGTSolver(diffrax.Tsit5(), chart, group="SE3").init(None, 0.0, 1.0, (jnp.zeros((1, 7)), jnp.zeros((1, 6))), None)


# -- generalized-alpha (Brüls, Cardona & Arnold 2012) through the LGT, on the local group ------

RHO_INF = 0.8
GA_FAST = ("EulerAnglesxyz", "EulerParameters")


@jax.jit
def top_reference_alpha():
    """The top by Lie-group generalized-alpha directly on SO(3) (matrices, no chart): the
    increment dpsi with R1 = R0 exp(dpsi) solved by six Newton iterations per step."""
    am, af, gamma, beta = alpha_coefficients(RHO_INF)
    h = H_TOP

    def step(y, _):
        R, w, wdot, a = y

        def unpack(dpsi):
            a1 = (dpsi - h * w - h**2 * (0.5 - beta) * a) / (beta * h**2)
            return a1, w + h * (1 - gamma) * a + h * gamma * a1, ((1 - am) * a1 + am * a - af * wdot) / (1 - af)

        def residual(dpsi):
            _, w1, wdot1 = unpack(dpsi)
            return wdot1 - top_omega_dot(R @ SO3.exp(dpsi).matrix, w1)

        dpsi = h * w + h**2 * (0.5 - beta) * a + h**2 * beta * (wdot - am * a) / (1 - am)
        dpsi = jax.lax.fori_loop(0, 6, lambda _, d: d - jnp.linalg.solve(jax.jacfwd(residual)(d), residual(d)), dpsi)
        a1, w1, wdot1 = unpack(dpsi)
        R1 = R @ SO3.exp(dpsi).matrix
        return (R1, w1, wdot1, a1), R1

    wdot0 = top_omega_dot(jnp.eye(3), OMEGA0)
    return jax.lax.scan(step, (jnp.eye(3), OMEGA0, wdot0, wdot0), None, length=N_TOP)[1]


@eqx.filter_jit
def run_alpha(model, solver, dt, n):
    """``n`` (traced) fixed steps of ``solver`` from the model's initial state: every ``q``, and
    the worst step result and the Newton iteration count."""
    y0, state = solver.init(model, 0.0, dt)

    def body(carry, k):
        y, state = carry
        y1, _, state, stats, result = solver.step(model, k * dt, (k + 1) * dt, y, state)
        return (y1, state), (y1.q, result._value, stats.newton_iterations)

    _, (q, results, iterations) = jax.lax.scan(body, (y0, state), jnp.arange(n, dtype=model.q0.dtype))
    return q, results, iterations


@pytest.mark.parametrize(
    "chart", [c if i in GA_FAST else pytest.param(c, marks=pytest.mark.slow) for c, i in zip(CHARTS, IDS)], ids=IDS
)
def test_alpha_heavy_top_every_chart_equals_so3(chart):
    """Generalized-alpha through the LGT reproduces generalized-alpha on SO(3) to round-off,
    through the Cardan angles' gimbal lock (no H^-1 anywhere), with no failed step."""
    q, results, iterations = run_alpha(top_model(chart), LGTGeneralizedAlpha(RHO_INF), H_TOP, N_TOP)
    assert np.all(np.asarray(results) == RESULTS.successful._value)
    assert int(iterations.max()) <= 4
    assert _rotation_error(chart, q, top_reference_alpha()) < 1e-9


def test_alpha_differs_from_rk(top_reference):
    """The comparison above can fail: the alpha trajectory is not the RKMK4 one (order 2 vs 4)."""
    chart = EulerAngles("xyz")
    q, _, _ = run_alpha(top_model(chart), LGTGeneralizedAlpha(RHO_INF), H_TOP, N_TOP)
    assert _rotation_error(chart, q, top_reference) > 1e-6


@eqx.filter_jit
def final_alpha(model, solver, dt, n):
    """``q`` after ``n`` steps (``dt``, ``n`` traced: one compilation for every step size) and
    whether every step succeeded."""

    def body(k, carry):
        y, ok = carry
        y1, _, _, _, result = solver.step(model, k * dt, (k + 1) * dt, y, None)
        return y1, ok & (result == RESULTS.successful)

    y, ok = jax.lax.fori_loop(0, n, body, (solver.init(model, 0.0, dt)[0], jnp.array(True)))
    return y.q[0], ok


def test_alpha_order_two_through_gimbal_lock(top_accurate):
    """The Cardan-angle top through gimbal lock: fitted slope 2 against DOP853."""
    chart = EulerAngles("xyz")
    model, solver = top_model(chart), LGTGeneralizedAlpha(RHO_INF)
    hs = [4e-3, 2e-3, 1e-3, 5e-4]
    errors = []
    for h in hs:
        q, ok = final_alpha(model, solver, jnp.asarray(h), jnp.asarray(round(H_TOP * N_TOP / h)))
        assert bool(ok)
        errors.append(float(jnp.max(jnp.abs(chart.to_rotation(q) - top_accurate[-1]))))
    slope = fitted_order(hs, errors)
    assert 1.85 < slope < 2.3, (slope, errors)


def test_alpha_order_two_free_body(free_reference):
    """Free body in Cardan angles (SO(3)xR3 local group, translation too): fitted slope 2."""
    chart = EulerAngles("zyx")
    model, solver = free_model(chart), LGTGeneralizedAlpha(0.9)
    errors = []
    for h in STEPS:
        q, ok = final_alpha(model, solver, jnp.asarray(h), jnp.asarray(round(T_END / h)))
        assert bool(ok)
        errors.append(pose_error(chart, q, free_reference))
    slope = fitted_order(STEPS, errors)
    assert 1.85 < slope < 2.3, (slope, errors)


def test_alpha_newton_failure_reported():
    """A step the Newton iteration cannot finish in one iteration reports newton_failed."""
    chart = EulerAngles("xyz")
    _, results, iterations = run_alpha(top_model(chart), LGTGeneralizedAlpha(RHO_INF, max_iterations=1), H_TOP, 2)
    assert np.all(np.asarray(results) == RESULTS.newton_failed._value)
    assert np.all(np.asarray(iterations) == 1)
    with pytest.raises(ValueError, match="rho_inf"):
        LGTGeneralizedAlpha(1.5)
    with pytest.raises(ValueError, match="AbsoluteModel"):
        LGTGeneralizedAlpha().init(object(), 0.0, 0.1)


# -- simulate() on absolute-coordinate models --------------------------------------------------


def test_simulate_lgt_rk_equals_integrate_with_saveat():
    """simulate(absolute model, LGTRungeKutta, SaveAt(ts)) equals the fixed-step integrate()."""
    chart = EulerAngles("xyz")
    model = top_model(chart)
    _, q, V = run_lgt(model, LGTRungeKutta())
    index = np.array([0, 1, 37, 50, 99, 100])
    sol = simulate(model, LGTRungeKutta(), 0.0, H_TOP * N_TOP, H_TOP, saveat=SaveAt(ts=H_TOP * jnp.asarray(index)))
    np.testing.assert_allclose(sol.ts, H_TOP * index, rtol=1e-14)
    np.testing.assert_allclose(sol.rotation[:, 0], chart.to_rotation(q[index, 0]), atol=1e-13)
    np.testing.assert_allclose(sol.angular_velocity[:, 0], V[index, 0], rtol=1e-13, atol=1e-10)
    np.testing.assert_allclose(sol.position, 0.0)


def test_simulate_alpha_equals_direct_steps():
    """simulate drives LGTGeneralizedAlpha exactly as the direct step loop does; the observed
    pose and velocity are the free body's (position = r, world velocity = r_dot)."""
    chart = EulerParameters()
    model, solver = free_model(chart), LGTGeneralizedAlpha(0.9)
    q, _, _ = run_alpha(model, solver, 0.05, 20)
    sol = simulate(model, solver, 0.0, 1.0, 0.05, saveat=SaveAt(t0=True, t1=True), n_steps=20)
    np.testing.assert_allclose(sol.position[-1, 0], q[-1, 0, :3], atol=1e-13)
    np.testing.assert_allclose(sol.rotation[-1, 0], chart.to_rotation(q[-1, 0, 3:]), atol=1e-13)
    np.testing.assert_allclose(sol.velocity[0, 0], V0[:3])
    assert int(sol.stats.newton_iterations) >= 20


def test_simulate_adaptive_dopri5_through_lgt(free_reference):
    """simulate with LGTRungeKutta(DOPRI5) and a PID controller reaches the tolerance."""
    chart = EulerAngles("zyx")
    model = free_model(chart)
    solver = LGTRungeKutta(DOPRI5, method_order=5)
    errors, steps = [], []
    for tol in (1e-6, 1e-9):
        sol = simulate(model, solver, 0.0, T_END, 0.01, stepsize_controller=PIDController(rtol=tol, atol=tol))
        q = jnp.concatenate([sol.position[-1, 0], chart.from_rotation(sol.rotation[-1, 0])])
        errors.append(pose_error(chart, q, free_reference))
        steps.append(int(sol.stats.steps))
    assert errors[1] < 1e-7 and errors[1] < 1e-2 * errors[0], errors
    assert steps[0] < steps[1] < 400, steps
