"""Lie-group generalized-alpha (Brüls, Cardona & Arnold 2012, as in Holzinger, Arnold & Gerstmayr
2024) against reference values from an independent float64 prototype and exact cases."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_float32

from difflie.body import RigidBody
from difflie.forces import CartesianSpringDamper
from difflie.lie import SO3
from difflie.model import Model
from difflie.models.spatial import heavy_top_spherical
from difflie.simulate import simulate
from difflie.results import RESULTS
from difflie.solvers.generalized_alpha import GeneralizedAlpha, alpha_coefficients

# Heavy-top COM at t = 1 s (Holzinger, Arnold & Gerstmayr 2024, §4.1; DOP853, rtol 1e-13) and the
# errors of an independent float64 Lie generalized-alpha prototype (rho_inf = 0.9, full Newton).
HT_REF_T1 = np.array([0.173343964098, 0.640088592070, -0.748490791134])
PROTOTYPE_ERRORS = {4e-4: 1.161e-3, 2e-4: 2.901e-4, 1e-4: 7.252e-5, 5e-5: 1.813e-5}
PIVOT = np.array([0.0, 1.0, 0.0])  # fixed point seen from the COM is -PIVOT in body axes


@eqx.filter_jit
def integrate(solver, model, h, n):
    """``n`` steps of size ``h`` (both traced: one compilation per model and solver)."""
    y, st = solver.init(model, 0.0, h)

    def body(k, carry):
        y, st, phi, its, max_its, ok = carry
        y, _, st, stats, res = solver.step(model, k * h, (k + 1) * h, y, st)
        origins = y.position - jnp.einsum("bij,bj->bi", y.rotation, model.bodies.com)
        if model.constraints is not None:
            phi = jnp.maximum(phi, jnp.max(jnp.abs(model.constraints.residual((k + 1) * h, origins, y.rotation))))
        its = its + stats.newton_iterations
        max_its = jnp.maximum(max_its, stats.newton_iterations)
        return y, st, phi, its, max_its, ok & (res == RESULTS.successful)

    zero = jnp.zeros((), y.position.dtype)
    init = (y, st, zero, jnp.array(0), jnp.array(0), jnp.array(True))
    y, st, phi, its, max_its, ok = jax.lax.fori_loop(0, n, body, init)
    return dict(y=y, cache=st, phi=phi, mean_its=its / n, max_its=max_its, ok=ok)


def run(solver, model, h, t1=1.0):
    return integrate(solver, model, jnp.asarray(h), jnp.asarray(int(round(t1 / h))))


@pytest.fixture(scope="module")
def top():
    return heavy_top_spherical()


@pytest.fixture(scope="module")
def top_runs(top):
    return {h: run(GeneralizedAlpha(), top, h) for h in (1e-3, 5e-4, 4e-4)}


def _err(out):
    return float(np.linalg.norm(np.asarray(out["y"].position[0]) - HT_REF_T1))


def test_coefficients():
    am, af, g, b = alpha_coefficients(0.9)
    np.testing.assert_allclose([am, af, g, b], [8 / 19, 9 / 19, 21 / 38, 100 / 361], rtol=1e-15)
    np.testing.assert_allclose(alpha_coefficients(1.0), [0.5, 0.5, 0.5, 0.25], rtol=1e-15)
    with pytest.raises(ValueError, match="rho_inf"):
        GeneralizedAlpha(rho_inf=1.0)
    with pytest.raises(ValueError, match="newton"):
        GeneralizedAlpha(newton="quasi")


def test_heavy_top_second_order_matches_reference(top_runs):
    """Order 2 against the reference; the prototype's error at h = 4e-4 to 0.2 %."""
    hs = sorted(top_runs)
    errs = [_err(top_runs[h]) for h in hs]
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert 1.95 < slope < 2.05, (errs, slope)
    assert abs(_err(top_runs[4e-4]) / PROTOTYPE_ERRORS[4e-4] - 1) < 2e-3
    for out in top_runs.values():
        assert bool(out["ok"])  # h = 1e-3 included: Exudyn's default fails for h >= 1.25e-4


def test_heavy_top_constraint_and_iterations(top_runs):
    for h, out in top_runs.items():
        assert float(out["phi"]) < 1e-10, (h, float(out["phi"]))
        assert 1.0 <= float(out["mean_its"]) <= 2.5  # the prototype: 2.00 per step
        assert int(out["max_its"]) <= 3


def test_heavy_top_step_sweep(top):
    """Every h from 1e-3 down to 6.25e-5 runs without Newton failure; prototype errors to 0.3 %."""
    hs = [1e-3 / 2**k for k in range(5)]
    outs = {h: run(GeneralizedAlpha(), top, h) for h in hs + [4e-4, 2e-4, 1e-4, 5e-5]}
    for out in outs.values():
        assert bool(out["ok"]) and float(out["phi"]) < 1e-10
    errs = [_err(outs[h]) for h in hs]
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert 1.97 < slope < 2.03
    for h, e in PROTOTYPE_ERRORS.items():
        assert abs(_err(outs[h]) / e - 1) < 3e-3, (h, _err(outs[h]), e)


def test_modified_newton_same_solution(top, top_runs):
    """Modified Newton keeps its matrix across steps and converges to the same solution."""
    h = 1e-3
    out = run(GeneralizedAlpha(newton="modified"), top, h)
    assert bool(out["ok"]) and float(out["phi"]) < 1e-10
    full = top_runs[h]
    np.testing.assert_allclose(out["y"].position, full["y"].position, atol=1e-8)
    assert int(out["cache"].matrix.updates) < 1000  # fewer factorisations than steps
    assert int(full["cache"].matrix.updates) >= 1000 * float(full["mean_its"]) - 1  # full: one per iteration
    assert float(out["mean_its"]) > float(full["mean_its"])


def test_unconstrained_fixed_origin_equals_spherical_joint(top_runs):
    """The fixed-point heavy top (``fixed_origin``, no constraints) gives the same steps."""
    from difflie.models import heavy_top

    out = run(GeneralizedAlpha(), heavy_top(), 1e-3)
    np.testing.assert_allclose(out["y"].position, top_runs[1e-3]["y"].position, atol=1e-11)


def test_consistent_initial_acceleration(top):
    """vdot0 from the index-3 saddle point equals the fixed-point Euler equation's answer."""
    y0, _ = jax.jit(GeneralizedAlpha().init)(top, 0.0, 1e-3)
    m, J = 15.0, np.diag([0.234375, 0.46875, 0.234375])
    X = PIVOT  # COM seen from the fixed point
    w = np.array([0.0, 150.0, -4.61538])
    J_fp = J + m * (X @ X * np.eye(3) - np.outer(X, X))
    f = np.array([0.0, 0.0, -9.81 * m])
    wdot = np.linalg.solve(J_fp, np.cross(X, f) - np.cross(w, J_fp @ w))
    a_com = np.cross(wdot, X) + np.cross(w, np.cross(w, X))
    np.testing.assert_allclose(y0.acceleration[0, 3:], wdot, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(y0.acceleration[0, :3], a_com, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(y0.algorithmic_acceleration, y0.acceleration)
    # The multipliers give the joint's reaction -B^T lambda = m a_com - f.
    B = jax.jacfwd(lambda r: top.constraints.residual(0.0, r, top.R0))(top.r0)[:, 0, :]
    np.testing.assert_allclose(-B.T @ y0.multipliers, m * a_com - f, rtol=1e-12)


def _spring_body(stiffness, omega0, v0):
    body = RigidBody(2.0, jnp.diag(jnp.array([1.0, 2.0, 3.0])))
    spring = CartesianSpringDamper((0,), jnp.zeros((1, 3)), jnp.zeros((1, 3)), jnp.full((1, 3), stiffness))
    return Model(body, r0=jnp.zeros((1, 3)), v0=jnp.asarray(v0)[None], omega0=jnp.asarray(omega0)[None],
                 gravity=(0.0, 0.0, -9.81), forces=(spring,))  # fmt: skip


def test_free_body_exact():
    """No constraints: constant gravity and a principal-axis spin are integrated exactly."""
    w, v0 = np.array([0.0, 0.0, 5.0]), np.array([1.0, 0.0, 2.0])
    h, n = 0.01, 100
    out = run(GeneralizedAlpha(), _spring_body(0.0, w, v0), h, t1=h * n)
    t = h * n
    np.testing.assert_allclose(out["y"].position[0], v0 * t + 0.5 * np.array([0, 0, -9.81]) * t**2, atol=1e-12)
    np.testing.assert_allclose(out["y"].rotation[0], SO3.exp(jnp.asarray(w * t)).matrix, atol=1e-12)
    assert bool(out["ok"])


def test_spectral_radius_at_infinity():
    """Linear oscillator: the step's amplification matrix (by jax.jacfwd through the implicit
    step) has spectral radius rho_inf as h omega -> oo, and ~1 for small h omega."""
    model = _spring_body(2.0e4, np.zeros(3), np.zeros(3))  # omega = 100 rad/s
    y0, st = jax.jit(GeneralizedAlpha().init)(model, 0.0, 1.0)

    @eqx.filter_jit
    def amplification(solver, h):
        def step(z):
            y = eqx.tree_at(
                lambda s: (s.position, s.velocity, s.acceleration, s.algorithmic_acceleration),
                y0,
                (y0.position.at[0, 0].set(z[0]), y0.velocity.at[0, 0].set(z[1]),
                 y0.acceleration.at[0, 0].set(z[2]), y0.algorithmic_acceleration.at[0, 0].set(z[3])),
            )  # fmt: skip
            y1 = solver.step(model, 0.0, h, y, st)[0]
            return jnp.stack([y1.position[0, 0], y1.velocity[0, 0], y1.acceleration[0, 0],
                              y1.algorithmic_acceleration[0, 0]])  # fmt: skip

        return jax.jacfwd(step)(jnp.zeros(4, h.dtype))

    for rho in (0.9, 0.5):
        solver = GeneralizedAlpha(rho_inf=jnp.asarray(rho))

        def radius(h):
            return np.max(np.abs(np.linalg.eigvals(np.asarray(amplification(solver, jnp.asarray(h))))))

        # A triple eigenvalue -rho_inf at h omega = oo: perturbations of size (h omega)^(-2/3).
        assert abs(radius(1e5) - rho) < 1e-4
        assert 1 - 1e-6 < radius(1e-5) <= 1 + 1e-12


def test_scaling_conditions_the_iteration_matrix(top):
    """Bottasso scaling: O(1) condition numbers for every h, the same converged step."""

    @eqx.filter_jit
    def matrix_and_step(solver, h):
        y0, st = solver.init(top, 0.0, h)
        fn, _, x_pred, _ = solver._residual_fn(top, h, h, y0)
        return jax.jacfwd(lambda z: fn((z[:6], z[6:]))[0])(x_pred), solver.step(top, 0.0, h, y0, st)[0]

    conds, steps = {}, {}
    for scaling in (True, False):
        for h in (1e-2, 1e-4):
            mat, steps[scaling, h] = matrix_and_step(GeneralizedAlpha(scaling=scaling), jnp.asarray(h))
            conds[scaling, h] = np.linalg.cond(np.asarray(mat))
    assert conds[True, 1e-4] < 1e3 and conds[True, 1e-4] / conds[True, 1e-2] < 10
    assert conds[False, 1e-4] / conds[False, 1e-2] > 1e3
    for h in (1e-2, 1e-4):
        np.testing.assert_allclose(steps[True, h].position, steps[False, h].position, atol=1e-12)
        np.testing.assert_allclose(steps[True, h].multipliers, steps[False, h].multipliers, rtol=1e-7)


def test_newton_failure_is_reported(top):
    solver = GeneralizedAlpha(max_iterations=1, rtol=1e-15, atol=1e-15, ctol=1e-18)
    y0, st = jax.jit(solver.init)(top, 0.0, 1e-3)
    _, _, _, stats, result = jax.jit(solver.step)(top, 0.0, 2e-2, y0, st)
    assert result == RESULTS.newton_failed and int(stats.newton_iterations) == 1
    with pytest.raises(Exception, match="Newton"):
        jax.block_until_ready(simulate(top, solver, 0.0, 0.04, 0.02, throw=True).ts)


@jax.jit
def _final_x(params):
    mass, spin = params[0], params[1]
    model = heavy_top_spherical(mass=mass, omega0=jnp.stack([0.0 * spin, spin, -4.61538 + 0.0 * spin]))
    sol = simulate(model, GeneralizedAlpha(), 0.0, 0.02, 1e-3)
    return sol.position[-1, 0, 0] + sol.angular_velocity[-1, 0, 0]


_P = jnp.array([15.0, 150.0])


def test_gradients_implicit_function_theorem():
    """jax.grad through simulate matches central differences (IFT per step)."""
    g_rev = jax.grad(_final_x)(_P)
    eps = np.array([1e-4, 1e-3])
    fd = [(_final_x(_P.at[i].add(eps[i])) - _final_x(_P.at[i].add(-eps[i]))) / (2 * eps[i]) for i in range(2)]
    assert np.all(np.isfinite(np.asarray(g_rev))) and np.linalg.norm(np.asarray(g_rev)) > 0
    np.testing.assert_allclose(g_rev, np.asarray(fd), rtol=1e-6)


@pytest.mark.slow
def test_forward_and_reverse_gradients_agree():
    """jax.jacfwd and jax.grad through the same implicit steps agree to rounding."""
    np.testing.assert_allclose(jax.grad(_final_x)(_P), jax.jacfwd(_final_x)(_P), rtol=1e-10)


def test_vmap_over_parameters():
    masses = jnp.array([10.0, 15.0])

    def final(mass):
        return simulate(heavy_top_spherical(mass=mass), GeneralizedAlpha(), 0.0, 0.01, 1e-3).position[-1, 0]

    batched = jax.vmap(final)(masses)
    np.testing.assert_allclose(batched[1], final(masses[1]), atol=1e-13)
    assert not np.allclose(batched[0], batched[1])


def test_float32_smoke():
    code = (
        "import jax, jax.numpy as jnp\n"
        "assert not jax.config.jax_enable_x64\n"
        "from difflie.models.spatial import heavy_top_spherical\n"
        "from difflie.simulate import simulate\n"
        "from difflie.solvers.generalized_alpha import GeneralizedAlpha\n"
        "sol = simulate(heavy_top_spherical(), GeneralizedAlpha(), 0.0, 0.05, 1e-3)\n"
        "assert sol.position.dtype == jnp.float32, sol.position.dtype\n"
        "r = sol.position[-1, 0]; R = sol.rotation[-1, 0]\n"
        "assert float(jnp.abs(r + R @ jnp.array([0.0, -1.0, 0.0])).max()) < 1e-4\n"
        "print(sol.stats.newton_iterations / sol.stats.steps)\n"
    )
    run_float32(code)


def test_float32_inputs_stay_float32_under_x64():
    """A float32 model runs in float32 with x64 on (no promotion by library constants: found by
    the GPU benchmark, where a float64 constraint constant broke the Newton loop's carry)."""
    f32 = jnp.float32
    model = heavy_top_spherical(mass=f32(15.0), inertia=jnp.diag(jnp.asarray([0.234375, 0.46875, 0.234375], f32)),
                                omega0=jnp.asarray([0.0, 150.0, -4.61538], f32))  # fmt: skip
    with jax.numpy_dtype_promotion("strict"):
        sol = simulate(model, GeneralizedAlpha(), 0.0, 3e-3, 1e-3)
    assert sol.position.dtype == f32 and sol.rotation.dtype == f32


def test_extrapolated_start_fewer_iterations_same_solution(top, top_runs):
    """The cubic predictor of vdot and lambda (default) against the published algorithm's
    vdot1 = vdot0 start: same solution, fewer Newton iterations at h = 1e-3 (measured 1.14
    against 2.00)."""
    h = 1e-3
    plain = run(GeneralizedAlpha(extrapolation=0), top, h)
    out = top_runs[h]
    assert bool(plain["ok"]) and bool(out["ok"])
    np.testing.assert_allclose(out["y"].position, plain["y"].position, atol=1e-9)
    assert float(plain["mean_its"]) >= 1.9 and float(out["mean_its"]) <= 1.3, (plain["mean_its"], out["mean_its"])


def test_modified_newton_rebuild_rule_lowers_the_cost_per_step():
    """``rebuild_cost``: a kept matrix is rebuilt when the last step cost more iterations than the
    matrix's average per step (its build counted as ``rebuild_cost`` iterations). On a falling
    3-rod chain over 0.4 s the contraction rule alone keeps old matrices for 4 iterations per
    step; with the rule the same solution costs fewer iterations and fewer iteration-equivalents
    in all (2.7 against 4.1 per step, 14 against 5 matrices, measured)."""
    from difflie.models import chain

    model = chain(3)

    def counts(rebuild_cost):
        solver = GeneralizedAlpha(newton="modified", rebuild_cost=rebuild_cost)

        def body(k, carry):
            y, state, its = carry
            y, _, state, st, _ = solver.step(model, k * 1e-3, (k + 1) * 1e-3, y, state)
            return y, state, its + st.newton_iterations

        y, state, its = jax.lax.fori_loop(0, 400, body, (*solver.init(model, 0.0, 1e-3), 0))
        return y.position, its, state.matrix.updates

    out = jax.jit(lambda: (counts(None), counts(20.0)))()
    (x_off, its_off, mats_off), (x_on, its_on, mats_on) = jax.tree.map(np.asarray, out)
    np.testing.assert_allclose(x_on, x_off, rtol=0, atol=1e-9)
    assert its_on < 0.8 * its_off and mats_on > mats_off
    assert its_on + 20 * mats_on < its_off + 20 * mats_off
    with pytest.raises(ValueError, match="rebuild_cost"):
        GeneralizedAlpha(rebuild_cost=-1.0)


def test_newton_auto_is_full_for_one_body_and_modified_for_a_mechanism():
    """The default ``newton="auto"``: the heavy top runs exactly as with full Newton, a double
    pendulum exactly as with modified Newton (kept matrices: fewer builds than iterations)."""
    from difflie.models import double_pendulum

    def run_with(model, solver):
        sol = simulate(model, solver, 0.0, 0.01, 1e-3)
        return np.asarray(sol.position), int(sol.stats.newton_iterations)

    top = heavy_top_spherical()
    auto, full = run_with(top, GeneralizedAlpha()), run_with(top, GeneralizedAlpha(newton="full"))
    np.testing.assert_array_equal(auto[0], full[0])
    assert auto[1] == full[1]
    pendulum = double_pendulum()
    auto, modified = run_with(pendulum, GeneralizedAlpha()), run_with(pendulum, GeneralizedAlpha(newton="modified"))
    np.testing.assert_array_equal(auto[0], modified[0])
    assert auto[1] == modified[1]
    assert not np.array_equal(auto[0], run_with(pendulum, GeneralizedAlpha(newton="full"))[0])
    with pytest.raises(ValueError, match="auto"):
        GeneralizedAlpha(newton="chord")
