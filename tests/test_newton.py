"""The shared Newton solver (difflie.numerics.newton): the leaf-by-leaf iteration matrix against
``jax.jacfwd`` of the flattened residual, and solves of a saddle-point system in two leaves
(accelerations and multipliers, as the implicit steps pose them) against its closed form."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import difflie as dl
from difflie.solvers.backward_euler import BackwardEuler
from difflie.numerics.newton import Newton, newton_solve, value_and_jacobian

RNG = np.random.default_rng(11)
A = jnp.asarray(RNG.normal(size=(4, 2, 3)))
B = jnp.asarray(RNG.normal(size=(4, 5)))


def _f(x):
    """A nonlinear map of a pytree (a (2, 3) leaf, a 5-vector entering linearly, an empty leaf)."""
    u, (w, e) = x
    return jnp.concatenate([jnp.sin(jnp.einsum("kij,ij->k", A, u)) * jnp.sum(u**2) + B @ w, jnp.tanh(w) + jnp.sum(e)])


@pytest.mark.parametrize("with_empty", [False, True])
def test_leafwise_jacobian_matches_jacfwd_of_the_flat_map(with_empty):
    rng = np.random.default_rng(5)
    x = (jnp.asarray(rng.normal(size=(2, 3))), (jnp.asarray(rng.normal(size=5)), jnp.zeros(0 if with_empty else 2)))
    flat, unravel = ravel_pytree(x)
    value, mat = value_and_jacobian(_f, x)
    ref = jax.jacfwd(lambda z: _f(unravel(z)))(flat)
    assert mat.shape == ref.shape == (9, flat.shape[0])
    np.testing.assert_allclose(value, _f(x), rtol=0, atol=0)
    np.testing.assert_allclose(mat, ref, rtol=1e-13, atol=1e-13)


def test_saddle_point_system_in_two_leaves():
    """M(a) a + G^T lam = f, G a = c with M(a) = M0 + diag(a^2): Newton in the leaves (a, lam)
    against a solve of the same system by scipy's fsolve on the flat unknown."""
    scipy_optimize = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(3)
    n, m = 5, 2
    M0 = jnp.asarray(np.diag(rng.uniform(1.0, 2.0, n)))
    G = jnp.asarray(rng.normal(size=(m, n)))
    f, c = jnp.asarray(0.5 * rng.normal(size=n)), jnp.asarray(0.5 * rng.normal(size=m))

    def residual(x, args):
        a, lam = x
        return jnp.concatenate([(M0 + jnp.diag(a**2)) @ a + G.T @ lam - args[0], G @ a - args[1]])

    flat_res = lambda z: np.asarray(residual((jnp.asarray(z[:n]), jnp.asarray(z[n:])), (f, c)))  # noqa: E731
    ref = scipy_optimize.fsolve(flat_res, np.zeros(n + m), xtol=1e-12)
    for modified in (False, True):
        sol = newton_solve(residual, (jnp.zeros(n), jnp.zeros(m)), (f, c), Newton(tol=1e-12, modified=modified, max_iterations=60))
        assert sol.result == dl.RESULTS.successful
        np.testing.assert_allclose(jnp.concatenate(sol.value), ref, rtol=1e-10, atol=1e-12)
    # derivatives by the implicit-function theorem: d lam / d c against central differences
    def lam_of(cc):
        return newton_solve(residual, (jnp.zeros(n), jnp.zeros(m)), (f, cc), Newton(tol=1e-13)).value[1]

    eps = 1e-6
    fd = np.stack([(lam_of(c + eps * e) - lam_of(c - eps * e)) / (2 * eps) for e in jnp.eye(m)], axis=1)
    np.testing.assert_allclose(jax.jacfwd(lam_of)(c), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("formulation", ["rA", "rp"])
def test_backward_euler_iteration_matrix_is_the_full_jacobian(formulation):
    """The step's matrix, taken leaf by leaf in (accelerations, multipliers), is jax.jacfwd of
    the residual as one function of the concatenated unknown (slider crank, first step)."""

    @eqx.filter_jit
    def matrices(solver, model):
        y0, _ = solver.init(model, 0.0, 1e-3)
        h = t1 = jnp.asarray(1e-3)
        n = y0.acceleration.shape[0]
        x = (y0.acceleration + 0.1, y0.multipliers - 0.2)
        _, mat = value_and_jacobian(lambda z: solver.residual(model, t1, h, y0, z), x)
        ref = jax.jacfwd(lambda z: solver.residual(model, t1, h, y0, (z[:n], z[n:])))(jnp.concatenate(x))
        return mat, ref

    mat, ref = matrices(BackwardEuler(formulation=formulation), dl.models.slider_crank())
    np.testing.assert_allclose(mat, ref, rtol=1e-12, atol=1e-9 * float(jnp.max(jnp.abs(ref))))


def _cubic(x):
    """``x^3 + x - c``, one root per entry."""
    return x**3 + x - jnp.array([0.3, -0.2, 0.1])


def test_kept_matrix_from_an_earlier_solve_is_dropped_when_it_fails():
    """Modified Newton on a kept matrix that does not fit (``-0.05 I``): the iteration runs out
    or diverges on it, starts again from x0 on a fresh matrix and converges; the counts show
    both attempts, and the root solves the system."""
    from difflie.numerics.linear import factor
    from difflie.numerics.newton import KeptMatrix, linear_system, newton_iterate

    x0 = jnp.zeros(3)
    system = linear_system(_cubic, x0)
    kept = KeptMatrix(factor(-0.05 * jnp.eye(3)), jnp.array(True))
    newton = Newton(tol=1e-12, modified=True, max_iterations=30)
    out = jax.jit(lambda k: newton_iterate(_cubic, x0, system, newton, kept=k))(kept)
    assert bool(out.converged) and bool(out.fresh)
    assert int(out.iterations) > int(out.num_steps) >= 1
    np.testing.assert_allclose(_cubic(out.value), 0.0, atol=1e-11)
    # The same kept matrix marked invalid is never used: one attempt on a fresh matrix.
    fresh = newton_iterate(_cubic, x0, system, newton, kept=KeptMatrix(kept.factors, jnp.array(False)))
    assert bool(fresh.converged) and int(fresh.iterations) == int(fresh.num_steps)


def test_a_vmap_batch_shares_the_matrices_it_builds():
    """Modified Newton under ``vmap``: when one system's kept matrix is invalid, the batch
    builds matrices once and every system takes its own (each at its own iterate), so every
    system counts one build; run alone, only that system builds. Both reach each system's
    root."""
    from difflie.numerics.linear import factor
    from difflie.numerics.newton import KeptMatrix, linear_system, newton_iterate

    cs = jnp.array([[0.3, -0.2, 0.1], [0.2, 0.1, -0.3], [-0.1, 0.3, 0.2]])
    valid = jnp.array([False, True, True])

    def solve(c, ok):
        def fn(x):
            return x**3 + x - c

        x0 = jnp.zeros(3)
        kept = KeptMatrix(factor(jnp.eye(3)), ok)  # the Jacobian at x0: fits every system
        newton = Newton(tol=1e-12, modified=True, max_iterations=30)
        return newton_iterate(fn, x0, linear_system(fn, x0), newton, kept=kept)

    batch = jax.jit(jax.vmap(solve))(cs, valid)
    one = jax.jit(solve)
    alone = [one(c, ok) for c, ok in zip(cs, valid)]
    np.testing.assert_array_equal(np.asarray(batch.updates), [1, 1, 1])
    np.testing.assert_array_equal([int(out.updates) for out in alone], [1, 0, 0])
    assert bool(jnp.all(batch.converged)) and all(bool(out.converged) for out in alone)
    np.testing.assert_allclose(batch.value**3 + batch.value - cs, 0.0, atol=1e-11)
    for c, out in zip(cs, alone):
        np.testing.assert_allclose(out.value**3 + out.value - c, 0.0, atol=1e-11)


def test_residual_test_and_iterates_outside_the_admissible_set():
    """The residual test stops at ``max |F| <= tol``; an iterate outside ``admissible`` is a
    failure with ``RESULTS.no_solution`` (x - 2 = 0 with x restricted below 1)."""
    newton = Newton(tol=1e-13, norm="max", test="residual")
    sol = newton_solve(lambda x, a: _cubic(x), jnp.zeros(3), None, newton)
    assert sol.result == dl.RESULTS.successful
    assert float(jnp.max(jnp.abs(_cubic(sol.value)))) <= 1e-13
    bad = newton_solve(lambda x, a: x - 2.0, jnp.zeros(2), None, newton, admissible=lambda x: jnp.all(x < 1.0))
    assert bad.result == dl.RESULTS.no_solution


def test_implicit_derivatives_reach_closed_over_values_and_stay_out_of_forward_programs(monkeypatch):
    """``x**3 + a x - p = 0`` with ``a`` an argument and ``p`` in the residual's closure:
    ``dx/dp = 1 / (3 x^2 + a)``, ``dx/da = -x / (3 x^2 + a)``. The derivative rule (its linear
    solve) is traced only when a derivative is taken."""
    from difflie.numerics import linear

    calls = []
    tangent_solve = linear.tangent_solve
    monkeypatch.setattr(linear, "tangent_solve", lambda g, y: calls.append(1) or tangent_solve(g, y))

    def root(a, p):
        return newton_solve(lambda x, a: x**3 + a * x - p, jnp.ones(1), a, Newton(tol=1e-14)).value[0]

    a, p = 2.0, 3.0
    jax.make_jaxpr(root)(a, p)
    assert not calls
    x = root(a, p)
    d = 3 * x**2 + a
    np.testing.assert_allclose(jax.grad(root, argnums=(0, 1))(a, p), [-x / d, 1 / d], rtol=1e-12)
    np.testing.assert_allclose(jax.jvp(root, (a, p), (1.0, 2.0))[1], (-x + 2.0) / d, rtol=1e-12)
    ps = jnp.array([1.0, 3.0, 10.0])
    xs = jax.vmap(root, in_axes=(None, 0))(a, ps)
    np.testing.assert_allclose(jax.vmap(jax.grad(root, argnums=1), in_axes=(None, 0))(a, ps), 1 / (3 * xs**2 + a), rtol=1e-12)
    assert calls


def test_iteration_matrix_record_serves_only_the_step_it_fits():
    """``IterationMatrix``, the record both implicit solvers keep: its factors serve a step of
    the size they were built for (to 1e-6), not one 1e-3 larger; the renewal rule retires them
    after a solve that cost more than their average (a build counted as 20 iterations, then
    2 and 30 iterations: 52/2 = 26 < 30); ``max_solves`` caps their age; ``after`` counts the
    builds and restarts the cost when a solve built a matrix."""
    from difflie.numerics.newton import IterationMatrix, KeptMatrix, NewtonResult

    h = jnp.asarray(1e-3)

    def solved(iterations, updates):
        return NewtonResult(value=None, num_steps=jnp.array(iterations), iterations=jnp.array(iterations),
                            converged=jnp.array(True), diverged=jnp.array(False), correction_norm=jnp.array(0.0),
                            residual=None, matrix=KeptMatrix(jnp.ones(2), jnp.array(True)), fresh=jnp.array(updates > 0),
                            updates=jnp.array(updates))  # fmt: skip

    record = IterationMatrix.start(jnp.zeros(2), h.dtype)
    assert not bool(record.for_step(h, 20.0).valid)  # nothing built yet
    record = record.after(solved(2, 1), h, 20.0)
    assert int(record.updates) == 1 and int(record.cost.solves) == 1 and float(record.cost.cost) == 22.0
    assert bool(record.for_step(h, 20.0).valid) and bool(record.for_step(h * (1 + 1e-7), 20.0).valid)
    assert not bool(record.for_step(h * (1 + 1e-3), 20.0).valid)
    assert not bool(record.for_step(h, 20.0, max_solves=1).valid)
    record = record.after(solved(30, 0), h, 20.0)
    assert int(record.updates) == 1 and int(record.cost.solves) == 2 and float(record.cost.cost) == 52.0
    assert not bool(record.for_step(h, 20.0).valid) and bool(record.for_step(h, None).valid)
    assert not bool(record.after(solved(1, 0), h, 20.0, keep=False).valid)


def test_a_vmap_batch_iterates_in_one_loop_and_stopped_systems_keep_their_roots():
    """Under ``vmap`` the batch runs one loop until its last system stops. A system that
    converges on its kept matrix before another needs a new one keeps its root and its
    iteration count, the same as alone, and takes the matrices the batch builds after it (each
    counted, as the other system's); alone, it builds none. (With a loop per system, the
    stopped system kept its first matrix: 0 builds against 8.)"""
    cs = jnp.array([[1e-9, -2e-9, 1e-9], [2.0, -1.5, 1.0]])  # near x0 = 0, and far from it

    def solve(c):
        return _cubic_on_kept_identity(c, Newton(tol=1e-12, modified=True, max_iterations=30, contractivity=0.5))

    batch = jax.jit(jax.vmap(solve))(cs)
    alone = jax.jit(solve)(cs[0])
    assert bool(jnp.all(batch.converged)) and int(alone.updates) == 0
    assert int(batch.num_steps[0]) == int(alone.num_steps) < int(batch.num_steps[1])
    np.testing.assert_array_equal(np.asarray(batch.value[0]), np.asarray(alone.value))
    assert int(batch.updates[1]) >= 1 and int(batch.updates[0]) == int(batch.updates[1])
    np.testing.assert_allclose(batch.value**3 + batch.value - cs, 0.0, atol=1e-11)
    # Nested vmaps share over both axes: the far system's builds reach every system.
    nested = jax.jit(jax.vmap(jax.vmap(solve)))(jnp.stack([cs, cs[::-1]]))
    np.testing.assert_array_equal(np.asarray(nested.updates), int(batch.updates[1]))


def test_a_matrix_is_charged_only_the_iterations_done_on_it():
    """A kept matrix that stops contracting is retired mid-solve; the matrix built then is
    charged the iterations done on it, not the whole solve's (the renewal rule would otherwise
    think a fresh matrix as costly as the stale one it replaced, and keep it)."""
    from difflie.numerics.linear import factor
    from difflie.numerics.newton import IterationMatrix, KeptMatrix, linear_system, newton_iterate

    c = jnp.array([0.3, -0.2, 0.1])

    def fn(x):
        return x**3 + x - c

    x0 = jnp.zeros(3)
    stale = KeptMatrix(factor(3.0 * jnp.eye(3)), jnp.array(True))  # far from dF/dx = I at x0
    newton = Newton(tol=1e-12, modified=True, max_iterations=30, contractivity=0.5)
    out = newton_iterate(fn, x0, linear_system(fn, x0), newton, kept=stale)
    assert bool(out.converged) and int(out.updates) >= 1
    assert 1 <= int(out.on_matrix) < int(out.iterations)
    record = IterationMatrix.start(stale.factors, x0.dtype).after(out, jnp.asarray(1e-3), 20.0)
    assert float(record.cost.cost) == 20.0 + int(out.on_matrix) and int(record.cost.last) == int(out.on_matrix)


def test_a_stopped_system_does_not_ask_its_batch_for_matrices():
    """A system that stops on the ``max_reuse``-th iteration on its matrix (4 of 4) has no say
    in its batch's rebuilds: the other system iterates as it does alone (14 iterations on 3
    matrices; before, the stopped system asked for a new matrix at every iteration left, 6)."""
    cs = jnp.array([[3e-3, -3e-3, 3e-3], [0.8, -0.6, 0.5]])

    def solve(c):
        return _cubic_on_kept_identity(c, Newton(tol=1e-12, modified=True, max_iterations=40, max_reuse=4))

    batch = jax.jit(jax.vmap(solve))(cs)
    one = jax.jit(solve)
    first, second = one(cs[0]), one(cs[1])
    assert int(first.num_steps) == int(first.on_matrix) == 4 and int(first.updates) == 0
    assert bool(jnp.all(batch.converged))
    assert int(batch.num_steps[1]) == int(second.num_steps) == 14
    assert int(batch.updates[1]) == int(second.updates) == 3
    np.testing.assert_array_equal(np.asarray(batch.value[1]), np.asarray(second.value))


def _cubic_on_kept_identity(c, newton):
    """Modified Newton on ``x^3 + x - c = 0`` from ``x0 = 0``, starting on a kept matrix ``I``
    (the Jacobian at ``x0``)."""
    from difflie.numerics.linear import factor
    from difflie.numerics.newton import KeptMatrix, linear_system, newton_iterate

    def fn(x):
        return x**3 + x - c

    x0 = jnp.zeros(3)
    return newton_iterate(fn, x0, linear_system(fn, x0), newton, kept=KeptMatrix(factor(jnp.eye(3)), jnp.array(True)))
