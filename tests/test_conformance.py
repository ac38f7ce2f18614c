"""Every solver x every built-in model: refused before running with a ``ValueError`` that says
why, or in agreement with a fine-step reference run to a tolerance set by the solver's order.

In the spirit of diffrax's test over all solvers: a new solver or model joins the matrix by a
line here, and any flag of the model that one solver ignores shows up as a disagreement (the
heavy top's pinned pivot under ``BackwardEuler`` did; so did the four link's inconsistent
initial pose under ``GeneralizedAlpha``).
"""

from __future__ import annotations

import functools
import pathlib
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.io import RobotModelWarning
from difflie.kinematics import kinematics
from difflie.joint_laws import JointPD
from difflie.lie import SO3
from helpers import undeclared_couplings

STEPS = 20  # compile time dominates; errors stay far above rounding


class Case:
    """A built-in model, the step it is tested at, its reference and whether it runs by default.

    ``rate`` is the model's fastest angular rate: the tolerance scales with ``(rate h)^order``.
    The reference is the kinematic analysis for a fully driven (zero-DOF) model, which no
    dynamics solver enters, and otherwise RKMK4 at a 40x finer step on the same motion
    written without constraints (``free``), or generalized-alpha at a 40x finer step."""

    def __init__(self, make, h, rate, reference, free=None, slow=False):
        self.make, self.h, self.rate, self.reference, self.free, self.slow = make, h, rate, reference, free, slow


MODELS = {
    # one body, pinned origin, no constraint set; spins at 150 rad/s
    "heavy_top": Case(dl.models.heavy_top, 2e-4, 150.0, "rkmk4"),
    # one free body, 100 rad/s
    "torque_free": Case(dl.models.torque_free, 2e-4, 100.0, "rkmk4", slow=True),
    # spatial, zero DOF, an initial pose that violates the constraints by 8.7e-3
    "four_link": Case(dl.models.four_link, 2e-3, 10.0, "kinematics"),
    # planar, revolute to ground, driven
    "single_pendulum": Case(dl.models.single_pendulum, 2e-3, 10.0, "kinematics", slow=True),
    # planar-in-space closed loop with a driver
    "slider_crank": Case(dl.models.slider_crank, 2e-3, 10.0, "kinematics", slow=True),
    # the heavy top on a spherical joint to ground: the pinned heavy top's motion
    "heavy_top_spherical": Case(dl.models.heavy_top_spherical, 2e-4, 150.0, "rkmk4", free=dl.models.heavy_top, slow=True),
    # spatial closed loop, one degree of freedom
    "spatial_slider_crank": Case(dl.models.spatial_slider_crank, 2e-3, 10.0, "gen_alpha", slow=True),
    # a robot file (revolute, prismatic and continuous joints, a merged link) with URDF damping,
    # joint torques and a PD controller on its joint state: every force element of a robot
    "robot": Case(lambda: _robot(), 1e-3, 40.0, "gen_alpha", slow=True),
    # an MJCF body tree on pairs and triples of hinges about one point (difflie.hinges), damped,
    # driven and with rotor inertias (difflie.forces.JointInertia)
    "hinges": Case(lambda: _hinges(), 1e-3, 10.0, "gen_alpha", slow=True),
    # MJCF ball joints among hinges, their damping and rotor inertias (three 1-DOF joints each)
    "balls": Case(lambda: _balls(), 1e-3, 10.0, "gen_alpha", slow=True),
    # a spatial loop closed by an MJCF connect, and a free body held by a weld
    "loop": Case(lambda: _robot_file("loop.xml"), 1e-3, 10.0, "gen_alpha", slow=True),
    # one free body on force elements alone (a bearing, rotational springs and dampers, joint
    # damping and a driving torque, a dead load), so that the explicit and variational solvers read them too
    "sprung_body": Case(lambda: _sprung_body(), 2e-3, 10.0, "rkmk4"),
    # two free bodies coupled by a spring-damper between points and a rotational spring
    "spring_pair": Case(lambda: _spring_pair(), 2e-3, 10.0, "rkmk4", slow=True),
    # joint limits as spring-dampers, friction and a tendon (difflie.joint_laws.JointLimits,
    # BallLimits, JointFriction, Tendons): a hinge and a ball that start beyond their
    # limits, a slide pushed into its own against friction, a spring coupling the two
    "limits": Case(lambda: _limits(), 1e-3, 50.0, "gen_alpha", slow=True),
}


def _sprung_body() -> dl.Model:
    body = dl.RigidBody(2.0, jnp.diag(jnp.array([0.3, 0.4, 0.5])))
    z = jnp.array([0.0, 0.0, 1.0])
    forces = [
        dl.forces.CartesianSpringDamper(0, [0.1, 0.0, 0.2], [0.1, 0.0, 0.2], [400.0, 300.0, 500.0], 2.0),
        dl.forces.BallSpring((-1,), (0,), jnp.eye(3)[None], jnp.eye(3)[None], jnp.array([20.0])),
        dl.forces.JointForce(-1, 0, z, damping=0.5, torque=lambda t: jnp.array([2.0 * jnp.sin(20.0 * t)])),
        dl.forces.DeadLoad([[3.0, 0.0, 0.0]], [[0.0, 0.1, 0.0]]),
        dl.forces.RotationalSpringDamper(-1, 0, 10.0, 0.3, rest=SO3.exp(jnp.array([0.2, 0.0, -0.1])).as_matrix()),
    ]
    return dl.Model(body, omega0=jnp.array([[2.0, -1.0, 4.0]]), v0=jnp.array([[0.3, 0.0, -0.2]]), forces=forces)


def _spring_pair() -> dl.Model:
    bodies = dl.RigidBody(jnp.array([1.0, 2.0]), jnp.stack([jnp.diag(jnp.array([0.1, 0.15, 0.2])), jnp.diag(jnp.array([0.3, 0.2, 0.25]))]))
    forces = [
        dl.forces.SpringDamper(0, [0.1, 0.0, 0.0], 1, [0.0, 0.1, 0.0], 200.0, 1.0, rest_length=0.8),
        dl.forces.BallSpring((0,), (1,), jnp.eye(3)[None], jnp.eye(3)[None], jnp.array([5.0])),
    ]
    return dl.Model(bodies, r0=jnp.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]), omega0=jnp.array([[1.0, 0.0, 3.0], [0.0, -2.0, 1.0]]),
                    v0=jnp.array([[0.0, 0.5, 0.0], [0.0, -0.25, 0.3]]), forces=forces)


def _robot() -> dl.Model:
    law = JointPD(jnp.array([20.0, 50.0, 0.5]), jnp.array([2.0, 5.0, 0.05]), jnp.array([0.8, -0.05, 1.5]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)  # joint limits, not modelled
        return dl.load_model(str(pathlib.Path(__file__).resolve().parent / "data" / "toy_robot.urdf"),
                             joint_positions={"shoulder": 0.3, "slide": 0.02, "spin": 0.5},
                             joint_torques={"shoulder": "0.5*sin(10*t)"}, joint_feedback=law)  # fmt: skip

def _hinges() -> dl.Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)  # the geoms' contacts, not modelled
        return dl.load_model(str(pathlib.Path(__file__).resolve().parent / "data" / "armature.xml"),
                             joint_positions={"hip_x": 0.4, "hip_z": -0.3, "knee": -0.7, "sh_2": -0.6},
                             joint_velocities={"waist_z": 0.2, "hip_y": 0.3}, joint_torques={"knee": 0.3})  # fmt: skip


def _robot_file(name: str) -> dl.Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)  # the geoms' contacts, not modelled
        return dl.load_model(str(pathlib.Path(__file__).resolve().parent / "data" / name))


def _balls() -> dl.Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)  # the geoms' contacts, not modelled
        return dl.load_model(str(pathlib.Path(__file__).resolve().parent / "data" / "balls.xml"),
                             joint_positions={"root": 0.4, "shoulder": [0.8, 0.0, 0.6, 0.0], "elbow": -0.6},
                             joint_velocities={"wrist": [-1.0, 0.5, 0.3]})  # fmt: skip


def _limits() -> dl.Model:
    return dl.load_model(str(pathlib.Path(__file__).resolve().parent / "data" / "limits.xml"), joint_limits=True, joint_friction=True, joint_couplings=True,
                         joint_positions={"shoulder": 0.35, "slide": -0.04, "wrist": [np.cos(0.15), 0.0, np.sin(0.15), 0.0]},
                         joint_velocities={"slide": -1.0})  # fmt: skip


SOLVERS = {
    "rkmk4": dl.RKMK4(),
    "dopri5": dl.Dopri5(),
    "gen_alpha": dl.GeneralizedAlpha(),
    "backward_euler_rA": dl.BackwardEuler(formulation="rA"),
    "backward_euler_rp": dl.BackwardEuler(formulation="rp"),
    "backward_euler_re": dl.BackwardEuler(formulation="re"),
    "dqvi": dl.DQVI(),
}

# What a solver refuses, and the words its ValueError must contain.
EXPLICIT = {"rkmk4", "dopri5"}
ONE_FREE_BODY = {"dqvi"}


def _expected_refusal(solver: str, model: dl.Model) -> str | None:
    if solver in EXPLICIT and model.constraints is not None:
        return "constraints"
    if solver in ONE_FREE_BODY and model.num_bodies != 1:
        return "one body"
    if solver in ONE_FREE_BODY and model.constraints is not None:
        return "constraints"
    return None


def _run(model, solver, h, doubled=False):
    """``STEPS`` steps of ``h`` to ``t1 = STEPS h`` (adaptive for Dopri5); ``doubled``: as many
    steps of ``2 h``, saved at the same ``t1`` (the Richardson pair: the same program, as
    ``n_steps`` and the saves' structure are the same, so it compiles once)."""
    t1 = STEPS * h
    if isinstance(solver, dl.Dopri5):
        ctrl = dl.PIDController(rtol=1e-9, atol=1e-9)
        return dl.simulate(model, solver, 0.0, t1, h, stepsize_controller=ctrl, max_steps=4096)
    k = 2 if doubled else 1
    return dl.simulate(model, solver, 0.0, k * t1, k * h, n_steps=STEPS, saveat=dl.SaveAt(ts=np.array([t1])))


@functools.cache
def _reference(model_name: str):
    """Final COM positions and rotations of the reference (see :class:`Case`)."""
    case = MODELS[model_name]
    t1 = STEPS * case.h
    if case.reference == "kinematics":
        kin = kinematics(case.make(), jnp.array([0.0, t1]), tol=1e-12)
        return np.asarray(kin.position[-1]), np.asarray(kin.rotation[-1])
    solver = dl.RKMK4() if case.reference == "rkmk4" else dl.GeneralizedAlpha()
    sol = dl.simulate((case.free or case.make)(), solver, 0.0, t1, case.h / 40)
    return np.asarray(sol.position[-1]), np.asarray(sol.rotation[-1])


# Rows of the default run that repeat what another covers (the same loop, another chart), kept for
# the slow run: the suite stays within its time budget.
SLOW_PAIRS = {(model, chart) for model in ("four_link", "sprung_body") for chart in ("backward_euler_rp", "backward_euler_re")}


def _params():
    for model_name, case in MODELS.items():
        for solver_name in SOLVERS:
            marks = [pytest.mark.slow] if case.slow or (model_name, solver_name) in SLOW_PAIRS else []
            yield pytest.param(model_name, solver_name, marks=marks, id=f"{model_name}-{solver_name}")


def _distance(sol, r, R) -> float:
    """Largest difference of the final COM positions and rotations from ``r``, ``R``."""
    return max(np.max(np.abs(np.asarray(sol.position[-1]) - r)), np.max(np.abs(np.asarray(sol.rotation[-1]) - R)))


@pytest.mark.parametrize("model_name, solver_name", list(_params()))
def test_solver_model_conformance(model_name, solver_name):
    case = MODELS[model_name]
    model, solver = case.make(), SOLVERS[solver_name]
    refusal = _expected_refusal(solver_name, model)
    if refusal is not None:
        with pytest.raises(ValueError, match=refusal):
            _run(model, solver, case.h)
        return
    sol = _run(model, solver, case.h)
    assert sol.result == dl.RESULTS.successful
    r_ref, R_ref = _reference(model_name)
    err = _distance(sol, r_ref, R_ref)
    # The tolerance follows the order: a first-order method may be off by O(h), a second-order
    # one by O(h^2) (in units of the model's rate); a wrong reading of the model (a dropped pin,
    # an unassembled start) is off by far more.
    order = 4 if solver_name in EXPLICIT else (1 if solver_name.startswith("backward_euler") else 2)
    scale = max(1.0, float(np.max(np.abs(r_ref))))
    assert err <= 20 * scale * (case.rate * case.h) ** order, (model_name, solver_name, err)
    # That bound is far above the error (1e-3 of it on the heavy top and the robot under implicit
    # Euler), so it misses a dropped force: the error itself is held to its Richardson estimate,
    # |x_h - x_2h| / (2^p - 1), which a solver that reads the model otherwise than the reference
    # does not meet (it converges to another motion). Dropping gravity in BackwardEuler's step made
    # the heavy top's error 13x its estimate, dropping the force elements the robot's 220x; each
    # row that reads the model right is within 7 % of it, or at rounding.
    if not isinstance(solver, dl.Dopri5):
        coarse = _run(model, solver, case.h, doubled=True)
        estimate = _distance(coarse, np.asarray(sol.position[-1]), np.asarray(sol.rotation[-1])) / (2**order - 1)
        assert err <= 2 * estimate + 1e-9 * scale, (model_name, solver_name, err, estimate)
    # Pinned points and constraints hold to the Newton tolerance in the implicit solvers.
    if model.num_constraints and solver_name not in EXPLICIT:
        origins = sol.position[-1] - jnp.einsum("bij,bj->bi", sol.rotation[-1], model.bodies.com)
        assert float(jnp.max(jnp.abs(model.constraint_residual(STEPS * case.h, origins, sol.rotation[-1])))) < 1e-8


def test_forces_declare_the_bodies_they_couple():
    """Every model's force elements name each pair of bodies whose forces depend on each
    other's state (``Model.coupling``), as the implicit solvers' block iteration matrices
    assume: a new force element or joint law that ties bodies together without saying so fails
    here (``tests/test_joint_laws.py`` shows the check failing on a law that hides one)."""
    for name, case in MODELS.items():
        model = case.make()
        if model.forces and model.coupling() is not None:  # None: any pair, a dense matrix
            assert undeclared_couplings(model) == set(), name


def test_heavy_top_backward_euler_keeps_the_pivot():
    """The heavy top (pinned origin, no constraint set) under implicit Euler keeps its centre of
    mass 1 m from the pivot over 1 s in rA and rp (before, ``BackwardEuler`` ignored the pin and
    the COM ended 6.8 m away); in re, whose ZXZ chart at h = 1e-3 cannot follow the 150 rad/s
    spin, the run fails loudly instead (it runs at h = 2e-4)."""
    top = dl.models.heavy_top()
    for form in ("rA", "rp"):
        sol = dl.simulate(top, dl.BackwardEuler(formulation=form), 0.0, 1.0, 1e-3)
        assert abs(float(jnp.linalg.norm(sol.position[-1, 0])) - 1.0) < 1e-6, form
    sol = dl.simulate(top, dl.BackwardEuler(formulation="re"), 0.0, 1.0, 1e-3, throw=False)
    assert sol.result == dl.RESULTS.newton_failed
