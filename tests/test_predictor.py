"""How the implicit solvers start and run Newton: the starting guess by polynomial extrapolation
(difflie.solvers.predictor) and BackwardEuler's iteration matrix kept across steps. Both change
the cost (iterations, Jacobians), not the solution or its gradient."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.solvers.predictor import History


def _cubic(t):
    return jnp.stack([1.0 - 2.0 * t + 0.5 * t**2 + 3.0 * t**3, jnp.sin(0.0 * t) + 4.0 * t**2])


def test_extrapolation_exact_for_cubics_on_unequal_steps():
    times = [0.0, 0.1, 0.25, 0.3, 0.42]
    hist = History.start(3, jnp.asarray(times[0]), _cubic(jnp.asarray(times[0])))
    for t in times[1:]:
        hist = hist.push(jnp.asarray(t), _cubic(jnp.asarray(t)))
    assert int(hist.count) == 4  # capped at order + 1; the oldest point was dropped
    t = jnp.asarray(0.5)
    np.testing.assert_allclose(hist.guess(t), _cubic(t), rtol=1e-12)
    np.testing.assert_allclose(jnp.sum(hist.weights(t)), 1.0, rtol=1e-14)


def test_extrapolation_degree_grows_with_the_points_kept_and_restarts():
    f = lambda t: jnp.array([2.0 + 3.0 * t, t**2])  # noqa: E731
    hist = History.start(3, jnp.asarray(1.0), f(1.0))
    np.testing.assert_allclose(hist.guess(jnp.asarray(2.0)), f(1.0))  # one point: constant
    hist = hist.push(jnp.asarray(1.5), f(1.5))
    np.testing.assert_allclose(hist.guess(jnp.asarray(2.0)), [8.0, 2.0 * 2.25 - 1.0])  # linear
    hist = hist.push(jnp.asarray(1.75), f(1.75))
    np.testing.assert_allclose(hist.guess(jnp.asarray(2.0)), f(2.0), rtol=1e-13)  # quadratic: exact
    hist = hist.push(jnp.asarray(1.9), f(1.9), restart=True)
    assert int(hist.count) == 1
    np.testing.assert_allclose(hist.guess(jnp.asarray(2.0)), f(1.9))


@pytest.mark.parametrize("cls", [dl.BackwardEuler, dl.GeneralizedAlpha])
def test_extrapolation_must_be_a_nonnegative_integer(cls):
    with pytest.raises(ValueError, match="extrapolation"):
        cls(extrapolation=-1)
    with pytest.raises(ValueError, match="extrapolation"):
        cls(extrapolation=1.5)


def _be(model, formulation, extrapolation, t1=0.3, h=1e-3, reuse=1):
    # reuse=1 (a matrix per step) isolates the predictor's effect on the iteration count.
    solver = dl.BackwardEuler(formulation=formulation, extrapolation=extrapolation, matrix_reuse=reuse)
    sol = dl.simulate(model, solver, 0.0, t1, h)
    return np.asarray(sol.position[-1]), int(sol.stats.newton_iterations) / int(sol.stats.steps)


@pytest.mark.parametrize("formulation", ["rA", pytest.param("rp", marks=pytest.mark.slow), pytest.param("re", marks=pytest.mark.slow)])
def test_backward_euler_one_iteration_per_step_same_solution(formulation):
    """Driven single pendulum: the paper's start (last values) takes 2 Newton iterations per
    step; the cubic predictor's first correction is already below the tolerance in nearly every
    step. rA and re: 1.03 iterations per step. rp: 1.06-1.12, by the rounding of the iteration
    matrix's inverse (Gauss-Jordan or LAPACK, XLA's optimisation level; both inverses within
    2e-12 of the identity at condition 1.5e6): its corrections end near the tolerance."""
    model = dl.models.single_pendulum()
    pos0, its0 = _be(model, formulation, 0)
    pos3, its3 = _be(model, formulation, 3)
    assert its0 >= 1.99 and its3 <= 1.15, (its0, its3)
    np.testing.assert_allclose(pos3, pos0, atol=1e-10)


@pytest.mark.slow  # the single pendulum's row above runs by default
def test_backward_euler_mechanism_same_solution():
    """Slider crank (three bodies, driven): fewer iterations, same positions."""
    model = dl.models.slider_crank()
    pos0, its0 = _be(model, "rA", 0, t1=0.2)
    pos3, its3 = _be(model, "rA", 3, t1=0.2)
    assert its3 < 0.8 * its0, (its0, its3)
    np.testing.assert_allclose(pos3, pos0, atol=1e-10)


def test_matrix_reuse_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="matrix_reuse"):
        dl.BackwardEuler(matrix_reuse=0)


@pytest.mark.parametrize("reuse", [pytest.param(10, marks=pytest.mark.slow), 10**6])
def test_kept_matrix_same_solution(reuse):
    """Slider crank with one iteration matrix for 10 steps, or until the renewal rule replaces
    it (10**6): same positions, and still well under the two iterations per step that
    starting from the last values takes. t1 is not a multiple of h, so the last, shorter step
    needs a fresh matrix too."""
    model = dl.models.slider_crank()
    pos1, its1 = _be(model, "rA", 3, t1=0.2004)
    pos, its = _be(model, "rA", 3, t1=0.2004, reuse=reuse)
    np.testing.assert_allclose(pos, pos1, atol=1e-10)
    assert its <= 1.4, its


def test_kept_matrix_renewal_rule_lowers_the_cost_per_step():
    """``rebuild_cost`` (``difflie.numerics.newton.MatrixCost``, shared with generalized-alpha):
    with no cap on a matrix's age, a falling 3-rod chain over 0.4 s keeps its first matrices
    for 3.6 iterations per step; with the rule, matrices are renewed when the last step cost
    more than their average (a build counted as 20 iterations): the same solution in 1.1
    iterations per step on 12 matrices, under half the cost in all (measured). A negative
    ``rebuild_cost`` is refused."""
    model = dl.models.chain(3)

    def counts(rebuild_cost):
        solver = dl.BackwardEuler(rebuild_cost=rebuild_cost, matrix_reuse=10**6)

        def body(k, carry):
            y, state, its, built = carry
            y, _, state, st, _ = solver.step(model, k * 1e-3, (k + 1) * 1e-3, y, state)
            return y, state, its + st.newton_iterations, built + (state.matrix.cost.solves == 1)

        y, _, its, built = jax.lax.fori_loop(0, 400, body, (*solver.init(model, 0.0, 1e-3), 0, 0))
        return y.position, its, built

    out = jax.jit(lambda: (counts(None), counts(20.0)))()
    (x_off, its_off, mats_off), (x_on, its_on, mats_on) = jax.tree.map(np.asarray, out)
    np.testing.assert_allclose(x_on, x_off, rtol=0, atol=1e-8)
    assert its_on < 0.5 * its_off and mats_on > mats_off
    assert its_on + 20 * mats_on < 0.6 * (its_off + 20 * mats_off)
    with pytest.raises(ValueError, match="rebuild_cost"):
        dl.BackwardEuler(rebuild_cost=-1.0)


@pytest.mark.slow  # by default: test_gradients' backward-Euler gradients, which keep matrices too
def test_kept_matrix_gradient():
    """Double pendulum (free), re: the implicit-function-theorem gradient through kept matrices
    matches finite differences of runs with a fresh matrix every step. (The constraints after
    every step with the default kept matrix: ``test_mechanisms.test_double_pendulum_20s_invariants``.)"""
    h, n = 1e-3, 40

    def final_z(g, reuse):
        model = dl.models.double_pendulum(gravity=jnp.array([0.0, 0.0, -g]))
        solver = dl.BackwardEuler(formulation="re", matrix_reuse=reuse)
        return dl.simulate(model, solver, 0.0, n * h, h).position[-1, 1, 2]

    grad = jax.grad(final_z)(9.81, 10)
    fd = (final_z(9.81 + 1e-4, 1) - final_z(9.81 - 1e-4, 1)) / 2e-4  # fresh matrices
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_kept_matrix_that_fails_is_replaced_by_a_fresh_one():
    """A kept matrix three times the true inverse makes modified Newton diverge (error factor
    -2 per iteration): the step starts again from its guess on a fresh matrix and converges to
    the same solution as with a good kept matrix, counting the failed attempt's iterations;
    with no iterations to spare, the failure is reported."""
    model = dl.models.single_pendulum()
    h = 1e-3

    @functools.partial(jax.jit, static_argnums=1)
    def two_steps(scale, max_steps):
        solver = dl.BackwardEuler(formulation="rA", matrix_reuse=10, max_iterations=max_steps, extrapolation=0)

        def advance(k, carry):  # past the start, where steps take three iterations and rebuild
            return solver.step(model, k * h, (k + 1) * h, *carry)[0:3:2]

        y, st = jax.lax.fori_loop(0, 6, advance, solver.init(model, 0.0, h))
        kept = eqx.tree_at(lambda s: (s.matrix.factors.inverses, s.matrix.valid, s.matrix.cost.solves), st,
                           (scale * st.matrix.factors.inverses, jnp.array(True), jnp.array(1, jnp.int32)))
        y, _, st, stats, result = solver.step(model, 6 * h, 7 * h, y, kept)
        return y, st.matrix.cost.solves, stats.newton_iterations, result._value

    good, age_good, its_good, res_good = two_steps(1.0, 20)
    bad, age_bad, its_bad, res_bad = two_steps(3.0, 20)
    assert res_good == res_bad == dl.RESULTS.successful._value
    np.testing.assert_allclose(bad.position, good.position, atol=1e-12)
    np.testing.assert_allclose(bad.acceleration, good.acceleration, rtol=1e-8, atol=1e-8)
    assert int(age_good) == 2 and int(age_bad) == 1  # kept, and fresh after the retry
    assert int(its_good) <= 2 and int(its_bad) > 20, (its_good, its_bad)
    *_, res_fail = two_steps(3.0, 1)  # one iteration on each matrix cannot reach the tolerance
    assert res_fail == dl.RESULTS.newton_failed._value
