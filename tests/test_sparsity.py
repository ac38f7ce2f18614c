"""Block-structured iteration matrices (difflie.numerics.sparsity): the same steps as the dense
matrix, on chains, trees and closed loops, with gradients."""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.models import chain, ladder, spider
from difflie.numerics import linear, sparsity

H = 1e-3


def _random_system(rng, num_bodies, per_body, row_bodies, block_size):
    """A random KKT-like matrix with the couplings of a multibody step: body unknowns couple
    with those of their own and adjacent bodies, a constraint row with its bodies' unknowns
    (both ways), multipliers not with each other."""
    body_unknowns = np.repeat(np.arange(num_bodies), per_body)
    leaves = (body_unknowns.size, len(row_bodies))
    st = sparsity.block_structure(num_bodies, row_bodies, body_unknowns, row_bodies, leaves, block_size)
    adjacent = np.eye(num_bodies, dtype=bool)
    inner = row_bodies[(row_bodies >= 0).all(axis=1)]
    adjacent[inner[:, 0], inner[:, 1]] = adjacent[inner[:, 1], inner[:, 0]] = True
    nu = body_unknowns.size
    pattern = np.zeros((st.n, st.n), bool)
    pattern[:nu, :nu] = adjacent[body_unknowns[:, None], body_unknowns[None, :]]
    touches = (body_unknowns[:, None, None] == row_bodies[None, :, :]).any(axis=2)  # (nu, m)
    pattern[:nu, nu:] = touches
    pattern[nu:, :nu] = touches.T
    A = rng.normal(size=(st.n, st.n)) * pattern
    A[:nu, :nu] += 4.0 * np.eye(nu)
    return st, A, leaves


@pytest.mark.parametrize("block_size", [None, 5, 12, 1000])
def test_blocks_solve_like_a_dense_matrix(block_size):
    """A tree with a loop closure and a free body: solves and transposed solves (reverse mode)
    agree with numpy's dense solve to rounding, whatever the block size."""
    rng = np.random.default_rng(0)
    rows = np.array([[-1, 0], [0, 1], [1, 2], [0, 3], [3, 4], [2, 4], [4, 5], [-1, 5]])  # body 6: free
    st, A, leaves = _random_system(rng, 7, 2, rows, block_size)
    if block_size == 5:
        assert st.num_levels * st.width > 3 and st.num_seeds < st.n  # groups and compression in use
    x = rng.normal(size=st.n)
    b = rng.normal(size=st.n)
    parts = (jnp.asarray(x[: leaves[0]]), jnp.asarray(x[leaves[0] :]))
    value, factors = st.value_and_factors(lambda p: jnp.asarray(A) @ jnp.concatenate(p), parts)
    np.testing.assert_allclose(value, A @ x, atol=1e-12)
    np.testing.assert_allclose(st.solve(factors, jnp.asarray(b)), np.linalg.solve(A, b), atol=1e-12)
    # The transpose of the solve, as reverse mode takes it through the implicit-function theorem.
    g = jax.grad(lambda y: jnp.vdot(jnp.asarray(b), st.tangent_solve(lambda v: jnp.asarray(A) @ v, y)))(jnp.asarray(x))
    np.testing.assert_allclose(g, np.linalg.solve(A.T, b), atol=1e-12)


def test_wide_levels_solve_like_a_dense_matrix():
    """A hub with 20 arms of two bodies (levels of 20 groups, past the product that sums a
    narrow level's fill into its parents; the hub's rows by reverse mode): solves, transposed
    solves and values as NumPy's."""
    rng = np.random.default_rng(5)
    arms = np.arange(1, 21)
    rows = np.concatenate([[[-1, 0]], np.stack([0 * arms, arms], 1), np.stack([arms, arms + 20], 1)])
    st, A, leaves = _random_system(rng, 41, 2, rows, 3)  # 3: no merges along the arms
    assert (st.num_levels, st.width) == (3, 20) and st.width > linear._ONE_HOT_WIDTH
    assert st.hub_rows.size == 3 and st.num_seeds == 9  # hub: 2 unknowns, 1 row; 3 colours x 3, not 21
    b = rng.normal(size=st.n)
    zero = (jnp.zeros(leaves[0]), jnp.zeros(leaves[1]))
    _, factors = st.value_and_factors(lambda p: jnp.asarray(A) @ jnp.concatenate(p), zero)
    for indexed in (False, True):
        np.testing.assert_allclose(st.solve(factors, jnp.asarray(b), indexed), np.linalg.solve(A, b), atol=1e-12)
    g = jax.grad(lambda y: jnp.vdot(jnp.asarray(b), st.tangent_solve(lambda v: jnp.asarray(A) @ v, y)))(jnp.zeros(st.n))
    np.testing.assert_allclose(g, np.linalg.solve(A.T, b), atol=1e-12)


def test_chain_is_block_tridiagonal_with_few_seeds():
    """A chain of 64 bodies: one body per level, three colours: 27 derivative passes build the
    576 x 576 generalized-alpha matrix, in 64 blocks of 9 unknowns (one body and its joint's
    rows; with ``block_size=48``, five bodies to a block)."""
    st = dl.GeneralizedAlpha().structure(chain(64))
    assert st.n == 64 * 9 and st.num_seeds == 27
    assert (st.num_levels, st.width, st.block_size) == (64, 1, 9)
    st = dl.GeneralizedAlpha(block_size=48).structure(chain(64))
    assert (st.num_levels, st.width, st.block_size) == (13, 1, 45)


def test_a_tree_keeps_one_body_to_a_block_however_wide():
    """A hub with 16 arms of 4 bodies: 16 groups of one body (9 unknowns) in each of four
    levels below the hub, each tied to its parent in the level above: the elimination runs from
    the arms' tips to the hub (Baraff 1996), never on a level's 144 unknowns at once."""
    st = dl.GeneralizedAlpha().structure(spider(65, arms=16))
    assert (st.num_levels, st.width, st.block_size) == (5, 16, 9)
    # the hub's 9 rows by reverse mode; the rest in 3 colours x 9, not 17 colours (hub and arms)
    assert st.hub_rows.size == 9 and st.num_seeds == 27
    assert (st.parent[0] == 16).all() and (st.parent[1] == 0).all()  # the hub: a root; arms hang from it
    np.testing.assert_array_equal(st.parent[2:], np.broadcast_to(np.arange(16), (3, 16)))


def test_rp_normalisation_rows_stay_with_their_bodies():
    st = dl.BackwardEuler(formulation="rp").structure(chain(16))
    assert (st.num_levels, st.width, st.block_size) == (16, 1, 11)  # 3 + 4 + 3 joint rows + 1 norm row


DATA = Path(__file__).parent / "data"


def _final(solver, model, steps):
    run = dl.xla.jit(lambda m: dl.simulate(m, solver, 0.0, steps * H, H, saveat=dl.SaveAt(t1=True)).position[-1])
    return np.asarray(run(model))


@pytest.mark.parametrize("name, model, steps", [("star31", spider(31, arms=10), 20), ("ladder4", ladder(4), 20)])
def test_generalized_alpha_blocks_match_dense(name, model, steps):
    """The block step follows the dense step's trajectory to 1e-10 on a tree (a hub with ten
    arms of three bodies: levels of ten groups, the hub's rows by reverse mode) and on a row of
    closed four-bar loops."""
    dense = _final(dl.GeneralizedAlpha(block_size=None), model, steps)
    blocks = _final(dl.GeneralizedAlpha(), model, steps)
    assert np.abs(dense - model.r0).max() > 1e-3  # it moved
    np.testing.assert_allclose(blocks, dense, atol=1e-10)


def test_chain64_blocks_match_the_dense_step():
    """50 steps of a 64-body chain: the block step ends where the dense step ended (stored in
    ``tests/data``, made by ``GeneralizedAlpha(block_size=None)``; the slow test below remakes
    it) to 1e-10."""
    ref = np.load(DATA / "chain64_generalized_alpha_dense.npz")["position"]
    model = chain(64)
    assert np.abs(ref - model.r0).max() > 1e-2  # it moved
    np.testing.assert_allclose(_final(dl.GeneralizedAlpha(), model, 50), ref, atol=1e-10)


@pytest.mark.slow
def test_chain64_stored_dense_step_is_current():
    ref = np.load(DATA / "chain64_generalized_alpha_dense.npz")["position"]
    np.testing.assert_allclose(_final(dl.GeneralizedAlpha(block_size=None), chain(64), 50), ref, atol=1e-12)


@pytest.mark.parametrize("formulation", ["rA", pytest.param("rp", marks=pytest.mark.slow)])
def test_backward_euler_blocks_match_dense(formulation):
    """Backward Euler on a tree with kept matrices (the default) and full Newton: the block
    step meets the same Newton tolerance as the dense one (positions to 1e-10)."""
    model = spider(9)
    for newton in ("modified", "full"):
        dense = _final(dl.BackwardEuler(formulation=formulation, newton=newton, block_size=None), model, 20)
        blocks = _final(dl.BackwardEuler(formulation=formulation, newton=newton, block_size=12), model, 20)
        np.testing.assert_allclose(blocks, dense, atol=1e-10)


def test_gradient_through_blocks_matches_finite_differences():
    """Reverse-mode gradient of the tip height of a 16-body chain after 10 steps with respect to
    all masses, through the block implicit-function solves, against central differences."""
    model = chain(16)
    solver = dl.GeneralizedAlpha(block_size=12)

    def tip(masses):
        m = eqx.tree_at(lambda m: m.bodies.mass, model, masses)
        return dl.simulate(m, solver, 0.0, 10 * H, H, saveat=dl.SaveAt(t1=True)).position[-1, -1, 2]

    masses = model.bodies.mass
    g = dl.xla.jit(jax.grad(tip))(masses)
    f = dl.xla.jit(tip)
    eps = 1e-5
    for i in (0, 7, 15):
        e = jnp.zeros_like(masses).at[i].set(eps)
        fd = (f(masses + e) - f(masses - e)) / (2 * eps)
        np.testing.assert_allclose(g[i], fd, rtol=1e-5, atol=1e-9)


def test_float32_blocks_run():
    """float32: the block step runs and stays near the float64 trajectory."""
    m32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x, chain(8))
    x32 = _final(dl.GeneralizedAlpha(block_size=12), m32, 10)
    x64 = _final(dl.GeneralizedAlpha(block_size=12), chain(8), 10)
    assert x32.dtype == np.float32
    np.testing.assert_allclose(x32, x64, atol=1e-4)


def test_blocks_of_a_dense_structure_are_one_matrix():
    st = sparsity.dense((3, 2))
    assert st.is_dense and st.block_size == 5
    rng = np.random.default_rng(1)
    A = rng.normal(size=(5, 5)) + 5 * np.eye(5)
    factors = st.factor(st.blocks(jnp.asarray(A)))
    b = rng.normal(size=5)
    np.testing.assert_allclose(st.solve(factors, jnp.asarray(b)), np.linalg.solve(A, b), atol=1e-13)


def test_assembly_in_blocks_matches_the_dense_steps(monkeypatch):
    """Assembly's minimum-norm Gauss-Newton steps in the topology's blocks (the saddle-point
    system ``[[I, G^T], [G, 0]]``, used above ``DENSE_SADDLE_LIMIT`` unknowns) land where the
    dense steps ``G^T (G G^T)^{-1} Psi`` do, in as many iterations, and their derivative (one
    more step from the result) is the same: a ladder of closed loops in rp (normalisation rows)
    and a tree in rA, moved off their constraints."""
    from difflie.constraints import jacobians as jac
    from difflie.constraints.formulations import get_formulation
    from difflie.kinematics import assemble

    monkeypatch.setattr(jac, "DENSE_SADDLE_LIMIT", 0)
    for model, name in ((ladder(3), "rp"), (spider(6), "rA")):
        form = get_formulation(name)
        assert not jac.saddle_structure(model, form).is_dense
        r0, R0, _, _ = model.initial_state()
        r0 = r0 + 0.01 * np.sin(np.arange(r0.size)).reshape(r0.shape)
        rot0 = form.from_rotation(R0)
        w = np.cos(np.arange(r0.size)).reshape(r0.shape)

        def loss(r, block_size):
            r1, rot1, _, _ = assemble(model, 0.0, form, r, rot0, block_size=block_size)
            return jnp.sum(w * r1) + jnp.sum(jnp.sin(rot1))

        dense, blocks = (assemble(model, 0.0, form, r0, rot0, block_size=b) for b in (None, 16))
        assert int(dense[2]) == int(blocks[2]) >= 3 and float(blocks[3]) < 1e-14
        for a, b in zip(dense[:2], blocks[:2]):
            np.testing.assert_allclose(b, a, atol=1e-15)
        np.testing.assert_allclose(jax.grad(loss)(r0, 16), jax.grad(loss)(r0, None), atol=1e-13)


@pytest.mark.slow
def test_start_above_the_dense_limit_matches_the_dense_start():
    """A chain of 360 bodies (3240 unknowns, above ``DENSE_SADDLE_LIMIT``): the consistent start
    of ``GeneralizedAlpha`` in blocks (assembly, rates, accelerations and multipliers) is the
    dense one (``block_size=None``), from a configuration moved off its joints."""
    from difflie import dae
    from difflie.constraints import jacobians as jac
    from difflie.constraints.formulations import get_formulation

    model, form = chain(360), get_formulation("rA")
    assert not jac.saddle_structure(model, form).is_dense
    r0 = np.asarray(model.r0)
    model = eqx.tree_at(lambda m: m.r0, model, jnp.asarray(r0 + 1e-3 * np.sin(np.arange(r0.size)).reshape(r0.shape)))
    start = jax.jit(dae.consistent_state, static_argnums=(1, 3))
    blocks, dense = start(model, form, 0.0, 16), start(model, form, 0.0, None)
    assert float(jnp.max(jnp.abs(jac.psi(model, form, 0.0, blocks[0], blocks[1])))) < 1e-12
    for a, b in zip(blocks, dense):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * float(jnp.max(jnp.abs(b))))


def test_saddle_point_systems_in_blocks_match_numpy():
    """The start's saddle-point systems factored in the topology's blocks (what
    ``dae.consistent_state`` does above ``DENSE_SADDLE_LIMIT`` unknowns) solve the dense systems
    assembled by ``jacfwd`` and solved by NumPy: the accelerations and multipliers
    ``[[M, G^T], [G, 0]] [a; lambda] = [-E(0); gamma]`` and the nearest rates with
    ``G q_dot = nu``. Closed loops (a ladder of four-bar loops) and rp's normalisation rows."""
    from difflie import dae
    from difflie.constraints import jacobians as jac
    from difflie.constraints.formulations import get_formulation

    model, form = ladder(3), get_formulation("rp")
    st = jac.structure(model, form, 16)
    assert not st.is_dense

    @jax.jit
    def solve(model):
        r, rot, v, rate, _, _ = dae.consistent_state(model, form, 0.0)
        qdot = jac.join(v, rate)
        off = qdot + 0.1 * jnp.sin(jnp.arange(qdot.shape[0]))

        def E(a):
            return dae.dynamics_residual(model, form, 0.0, r, rot, v, rate, a)

        gamma, nu = jac.gamma(model, form, 0.0, r, rot, qdot), jac.nu(model, form, 0.0, r, rot)
        blocks = jac.solve_saddle(model, form, 0.0, r, rot, E, gamma, st)
        near, _ = jac.solve_saddle(model, form, 0.0, r, rot, lambda x: x - off, nu, st)
        zero = jnp.zeros_like(qdot)
        dense = jax.jacfwd(E)(zero), -E(zero), jac.jacobian(model, form, 0.0, r, rot), gamma, nu, off
        return jnp.concatenate(blocks), near, dense

    blocks, near, (M, b, G, gamma, nu, off) = jax.tree.map(np.asarray, solve(model))
    n, m = M.shape[0], G.shape[0]

    def dense(A, b, c):
        return np.linalg.solve(np.block([[A, G.T], [G, np.zeros((m, m))]]), np.concatenate([b, c]))

    ref = dense(M, b, gamma)
    assert np.abs(ref[n:]).max() > 1.0  # loaded joints
    np.testing.assert_allclose(blocks, ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(near, dense(np.eye(n), off, nu)[:n], atol=1e-12)
    np.testing.assert_allclose(G @ near, nu, atol=1e-12)


def test_indexed_block_solve_matches_the_scan_alone_and_in_a_batch():
    """``solve_blocks(..., indexed=True)`` (the form for a batch) solves a system in blocks
    along a forest (two roots; groups of the level below on either) as the scan does, for one
    system and under ``vmap``, and both match NumPy; ``indexed=None`` scans alone and indexes
    the factors under a ``vmap`` of them, not of the right-hand side only."""
    rng = np.random.default_rng(3)
    parent = np.array([[2, 2], [0, 0], [1, 0], [1, 1]])  # level 0: two roots; (3, 1) below a pad
    K, W, B, n = *parent.shape, 4, 3

    def matrix():
        A = np.zeros((K, W, B, K, W, B))
        for k in range(K):
            for w in range(W):
                A[k, w, :, k, w] = rng.normal(size=(B, B)) + 6 * np.eye(B)
                if k and parent[k, w] < W:
                    A[k, w, :, k - 1, parent[k, w]] = rng.normal(size=(B, B))
                    A[k - 1, parent[k, w], :, k, w] = rng.normal(size=(B, B))
        return A.reshape(K * W * B, K * W * B)

    mats = np.stack([matrix() for _ in range(n)])
    bs = rng.normal(size=(n, K * W * B))

    def solve(A, b, indexed):
        blk = A.reshape(K, W, B, K, W, B)
        ks, ws = np.arange(K)[:, None], np.arange(W)[None]
        above = np.maximum(ks - 1, 0), np.minimum(parent, W - 1)
        root = jnp.asarray(parent == W)[..., None, None]
        blocks = linear.Blocks(blk[ks, ws, :, ks, ws], jnp.where(root, 0.0, blk[ks, ws, :, above[0], above[1]]),
                               jnp.where(root, 0.0, blk[above[0], above[1], :, ks, ws]))  # fmt: skip
        x = linear.solve_blocks(linear.factor_blocks(blocks, parent), b.reshape(K, W, B), parent, indexed)
        return x.reshape(-1)

    expected = np.linalg.solve(mats, bs[..., None])[..., 0]
    for indexed in (False, True, None):
        np.testing.assert_allclose(solve(jnp.asarray(mats[0]), jnp.asarray(bs[0]), indexed), expected[0], atol=1e-12)
        batch = jax.jit(jax.vmap(lambda A, b, i=indexed: solve(A, b, i)))(jnp.asarray(mats), jnp.asarray(bs))
        np.testing.assert_allclose(batch, expected, atol=1e-12)

    def transposes(fn, *args):  # a scan over batched factors transposes them
        return str(jax.make_jaxpr(fn)(*args)).count("transpose[")

    As, bs = jnp.asarray(mats), jnp.asarray(bs)
    A0 = As[0]
    by_batch = transposes(jax.vmap(lambda A, b: solve(A, b, None)), As, bs)
    assert by_batch == transposes(jax.vmap(lambda A, b: solve(A, b, True)), As, bs)
    assert by_batch < transposes(jax.vmap(lambda A, b: solve(A, b, False)), As, bs)
    shared = transposes(jax.vmap(lambda b: solve(A0, b, None)), bs)
    assert shared == transposes(jax.vmap(lambda b: solve(A0, b, False)), bs)
