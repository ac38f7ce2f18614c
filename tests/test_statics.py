"""Static equilibrium and small oscillations (:func:`difflie.equilibrium`, :func:`difflie.modes`):
hanging chains, trees and loops against their obvious equilibria, a free body on a spring
against the force and moment balance by hand, pendulums' eigenvalues against the joint-space
ones by hand, the Franka Panda on a PD controller against Pinocchio's gravity torques, mass
matrix and gravity derivatives (Carpentier et al., 2019), and derivatives by the
implicit-function theorem against central differences."""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.joint_laws import JointPD
from difflie.io import RobotModelWarning
from difflie.models import chain, ladder, spider
from helpers import flying_body, robot_file


HANGING = {
    "chain": (lambda: chain(4), [-0.5, -1.5, -2.5, -3.5]),
    "revolute": (lambda: chain(3, joint="revolute"), [-0.5, -1.5, -2.5]),
    "spider": (lambda: spider(5), [-0.5, -1.5, -1.5, -1.5, -1.5]),
    "ladder": (lambda: ladder(2), [-0.5, -0.5, -1.0, -1.5, -1.5, -2.0]),
}


@pytest.mark.parametrize("name", [pytest.param(k, marks=[] if k == "chain" else [pytest.mark.slow]) for k in HANGING])
def test_mechanisms_hang_down_from_the_horizontal(name):
    """Released from the horizontal, a chain on spherical joints, one on revolute joints, a tree
    and a ladder of closed loops settle hanging straight down (the stable equilibrium, not a
    folded one), their joints holding to rounding; the chain's top joint carries the weight of
    all its rods."""
    make, heights = HANGING[name]
    model = make()
    eq = dl.equilibrium(model)
    assert eq.result == dl.RESULTS.successful and int(eq.iterations) < 60
    np.testing.assert_allclose(eq.state.position[:, 2], heights, atol=1e-9)
    np.testing.assert_allclose(eq.state.velocity, 0.0)
    R = eq.state.rotation
    origins = eq.state.position - jnp.einsum("bij,bj->bi", R, model.bodies.com)
    assert float(jnp.abs(model.constraint_residual(0.0, origins, R)).max()) < 1e-12
    if name == "chain":
        assert abs(float(jnp.linalg.norm(eq.multipliers[:3])) - 4 * 9.81) < 1e-8


@pytest.mark.slow
def test_free_body_on_a_spring():
    """A free body on a spring to a ground point (no joint; turning about the vertical is free:
    the stabiliser keeps the iteration matrix regular): the spring is vertical, stretched by
    ``m g / k``, and its point on the body lies straight above the COM."""
    model = flying_body()
    eq = dl.equilibrium(model)
    spring = model.forces[0]
    x, R = eq.state.position[0], eq.state.rotation[0]
    P = x + R @ spring.point_a[0]  # the point is given from the COM
    anchor = jnp.asarray(spring.point_b[0])
    length = float(spring.rest_length[0] + model.bodies.mass[0] * 9.81 / spring.stiffness[0])
    np.testing.assert_allclose(P, anchor - jnp.array([0.0, 0.0, length]), atol=1e-9)
    np.testing.assert_allclose(x[:2], P[:2], atol=1e-9)
    with pytest.raises(ValueError, match="equilibrium: Newton did not converge in 20 iterations"):
        dl.equilibrium(eqx.tree_at(lambda m: m.forces, model, ()), max_iterations=20)  # falls for ever


def test_modes_of_hanging_pendulums_are_the_joint_space_ones():
    """Small oscillations about the hanging equilibrium: one rod on a revolute joint,
    ``omega^2 = m g (l/2) / (J + m l^2 / 4)``, and its derivative with respect to gravity; a
    rotor inertia on the joint (MJCF armature) adds to ``J``."""
    g, l, m = 9.81, 1.0, 1.0
    rod = chain(1, joint="revolute")
    J = float(rod.bodies.inertia[0, 1, 1])  # about a transverse axis
    hinge = dl.forces.JointForce(-1, 0, jnp.array([0.0, 1.0, 0.0]), rod.R0[0].T @ -rod.r0[0])

    @jax.jit
    @jax.value_and_grad
    def omega2(gz, armature):
        """The lowest ``omega^2`` with gravity ``gz`` and a rotor inertia on the joint."""
        geared = dl.forces.JointInertia(hinge, jnp.reshape(armature, (1,)))
        model = eqx.tree_at(lambda m: (m.gravity, m.forces), rod, (jnp.array([0.0, 0.0, -gz]), (geared,)))
        return dl.modes(model, dl.equilibrium(model)).omega_squared[0]

    value, slope = omega2(g, 0.0)
    np.testing.assert_allclose(value, m * g * l / 2 / (J + m * l**2 / 4), rtol=1e-10)
    np.testing.assert_allclose(slope, m * l / 2 / (J + m * l**2 / 4), rtol=1e-8)
    # A rotor inertia on the joint (MJCF armature) adds to the joint's inertia.
    np.testing.assert_allclose(omega2(g, 0.2)[0], m * g * l / 2 / (J + m * l**2 / 4 + 0.2), rtol=1e-10)


@pytest.mark.slow
def test_modes_of_two_rods_are_the_joint_space_ones():
    """Two rods on revolute joints: the eigenvalues of the joint-space ``(K, M)`` written by
    hand, mass-normalised shapes; on spherical joints each of those twice (two planes) and two
    free spins about the rods' axes."""
    g, l, m = 9.81, 1.0, 1.0
    J = float(chain(1, joint="revolute").bodies.inertia[0, 1, 1])  # about a transverse axis
    solve = jax.jit(lambda model: dl.modes(model, dl.equilibrium(model)))
    Mj = np.array([[J + m * l**2 / 4 + m * l**2, m * l**2 / 2], [m * l**2 / 2, J + m * l**2 / 4]])
    Kj = m * g * l * np.diag([3 / 2, 1 / 2])
    pair = np.sort(np.real(np.linalg.eigvals(np.linalg.solve(Mj, Kj))))
    two = solve(chain(2, joint="revolute"))
    np.testing.assert_allclose(two.omega_squared, pair, rtol=1e-10)
    shapes = two.shapes.reshape(2, -1)
    M = np.kron(np.eye(2), np.diag([m, m, m, *np.diag(np.asarray(chain(2).bodies.inertia[0]))]))
    np.testing.assert_allclose(shapes @ M @ shapes.T, np.eye(2), atol=1e-10)  # mass-normalised
    spherical = solve(chain(2))
    np.testing.assert_allclose(spherical.omega_squared, [0, 0, pair[0], pair[0], pair[1], pair[1]], atol=1e-9, rtol=1e-10)


PANDA = robot_file("panda_description/urdf/panda.urdf")
try:
    import pinocchio as pin
except ImportError:  # pragma: no cover - depends on the environment
    pin = None


@pytest.mark.slow
@pytest.mark.skipif(pin is None or PANDA is None, reason="needs `pin` and `example-robot-data` (pip install -e '.[test]')")
def test_panda_on_a_pd_controller_balances_pinocchio_gravity():
    """The Panda held by PD joint torques ``kp (target - q)``: at difflie's equilibrium the
    controller's torques are Pinocchio's generalized gravity ``g(q)`` (``rnea(q, 0, 0)``), and
    ``d q / d kp`` is the central difference's."""
    target = np.array([0.3, -0.5, 0.2, -2.0, 0.4, 1.5, 0.7, 0.02, 0.02])
    kp = np.array([300.0, 300.0, 200.0, 200.0, 50.0, 50.0, 20.0, 500.0, 500.0])
    pm = pin.buildModelFromUrdf(PANDA)
    names = list(pm.names)[1:]

    def load(gains):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RobotModelWarning)  # joint limits
            return dl.load_model(PANDA, joint_positions=dict(zip(names, target)),
                                 joint_feedback=JointPD(gains, jnp.zeros(9), jnp.asarray(target)))  # fmt: skip

    model = load(jnp.asarray(kp))
    assert model.joint_names == tuple(names)
    solve = jax.jit(lambda m: dl.joint_coordinates(m, dl.equilibrium(m).state))
    q = np.asarray(solve(model))
    gravity = pin.computeGeneralizedGravity(pm, pm.createData(), q)
    np.testing.assert_allclose(kp * (target - q), gravity, rtol=1e-7, atol=1e-8)
    assert np.abs(q - target).max() > 1e-3  # gravity moved it

    def elbow(k):
        m = eqx.tree_at(lambda m: m.forces[-1].law.kp, model, jnp.asarray(kp).at[3].set(k))
        return solve(m)[3]

    grad = jax.grad(elbow)(200.0)
    fd = (elbow(200.0 + 1e-3) - elbow(200.0 - 1e-3)) / 2e-3
    np.testing.assert_allclose(grad, fd, rtol=1e-5)

    # Oscillations about it: M(q) q'' = -(kp + dg/dq) dq in joint space (Pinocchio's CRBA and
    # gravity derivatives) against difflie's modes in absolute coordinates.
    data = pm.createData()
    M = pin.crba(pm, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    dg = pin.computeGeneralizedGravityDerivatives(pm, data, q)
    K = np.diag(kp) + dg
    expected = np.sort(np.real(np.linalg.eigvals(np.linalg.solve(M, K))))
    found = dl.modes(model, dl.equilibrium(model)).omega_squared
    np.testing.assert_allclose(found, expected, rtol=1e-6)


def test_equilibrium_refuses_bad_input_and_fails_loudly_under_jit_of_grad():
    crank = dl.models.slider_crank()
    with pytest.raises(ValueError, match="equilibrium: t must be a finite time, got nan"):
        dl.equilibrium(crank, t=float("nan"))
    top = dl.models.heavy_top()
    with pytest.raises(ValueError, match="mass must be positive"):
        dl.equilibrium(eqx.tree_at(lambda m: m.bodies.mass, top, -top.bodies.mass))

    def height(g, iterations):  # two iterations do not reach the pendulum's rest: a failure only the gradient reads
        model = eqx.tree_at(lambda m: m.gravity, dl.models.double_pendulum(), g)
        return dl.equilibrium(model, max_iterations=iterations).state.position[-1].sum()

    g = dl.models.double_pendulum().gravity
    assert bool(jnp.all(jnp.isfinite(jax.jit(jax.grad(lambda g: height(g, 200)))(g))))
    with pytest.raises(Exception, match="Newton iteration did not converge"):
        jax.block_until_ready(jax.jit(jax.grad(lambda g: height(g, 2)))(g))
