"""Force elements against independent references: the rotational spring-damper's damped
oscillation (exact) and its energy balance."""

import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie import diagnostics
from difflie.forces import RotationalSpringDamper
from difflie.lie import SO3
from helpers import undeclared_couplings

J3, K, C, W0 = 2.0, 50.0, 1.0, 3.0


@pytest.mark.parametrize("solver", [dl.RKMK4(), dl.GeneralizedAlpha(), dl.DQVI()], ids=["rkmk4", "gen_alpha", "dqvi"])
def test_rotational_spring_damper_rings_as_a_damped_oscillator(solver):
    """One body on the ground's rotational spring-damper, spun about a principal axis:
    ``theta = W0 / wd exp(-s t) sin(wd t)`` with ``s = c / 2J``, ``wd = sqrt(k/J - s^2)``
    (measured at h = 1e-3: 8e-12 RKMK4, 3e-6 generalized-alpha, 2e-4 DQVI)."""
    body = dl.RigidBody(1.0, jnp.diag(jnp.array([1.0, 1.5, J3])))
    model = dl.Model(body, omega0=jnp.array([[0.0, 0.0, W0]]), gravity=jnp.zeros(3), forces=[RotationalSpringDamper(-1, 0, K, C)])
    ts = jnp.linspace(0.0, 1.0, 11)
    sol = dl.simulate(model, solver, 0.0, 1.0, 1e-3, saveat=dl.SaveAt(ts=ts))
    s = C / (2 * J3)
    wd = np.sqrt(K / J3 - s**2)
    exact = W0 / wd * np.exp(-s * np.asarray(ts)) * np.sin(wd * np.asarray(ts))
    R = np.asarray(sol.rotation[:, 0])
    assert np.max(np.abs(np.arctan2(R[:, 1, 0], R[:, 0, 0]) - exact)) < 1e-3  # a wrong sign, k or c: > 0.05


def test_rotational_spring_damper_energy_balance():
    """Two tumbling bodies coupled by it: the kinetic energy lost equals the spring's potential
    gained plus the damper's work: ``E - E0`` is the elements' work (``force_work``) within 1e-5
    of its 3 J."""
    bodies = dl.RigidBody(jnp.array([1.0, 2.0]), jnp.stack([jnp.diag(jnp.array([1.0, 1.5, 2.0])), jnp.diag(jnp.array([0.5, 0.7, 0.9]))]))
    model = dl.Model(bodies, r0=jnp.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]),
                     R0=jnp.stack([jnp.eye(3), SO3.exp(jnp.array([0.3, -0.2, 0.5])).as_matrix()]),
                     omega0=jnp.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]]), forces=[RotationalSpringDamper(0, 1, 20.0, 0.5)])  # fmt: skip
    assert undeclared_couplings(model) == set()
    ts = jnp.linspace(0.0, 0.5, 2001)
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.5, 2.5e-4, saveat=dl.SaveAt(ts=ts))
    E = np.asarray(diagnostics.energy(model, sol.states))
    W = np.asarray(diagnostics.force_work(model, ts, sol.states))
    assert W[-1] < -2.9
    assert np.max(np.abs(E - E[0] - W)) < 1e-5
