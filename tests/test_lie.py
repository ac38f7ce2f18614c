"""Lie groups: axioms, maps, tangent operators, golden values, singular points, precisions."""

import functools
import math
import re

import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from helpers import run_float32

from difflie.lie import SE3, SO3, SO3xR3, UnitDualQuaternion, UnitQuaternion, cross, hat

GROUPS = [SO3, UnitQuaternion, SE3, SO3xR3, UnitDualQuaternion]
IDS = [G.__name__ for G in GROUPS]
BATCHES = [(), (3,), (2, 4)]
hyp = settings(max_examples=15, deadline=None)


def random_tangent(key, G, batch=(), max_angle=3.0, dtype=jnp.float64):
    k1, k2, k3 = jax.random.split(key, 3)
    axis = jax.random.normal(k1, batch + (3,), dtype)
    axis = axis / jnp.linalg.norm(axis, axis=-1, keepdims=True)
    w = axis * jax.random.uniform(k2, batch + (1,), dtype, 0.0, max_angle)
    if G.tangent_dim == 3:
        return w
    return jnp.concatenate([jax.random.normal(k3, batch + (3,), dtype), w], axis=-1)


def pose_matrix(g):
    """A faithful comparison key: the rotation matrix or the homogeneous transform."""
    return g.as_matrix()


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=tol)


@functools.cache
def axioms_fn(G):
    @jax.jit
    def f(key, batch_shape_dummy):
        batch = batch_shape_dummy.shape
        ka, kb, kc = jax.random.split(key, 3)
        a, b, c = (G.sample_uniform(k, batch) for k in (ka, kb, kc))
        e = G.identity(batch)
        m = pose_matrix
        return {
            "assoc": jnp.max(jnp.abs(m((a @ b) @ c) - m(a @ (b @ c)))),
            "left_id": jnp.max(jnp.abs(m(e @ a) - m(a))),
            "right_id": jnp.max(jnp.abs(m(a @ e) - m(a))),
            "inverse": jnp.max(jnp.abs(m(a @ a.inverse()) - m(e))) + jnp.max(jnp.abs(m(a.inverse() @ a) - m(e))),
        }

    return f


@pytest.mark.parametrize("G", GROUPS, ids=IDS)
@hyp
@given(seed=st.integers(0, 2**31 - 1), batch=st.sampled_from(BATCHES))
def test_group_axioms(G, seed, batch):
    out = axioms_fn(G)(jax.random.PRNGKey(seed), jnp.zeros(batch))
    for name, err in out.items():
        assert float(err) < 1e-13, name


@pytest.mark.parametrize("G", GROUPS, ids=IDS)
@hyp
@given(seed=st.integers(0, 2**31 - 1), batch=st.sampled_from(BATCHES))
def test_exp_log_roundtrip_and_action(G, seed, batch):
    key = jax.random.PRNGKey(seed)
    xi = random_tangent(key, G, batch, max_angle=3.1)
    g = G.exp(xi)
    assert g.batch_shape == batch
    close(g.log(), xi, 1e-11)
    # act agrees with the matrix
    p = jax.random.normal(jax.random.fold_in(key, 1), batch + (3,))
    m = g.as_matrix()
    expected = jnp.einsum("...ij,...j->...i", m[..., :3, :3], p)
    if m.shape[-1] == 4:
        expected = expected + m[..., :3, 3]
    close(g.act(p), expected, 1e-12)
    # log of a sampled element returns an angle in [0, pi] and exp(log g) = g
    h = G.sample_uniform(key, batch)
    eta = h.log()
    assert float(jnp.max(jnp.linalg.norm(eta[..., -3:], axis=-1))) <= np.pi + 1e-12
    close(G.exp(eta).as_matrix(), h.as_matrix(), 1e-12)


@pytest.mark.parametrize("G", GROUPS, ids=IDS)
@hyp
@given(seed=st.integers(0, 2**31 - 1))
def test_adjoint_conjugation(G, seed):
    key = jax.random.PRNGKey(seed)
    g = G.sample_uniform(key, (4,))
    xi = random_tangent(jax.random.fold_in(key, 7), G, (4,), max_angle=2.0)
    lhs = g @ G.exp(xi) @ g.inverse()
    rhs = G.exp(jnp.einsum("...ij,...j->...i", g.adjoint(), xi))
    close(lhs.as_matrix(), rhs.as_matrix(), 1e-12)


@functools.cache
def _autodiff_dexp(G):
    def jac(xi):
        f = lambda d: (G.exp(xi).inverse() @ G.exp(xi + d)).log()  # noqa: E731
        return jax.jacfwd(f)(jnp.zeros_like(xi))

    return jax.jit(jac)


def autodiff_dexp(G, xi):
    """d/dd log(exp(xi)^-1 exp(xi + d)) at d = 0."""
    return _autodiff_dexp(G)(xi)


@pytest.mark.parametrize("G", GROUPS, ids=IDS)
@pytest.mark.parametrize("angle", [0.0, 1e-12, 1e-6, 1e-3, 0.3, 0.5, 1.0, 2.5, np.pi - 1e-6])
def test_dexp_matches_autodiff_and_inverse(G, angle):
    key = jax.random.PRNGKey(int(angle * 1e6) % 1000)
    xi = random_tangent(key, G)
    w = xi[-3:]
    xi = xi.at[-3:].set(w / jnp.linalg.norm(w) * angle)
    T = G.dexp(xi)
    close(T, autodiff_dexp(G, xi), 1e-9)
    close(T @ G.dexpinv(xi), jnp.eye(G.tangent_dim), 1e-12)


@pytest.mark.parametrize("G", [SO3, SE3, SO3xR3])
def test_dexp_series(G):
    """The closed-form right Jacobian equals its series sum_k (-ad_xi)^k / (k+1)!."""
    xi = random_tangent(jax.random.PRNGKey(3), G, max_angle=1.5)
    A = -G.ad(xi)
    term, series = jnp.eye(G.tangent_dim), jnp.zeros((G.tangent_dim, G.tangent_dim))
    for k in range(40):
        series = series + term / float(math.factorial(k + 1))
        term = term @ A
    close(G.dexp(xi), series, 1e-12)


def test_golden_values_mueller():
    x = jnp.array([0.3, -0.2, 0.5])
    close(SO3.exp(x).matrix, [[0.859533898559, -0.497991537003, -0.114916953936],
                              [0.439867632958, 0.835315605207, -0.329794337692],
                              [0.260226714048, 0.232921164284, 0.937032437285]], 1e-11)
    close(UnitQuaternion.exp(x).wxyz, [0.952874852886, 0.147636255767, -0.098424170511, 0.246060426278], 1e-11)
    # the paper's right-trivialised dexp_x is our right Jacobian at -x (= left Jacobian at x)
    close(SO3.dexp(-x), [[0.95257673497, -0.251994643526, -0.072343898392],
                         [0.232371223513, 0.944400309965, -0.161662610122],
                         [0.121402448423, 0.128956910102, 0.978741294987]], 1e-11)
    close(SO3.dexpinv(-x), [[0.975678879706, 0.244968044077, 0.112579889807],
                            [-0.255031955923, 0.971485583104, 0.141613406795],
                            [-0.087420110193, -0.158386593205, 0.989097428834]], 1e-11)
    g = SE3.exp(jnp.array([1.0, 2.0, -1.0, 0.3, -0.2, 0.5]))
    close(g.translation, [0.520931346312, 2.282834453566, -0.599425026361], 1e-11)
    close(g.rotation, SO3.exp(x).matrix, 1e-15)


def test_golden_values_holzinger_se3():
    n = jnp.array([0.1, -0.2, 0.3, 0.4, 0.5, -0.6])
    close(SE3.exp(n).as_matrix()[:3], [[0.714075363402, 0.619656510510, 0.325764001026, 0.086318481978],
                                        [-0.432164945528, 0.756260965523, -0.491225825749, -0.278918746997],
                                        [-0.550753879005, 0.209988478276, 0.807821145893, 0.225113365488]], 1e-11)
    top = jnp.array([[0.948502110807, 0.316884553834, 0.229738535400, 0.047698770512, -0.152671050215, -0.094768593282],
                     [-0.283115446166, 0.956100160032, -0.225326830751, 0.147328949785, 0.023998129931, -0.026998301614],
                     [-0.270261464600, 0.174673169249, 0.965386664641, 0.105231406718, 0.073001698386, 0.010414384937]])
    Tinv = SE3.dexpinv(n)
    close(Tinv[:3], top, 1e-11)
    close(Tinv[3:, 3:], top[:, :3], 1e-11)
    close(Tinv[3:, :3], jnp.zeros((3, 3)), 0)


def test_printed_eq17_commutator_is_wrong():
    """Holzinger, Gerstmayr & Schöberl's eq. 17 prints a commutator [n_T, n_R]; with it the block
    misses autodiff by ~5e-2."""
    from difflie.lie import coefficients as c

    n = jnp.array([0.1, -0.2, 0.3, 0.4, 0.5, -0.6])
    v, w = n[:3], n[3:]
    t = w @ w
    V, W = hat(v), hat(w)
    printed = 0.5 * V + c.k2(t) * (V @ W - W @ V) + (w @ v) * c.k3(t) * W @ W
    exact = jnp.linalg.inv(autodiff_dexp(SE3, n))[:3, 3:]
    close(SE3.dexpinv(n)[:3, 3:], exact, 1e-10)
    assert float(jnp.max(jnp.abs(printed - exact))) > 1e-2


def test_cross_representation_consistency():
    key = jax.random.PRNGKey(11)
    xi = random_tangent(key, SE3, (5,), max_angle=3.1)
    w = xi[..., 3:]
    R = SO3.exp(w).matrix
    close(UnitQuaternion.exp(w).as_matrix(), R, 1e-13)
    close(SE3.exp(xi).rotation, R, 1e-15)
    close(UnitDualQuaternion.exp(xi).rotation, R, 1e-13)
    close(SO3xR3.exp(xi).rotation, R, 1e-15)
    close(UnitDualQuaternion.exp(xi).as_matrix(), SE3.exp(xi).as_matrix(), 1e-13)
    # conversions
    g = SO3.sample_uniform(key, (5,))
    close(g.as_quaternion().as_so3().matrix, g.matrix, 1e-13)
    q = UnitQuaternion.sample_uniform(key, (5,))
    close(UnitQuaternion.from_matrix(q.as_matrix()).as_matrix(), q.as_matrix(), 1e-13)
    h = SE3.sample_uniform(key, (5,))
    close(h.as_dual_quaternion().as_se3().as_matrix(), h.as_matrix(), 1e-13)
    close(h.as_so3xr3().as_se3().as_matrix(), h.as_matrix(), 0)
    # products commute with the conversions
    h2 = SE3.sample_uniform(jax.random.fold_in(key, 1), (5,))
    close((h.as_dual_quaternion() @ h2.as_dual_quaternion()).as_matrix(), (h @ h2).as_matrix(), 1e-13)
    q2 = UnitQuaternion.sample_uniform(jax.random.fold_in(key, 2), (5,))
    close((q @ q2).as_matrix(), (q.as_so3() @ q2.as_so3()).matrix, 1e-13)
    # the same rotation vector comes out of every representation's log
    close(UnitQuaternion.exp(w).log(), w, 1e-11)
    close(SO3xR3.exp(xi).log(), xi, 1e-11)


def test_quaternion_double_cover():
    q = UnitQuaternion.sample_uniform(jax.random.PRNGKey(5), (6,))
    neg = UnitQuaternion(-q.wxyz)
    close(q.log(), neg.log(), 1e-13)
    close(q.as_matrix(), neg.as_matrix(), 1e-15)
    p = UnitDualQuaternion.sample_uniform(jax.random.PRNGKey(6), (6,))
    negp = UnitDualQuaternion(-p.real, -p.dual)
    close(p.log(), negp.log(), 1e-13)
    close(p.act(jnp.ones(3)), negp.act(jnp.ones(3)), 1e-14)


SINGULAR_ANGLES = [0.0, 1e-12, 1e-6, 1.0, np.pi - 1e-6]


@functools.cache
def singular_fns(G):
    def roundtrip(xi):
        return G.exp(xi).log()

    def scalar(xi):
        g = G.exp(xi)
        return jnp.sum(g.as_matrix()) + jnp.sum(g.log() ** 2) + jnp.sum(G.dexpinv(xi)) + jnp.sum(G.dexp(xi))

    def smooth(xi):  # no log: smooth across angle pi, for finite differences
        return jnp.sum(G.exp(xi).as_matrix()) + jnp.sum(G.dexpinv(xi)) + jnp.sum(G.dexp(xi))

    def fd_and_grad(xi):
        eps = 1e-6
        eye = jnp.eye(xi.size, dtype=xi.dtype)
        fd = jax.vmap(lambda e: (smooth(xi + eps * e) - smooth(xi - eps * e)) / (2 * eps))(eye)
        return fd, jax.grad(smooth)(xi)

    return jax.jit(roundtrip), jax.jit(jax.jacfwd(roundtrip)), jax.jit(jax.grad(scalar)), jax.jit(fd_and_grad)


@pytest.mark.parametrize("dtype, tol", [(jnp.float64, 1e-9), (jnp.float32, 2e-3)], ids=["f64", "f32"])
@pytest.mark.parametrize("G", GROUPS, ids=IDS)
@pytest.mark.parametrize("angle", SINGULAR_ANGLES)
def test_singular_points_values_and_derivatives(G, angle, dtype, tol):
    axis = jnp.array([0.48, -0.6, 0.64], dtype)
    w = axis * jnp.asarray(angle, dtype)
    xi = w if G.tangent_dim == 3 else jnp.concatenate([jnp.array([0.3, -0.1, 0.2], dtype), w])
    roundtrip, jac, grad, fd_and_grad = singular_fns(G)
    out = roundtrip(xi)
    assert out.dtype == dtype
    rel = 1e-12 if dtype == jnp.float64 else 2e-6
    # log(exp(xi)) = xi, to precision relative to |xi|
    np.testing.assert_allclose(np.asarray(out), np.asarray(xi), atol=rel * (1 + float(jnp.linalg.norm(xi))) * (1e4 if angle > 3 else 1))
    J = jac(xi)
    assert bool(jnp.all(jnp.isfinite(J)))
    # the Jacobian of log(exp(.)) is the identity (near pi the log's conditioning costs digits)
    cond = 1.0 if angle < 3 else 1e3
    np.testing.assert_allclose(np.asarray(J), np.eye(G.tangent_dim), atol=tol * cond)
    g = grad(xi)
    assert bool(jnp.all(jnp.isfinite(g)))
    # gradient matches central differences in float64
    if dtype == jnp.float64:
        fd, auto = fd_and_grad(xi)
        np.testing.assert_allclose(np.asarray(auto), np.asarray(fd), atol=1e-7)


def test_exp_derivative_at_identity_is_hat_basis():
    J = jax.jacfwd(lambda w: SO3.exp(w).matrix)(jnp.zeros(3))
    for k in range(3):
        close(J[..., k], hat(jnp.eye(3)[k]), 1e-15)
    close(SO3.dexp(jnp.zeros(3)), jnp.eye(3), 0)
    close(SE3.dexpinv(jnp.zeros(6)), jnp.eye(6), 0)


def test_so3_exp_across_its_series_switch():
    """``SO3.exp`` (one sin/cos, Taylor series below angle 0.3) against scipy's rotation vectors,
    and its Jacobian against that of the quaternion exponential (written separately), at 0, on
    both sides of the switch and next to pi."""
    from scipy.spatial.transform import Rotation

    ws = jnp.array([[0.0, 0.0, 0.0], [1e-9, 2e-9, 0.0], [5e-3, 3e-3, -6e-3], [0.29999999, 0.0, 0.0],
                    [0.0, 0.30000001, 0.0], [0.1, -0.2, 0.2], [0.3, -0.7, 1.1], [2.0, -1.0, 0.5],
                    [0.0, 0.0, np.pi - 1e-9]])  # fmt: skip
    close(SO3.exp(ws).matrix, Rotation.from_rotvec(np.array(ws)).as_matrix(), 1e-15)
    jac = jax.vmap(jax.jacfwd(lambda w: SO3.exp(w).matrix))(ws)
    close(jac, jax.vmap(jax.jacfwd(lambda w: UnitQuaternion.exp(w).as_matrix()))(ws), 5e-15)


def test_log_near_pi_from_matrix():
    """log of rotations close to angle pi (where arccos-based logs lose digits)."""
    axis = jnp.array([0.0, 0.6, 0.8])
    for angle in [np.pi, np.pi - 1e-9, np.pi - 1e-6]:
        R = SO3.exp(axis * angle)
        w = R.log()
        assert abs(float(jnp.linalg.norm(w)) - angle) < 1e-12
        close(SO3.exp(w).matrix, R.matrix, 1e-14)


def test_vmap_and_batch_agree():
    key = jax.random.PRNGKey(2)
    for G in GROUPS:
        xi = random_tangent(key, G, (7,))
        batched = G.exp(xi).log()
        mapped = jax.vmap(lambda x: G.exp(x).log())(xi)
        close(batched, mapped, 1e-14)
        T1 = G.dexpinv(xi)
        T2 = jax.vmap(G.dexpinv)(xi)
        close(T1, T2, 1e-15)  # one program against op by op: the rounding of fused operations
        g = G.sample_uniform(key, (7,))
        assert jax.vmap(lambda h: h.act(jnp.ones(3)))(g).shape == (7, 3)


def test_sample_uniform_is_valid():
    for G in GROUPS:
        g = G.sample_uniform(jax.random.PRNGKey(0), (50,))
        M = g.as_matrix()
        R = M[..., :3, :3]
        close(jnp.einsum("...ji,...jk->...ik", R, R), jnp.broadcast_to(jnp.eye(3), (50, 3, 3)), 1e-13)
        close(jnp.linalg.det(R), jnp.ones(50), 1e-13)


def test_float32_without_x64():
    """Smoke test in a fresh interpreter with x64 off: default dtype float32 everywhere."""
    code = (
        "import jax, jax.numpy as jnp\n"
        "from difflie.lie import SO3, UnitQuaternion, SE3, SO3xR3, UnitDualQuaternion\n"
        "for G in (SO3, UnitQuaternion, SE3, SO3xR3, UnitDualQuaternion):\n"
        "    xi = jnp.linspace(0.1, 0.6, G.tangent_dim)\n"
        "    g = G.exp(xi); assert g.log().dtype == jnp.float32\n"
        "    assert float(jnp.max(jnp.abs(g.log() - xi))) < 1e-5\n"
        "    assert G.identity((2,)).as_matrix().dtype == jnp.float32\n"
        "    gr = jax.grad(lambda x: jnp.sum(G.exp(x).log()))(jnp.zeros(G.tangent_dim))\n"
        "    assert bool(jnp.all(jnp.isfinite(gr)))\n"
        "print('ok')\n"
    )
    assert run_float32(code).strip() == "ok"


def test_cross_matches_numpy_and_hat_with_broadcasting():
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(4, 5, 3)), rng.normal(size=(5, 3))
    np.testing.assert_allclose(cross(a, b), np.cross(a, b), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(cross(a, b), np.einsum("...ij,...j->...i", hat(a), b), atol=1e-14)
    # reverse-mode derivative: d/da (c . (a x b)) = b x c
    c = rng.normal(size=3)
    g = jax.grad(lambda x: jnp.dot(c, cross(x, b[0])))(jnp.asarray(a[0, 0]))
    np.testing.assert_allclose(g, np.cross(b[0], c), atol=1e-14)
    assert cross(jnp.ones(3, jnp.float32), jnp.ones(3, jnp.float32)).dtype == jnp.float32


_COMPILES = []  # backend compilations seen while a test below collects them
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: _COMPILES.append(event) if "backend_compile" in event else None
)


@pytest.mark.parametrize("G", GROUPS, ids=IDS)
def test_eager_calls_run_as_one_program(G):
    """Outside ``jit`` a group map compiles once per shape, not once per operation inside it
    (dozens of dispatched operations, milliseconds per call); values as under ``jit``."""
    batch = (5, 7, 11)  # a shape no other test uses: nothing cached yet
    xi = random_tangent(jax.random.PRNGKey(11), G, batch)
    g, h = jax.jit(G.exp)(xi), jax.jit(G.exp)(0.5 * xi)
    p = jnp.ones(batch + (3,))
    calls = {"exp": lambda: G.exp(xi), "log": g.log, "compose": lambda: g @ h, "act": lambda: g @ p, "dexp": lambda: G.dexp(xi)}
    for name, call in calls.items():
        _COMPILES.clear()
        value = call()
        assert len(_COMPILES) <= 1, f"{name}: {len(_COMPILES)} programs compiled"
        traced = jax.jit(lambda: call())()
        for a, b in zip(jax.tree_util.tree_leaves(value), jax.tree_util.tree_leaves(traced)):
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("group", [SO3, UnitQuaternion, SE3, SO3xR3, UnitDualQuaternion])
def test_a_tangent_of_the_wrong_size_is_named(group):
    wrong = jnp.ones(group.tangent_dim - 1)
    for name in ("exp", "dexp", "dexpinv"):
        with pytest.raises(ValueError, match=rf"{group.__name__}\.{name}: expected tangent vectors of shape \(\.\.\., {group.tangent_dim}\)"):
            getattr(group, name)(wrong)
    assert jax.vmap(group.dexp)(jnp.zeros((2, group.tangent_dim))).shape == (2, group.tangent_dim, group.tangent_dim)


@pytest.mark.parametrize("group", GROUPS)
def test_points_of_the_wrong_size_are_named(group):
    """``act`` (and ``g @ points``) names the group and the shape, where it failed inside
    ``einsum`` ("Size of label 'j' for operand 1 ...")."""
    g = group.identity()
    for points in (jnp.zeros(4), jnp.zeros((2, 2))):
        with pytest.raises(ValueError, match=rf"^{group.__name__}\.act: expected points of shape \(\.\.\., 3\), got shape {re.escape(str(points.shape))}"):
            g @ points
    assert (g @ jnp.ones((2, 3))).shape == (2, 3)



@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SO3(jnp.zeros((3, 4))), r"SO3: matrix must have shape \(\.\.\., 3, 3\), got \(3, 4\)"),
        (lambda: UnitQuaternion(jnp.zeros(3)), r"UnitQuaternion: wxyz must have shape \(\.\.\., 4\), got \(3,\)"),
        (lambda: SE3(jnp.eye(3), jnp.zeros(4)), r"SE3: translation must have shape \(\.\.\., 3\), got \(4,\)"),
        (lambda: SO3xR3(jnp.eye(2), jnp.zeros(3)), r"SO3xR3: rotation must have shape \(\.\.\., 3, 3\)"),
        (lambda: UnitDualQuaternion(jnp.zeros(4), jnp.zeros(3)), r"UnitDualQuaternion: dual must have shape"),
    ],
    ids=["so3", "quaternion", "se3", "so3xr3", "dual_quaternion"],
)
def test_raw_constructors_name_a_field_of_the_wrong_shape(make, message):
    """Before, ``SO3(zeros((3, 4)))`` and ``SE3(eye(3), zeros(4))`` were accepted and failed
    later, inside an ``einsum`` or a broadcast."""
    with pytest.raises(ValueError, match=message):
        make()


def test_compose_names_an_element_of_another_group():
    """Before, ``SE3.compose(SO3)`` failed with "'SO3' object has no attribute 'rotation'"."""
    with pytest.raises(TypeError, match=r"^SE3\.compose: expected another SE3, got SO3"):
        SE3.identity().compose(SO3.identity())
    with pytest.raises(TypeError, match=r"^SO3xR3\.compose: expected another SO3xR3, got SE3"):
        SO3xR3.identity().compose(SE3.identity())
