"""Batches: vmap over parameters and initial states; sharding over (forced host) devices."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

from difflie.batch import batch_size, shard, simulate_batch, stack
from difflie.lie import SO3
from difflie.numerics import newton
from difflie.models.rigid import heavy_top
from difflie.models.spatial import heavy_top_spherical
from difflie.simulate import simulate
from difflie.solution import SaveAt
from difflie.solvers.backward_euler import BackwardEuler
from difflie.solvers.generalized_alpha import GeneralizedAlpha
from difflie.solvers.rkmk import RKMK4


N = 64
T1, DT = 0.05, 5e-3


def random_tops(key, n):
    """Random physical inertias (second moments ``u`` > 0, ``J = Q diag(tr u - u) Q^T``) and
    random initial angular velocities."""
    k1, k2, k3 = jax.random.split(key, 3)
    u = jax.random.uniform(k1, (n, 3), minval=0.05, maxval=0.5)
    Q = SO3.sample_uniform(k2, (n,)).matrix
    J = jnp.einsum("nij,nj,nkj->nik", Q, jnp.sum(u, -1, keepdims=True) - u, Q)
    omega0 = jax.random.normal(k3, (n, 3)) * jnp.array([2.0, 20.0, 2.0])
    return {"inertia": J, "omega0": omega0}


def make_top(p):
    return heavy_top(inertia=p["inertia"], omega0=p["omega0"])


@pytest.fixture(scope="module")
def batch():
    params = random_tops(jax.random.PRNGKey(0), N)
    return params, simulate_batch(params, RKMK4(), 0.0, T1, DT, make_model=make_top)


def test_vmap_over_parameters_matches_single_runs(batch):
    params, sol = batch
    assert sol.rotation.shape == (N, 1, 1, 3, 3) and sol.ts.shape == (N, 1)
    for i in (0, 17, N - 1):
        single = simulate(make_top(jax.tree.map(lambda x: x[i], params)), RKMK4(), 0.0, T1, DT)
        np.testing.assert_allclose(sol.rotation[i], single.rotation, rtol=0, atol=1e-13)
        np.testing.assert_allclose(sol.angular_velocity[i], single.angular_velocity, rtol=1e-13, atol=1e-12)
    # different inertias really give different motions
    assert np.ptp(np.asarray(sol.angular_velocity[:, -1, 0, 1])) > 1.0


def test_chunked_batch_matches_vmap(batch):
    params, sol = batch
    out = simulate_batch(params, RKMK4(), 0.0, T1, DT, make_model=make_top, chunk_size=24)  # 64 = 2*24 + 16
    np.testing.assert_allclose(out.rotation, sol.rotation, rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="chunk_size"):
        simulate_batch(params, RKMK4(), 0.0, T1, DT, make_model=make_top, chunk_size=0)


def test_a_batch_compiles_once_per_configuration(batch):
    """Calls of ``simulate_batch`` that differ only in the batch's values reuse one compiled
    program, chunked and split over devices too (eagerly, a ``lax.map`` or ``shard_map`` of a
    new closure traced and compiled again at every call: 2-5 s each). Times and save times are
    compile-time constants: new ones compile anew."""
    params, sol = batch
    traces = []

    def counted(p):
        traces.append(1)
        return make_top(p)

    ts = np.linspace(0.0, T1, 6)  # on the step grid: the same steps as the fixture's run
    for options in ({"chunk_size": 16}, {"chunk_size": 16, "devices": jax.devices()[:1]}):
        runs = [simulate_batch(jax.tree.map(lambda x: x * scale, params), RKMK4(), 0.0, T1, DT, make_model=counted,
                               saveat=SaveAt(ts=ts), **options) for scale in (1.0, 1.01)]  # fmt: skip
        assert len(traces) == 1, options
        np.testing.assert_allclose(runs[0].rotation[:, -1], sol.rotation[:, -1], rtol=0, atol=1e-13)
        assert np.abs(runs[1].rotation - runs[0].rotation).max() > 1e-6  # the new values were used
        traces.clear()
    simulate_batch(params, RKMK4(), 0.0, T1, DT, make_model=counted, saveat=SaveAt(ts=ts[:3]), chunk_size=16)
    assert len(traces) == 1  # other save times: another program


def test_stacked_models(batch):
    params, sol = batch
    models = stack([make_top(jax.tree.map(lambda x: x[i], params)) for i in range(4)])
    out = simulate_batch(models, RKMK4(), 0.0, T1, DT)
    np.testing.assert_allclose(out.position, sol.position[:4], rtol=0, atol=1e-13)


def _conds(jaxpr) -> int:
    """The ``cond`` equations of a jaxpr and of every jaxpr nested in it."""
    n = 0
    for eqn in jaxpr.eqns:
        n += eqn.primitive.name == "cond"
        n += sum(_conds(sub) for sub in jax.extend.core.jaxprs_in_params(eqn.params))
    return n


@pytest.mark.parametrize("solver", [GeneralizedAlpha(newton="modified"), BackwardEuler()], ids=["ga-modified", "be"])
def test_modified_newton_batch_rebuilds_matrices_together(solver, monkeypatch):
    """Under ``vmap`` (``simulate_batch``'s or a plain one) modified Newton rebuilds a kept
    matrix under a ``lax.cond`` taken when any system of the batch needs one (a cond per system
    would become a select that builds a matrix at every iteration), and every system takes the
    new matrix it paid for: the results of single runs to Newton's tolerance (relative 1e-8 on
    the residual, ~1e-12 per step on the rotations here), in fewer iterations."""
    omegas = jnp.array([[0.0, 150.0, -4.6], [0.0, 120.0, 2.0], [3.0, 90.0, 0.0]])

    def batch(w):
        return simulate_batch(w, solver, 0.0, 0.04, 4e-3, make_model=lambda o: heavy_top_spherical(omega0=o))

    def one(o):
        return simulate(heavy_top_spherical(omega0=o), solver, 0.0, 0.04, 4e-3)

    out = jax.jit(batch)(omegas)
    alone = 0
    for i in range(3):
        single = one(omegas[i])
        np.testing.assert_allclose(out.rotation[i], single.rotation, rtol=0, atol=1e-10)
        alone += int(single.stats.newton_iterations)
    assert int(jnp.sum(out.stats.newton_iterations)) <= alone
    plain = jax.jit(jax.vmap(one))(omegas)
    np.testing.assert_array_equal(plain.rotation, out.rotation)
    conds = _conds(jax.make_jaxpr(batch)(omegas).jaxpr)
    monkeypatch.setattr(newton, "any_in_batch", lambda p: p)  # a decision per system
    jax.clear_caches()  # simulate's trace is cached
    try:
        per_system = _conds(jax.make_jaxpr(batch)(omegas).jaxpr)
    finally:
        monkeypatch.undo()
        jax.clear_caches()
    assert conds == per_system + 1


def test_bad_batches():
    with pytest.raises(ValueError, match="same leading"):
        batch_size({"a": jnp.zeros((3, 2)), "b": jnp.zeros((4,))})
    with pytest.raises(ValueError, match="different structure"):
        stack([{"a": 1.0}, {"b": 1.0}])
    with pytest.raises(ValueError, match="multiple"):
        shard({"a": jnp.zeros((3, 2))}, devices=jax.devices() * 2)
    with pytest.raises(ValueError, match="multiple"):
        simulate_batch({"a": jnp.zeros((3, 2))}, RKMK4(), 0.0, T1, DT, make_model=make_top, devices=jax.devices() * 2)
    with pytest.raises(ValueError, match="chunk_size"):
        simulate_batch({"a": jnp.zeros((3, 2))}, RKMK4(), 0.0, T1, DT, make_model=make_top, chunk_size=1.5)


_SHARDED = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    assert len(jax.devices()) == 2, jax.devices()
    from difflie.batch import shard, simulate_batch
    from difflie.solvers.rkmk import RKMK4
    from tests.test_batch import random_tops, make_top, T1, DT
    params = random_tops(jax.random.PRNGKey(1), 8)
    sharded = shard(params)
    assert len(sharded["inertia"].sharding.device_set) == 2
    out = simulate_batch(sharded, RKMK4(), 0.0, T1, DT, make_model=make_top)
    ref = simulate_batch(jax.device_put(params, jax.devices()[0]), RKMK4(), 0.0, T1, DT, make_model=make_top)
    assert len(out.rotation.sharding.device_set) == 2, out.rotation.sharding
    shards = out.rotation.addressable_shards
    assert {s.data.shape[0] for s in shards} == {4}, [s.data.shape for s in shards]
    np.testing.assert_allclose(np.asarray(out.rotation), np.asarray(ref.rotation), rtol=0, atol=1e-13)
    # The batch split by simulate_batch itself (shard_map), chunked on each device: 5 systems
    # per device run as a chunk of 3 and a remainder of 2.
    params = random_tops(jax.random.PRNGKey(2), 10)
    ref = simulate_batch(params, RKMK4(), 0.0, T1, DT, make_model=make_top)
    out = jax.jit(lambda p: simulate_batch(p, RKMK4(), 0.0, T1, DT, make_model=make_top, chunk_size=3,
                                           devices=jax.devices()))(params)  # fmt: skip
    assert {s.data.shape[0] for s in out.rotation.addressable_shards} == {5}
    assert len(out.rotation.sharding.device_set) == 2
    np.testing.assert_allclose(np.asarray(out.rotation), np.asarray(ref.rotation), rtol=0, atol=1e-13)
    # Gradients pass through the split and the chunks (an identification over a batch).
    def loss(p, **kw):
        return jnp.sum(simulate_batch(p, RKMK4(), 0.0, T1, DT, make_model=make_top, **kw).angular_velocity[:, -1] ** 2)
    g_ref = jax.grad(loss)(params)
    g = jax.jit(jax.grad(lambda p: loss(p, chunk_size=2, devices=jax.devices())))(params)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)
    assert float(jnp.abs(g_ref["inertia"]).max()) > 1.0
    # Modified Newton with the chunk's axis named: the chunks' iterates and iteration counts,
    # whether the chunks run on one device or two.
    from difflie.models.spatial import heavy_top_spherical
    from difflie.solvers.generalized_alpha import GeneralizedAlpha
    omegas = jnp.stack([jnp.array([0.0, 30.0 + 40.0 * (k % 2), 0.5]) for k in range(4)])
    run = lambda **kw: simulate_batch(omegas, GeneralizedAlpha(newton="modified"), 0.0, 0.04, 4e-3,
                                      make_model=lambda o: heavy_top_spherical(omega0=o), chunk_size=2, **kw)  # fmt: skip
    ref, out = run(), run(devices=jax.devices())
    np.testing.assert_allclose(np.asarray(out.rotation), np.asarray(ref.rotation), rtol=0, atol=1e-13)
    np.testing.assert_array_equal(np.asarray(out.stats.newton_iterations), np.asarray(ref.stats.newton_iterations))
    print("SHARDED_OK")
    """
)


@pytest.mark.slow  # a process of its own that compiles everything again: 47 s of the default run
def test_sharding_over_two_host_devices():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", _SHARDED], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert "SHARDED_OK" in proc.stdout, proc.stdout + proc.stderr


def test_float32_batch():
    """dtype follows the input: a float32 batch stays float32 (x64 enabled in the tests)."""
    params = jax.tree.map(lambda x: x.astype(jnp.float32), random_tops(jax.random.PRNGKey(2), 4))
    sol = simulate_batch(params, RKMK4(), 0.0, T1, DT, make_model=make_top)
    assert sol.rotation.dtype == jnp.float32
    R = np.asarray(sol.rotation[:, -1, 0], np.float64)
    assert np.abs(np.swapaxes(R, -1, -2) @ R - np.eye(3)).max() < 1e-5


_CHAINS = textwrap.dedent(
    """
    import equinox as eqx
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    import difflie as dl
    from difflie.models import chain

    model = chain(32)

    def tip(angle):  # the chain turned about the y axis through its pivot: a consistent start
        c, s = jnp.cos(angle), jnp.sin(angle)
        Ry = jnp.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
        m = eqx.tree_at(lambda m: (m.r0, m.R0), model, (model.r0 @ Ry.T, Ry @ model.R0))
        sol = dl.simulate(m, dl.GeneralizedAlpha(), 0.0, 2e-3, 1e-3, saveat=dl.SaveAt(t1=True))
        return sol.position[-1, -1]

    angles = jnp.linspace(0.0, 0.5, 16)
    ends = jax.jit(jax.vmap(tip))(angles)
    np.testing.assert_allclose(ends[5], jax.jit(tip)(angles[5]), rtol=0, atol=1e-12)
    print("CHAINS_OK")
    """
)


def test_vmap_of_generalized_alpha_over_chains_runs_on_every_core():
    """16 chains of 32 bodies under one vmap: with jaxlib 0.10's batched LAPACK calls on a
    CPU pool of two or more threads this hung for good before difflie.numerics.linear kept
    each call's batch under jaxlib's parallel threshold."""
    try:
        proc = subprocess.run([sys.executable, "-c", _CHAINS], capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("a vmap of GeneralizedAlpha over 16 chains of 32 bodies hung")
    assert "CHAINS_OK" in proc.stdout, proc.stdout + proc.stderr[-3000:]
