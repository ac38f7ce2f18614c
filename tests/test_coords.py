"""Absolute rotation coordinates: round trips, branches, kinematic matrices, batching, float32."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from difflie.coords import (
    EulerAngles,
    EulerParameters,
    Rodrigues,
    RotationMatrix,
    RotationVector,
    WienerMilenkovic,
)
from difflie.coords.euler_angles import SEQUENCES
from difflie.lie import SO3, ops as _ops

CHARTS = [RotationMatrix(), EulerParameters(), RotationVector(), Rodrigues(), WienerMilenkovic()] + [
    EulerAngles(s) for s in SEQUENCES
]
IDS = [type(c).__name__ + getattr(c, "seq", "") for c in CHARTS]


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=tol)


def random_rotations(key, n=64, max_angle=3.0):
    k1, k2 = jax.random.split(key)
    axis = jax.random.normal(k1, (n, 3))
    axis = axis / jnp.linalg.norm(axis, axis=-1, keepdims=True)
    return SO3.exp(axis * jax.random.uniform(k2, (n, 1), minval=0.0, maxval=max_angle)).matrix


def random_coordinates(chart, key, n=64):
    """Coordinates on generic (non-principal) branches where the chart has several."""
    if isinstance(chart, EulerAngles):
        return jax.random.uniform(key, (n, 3), minval=-7.0, maxval=7.0)
    if isinstance(chart, RotationVector):
        return jax.random.normal(key, (n, 3)) * 2.5  # norms up to ~9 > 2 pi
    if isinstance(chart, WienerMilenkovic):  # angles up to 3 pi / 2 (|p| < 4 tan(3 pi / 8) = 9.66)
        axis = jax.random.normal(key, (n, 3))
        length = jax.random.uniform(jax.random.fold_in(key, 1), (n, 1), minval=0.0, maxval=9.5)
        return axis / jnp.linalg.norm(axis, axis=-1, keepdims=True) * length
    if isinstance(chart, Rodrigues):
        return jax.random.normal(key, (n, 3)) * 2.0
    return chart.from_rotation(random_rotations(key, n))


@pytest.mark.parametrize("chart", CHARTS, ids=IDS)
def test_round_trip_and_quaternion(chart):
    R = random_rotations(jax.random.PRNGKey(0))
    theta = chart.from_rotation(R)
    close(chart.to_rotation(theta), R)
    close(_ops.quat_to_matrix(chart.to_quaternion(theta)), R)
    close(jnp.linalg.norm(chart.to_quaternion(theta), axis=-1), 1.0, 1e-14)


@pytest.mark.parametrize("chart", CHARTS, ids=IDS)
def test_branch_nearest_reference(chart):
    """from_rotation(R(theta), reference=theta + small) recovers theta on its own branch."""
    theta = random_coordinates(chart, jax.random.PRNGKey(1))
    ref = theta + 1e-3 * jax.random.normal(jax.random.PRNGKey(2), theta.shape)
    close(chart.from_rotation(chart.to_rotation(theta), reference=ref), theta, 1e-12)


@pytest.mark.parametrize("chart", CHARTS, ids=IDS)
def test_H_against_quaternion_rates(chart):
    """omega_body = H theta_dot, checked against 2 vec(Q* Q_dot) along a curve (autodiff)."""
    key1, key2 = jax.random.split(jax.random.PRNGKey(3))
    theta = random_coordinates(chart, key1, 16)
    w = jax.random.normal(key2, (16, 3))
    if isinstance(chart, RotationMatrix):  # tangent to SO(3): R_dot = R hat(w)
        theta_dot = chart.from_rotation(_ops.matmul(chart.to_rotation(theta), _ops.hat(w)))
    elif isinstance(chart, EulerParameters):
        theta_dot = 0.5 * _ops.qmul(theta, jnp.concatenate([jnp.zeros((16, 1)), w], -1))
    else:
        theta_dot = w
    quat = lambda th: _ops.matrix_to_quat(chart.to_rotation(th))  # noqa: E731
    Q, Q_dot = jax.jvp(quat, (theta,), (theta_dot,))
    omega = 2.0 * _ops.qmul(_ops.qconj(Q), Q_dot)[..., 1:]
    close(_ops.matvec(chart.H(theta), theta_dot), omega, 1e-12)


@pytest.mark.parametrize("chart", CHARTS, ids=IDS)
def test_H_inverse_is_right_inverse(chart):
    theta = random_coordinates(chart, jax.random.PRNGKey(4), 16)
    close(_ops.matmul(chart.H(theta), chart.H_inverse(theta)), jnp.broadcast_to(jnp.eye(3), (16, 3, 3)), 1e-12)


def test_redundant_charts_closed_forms():
    """Euler parameters: H = 2 [-p, p0 I - hat(p)]; rotation vector: H^-1 = dexp^-1_{-rho}."""
    Q = EulerParameters().from_rotation(random_rotations(jax.random.PRNGKey(5), 1))[0]
    p0, p = Q[0], Q[1:]
    G = np.hstack([-np.asarray(p)[:, None], float(p0) * np.eye(3) - np.asarray(_ops.hat(p))])
    close(EulerParameters().H(Q), 2 * G, 1e-15)
    rho = jnp.array([2.5, -1.0, 1.5])
    phi = float(jnp.linalg.norm(rho))
    k2 = (1 - 0.5 * phi / np.tan(0.5 * phi)) / phi**2
    P = np.asarray(_ops.hat(rho))
    close(RotationVector().H_inverse(rho), np.eye(3) + 0.5 * P + k2 * P @ P, 1e-14)


@pytest.mark.parametrize("seq", SEQUENCES)
def test_euler_sequence_is_intrinsic_product(seq):
    theta = jnp.array([0.7, -1.1, 2.3])
    axes = jnp.eye(3)[jnp.array(["xyz".index(a) for a in seq])]
    R = SO3.exp(theta[0] * axes[0]).matrix @ SO3.exp(theta[1] * axes[1]).matrix @ SO3.exp(theta[2] * axes[2]).matrix
    close(EulerAngles(seq).to_rotation(theta), R, 1e-15)


@pytest.mark.parametrize("seq", ["xyz", "zyx", "zxz", "yxy"])
def test_euler_gimbal_lock(seq):
    """At the lock R is still reproduced, the free first angle is the reference's, no NaN."""
    chart = EulerAngles(seq)
    middle = 0.0 if chart.proper else np.pi / 2
    theta = jnp.array([0.4, middle, -1.3])
    R = chart.to_rotation(theta)
    ref = jnp.array([0.3, middle, 0.0])
    out = chart.from_rotation(R, reference=ref)
    close(chart.to_rotation(out), R, 1e-14)
    close(out[0], 0.3, 1e-14)
    assert np.linalg.matrix_rank(np.asarray(chart.H(theta)), tol=1e-9) == 2
    g = jax.grad(lambda R_: jnp.sum(chart.from_rotation(R_, reference=ref)))(R)
    assert np.all(np.isfinite(np.asarray(g)))


def test_rotation_vector_continuous_branch_through_pi():
    """Spinning about a fixed axis, rho stays continuous past |rho| = pi and 2 pi."""
    chart = RotationVector()
    n = jnp.array([1.0, 2.0, 2.0]) / 3.0
    angles = jnp.linspace(0.1, 13.0, 200)
    rho = n * angles[0]
    out = []
    for a in angles:
        rho = chart.from_rotation(SO3.exp(n * a).matrix, reference=rho)
        out.append(rho)
    close(jnp.stack(out), n * angles[:, None], 1e-12)
    close(chart.from_rotation(SO3.exp(n * 4.0).matrix), n * (4.0 - 2 * np.pi), 1e-12)  # principal


def test_wiener_milenkovic_definition():
    x = jnp.array([0.3, -0.2, 0.5])
    phi = float(jnp.linalg.norm(x))
    p = WienerMilenkovic().from_rotation(SO3.exp(x).matrix)
    close(p, 4 * np.tan(phi / 4) * x / phi, 1e-15)


def test_rodrigues_golden():
    """Golden values of Müller's Cayley map cay(hat(c)) and quaternion Q(c) for c = (0.1, 0.4, -0.3)."""
    c = jnp.array([0.1, 0.4, -0.3])
    cay = [
        [0.603174603175, 0.539682539683, 0.587301587302],
        [-0.412698412698, 0.84126984127, -0.349206349206],
        [-0.68253968254, -0.031746031746, 0.730158730159],
    ]
    close(Rodrigues().to_rotation(c), cay, 1e-12)
    close(Rodrigues().to_quaternion(c), [0.890870806375, 0.089087080637, 0.35634832255, -0.267261241912], 1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="seq must be one of"):
        EulerAngles("xxy")
    with pytest.raises(ValueError, match="expects q with last axis 7"):
        EulerParameters().lgt(jnp.zeros(6), jnp.zeros(6))


@pytest.mark.parametrize("chart", [EulerAngles("zxz"), RotationVector(), EulerParameters()], ids=str)
def test_finite_gradients_at_identity(chart):
    theta0 = chart.from_rotation(jnp.eye(3))
    g = jax.grad(lambda R: jnp.sum(chart.from_rotation(R) ** 2))(jnp.eye(3))
    assert np.all(np.isfinite(np.asarray(g)))
    J = jax.jacfwd(lambda x: chart.compose(theta0, _ops.qexp(x)))(jnp.zeros(3))
    assert np.all(np.isfinite(np.asarray(J)))


def test_vmappable():
    chart = EulerAngles("xyz")
    q = jnp.concatenate([jnp.zeros((5, 3)), random_coordinates(chart, jax.random.PRNGKey(6), 5)], -1)
    X = 0.3 * jax.random.normal(jax.random.PRNGKey(7), (5, 6))
    batched = chart.lgt(q, X, "SE3")
    mapped = jax.vmap(lambda a, b: chart.lgt(a, b, "SE3"))(q, X)
    close(batched, mapped, 1e-15)
    close(jax.vmap(chart.H)(q[:, 3:]), chart.H(q[:, 3:]), 1e-15)


def test_float32_smoke():
    code = textwrap.dedent(
        """
        import jax, jax.numpy as jnp, numpy as np
        assert not jax.config.jax_enable_x64
        from difflie.coords import EulerAngles, EulerParameters, RotationVector, Rodrigues, WienerMilenkovic
        from difflie.lie import SO3
        R = SO3.exp(jnp.array([0.3, -0.2, 0.5], jnp.float32)).matrix
        X = jnp.array([0.1, 0.2, -0.1, 0.3, -0.2, 0.5], jnp.float32)
        for chart in [EulerAngles("zyx"), EulerParameters(), RotationVector(), Rodrigues(), WienerMilenkovic()]:
            th = chart.from_rotation(R)
            assert th.dtype == jnp.float32, (chart, th.dtype)
            assert np.abs(np.asarray(chart.to_rotation(th)) - np.asarray(R)).max() < 1e-6
            q1 = chart.lgt(jnp.concatenate([jnp.zeros(3, jnp.float32), th]), X, "SE3")
            assert q1.dtype == jnp.float32 and np.all(np.isfinite(np.asarray(q1)))
            g = jax.grad(lambda x: jnp.sum(chart.lgt(jnp.concatenate([jnp.zeros(3, jnp.float32), th]), x, "SE3")))(X * 0)
            assert np.all(np.isfinite(np.asarray(g)))
        from difflie.coords import AbsoluteModel, LGTRungeKutta, integrate
        chart = EulerAngles("xyz")
        f = lambda t, q, V, args: -0.1 * V
        model = AbsoluteModel(chart, f, chart.from_rotation(R)[None], jnp.array([[0.0, 2.0, 1.0]], jnp.float32))
        ts, q, V = integrate(model, LGTRungeKutta(), 0.0, 0.1, 3)
        assert q.dtype == jnp.float32 and V.dtype == jnp.float32 and ts.dtype == jnp.float32
        assert np.all(np.isfinite(np.asarray(q)))
        from difflie.coords import LGTGeneralizedAlpha
        from difflie.simulate import simulate
        sol = simulate(model, LGTGeneralizedAlpha(), 0.0, 0.3, 0.1)  # raises unless every step succeeded
        R1 = np.asarray(sol.rotation[-1, 0])
        assert sol.rotation.dtype == jnp.float32 and np.abs(R1.T @ R1 - np.eye(3)).max() < 1e-5
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]
