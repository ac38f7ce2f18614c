"""Unified local velocity coordinates (Holzinger, Gerstmayr & Schöberl): matrices, mass matrix,
equivalence with Newton-Euler."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from difflie import eom
from difflie.body import RigidBody
from difflie.lie import SE3, SO3
from difflie.model import Model
from difflie.models import torque_free
from difflie.solvers import RKMK4
from helpers import flying_body


LENGTHS = jnp.array([0.7, 1.3, 0.9])


def test_d_matrix_and_inverse():
    D, Di = eom.ulvc_matrix(LENGTHS), eom.ulvc_matrix_inverse(LENGTHS)
    np.testing.assert_allclose(D @ Di, np.eye(6), atol=1e-15)
    np.testing.assert_allclose(np.linalg.det(D), -0.7 * 1.3 * 0.9, rtol=1e-14)
    D1 = eom.ulvc_matrix(jnp.ones(3))
    np.testing.assert_allclose(D1 @ D1.T, np.eye(6), atol=1e-15)  # orthogonal for l = 1


def test_rows_are_point_velocity_projections():
    # w_i = b_i . (U + Omega x y_i) for the hexahedron's face centres (Holzinger, Gerstmayr &
    # Schöberl, eqs. 19-24).
    l1, l2, l3 = np.asarray(LENGTHS)
    s = 1 / np.sqrt(2)
    b = np.array([[s, 0, 0], [-s, 0, 0], [0, s, 0], [0, -s, 0], [0, 0, s], [0, 0, -s]])
    y = np.array([[0, -l2, 0], [0, l2, 0], [0, 0, -l3], [0, 0, l3], [-l1, 0, 0], [l1, 0, 0]])
    V = np.array([0.3, -1.2, 0.7, 2.0, -0.5, 1.5])
    w = np.einsum("ij,ij->i", b, V[:3] + np.cross(V[3:], y))
    np.testing.assert_allclose(eom.ulvc_matrix(LENGTHS) @ V, w, atol=1e-14)
    # The velocity field reproduces its own degrees of freedom: b_i^T N(y_i) = e_i.
    N = eom.ulvc_field(jnp.asarray(y, float), jnp.broadcast_to(LENGTHS, (6, 3)))
    np.testing.assert_allclose(np.einsum("ij,ijk->ik", b, N), np.eye(6), atol=1e-14)


def test_mass_matrix_of_the_paper_example():
    model = torque_free()
    Mbar = np.asarray(eom.ulvc_mass_matrix(model)[0])
    # The paper's example (Holzinger, Gerstmayr & Schöberl, Sect. 6): l = 1,
    # J = diag(5.2988, 1.1775, 4.3568), m = 1.
    np.testing.assert_allclose(Mbar[:2, :2], [[2.6784, 1.6784], [1.6784, 2.6784]], atol=1e-12)
    np.testing.assert_allclose(Mbar[2:4, 2:4], [[3.1494, 2.1494], [2.1494, 3.1494]], atol=1e-12)
    np.testing.assert_allclose(Mbar[4:, 4:], [[1.08875, 0.08875], [0.08875, 1.08875]], atol=1e-12)
    np.testing.assert_allclose(Mbar[:2, 2:], 0, atol=1e-15)
    # Initial ULVC, eq. 89.
    _, w0 = eom.initial_state(torque_free(), "ulvc")
    s = 1 / np.sqrt(2)
    np.testing.assert_allclose(w0[0], [100 * s, 100 * s, 0.01 * s, 0.01 * s, 0, 0], rtol=1e-14)


def test_mass_matrix_general_lengths_eigenvalues():
    model = torque_free(ulvc_lengths=LENGTHS)
    Mbar = np.asarray(eom.ulvc_mass_matrix(model)[0])
    # Kinetic energy is the same in both coordinates: w^T Mbar w = V^T M V.
    V = np.array([0.3, -1.2, 0.7, 2.0, -0.5, 1.5])
    w = np.asarray(eom.ulvc_matrix(LENGTHS)) @ V
    M = np.asarray(model.bodies.spatial_inertia()[0])
    np.testing.assert_allclose(w @ Mbar @ w, V @ M @ V, rtol=1e-13)


MODEL = flying_body(ulvc_lengths=LENGTHS)


@eqx.filter_jit
def _trajectory(model, velocity, h, n):
    solver = RKMK4(velocity=velocity)
    y, state = solver.init(model, 0.0, h)

    def body(carry, i):
        y, state = carry
        y1, _, state1, _, _ = solver.step(model, i * h, (i + 1) * h, y, state)
        return (y1, state1), solver.observe(model, y1)

    _, obs = jax.lax.scan(body, (y, state), jnp.arange(n))
    return obs


def test_ulvc_trajectory_equals_newton_euler():
    # With forces evaluated at the stage configurations, ULVC + RKMK4 is Newton-Euler + RKMK4
    # on SE(3) for any invertible D (Holzinger, Gerstmayr & Schöberl, Sect. 4.3): same discrete
    # trajectory.
    a = _trajectory(MODEL, "ulvc", 0.01, 1000)
    b = _trajectory(MODEL, "se3", 0.01, 1000)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(x, y, atol=1e-10)
    # And the vector fields agree at a random state: w_dot = D V_dot.
    pose = SE3(SO3.exp(jnp.array([0.2, -0.4, 0.9])).matrix[None], jnp.array([[0.3, -0.1, 0.2]]))
    V = jnp.array([[0.4, 0.1, -0.7, 1.1, -2.0, 0.5]])
    D = eom.ulvc_matrix(LENGTHS)
    xi_u, wdot = eom.vector_field(MODEL, eom.prepare(MODEL, "ulvc"), 0.3, pose, (D @ V[0])[None])
    xi_s, Vdot = eom.vector_field(MODEL, eom.prepare(MODEL, "se3"), 0.3, pose, V)
    np.testing.assert_allclose(xi_u, xi_s, atol=1e-13)
    np.testing.assert_allclose(wdot[0], D @ Vdot[0], atol=1e-11)


def test_newton_euler_matches_point_mass_integral():
    """Independent check of the vector field: the body as 8 point masses, d/dt of momenta."""
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(8, 3))
    ms = rng.uniform(0.5, 1.5, 8)
    m = ms.sum()
    c = (ms[:, None] * pts).sum(0) / m
    d = pts - c
    J = sum(mi * (di @ di * np.eye(3) - np.outer(di, di)) for mi, di in zip(ms, d))
    force = np.array([0.3, -1.0, 2.0])
    model = Model(
        RigidBody(m, jnp.asarray(J), com=jnp.asarray(c)),
        gravity=force / m,  # a uniform field: force m g at the COM
    )
    R = np.asarray(SO3.exp(jnp.array([0.3, 0.2, -0.6])).matrix)
    V = np.array([0.4, 0.1, -0.7, 1.1, -2.0, 0.5])
    pose = SE3(jnp.asarray(R)[None], jnp.zeros((1, 3)))
    _, Vdot = eom.vector_field(model, eom.prepare(model, "se3"), 0.0, pose, jnp.asarray(V)[None])
    U, W, Ud, Wd = V[:3], V[3:], np.asarray(Vdot[0, :3]), np.asarray(Vdot[0, 3:])
    # World acceleration of each point: R (Ud + Wd x p + W x (U + W x p)); sum m a = F_world.
    acc = np.array([R @ (Ud + np.cross(Wd, p) + np.cross(W, U + np.cross(W, p))) for p in pts])
    np.testing.assert_allclose((ms[:, None] * acc).sum(0), force, atol=1e-11)
    # Moment balance about the world origin (where the body origin is now): internal forces
    # are central, so sum r_i x m_i a_i = sum r_i x m_i g with r_i = R p_i.
    lhs = sum(mi * np.cross(R @ p, a) for mi, p, a in zip(ms, pts, acc))
    rhs = sum(mi * np.cross(R @ p, force / m) for mi, p in zip(ms, pts))
    np.testing.assert_allclose(lhs, rhs, atol=1e-11)


def test_explicit_field_is_the_projection_of_model_newton_euler():
    """The explicit field about the origin (SE(3) body twist) makes the projection of
    ``Model.newton_euler``'s rows (about the COM) on the origin's twist vanish: the two
    statements of the dynamics agree (free body with a COM offset, a spring and gravity)."""
    pose = SE3(SO3.exp(jnp.array([0.2, -0.4, 0.9])).matrix[None], jnp.array([[0.3, -0.1, 0.2]]))
    V = jnp.array([[0.4, 0.1, -0.7, 1.1, -2.0, 0.5]])
    _, Vdot = eom.vector_field(MODEL, eom.prepare(MODEL, "se3"), 0.3, pose, V)
    R, c = pose.rotation, MODEL.bodies.com
    U, W, Ud, Wd = V[:, :3], V[:, 3:], Vdot[:, :3], Vdot[:, 3:]
    vc = U + jnp.cross(W, c)
    a_body = Ud + jnp.cross(Wd, c) + jnp.cross(W, vc)
    lin, ang = MODEL.newton_euler(0.3, pose.translation + R[0] @ c[0], R, (R[0] @ vc[0])[None], W, (R[0] @ a_body[0])[None], Wd)
    np.testing.assert_allclose(eom.about_origin(R, c, lin, ang), 0.0, atol=1e-12)
