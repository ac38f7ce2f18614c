"""Explicit RKMK solvers: tableaux, convergence orders on the heavy top, the dexp^-1 sign."""

from fractions import Fraction

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from difflie.lie import SE3, SO3, SO3xR3
from difflie.model import Model
from difflie.body import RigidBody
from difflie.models import heavy_top, torque_free
from difflie.solvers import RK67, Bosh3, Dopri5, Euler, Heun, RKMK4
from difflie.solvers import tableaux
from difflie.solvers.rkmk import AbstractRKMK
from helpers import flying_body


# Holzinger, Arnold & Gerstmayr 2024, §4.1 (heavy top): COM at t = 1 s (DOP853, rtol 1e-13, 12 digits).
REF_T1 = np.array([0.173343964098, 0.640088592070, -0.748490791134])


@eqx.filter_jit
def run(model, solver, h, n):
    """``n`` fixed steps of size ``h`` from t = 0 (``n`` traced: one compilation for all h)."""
    y, state = solver.init(model, jnp.zeros((), h.dtype), h)

    def body(i, carry):
        y, state = carry
        t = i * h
        y1, _, state1, _, _ = solver.step(model, t, t + h, y, state)
        return y1, state1

    y, _ = jax.lax.fori_loop(0, n, body, (y, state))
    return solver.observe(model, y)


def com_errors(solver, hs, model=None):
    model = heavy_top() if model is None else model
    out = []
    for h in hs:
        state = run(model, solver, jnp.asarray(h), int(round(1.0 / h)))
        out.append(np.linalg.norm(np.asarray(state.position[0]) - REF_T1))
    return np.array(out)


def slope(hs, errs):
    return np.polyfit(np.log(hs), np.log(errs), 1)[0]


# -- tableaux -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tab, order",
    [
        (tableaux.EULER, 1),
        (tableaux.HEUN, 2),
        (tableaux.RK4, 4),
        (tableaux.BOSH3, 3),
        (tableaux.DOPRI5, 5),
        (tableaux.RK67, 6),
    ],
)
def test_tableau_conditions(tab, order):
    c, b = np.array(tab.c), np.array(tab.b)
    A = np.zeros((len(b), len(b)))
    for i, row in enumerate(tab.a):
        A[i, : len(row)] = row
    np.testing.assert_allclose(A.sum(1), c, atol=1e-15)  # row sums
    for k in range(order):  # quadrature conditions sum b c^k = 1/(k+1)
        assert abs(b @ c**k - 1 / (k + 1)) < 1e-14
    if order >= 3:
        assert abs(b @ A @ c - 1 / 6) < 1e-14
    if order >= 4:
        assert abs(b @ A @ A @ c - 1 / 24) < 1e-14
        assert abs(b @ (c * (A @ c)) - 1 / 8) < 1e-14


def test_embedded_weights():
    # b_hat = b - b_error is a lower-order quadrature: sum b_hat = 1, and for Dopri5 order 4.
    for tab, order in [(tableaux.DOPRI5, 4), (tableaux.BOSH3, 2), (tableaux.HEUN, 1)]:
        c = np.array(tab.c)
        bh = np.array(tab.b) - np.array(tab.b_error)
        for k in range(order):
            assert abs(bh @ c**k - 1 / (k + 1)) < 1e-14
    assert np.allclose(np.array(tableaux.DOPRI5.b) - np.array(tableaux.DOPRI5.b_error), [
        float(Fraction(x)) for x in ("5179/57600", "0", "7571/16695", "393/640", "-92097/339200", "187/2100", "1/40")
    ])


# -- heavy top: reference errors -----------------------------------------------------------------

HS = np.array([1e-3, 5e-4, 2.5e-4])


def test_rkmk4_heavy_top_reference_errors():
    errs = com_errors(RKMK4(), HS)
    # Exudyn RK44 (Lie group) and MuJoCo RK4 errors measured for the paper's heavy top
    # (Holzinger, Arnold & Gerstmayr 2024): 1.344e-4, 9.33e-6, 6.23e-7.
    np.testing.assert_allclose(errs, [1.344e-4, 9.33e-6, 6.23e-7], rtol=2e-3)
    assert 3.8 <= slope(HS, errs) <= 4.2


def test_rkmk4_without_dexpinv_is_second_order():
    errs = com_errors(RKMK4(correction=False), HS)
    np.testing.assert_allclose(errs[0], 5.75e-3, rtol=2e-3)
    assert 1.8 <= slope(HS, errs) <= 2.2


def test_truncated_dexpinv_series_keeps_order_four():
    # dexpinv = I + ad/2 + ad^2/12 + O(ad^4): two terms suffice for order 4.
    errs = com_errors(RKMK4(dexpinv_order=2), HS[:2])
    np.testing.assert_allclose(errs, [1.344e-4, 9.33e-6], rtol=3e-3)


@pytest.mark.parametrize(
    "solver, hs, order",
    [
        pytest.param(Dopri5(), np.array([1e-3, 5e-4]), 5, marks=pytest.mark.slow),
        pytest.param(RK67(), np.array([2e-3, 1e-3, 5e-4]), 6, marks=pytest.mark.slow),
        (Bosh3(), np.array([2e-4, 1e-4]), 3),
        (Heun(), np.array([1e-4, 5e-5]), 2),
        (Euler(), np.array([1e-5, 5e-6]), 1),
    ],
)
def test_fixed_step_orders(solver, hs, order):
    errs = com_errors(solver, hs)
    assert abs(slope(hs, errs) - order) < 0.25, errs


# -- structure ---------------------------------------------------------------------------------


def test_constant_spin_is_exact():
    """Torque-free spin about a principal axis: R(t) = R0 exp(t omega) to round-off."""
    w = jnp.array([0.0, 0.0, 7.0])
    R0 = SO3.exp(jnp.array([0.3, -0.2, 0.5])).matrix
    for velocity in ("so3xr3", "se3"):
        model = torque_free(omega0=w, R0=R0, v0=(0.1, 0.2, -0.3))
        state = run(model, RKMK4(velocity=velocity), jnp.asarray(0.05), 20)
        exact = R0 @ SO3.exp(w * 1.0).matrix
        np.testing.assert_allclose(state.rotation[0], exact, atol=1e-13)
        if velocity == "so3xr3":  # world velocity is constant; the SE(3) body twist is not
            np.testing.assert_allclose(state.position[0], [0.1, 0.2, -0.3], atol=1e-13)


@pytest.mark.parametrize("velocity", ["so3xr3", "se3"])
def test_se3_and_so3xr3_converge_at_order_four(velocity):
    model = flying_body()
    ref = run(model, RK67(), jnp.asarray(1.0 / 1600), 1600)
    hs = np.array([1 / 50, 1 / 100, 1 / 200])
    errs = []
    for h in hs:
        s = run(model, RKMK4(velocity=velocity), jnp.asarray(h), int(round(1 / h)))
        errs.append(np.linalg.norm(s.position - ref.position) + np.linalg.norm(s.rotation - ref.rotation))
    assert 3.8 <= slope(hs, errs) <= 4.3, errs


def test_heavy_top_symmetry_invariant():
    # Lagrange top: body omega_y stays 150 exactly for the Lie-group integrator.
    state = run(heavy_top(), RKMK4(), jnp.asarray(1e-3), 1000)
    np.testing.assert_allclose(state.angular_velocity[0, 1], 150.0, rtol=1e-12)


def test_constrained_model_rejected():
    model = eqx.tree_at(lambda m: m.constraints, heavy_top(), object(), is_leaf=lambda x: x is None)
    with pytest.raises(ValueError, match="constraints"):
        RKMK4().init(model, 0.0, 1e-3)


def test_bad_dexpinv_order():
    with pytest.raises(ValueError, match="dexpinv_order"):
        RKMK4(dexpinv_order=99)


def test_solver_classes():
    assert [s.order for s in (Euler(), Heun(), Bosh3(), RKMK4(), Dopri5(), RK67())] == [1, 2, 3, 4, 5, 6]
    assert Dopri5.adaptive and Bosh3.adaptive and not RKMK4.adaptive
    assert isinstance(RKMK4(), AbstractRKMK)
    assert SE3 is not SO3xR3


def test_float32_smoke():
    code = (
        "import jax.numpy as jnp, numpy as np\n"
        "from difflie.models import heavy_top\n"
        "from difflie.simulate import simulate\n"
        "from difflie.solvers import RKMK4\n"
        "m = heavy_top(mass=jnp.float32(15.0))\n"
        "s = simulate(m, RKMK4(), 0.0, 0.2, 1e-3)\n"
        "assert s.position.dtype == jnp.float32, s.position.dtype\n"
        "ref = np.array([0.605550561377, 0.598957681795, -0.523983027430])\n"
        "err = np.linalg.norm(np.asarray(s.position[-1, 0], float) - ref)\n"
        "assert err < 2e-3, err\n"
        "print('ok')\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


def test_fast_so3_increment_matches_lie_group():
    """Values against scipy and the group's k2 (closed form via cot, written separately in
    ``difflie.lie``); the hand-written derivative rule against autodiff of the group's exp and
    k2; at 0, at the Taylor switches (angle 0.3, and 1 for k2) and next to pi."""
    from scipy.spatial.transform import Rotation

    from difflie.lie import coefficients as _coefficients
    from difflie.solvers.rkmk import _so3_increment

    ws = jnp.array([[0.0, 0.0, 0.0], [1e-9, -2e-9, 1e-9], [3e-5, 1e-5, -2e-5], [0.01, 0.0, 0.0],
                    [0.29999, 0.0005, 0.0], [0.30001, 0.0, 0.0005], [0.3, -0.2, 0.5], [0.0, 0.9999, 0.0],
                    [1.0001, 0.0, 0.0], [1.0, 2.0, -0.5], [0.0, 3.0, 0.1], [0.0, 0.0, 3.14159265]])  # fmt: skip
    E, k2 = _so3_increment(ws)
    np.testing.assert_allclose(E, Rotation.from_rotvec(np.array(ws)).as_matrix(), atol=2e-16 * 8, rtol=0)
    np.testing.assert_allclose(k2, _coefficients.k2(jnp.sum(ws**2, -1)), rtol=1e-11)
    for w in ws:
        ga = jax.jacfwd(lambda w: _so3_increment(w)[0])(w)
        gb = jax.jacfwd(lambda w: SO3.exp(w).matrix)(w)
        np.testing.assert_allclose(ga, gb, atol=1e-12)
        ka = jax.jacfwd(lambda w: _so3_increment(w)[1])(w)
        kb = jax.jacfwd(lambda w: _coefficients.k2(jnp.sum(w * w)))(w)
        np.testing.assert_allclose(ka, kb, rtol=1e-8, atol=1e-15)
        # Reverse mode transposes the same rule.
        np.testing.assert_allclose(jax.jacrev(lambda w: _so3_increment(w)[1])(w), ka, rtol=1e-14, atol=1e-18)
        assert np.all(np.isfinite(jax.grad(lambda w: _so3_increment(w)[1])(w)))


def test_mixed_pinned_and_free_bodies():
    """A pinned top next to a free body takes the general (6x6) path: same numbers as alone."""
    top = heavy_top()
    J = jnp.stack([top.bodies.inertia[0], jnp.diag(jnp.array([0.3, 0.5, 0.6]))])
    body = RigidBody(jnp.array([15.0, 2.0]), J, com=jnp.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))
    model = Model(
        body,
        r0=jnp.array([[0.0, 1.0, 0.0], [1.0, 2.0, 3.0]]),
        v0=jnp.array([[4.61538, 0.0, 0.0], [0.5, 0.0, 1.0]]),
        omega0=jnp.array([[0.0, 150.0, -4.61538], [1.0, 2.0, 3.0]]),
        fixed_origin=(True, False),
    )
    state = run(model, RKMK4(), jnp.asarray(1e-3), 1000)
    np.testing.assert_allclose(np.linalg.norm(state.position[0] - REF_T1), 1.344e-4, rtol=2e-3)
    # The free body falls: x(1) = x0 + v0 - g/2 e_z.
    np.testing.assert_allclose(state.position[1], [1.5, 2.0, 4.0 - 9.81 / 2], atol=1e-12)


def test_one_checked_tableau_class():
    """One tableau class for the RKMK and the LGT solvers: bad tableaux are refused, FSAL is
    detected from the coefficients (not declared), and a diffrax tableau converts."""
    from difflie.coords import LGTRungeKutta, Tableau

    assert Tableau is tableaux.ButcherTableau
    assert [t.fsal for t in (tableaux.RK4, tableaux.BOSH3, tableaux.DOPRI5, tableaux.RK67)] == [False, True, True, False]
    with pytest.raises(ValueError, match="row 1 of a sums to 0.4"):
        tableaux.ButcherTableau((0.0, 0.5), ((), (0.4,)), (0.5, 0.5))
    with pytest.raises(ValueError, match="sum to 0.9"):
        tableaux.ButcherTableau((0.0, 0.5), ((), (0.5,)), (0.4, 0.5))
    diffrax = pytest.importorskip("diffrax")
    converted = Tableau.convert(diffrax.Dopri5())
    assert converted.fsal and converted.b == tableaux.DOPRI5.b
    assert LGTRungeKutta(tableaux.DOPRI5, method_order=5).tableau is tableaux.DOPRI5
