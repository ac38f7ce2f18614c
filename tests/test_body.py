"""RigidBody validation and parameterisation; force elements; Model input checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl

from difflie.body import RigidBody
from difflie.forces import AppliedWrench, CartesianSpringDamper, SpringDamper, Wrench
from difflie.lie import SO3
from difflie.model import Model


J0 = np.diag([1.0, 2.0, 2.5])


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mass, inertia, match",
    [
        (-1.0, J0, "mass must be positive"),
        (1.0, J0 + np.array([[0, 0.1, 0], [0, 0, 0], [0, 0, 0]]), "not symmetric"),
        (1.0, np.diag([1.0, -2.0, 2.5]), "not positive definite"),
        (1.0, np.diag([1.0, 1.0, 2.5]), "triangle inequality"),
        (1.0, np.diag([1.0, np.nan, 2.5]), "finite"),
    ],
)
def test_invalid_bodies_name_the_body(mass, inertia, match):
    masses = np.array([1.0, mass])
    inertias = np.stack([J0, inertia])
    with pytest.raises(ValueError, match=match) as info:
        RigidBody(masses, inertias, names=("good", "bad"))
    assert "'bad' (index 1)" in str(info.value)


def test_shape_errors():
    with pytest.raises(ValueError, match="expected mass"):
        RigidBody(np.ones(2), np.stack([J0] * 3))
    with pytest.raises(ValueError, match="names"):
        RigidBody(np.ones(2), np.stack([J0] * 2), names=("a",))


def test_planar_body_accepted():
    # The heavy top's disc: J1 + J2 = J3 exactly.
    RigidBody(15.0, np.diag([0.234375, 0.46875, 0.234375]))


def test_traced_values_skip_validation():
    f = jax.jit(lambda m: RigidBody(m, J0).mass)
    assert f(jnp.asarray(2.0)).shape == (1,)


# -- parameterisation ------------------------------------------------------------------------


def _random_body(key, nb=4):
    k1, k2, k3 = jax.random.split(key, 3)
    R = SO3.sample_uniform(k1, (nb,)).matrix
    d = jax.random.uniform(k2, (nb, 3), minval=0.1, maxval=1.0)  # second moments, all > 0
    S = R @ (d[..., None] * jnp.eye(3)) @ jnp.swapaxes(R, -1, -2)
    J = jnp.trace(S, axis1=-2, axis2=-1)[:, None, None] * jnp.eye(3) - S
    m = jax.random.uniform(k3, (nb,), minval=0.5, maxval=3.0)
    c = jax.random.normal(k3, (nb, 3))
    return RigidBody(m, J, c)


def test_params_roundtrip():
    body = _random_body(jax.random.key(0))
    back = RigidBody.from_params(body.to_params())
    for a, b in [(body.mass, back.mass), (body.inertia, back.inertia), (body.com, back.com)]:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_any_params_give_a_physical_body():
    params = 3.0 * jax.random.normal(jax.random.key(1), (200, 10))
    body = RigidBody.from_params(params)  # validation inside raises if not physical
    J = np.asarray(body.inertia)
    eig = np.linalg.eigvalsh(J)
    assert np.all(body.mass > 0) and np.all(eig > 0)
    assert np.all(eig[:, 0] + eig[:, 1] > eig[:, 2] * (1 - 1e-12))


def test_params_gradient_finite():
    body = _random_body(jax.random.key(2), 1)
    p = body.to_params()
    g = jax.grad(lambda p: jnp.sum(RigidBody.from_params(p).inertia ** 2) + jnp.sum(RigidBody.from_params(p).com))(p)
    assert np.all(np.isfinite(g))


def test_parallel_axes():
    body = RigidBody(2.0, J0, com=np.array([0.0, 1.0, 0.0]))
    np.testing.assert_allclose(body.inertia_about_origin()[0], J0 + 2.0 * np.diag([1.0, 0.0, 1.0]))


# -- forces ------------------------------------------------------------------------------------


def _state(nb=2):
    R = SO3.exp(jnp.array([[0.3, -0.5, 0.2], [1.0, 0.4, -0.7]])[:nb]).matrix
    r = jnp.array([[0.1, 0.2, 0.3], [-0.4, 0.9, 1.2]])[:nb]
    rdot = jnp.array([[0.5, -0.1, 0.2], [0.3, 0.3, -0.6]])[:nb]
    w = jnp.array([[1.0, -2.0, 0.5], [0.2, 0.7, -1.1]])[:nb]
    return r, R, rdot, w


SPRINGS = SpringDamper(
    body_a=(0, 0), point_a=[[0.2, 0.0, 0.1], [0.0, -0.3, 0.0]],
    body_b=(1, -1), point_b=[[0.1, 0.1, 0.0], [1.0, 2.0, 0.0]],
    stiffness=[40.0, 15.0], damping=[0.0, 0.0], rest_length=[0.5, 0.2],
)  # fmt: skip


def _energy(el, r, R):
    """Potential energy of the springs, written directly."""
    pa = r[0] + R[0] @ el.point_a[0]
    pb = r[1] + R[1] @ el.point_b[0]
    e1 = 0.5 * el.stiffness[0] * (jnp.linalg.norm(pb - pa) - el.rest_length[0]) ** 2
    pa2 = r[0] + R[0] @ el.point_a[1]
    e2 = 0.5 * el.stiffness[1] * (jnp.linalg.norm(el.point_b[1] - pa2) - el.rest_length[1]) ** 2
    return e1 + e2


def test_spring_forces_are_minus_energy_gradient():
    r, R, rdot, w = _state()
    f, tau = SPRINGS(0.0, r, R, rdot, w)
    np.testing.assert_allclose(f, -jax.grad(_energy, argnums=1)(SPRINGS, r, R), atol=1e-12)
    # Torque in body axes: -dV/dtheta for R -> R exp(theta).
    dV = jax.grad(lambda th: _energy(SPRINGS, r, R @ SO3.exp(th).matrix))(jnp.zeros((2, 3)))
    np.testing.assert_allclose(tau, -dV, atol=1e-12)


def test_damper_dissipates():
    damped = SpringDamper(0, [0.2, 0.0, 0.1], 1, [0.1, 0.1, 0.0], stiffness=0.0, damping=3.0)
    r, R, rdot, w = _state()
    f, tau = damped(0.0, r, R, rdot, w)
    power = jnp.sum(f * rdot) + jnp.sum(tau * w)
    pa = r[0] + R[0] @ damped.point_a[0]
    pb = r[1] + R[1] @ damped.point_b[0]
    va = rdot[0] + R[0] @ jnp.cross(w[0], damped.point_a[0])
    vb = rdot[1] + R[1] @ jnp.cross(w[1], damped.point_b[0])
    n = (pb - pa) / jnp.linalg.norm(pb - pa)
    np.testing.assert_allclose(power, -3.0 * jnp.dot(n, vb - va) ** 2, rtol=1e-12)


def test_zero_length_spring_finite_gradient():
    el = SpringDamper(0, [0.0, 0.0, 0.0], -1, [0.1, 0.2, 0.3], stiffness=5.0, damping=1.0)
    r, R, rdot, w = _state(1)
    r = jnp.array([[0.1, 0.2, 0.3]])
    g = jax.grad(lambda r: jnp.sum(el(0.0, r, R, rdot, w)[0]))(r)
    assert np.all(np.isfinite(g))


def test_cartesian_spring_damper():
    el = CartesianSpringDamper(1, [0.1, 0.0, -0.2], [0.0, 1.0, 1.0], stiffness=[10.0, 20.0, 30.0], damping=[1.0, 2.0, 3.0])
    r, R, rdot, w = _state()
    f, tau = el(0.0, r, R, rdot, w)
    p = r[1] + R[1] @ el.point[0]
    v = rdot[1] + R[1] @ jnp.cross(w[1], el.point[0])
    F = -el.stiffness[0] * (p - el.ground_point[0]) - el.damping[0] * v
    np.testing.assert_allclose(f, jnp.stack([jnp.zeros(3), F]), atol=1e-14)
    np.testing.assert_allclose(tau[1], jnp.cross(el.point[0], R[1].T @ F), atol=1e-14)
    np.testing.assert_allclose(tau[0], 0.0)


def test_model_applied_forces_sum_gravity_and_elements():
    body = RigidBody(np.array([1.0, 2.0]), np.stack([J0, J0]))
    wrench = Wrench([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.5], [0.0, 0.0, 0.0]], torque_in_body_frame=False)
    user = AppliedWrench(lambda t, r, R, rd, w: (t * jnp.ones_like(r), -w))
    model = Model(body, gravity=(0.0, 0.0, -10.0), forces=(wrench, user))
    r, R, rdot, w = _state()
    f, tau = model.applied_forces(2.0, r, R, rdot, w)
    np.testing.assert_allclose(f, [[3.0, 2.0, -8.0], [2.0, 2.0, -18.0]])
    np.testing.assert_allclose(tau[0], R[0].T @ jnp.array([0.0, 0.0, 0.5]) - w[0], atol=1e-14)


def test_model_validation():
    body = RigidBody(np.array([1.0, 2.0]), np.stack([J0, J0]))
    with pytest.raises(ValueError, match="R0 of body 'b'"):
        Model(body, body_names=("a", "b"), R0=np.stack([np.eye(3), 2 * np.eye(3)]))
    with pytest.raises(ValueError, match=r"RKMK4\(velocity='se3'\)"):
        Model(body, formulation="se3")
    with pytest.raises(ValueError, match="velocity must be one of"):
        dl.RKMK4(velocity="euler")
    with pytest.raises(ValueError, match="unique"):
        Model(body, body_names=("a", "a"))
    with pytest.raises(ValueError, match="RigidBody"):
        Model("not a body")
