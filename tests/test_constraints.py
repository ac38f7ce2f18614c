"""Basic constraints, joints, ConstraintSet, the expression evaluator and the autodiff
Jacobian / nu / gamma of the three formulations, against the closed forms of Kissel, Taves &
Negrut (the paper's Table 2 and eqs. 18, with their errors corrected) and finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_float32, as_model

from difflie import constraints as C
from difflie.constraints import jacobians as jac
from difflie.constraints.formulations import RA, RE, RP
from difflie.expr import ExpressionError, parse, time_derivatives
from difflie.lie import SO3, hat

RNG = np.random.default_rng(0)


def _rand_rot(n, seed=0):
    return np.asarray(SO3.sample_uniform(jax.random.PRNGKey(seed), (n,)).as_matrix())


def _unit(v):
    return v / np.linalg.norm(v)


# --- expressions ------------------------------------------------------------------------------


def test_expression_values_and_autodiff_derivatives():
    f = parse("cos(pi/4*cos(2*t) + pi/2)")
    t = 0.37
    phi = np.pi / 4 * np.cos(2 * t)
    val, d1, d2 = time_derivatives(f, jnp.asarray(t))
    phid, phidd = -np.pi / 2 * np.sin(2 * t), -np.pi * np.cos(2 * t)
    assert abs(val - np.cos(phi + np.pi / 2)) < 1e-15
    assert abs(d1 - (-np.sin(phi + np.pi / 2) * phid)) < 1e-14
    assert abs(d2 - (-np.cos(phi + np.pi / 2) * phid**2 - np.sin(phi + np.pi / 2) * phidd)) < 1e-13
    # the f_ddot string of the C1 model file of the paper's public codes is wrong: autodiff differs from it
    wrong = parse("1/4*pi*(4*cos(2*t)*cos(1/4*pi*cos(2*t)))+pi*sin(2*t)**2*sin(1/4*pi*cos(2*t))")
    assert abs(wrong(t) - d2) > 1e-2
    assert parse("2^3")(0.0) == 8.0 and parse("np.sin(t)")(0.5) == pytest.approx(np.sin(0.5))


@pytest.mark.parametrize(
    "bad", ["__import__('os').system('x')", "t.real", "lambda: 1", "x + 1", "open('f')", "[1, 2]", "", "sin(t, k=1)"]
)
def test_expression_rejects_unsafe_input(bad):
    with pytest.raises(ExpressionError):
        parse(bad)


# --- Jacobians against the corrected Table 2 ---------------------------------------------------


def _pair_state(seed=1):
    A = _rand_rot(2, seed)
    r = RNG.normal(size=(2, 3))
    return r, A


def _table2(kind, v, r, A):
    """The paper's Table 2 rows with its errors corrected: columns r_i, theta_i, r_j, theta_j."""
    Ai, Aj = A
    ri, rj = r
    if kind == "DP1":
        ai, aj = v
        return np.concatenate(
            [np.zeros(3), -aj @ Aj.T @ Ai @ hat(ai), np.zeros(3), -ai @ Ai.T @ Aj @ hat(aj)]
        )
    if kind == "DP2":
        ai, sp, sq = v
        d = rj + Aj @ sq - ri - Ai @ sp
        a = Ai @ ai
        return np.concatenate([-a, ai @ hat(sp) - d @ Ai @ hat(ai), a, -a @ Aj @ hat(sq)])
    if kind == "D":
        sp, sq = v
        d = rj + Aj @ sq - ri - Ai @ sp
        return np.concatenate([-2 * d, 2 * d @ Ai @ hat(sp), 2 * d, -2 * d @ Aj @ hat(sq)])
    c, sp, sq = v
    return np.concatenate([-c, c @ Ai @ hat(sp), c, -c @ Aj @ hat(sq)])


def _rows(kind, v, bi=0, bj=1):
    if kind == "DP1":
        return C.dp1(bi, v[0], bj, v[1])
    if kind == "DP2":
        return C.dp2(bi, v[0], v[1], bj, v[2])
    if kind == "D":
        return C.d(bi, v[0], bj, v[1], 2.0)
    return C.cd(v[0], bi, v[1], bj, v[2])


KIND_VECTORS = {
    "DP1": [_unit(RNG.normal(size=3)), _unit(RNG.normal(size=3))],
    "DP2": [_unit(RNG.normal(size=3)), RNG.normal(size=3), RNG.normal(size=3)],
    "D": [RNG.normal(size=3), RNG.normal(size=3)],
    "CD": [np.array([0.0, 1.0, 0.0]), RNG.normal(size=3), RNG.normal(size=3)],
}


@pytest.mark.parametrize("kind", ["DP1", "DP2", "D", "CD"])
def test_rA_jacobian_matches_corrected_table2(kind):
    v = [jnp.asarray(x) for x in KIND_VECTORS[kind]]
    r, A = _pair_state()
    cs = C.ConstraintSet([_rows(kind, v)], 2)
    G = np.asarray(jac.jacobian(as_model(cs, jnp.zeros((2, 3))), RA(), 0.0, jnp.asarray(r), jnp.asarray(A)))
    expected = _table2(kind, [np.asarray(x) for x in v], r, A)
    # our columns: [r_1, r_2, theta_1, theta_2]; Table 2: [r_i, theta_i, r_j, theta_j]
    ours = np.concatenate([G[0, 0:3], G[0, 6:9], G[0, 3:6], G[0, 9:12]])
    np.testing.assert_allclose(ours, expected, atol=1e-12)
    # ground as body j: its columns are simply absent, the rest is unchanged
    cs_g = C.ConstraintSet([_rows(kind, v, 0, C.GROUND)], 1)
    Gg = np.asarray(jac.jacobian(as_model(cs_g, jnp.zeros((1, 3))), RA(), 0.0, jnp.zeros((1, 3)), jnp.asarray(A[:1])))
    exp_g = _table2(kind, [np.asarray(x) for x in v], np.stack([np.zeros(3), np.zeros(3)]), np.stack([A[0], np.eye(3)]))
    np.testing.assert_allclose(np.concatenate([Gg[0, :3], Gg[0, 3:]]), exp_g[:6], atol=1e-12)


def _gamma_cd_dp1(kind, v, r, A, rd, w):
    """The paper's eqs. (18a), (18d) with their errors corrected."""
    Ai, Aj = A
    wi, wj = hat(w[0]), hat(w[1])
    if kind == "DP1":
        ai, aj = v
        return -aj @ (Aj.T @ Ai @ wi @ wi + wj @ wj @ Aj.T @ Ai) @ ai + 2 * w[1] @ hat(aj) @ Aj.T @ Ai @ hat(ai) @ w[0]
    c, sp, sq = v
    return c @ (Ai @ wi @ wi @ sp - Aj @ wj @ wj @ sq)


@pytest.mark.parametrize("kind", ["DP1", "DP2", "D", "CD"])
def test_rA_gamma_matches_second_time_derivative(kind):
    """G [r_ddot; omega_dot] - gamma = Phi_ddot along r + t rd + t^2 rdd / 2, A exp(t w + t^2 wd / 2)."""
    v = [jnp.asarray(x) for x in KIND_VECTORS[kind]]
    r, A = _pair_state(3)
    rd, w, rdd, wd = (RNG.normal(size=(2, 3)) for _ in range(4))
    cs = C.ConstraintSet([_rows(kind, v)], 2)
    com = jnp.zeros((2, 3))
    qdot = jac.join(jnp.asarray(rd), jnp.asarray(w))
    gam = float(jac.gamma(as_model(cs, com), RA(), 0.0, jnp.asarray(r), jnp.asarray(A), qdot)[0])
    G = np.asarray(jac.jacobian(as_model(cs, com), RA(), 0.0, jnp.asarray(r), jnp.asarray(A)))

    def phi(s):
        rs = r + s * rd + s**2 * rdd / 2
        As = np.einsum("bij,bjk->bik", A, np.asarray(SO3.exp(jnp.asarray(s * w + s**2 * wd / 2)).as_matrix()))
        return float(cs.residual(0.0, jnp.asarray(rs), jnp.asarray(As))[0])

    e = 1e-4
    phidd = (phi(e) - 2 * phi(0.0) + phi(-e)) / e**2
    predicted = G[0] @ np.concatenate([rdd.ravel(), wd.ravel()]) - gam
    assert abs(phidd - predicted) < 1e-6 * max(1.0, abs(phidd))
    if kind in ("DP1", "CD"):
        closed = _gamma_cd_dp1(kind, [np.asarray(x) for x in v], r, A, rd, w)
        assert abs(gam - closed) < 1e-12


def test_formulations_agree_on_phi_velocity_and_acceleration():
    """One physical state as (r, A, w), (r, p, p_dot), (r, eps, eps_dot): equal Phi, Phi_dot, Phi_ddot."""
    v = [jnp.asarray(x) for x in KIND_VECTORS["DP2"]]
    rows = [_rows("DP2", v), _rows("D", [jnp.asarray(x) for x in KIND_VECTORS["D"]]), C.dp1(0, (1.0, 0, 0), C.GROUND, (0, 1.0, 0), f=parse("0.1*sin(t)"))]
    cs = C.ConstraintSet(rows, 2)
    com = jnp.zeros((2, 3))
    r, A = _pair_state(5)
    r, A = jnp.asarray(r), jnp.asarray(A)
    rd, w, rdd, wd = (jnp.asarray(RNG.normal(size=(2, 3))) for _ in range(4))
    t = 0.4
    results = {}
    for form in (RA(), RP(), RE()):
        rot = form.from_rotation(A)
        np.testing.assert_allclose(form.rotation(rot), A, atol=1e-13)
        rate = form.rate(rot, w)
        np.testing.assert_allclose(form.omega(rot, rate), w, atol=1e-12)
        # rate_dot for the given angular acceleration: W rate_dot = wd - W_dot rate
        W = form.W(rot)
        bias = form.omega_dot(rot, rate, jnp.zeros_like(rate))
        rate_dot = jnp.einsum("bij,bj->bi", jnp.linalg.pinv(W), wd - bias)
        if rate.shape[-1] == 4:  # Euler parameters: p . p_ddot = -|p_dot|^2 (second derivative of |p| = 1)
            rate_dot = rate_dot - rot * (jnp.sum(rot * rate_dot, -1) + jnp.sum(rate * rate, -1))[:, None]
        np.testing.assert_allclose(form.omega_dot(rot, rate, rate_dot), wd, atol=1e-11)
        G = jac.jacobian(as_model(cs, com), form, t, r, rot)
        qd, qdd = jac.join(rd, rate), jac.join(rdd, rate_dot)
        phi = jac.psi(as_model(cs, com), form, t, r, rot)[:3]
        phid = (G @ qd - jac.nu(as_model(cs, com), form, t, r, rot))[:3]
        phidd = (G @ qdd - jac.gamma(as_model(cs, com), form, t, r, rot, qd))[:3]
        results[form.name] = np.concatenate([phi, phid, phidd])
    np.testing.assert_allclose(results["rp"], results["rA"], atol=1e-11)
    np.testing.assert_allclose(results["re"], results["rA"], atol=1e-11)


# --- ConstraintSet and joints -------------------------------------------------------------------


def test_constraint_set_keeps_order_names_and_rejects_bad_bodies():
    rows = [C.cd((1.0, 0, 0), 0, (1.0, 0, 0), C.GROUND, (0, 0, 0), name="a"), C.dp1(0, (1.0, 0, 0), 1, (0, 1.0, 0), name="b"), C.cd((0, 1.0, 0), 1, (0, 0, 0), 0, (0, 0, 0), f=0.5, name="c")]
    cs = C.ConstraintSet(rows, 2)
    assert cs.names == ("a", "b", "c") and cs.kinds == ("DP1", "CD")
    r = jnp.asarray([[0.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    R = jnp.broadcast_to(jnp.eye(3), (2, 3, 3))
    # CD: c . (r_j + A_j s_q - r_i - A_i s_p) - f (Kissel, Taves & Negrut, eq. 4)
    np.testing.assert_allclose(cs.residual(0.0, r, R), [-1.0, 0.0, -2.5])
    with pytest.raises(ValueError, match="body_j = 2 but the model has 2 bodies"):
        C.ConstraintSet([C.dp1(0, (1.0, 0, 0), 2, (1.0, 0, 0))], 2)
    with pytest.raises(ValueError, match="same body"):
        C.dp1(1, (1.0, 0, 0), 1, (0, 1.0, 0))
    with pytest.raises(ValueError, match="3-vector"):
        C.cd((1.0, 0), 0, (0, 0, 0), C.GROUND, (0, 0, 0))


@pytest.mark.parametrize(
    "maker, rows, dof",
    [
        (lambda: C.spherical(0, (0.3, 0, 0), 1, (0, -0.2, 0)), 3, 3),
        (lambda: C.revolute(0, (0.3, 0, 0), (0, 0, 1.0), 1, (0, -0.2, 0), (0, 0, 1.0)), 5, 1),
        (lambda: C.universal(0, (0.3, 0, 0), (1.0, 0, 0), 1, (0, -0.2, 0), (0, 1.0, 0)), 4, 2),
        (lambda: C.cylindrical(0, (0.3, 0, 0), (0, 0, 1.0), 1, (0, -0.2, 0), (0, 0, 1.0)), 4, 2),
        (lambda: C.prismatic(0, (0.3, 0, 0), (0, 0, 1.0), 1, (0, -0.2, 0), (0, 0, 1.0), (1.0, 0, 0), (0, 1.0, 0)), 5, 1),
        (lambda: C.fixed(0, (0.3, 0, 0), 1, (0, -0.2, 0)), 6, 0),
    ],
)
def test_joints_rows_rank_and_allowed_motion(maker, rows, dof):
    """Assembled pair (body 1 = body 0 shifted so the joint points coincide): Phi = 0, the
    Jacobian has full row rank, and its null space has the joint's relative freedom."""
    cs = C.ConstraintSet(maker(), 2)
    assert cs.num_constraints == rows
    r = jnp.asarray([[0.0, 0.0, 0.0], [0.3, 0.2, 0.0]])
    R = jnp.broadcast_to(jnp.eye(3), (2, 3, 3))
    assert np.abs(cs.residual(0.0, r, R)).max() < 1e-15
    # fix body 0 (ground it by removing its columns) and count the freedom of body 1
    G = np.asarray(jac.jacobian(as_model(cs, jnp.zeros((2, 3))), RA(), 0.0, r, R))
    G1 = G[:, [3, 4, 5, 9, 10, 11]]
    s = np.linalg.svd(G1, compute_uv=False)
    assert np.sum(s > 1e-10) == rows and 6 - rows == dof


def test_angle_driver_keeps_rank_where_dp1_driver_loses_it():
    theta = C.Driver(lambda t: 0.0 * t)  # a_i . b_j = cos 0 = 1: the DP1 driver's singular point
    A = jnp.eye(3)[None]
    r = jnp.zeros((1, 3))
    cs_dp1 = C.ConstraintSet([C.dp1(0, (0, 1.0, 0), C.GROUND, (0, 1.0, 0), f=C.Driver(lambda t: jnp.cos(0.0 * t)))], 1)
    cs_ang = C.ConstraintSet([C.angle(0, (0, 1.0, 0), C.GROUND, (0, 1.0, 0), (0, 0, 1.0), theta)], 1)
    g_dp1 = jac.jacobian(as_model(cs_dp1, jnp.zeros((1, 3))), RA(), 0.0, r, A)
    g_ang = jac.jacobian(as_model(cs_ang, jnp.zeros((1, 3))), RA(), 0.0, r, A)
    assert np.abs(g_dp1).max() < 1e-15
    assert abs(g_ang[0, 3]) == pytest.approx(1.0)  # rotation about body x moves y towards z
    assert abs(cs_ang.residual(0.0, r, A)[0]) < 1e-15


def test_no_nan_gradients_at_identity_and_float32():
    cs = C.ConstraintSet(C.revolute(0, (0.5, 0, 0), (0, 0, 1.0), C.GROUND, (0, 0, 0), (0, 0, 1.0)) + [C.d(0, (0.5, 0, 0), C.GROUND, (0, 0, 0), 0.0)], 1)

    def loss(x):
        return jnp.sum(jac.psi_chart(as_model(cs, jnp.zeros((1, 3))), RA(), 0.0, jnp.asarray([[0.5, 0, 0]]), jnp.eye(3)[None], x) ** 2)

    g, h = jax.jit(lambda x: (jax.grad(loss)(x), jax.hessian(loss)(x)))(jnp.zeros(6))  # one program, not op by op
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(h))
    # float32 smoke test in a fresh interpreter with x64 off
    code = (
        "import jax, jax.numpy as jnp\n"
        "from difflie import constraints as C\n"
        "from difflie.constraints import jacobians as jac\n"
        "from difflie.constraints.formulations import RA\n"
        "cs = C.ConstraintSet(C.revolute(0, (0.5, 0, 0), (0, 0, 1.0), C.GROUND, (0, 0, 0), (0, 0, 1.0)), 1)\n"
        "r = jnp.asarray([[-0.5, 0.0, 0.0]]); R = jnp.eye(3)[None]\n"
        "from types import SimpleNamespace\n"
        "m = SimpleNamespace(bodies=SimpleNamespace(com=jnp.zeros((1, 3))), constraint_residual=cs.residual)\n"
        "res, G = jax.jit(lambda r, R: (cs.residual(0.0, r, R), jac.jacobian(m, RA(), 0.0, r, R)))(r, R)\n"
        "assert res.dtype == jnp.float32 and G.dtype == jnp.float32 and float(jnp.abs(res).max()) < 1e-6\n"
        "print('ok')\n"
    )
    assert run_float32(code).strip() == "ok"

def test_re_closed_form_W_equals_the_autodiff_one():
    from difflie.constraints.formulations import AbstractFormulation

    eps = jnp.asarray(RNG.uniform(-3, 3, size=(4, 3)))
    np.testing.assert_allclose(RE().W(eps), AbstractFormulation.W(RE(), eps), atol=1e-14)


def test_joint_dtype_follows_array_inputs():
    """Unit axes written as Python numbers take the points' float32 under x64 (no promotion)."""
    s = jnp.asarray([0.0, -1.0, 0.0], jnp.float32)
    joints = C.spherical(0, s, C.GROUND, jnp.zeros(3, jnp.float32)) + C.revolute(0, s, s, C.GROUND, s, s)
    cs = C.ConstraintSet(joints, 1)
    assert cs.vectors.dtype == jnp.dtype(jnp.float32)


def test_re_reframe_changes_the_chart_not_the_motion():
    """Near theta = 0 the re chart is re-centred: same A, omega_bar and omega_bar_dot, theta = pi/2;
    bodies away from the singularity keep their coordinates."""
    form = RE()
    eps = jnp.asarray([[0.4, 0.03, -1.1], [0.2, 1.0, 0.5], [1.3, np.pi - 0.05, 2.0]])
    rot = form.from_rotation(form.rotation(eps))
    assert rot.shape == (3, 12)
    np.testing.assert_allclose(rot[1, :3], eps[1], atol=1e-14)  # regular body: F = I, same angles
    np.testing.assert_allclose(rot[[0, 2], 1], np.pi / 2, atol=1e-14)  # singular ones start centred
    rot = jnp.concatenate([eps, jnp.tile(jnp.eye(3).reshape(1, 9), (3, 1))], -1)
    rate, rate_dot = jnp.asarray(RNG.normal(size=(3, 3))), jnp.asarray(RNG.normal(size=(3, 3)))
    new, new_rate, new_rate_dot = form.reframe(rot, rate, rate_dot)
    np.testing.assert_allclose(form.rotation(new), form.rotation(rot), atol=1e-14)
    np.testing.assert_allclose(form.omega(new, new_rate), form.omega(rot, rate), atol=1e-12)
    np.testing.assert_allclose(
        form.omega_dot(new, new_rate, new_rate_dot), form.omega_dot(rot, rate, rate_dot), atol=1e-10
    )
    np.testing.assert_allclose(new[:, 1], [np.pi / 2, 1.0, np.pi / 2], atol=1e-14)
    np.testing.assert_array_equal(new[1], rot[1])
    # the re-centred chart moves like the old one: retract(x) = A exp(W x) to first order
    x = 1e-6 * jnp.asarray(RNG.normal(size=(3, 3)))
    dA = form.rotation(form.retract(new, x)) - form.rotation(new)
    expected = jnp.einsum("bij,bjk->bik", form.rotation(new), hat(jnp.einsum("bij,bj->bi", form.W(new), x)))
    np.testing.assert_allclose(dA, expected, atol=1e-11)


def test_rows_of_chains_and_trees_are_taken_by_slices():
    """``_take_rows`` equals ``x[index]``, values and gradients; for the rows of a chain's, a
    tree's or a row of loops' joints (each body repeated for its rows, bodies in periodic runs)
    it uses slices, whose transpose has no scatter-add (a loop over the rows on a CPU); an index
    needing more than ``_MAX_SLICES`` slices falls back to a gather."""
    from difflie.constraints.constraint_set import _MAX_SLICES, _slice_plan, _take_rows
    from difflie.models import chain, ladder, spider

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(70, 3, 3)))
    nb1 = lambda m: m.num_bodies + 1  # noqa: E731  (the ground is the last entry)
    tree_rows = [np.asarray(m.constraints.body_i) % nb1(m) for m in (chain(12), spider(21), ladder(6))]
    scattered = rng.integers(0, 70, 40)
    # Rows of revolute joints put back in order: 3 CD rows then 2 DP1 rows per joint.
    in_order = np.concatenate([[12 + 3 * k, 13 + 3 * k, 14 + 3 * k, 2 * k, 2 * k + 1] for k in range(6)])
    for index in tree_rows + [np.asarray(spider(21).constraints.body_j) % 22, in_order, np.array([4, 4]), np.array([7]), scattered]:
        np.testing.assert_array_equal(_take_rows(x, index), x[index])

        def loss(x, take):
            return jnp.sum(jnp.sin(take(x)) * jnp.arange(index.size)[:, None, None])

        grad = jax.grad(loss)(x, lambda x: _take_rows(x, index))
        np.testing.assert_allclose(grad, jax.grad(loss)(x, lambda x: x[index]), rtol=1e-14, atol=1e-14)
        program = str(jax.make_jaxpr(jax.grad(lambda x: loss(x, lambda x: _take_rows(x, index))))(x))
        assert ("scatter" in program) == (index is scattered)
    assert _slice_plan(tree_rows[0])[0] == 3 and len(_slice_plan(tree_rows[0])[1]) == 2  # ground, then bodies 0..10
    assert _slice_plan(tree_rows[2])[1][1][1:] == ((3, 3, 3, 3), 5)  # the loops: period 4, step 3
    assert _slice_plan(in_order)[1] == [((12, 13, 14, 0, 1), (3, 3, 3, 2, 2), 6)]
    assert _slice_plan(scattered) is None and _MAX_SLICES < 40
