"""Variational integrators for one rigid body: DQVI on unit dual quaternions and its SO(3)xR3
counterpart (Xu & Halse, with the corrections noted below).

Both work on a single rigid body described by a ``FreeBody`` (spatial inertia about an
arbitrary body reference point, potential, external wrench); a ``difflie.model.Model``
with one unconstrained body is converted into one. All 6-vectors are translation first:
twists ``chi = (v, omega)`` (body velocity of the reference point, body angular velocity),
momenta ``mu = M chi = (p_B, h_B)`` and wrenches ``tau = (force_B, torque_B)`` with the torque
about the reference point, everything in body axes.

**DQVI.** The discrete Lagrangian ``L_d = (2/h) x^T M x - (h/2)(U_k + U_{k+1})`` of the relative
increment ``f = p_k^-1 p_{k+1}`` written in the chart ``x = (Psi, Phi)``,

    f_real = (w, Phi),  f_dual = (s, Psi),  w = sqrt(1 - |Phi|^2),  s = -(Psi . Phi)/w,

gives, in position-momentum form (Xu & Halse, §4),

    G(x_k) = (h/2) mu_k + (h^2/4) tau_k,   p_{k+1} = p_k f(x_k),
    mu_{k+1} = -(2/h) G(-x_k) + (h/2) tau_{k+1},

with ``z = M x = (z_b, z_a)`` and ``G = (B, A)``:

    A = (s I + S(Psi)) z_b + (w I + S(Phi)) z_a,    B = (w I + S(Phi)) z_b.

``mu_k`` is the Legendre-consistent momentum (the paper's (4.40) drops the ``-(h/2) tau``
term; used for the start it makes the method first order, ``initial_momentum="paper"``
reproduces that). The step is solved by Newton from ``x = M^-1 target`` with the corrected
closed-form Jacobian (Xu & Halse, §5, corrected) or the autodiff one; gradients through the solve
come from the implicit-function theorem (``difflie.numerics.newton.newton_solve``).

**SO3xR3Variational.** The decoupled scheme: the Lee-Leok-McClamroch / Moser-Veselov
discrete Euler-Poincare step for the rotation about the centre of mass (the rotational part
of the same equations, ``(w I + S(Phi)) J Phi = (h/2) Pi + (h^2/4) torque``) and
Stormer-Verlet for the world position of the centre of mass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..body import RigidBody
from .. import eom
from ..lie import SO3xR3, UnitDualQuaternion, cross, hat
from ..numerics import linear
from ..numerics.newton import Newton, newton_solve
from ..results import BodyState
from .base import AbstractSolver, StepStats


# --------------------------------------------------------------------------------------------
# The body
# --------------------------------------------------------------------------------------------


def _check_inertia(M) -> None:
    """Raise ValueError for a non-symmetric or non-positive-definite concrete 6x6 inertia."""
    if isinstance(M, jax.core.Tracer):
        return
    M = np.asarray(M)
    if M.shape != (6, 6):
        raise ValueError(f"FreeBody.inertia must have shape (6, 6), got {M.shape}")
    scale = max(float(np.max(np.abs(M))), 1e-300)
    if np.max(np.abs(M - M.T)) > 1e-6 * scale:
        raise ValueError("FreeBody.inertia must be symmetric")
    if not np.all(np.isfinite(M)) or np.min(np.linalg.eigvalsh(0.5 * (M + M.T))) <= 0:
        raise ValueError("FreeBody.inertia must be positive definite")


class FreeBody(eqx.Module):
    """One rigid body as the variational integrators see it.

    ``pose`` places the body reference frame (``x_world = R x_body + r``); ``inertia`` is the
    symmetric positive-definite 6x6 spatial inertia about the reference point (added mass
    allowed), ``com`` the centre of mass in the body frame, ``twist`` the initial body twist
    ``(v, omega)`` of the reference point. ``potential(t, pose) -> U`` gives conservative
    wrenches by autodiff (minus the left-trivialised gradient) and ``wrench(t, pose, twist)``
    a body wrench ``(force_B, torque about the reference point)`` of non-conservative forces,
    evaluated explicitly (velocity from the momentum before the step's force impulse).
    With ``pinned=True`` the reference point is fixed in space (a top): only the rotation
    moves, under the rotational part of ``inertia``.
    """

    inertia: Float[Array, "6 6"]
    com: Float[Array, "3"]
    pose: UnitDualQuaternion
    twist: Float[Array, "6"]
    potential: Callable[..., Any] | None = None
    wrench: Callable[..., Any] | None = None
    pinned: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        _check_inertia(self.inertia)
        for name, value, n in (("com", self.com, 3), ("twist", self.twist, 6)):
            if jnp.shape(value) != (n,):
                raise ValueError(f"FreeBody.{name} must have shape ({n},), got {jnp.shape(value)}")

    @classmethod
    def from_mass_properties(
        cls,
        mass,
        inertia,
        com=(0.0, 0.0, 0.0),
        *,
        rotation=None,
        position=(0.0, 0.0, 0.0),
        twist=(0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        added_mass=None,
        potential=None,
        wrench=None,
        pinned=False,
    ) -> FreeBody:
        """Body from mass, inertia about the centre of mass and centre of mass (body frame);
        ``rotation``/``position`` place the reference frame, ``twist`` is its body twist."""
        inertia = jnp.asarray(inertia)
        rotation = jnp.eye(3, dtype=inertia.dtype) if rotation is None else rotation
        pose = UnitDualQuaternion.from_rotation_translation(rotation, jnp.asarray(position, inertia.dtype))
        M = RigidBody(mass, inertia, com).spatial_inertia()[0]
        return cls(
            M if added_mass is None else M + jnp.asarray(added_mass),
            jnp.asarray(com, inertia.dtype),
            pose,
            jnp.asarray(twist, inertia.dtype),
            potential,
            wrench,
            pinned,
        )

    def body_wrench(self, t, pose: UnitDualQuaternion, twist) -> Float[Array, "6"]:
        """Total body wrench ``(force_B, torque_B about the reference point)`` at ``pose``."""
        tau = jnp.zeros_like(twist)
        if self.potential is not None:
            tau = tau - jax.grad(lambda xi: self.potential(t, pose.compose(UnitDualQuaternion.exp(xi))))(
                jnp.zeros_like(twist)
            )
        if self.wrench is not None:
            tau = tau + self.wrench(t, pose, twist)
        return tau

    def energy(self, t, pose: UnitDualQuaternion, momentum) -> Float[Array, ""]:
        """``0.5 mu^T M^-1 mu + U(pose)``."""
        kinetic = 0.5 * jnp.dot(momentum, linear.solve(self._active_inertia(), momentum))
        potential = 0.0 if self.potential is None else self.potential(t, pose)
        return kinetic + potential

    def _active_inertia(self):
        if not self.pinned:
            return self.inertia
        M = self.inertia
        # Translation is locked: keep the rotational block, make the linear one inert.
        eye = jnp.eye(3, dtype=M.dtype)
        return jnp.block([[eye, jnp.zeros_like(eye)], [jnp.zeros_like(eye), M[3:, 3:]]])


def spatial_momentum(pose: UnitDualQuaternion, momentum) -> Float[Array, "6"]:
    """World-frame momentum ``(R p_B, R h_B + r x R p_B)`` (angular part about the world
    origin); conserved exactly by DQVI for a free body."""
    R, r = pose.rotation, pose.translation
    p = R @ momentum[:3]
    return jnp.concatenate([p, R @ momentum[3:] + cross(r, p)])


# --------------------------------------------------------------------------------------------
# The DQVI step equations
# --------------------------------------------------------------------------------------------


def chart(x: Float[Array, "6"]) -> UnitDualQuaternion:
    """Increment ``f(x)``, ``x = (Psi, Phi)``: real ``(w, Phi)``, dual ``(-(Psi.Phi)/w, Psi)``."""
    psi, phi = x[:3], x[3:]
    w = jnp.sqrt(1.0 - jnp.dot(phi, phi))
    s = -jnp.dot(psi, phi) / w
    return UnitDualQuaternion(
        jnp.concatenate([w[None], phi]), jnp.concatenate([s[None], psi])
    )


def chart_inverse(f: UnitDualQuaternion) -> Float[Array, "6"]:
    """``(Psi, Phi)`` of an increment, taking the short-rotation sign (``w > 0``)."""
    sign = jnp.where(f.real[0] < 0, -1.0, 1.0).astype(f.real.dtype)
    return sign * jnp.concatenate([f.dual[1:], f.real[1:]])


def _w_s(x):
    psi, phi = x[:3], x[3:]
    w = jnp.sqrt(1.0 - jnp.dot(phi, phi))
    return psi, phi, w, -jnp.dot(psi, phi) / w


def discrete_momentum_map(M: Float[Array, "6 6"], x: Float[Array, "6"]) -> Float[Array, "6"]:
    """``G(x) = (B, A)``: ``(2/h) G(x_k)`` is the body momentum at ``k`` from the forward
    increment, ``-(2/h) G(-x_k)`` the one at ``k + 1``."""
    psi, phi, w, s = _w_s(x)
    z = M @ x
    zb, za = z[:3], z[3:]
    A = s * zb + cross(psi, zb) + w * za + cross(phi, za)
    B = w * zb + cross(phi, zb)
    return jnp.concatenate([B, A])


def discrete_momentum_map_jacobian(M: Float[Array, "6 6"], x: Float[Array, "6"]) -> Float[Array, "6 6"]:
    """Closed-form ``dG/dx`` (Xu & Halse, §5, corrected: the paper's (5.2) has a sign error in its
    first term and its (5.3) holds only for an isotropic translational mass)."""
    psi, phi, w, s = _w_s(x)
    M22, M21, M12, M11 = M[:3, :3], M[:3, 3:], M[3:, :3], M[3:, 3:]  # (Psi, Phi) blocks
    z = M @ x
    zb, za = z[:3], z[3:]
    eye = jnp.eye(3, dtype=x.dtype)
    S = hat
    wS = w * eye + S(phi)
    dA_dphi = (
        -jnp.outer(zb, psi + cross(phi, cross(phi, psi))) / w**3
        + (s * eye + S(psi)) @ M21
        - jnp.outer(za, phi) / w
        - S(za)
        + wS @ M11
    )
    dA_dpsi = -jnp.outer(zb, phi) / w - S(zb) + S(psi) @ M22 + s * M22 + wS @ M12
    dB_dphi = -jnp.outer(zb, phi) / w - S(zb) + wS @ M21
    dB_dpsi = wS @ M22
    return jnp.block([[dB_dpsi, dB_dphi], [dA_dpsi, dA_dphi]])


# --------------------------------------------------------------------------------------------
# Newton with implicit-function-theorem gradients
# --------------------------------------------------------------------------------------------

def _implicit_solve(G, jacobian, target, x0, rtol, max_iterations):
    """Solve ``G(x) = target`` by Newton (``difflie.numerics.newton.newton_solve``), to
    ``max |G(x) - target| <= rtol max |target|``; differentiable in everything ``G`` and
    ``target`` close over by the implicit-function theorem. An iterate with ``|Phi| >= 1`` (the
    last three entries: outside the chart) or not finite gives ``RESULTS.no_solution``."""
    scale = jnp.maximum(jnp.max(jnp.abs(jax.lax.stop_gradient(target))), jnp.finfo(target.dtype).tiny)
    newton = Newton(tol=rtol * scale, max_iterations=max_iterations, norm="max", test="residual")

    def inside_chart(x):
        phi = x[x.shape[0] - 3 :]
        return jnp.dot(phi, phi) < 1.0

    sol = newton_solve(
        lambda x, target: G(x) - target, x0, target, newton, jacobian=jacobian, admissible=inside_chart
    )
    return sol.value, sol.num_steps, sol.result


# --------------------------------------------------------------------------------------------
# Models as free bodies
# --------------------------------------------------------------------------------------------


class _GravityPotential(eqx.Module):
    """``U = -m g . (R c + r)``: uniform gravity on a body with centre of mass ``c``."""

    mass: Float[Array, ""]
    com: Float[Array, "3"]
    gravity: Float[Array, "3"]

    def __call__(self, t, pose: UnitDualQuaternion):
        return -self.mass * jnp.dot(self.gravity, pose.act(self.com))


class _ModelWrench(eqx.Module):
    """The force elements of a one-body ``difflie.model.Model`` (its
    ``applied_forces`` without gravity, which is the body's potential)
    as a body wrench about the reference point."""

    model: Any  # the one-body Model with zero gravity

    def __call__(self, t, pose: UnitDualQuaternion, twist):
        R, com = pose.rotation, self.model.bodies.com[0]
        omega = twist[3:]
        rdot = R @ (twist[:3] + cross(omega, com))
        f, tau = self.model.applied_forces(t, pose.act(com)[None], R[None], rdot[None], omega[None])
        return eom.about_origin(R, com, f[0], tau[0])


def _check_one_free_body(model) -> None:
    """A ``ValueError`` unless ``model`` is one body without constraints or force elements
    that act through the accelerations (``AbstractForce.accelerated``)."""
    if isinstance(model, FreeBody):
        return
    if model.num_bodies != 1:
        raise ValueError(f"variational integrators take a model with one body, got {model.num_bodies} bodies")
    if model.constraints is not None:
        raise ValueError("variational integrators take a model without constraints")
    inertial = [element for element in model.forces if element.accelerated]
    if inertial:
        raise ValueError(
            f"variational integrators take the model's force elements as wrenches of the state; its "
            f"{type(inertial[0]).__name__} (joint rotor inertias, MJCF armature) acts through the accelerations, which only "
            "the implicit solvers (GeneralizedAlpha, BackwardEuler) have as unknowns"
        )


def as_free_body(model) -> FreeBody:
    """A ``FreeBody`` from a one-body model without constraints (or the body itself).

    The reference point is the body-frame origin; a ``fixed_origin`` body is pinned there.
    """
    if isinstance(model, FreeBody):
        return model
    _check_one_free_body(model)
    b = model.bodies
    m, c = b.mass[0], b.com[0]
    r0, R0, v0, omega0 = (x[0] for x in model.initial_state())
    pinned = bool(model.pinned.size)
    v_ref = R0.T @ v0 - cross(omega0, c)  # zero for a pinned body
    return FreeBody(
        b.spatial_inertia()[0],
        c,
        UnitDualQuaternion.from_rotation_translation(R0, r0 - R0 @ c),
        jnp.concatenate([v_ref, omega0]),
        _GravityPotential(m, c, model.gravity),
        _ModelWrench(eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))) if model.forces else None,
        pinned,
    )


# --------------------------------------------------------------------------------------------
# The solvers
# --------------------------------------------------------------------------------------------


class VariationalState(eqx.Module):
    """Pose and momentum at one time step (position-momentum form)."""

    pose: Any
    momentum: Float[Array, "6"]


def _rotation_map(J, phi):
    """Rotational part of ``discrete_momentum_map`` at ``Psi = 0``: ``(w I + S(Phi)) J Phi``."""
    w = jnp.sqrt(1.0 - jnp.dot(phi, phi))
    z = J @ phi
    return w * z + cross(phi, z)


def _rotation_map_jacobian(J, phi):
    w = jnp.sqrt(1.0 - jnp.dot(phi, phi))
    z = J @ phi
    return -jnp.outer(z, phi) / w - hat(z) + (w * jnp.eye(3, dtype=phi.dtype) + hat(phi)) @ J


class _AbstractVariational(AbstractSolver):
    jacobian: Literal["closed_form", "autodiff"] = eqx.field(static=True, default="closed_form")
    initial_momentum: Literal["legendre", "paper"] = eqx.field(static=True, default="legendre")
    rtol: float | None = eqx.field(static=True, default=None)
    max_iterations: int = eqx.field(static=True, default=50)

    order: ClassVar[int] = 2

    def __check_init__(self):
        if self.jacobian not in ("closed_form", "autodiff"):
            raise ValueError(f"jacobian must be 'closed_form' or 'autodiff', got {self.jacobian!r}")
        if self.initial_momentum not in ("legendre", "paper"):
            raise ValueError(f"initial_momentum must be 'legendre' or 'paper', got {self.initial_momentum!r}")
        if self.max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {self.max_iterations}")

    def check_model(self, model) -> None:
        _check_one_free_body(model)

    def _rtol(self, dtype):
        return 64 * float(jnp.finfo(dtype).eps) if self.rtol is None else self.rtol

    def _solve_rotation(self, J, target, dtype):
        """``(w I + S(Phi)) J Phi = target`` (the discrete Euler-Poincare step on S^3)."""
        jac = (lambda phi: _rotation_map_jacobian(J, phi)) if self.jacobian == "closed_form" else None
        x0 = linear.solve(J, target)
        return _implicit_solve(
            lambda phi: _rotation_map(J, phi), jac, target, x0, self._rtol(dtype), self.max_iterations
        )


class DQVI(_AbstractVariational):
    """Dual-quaternion variational integrator (Xu & Halse, §4).

    Second order, symplectic, time reversible, conserves the world-frame momentum of a free body
    exactly and keeps the energy error bounded. The state is ``VariationalState(pose, momentum)``
    with the pose a ``UnitDualQuaternion`` of the body reference frame and
    the Legendre-consistent body momentum ``mu = (p_B, h_B)`` about the reference point.
    Each step solves a 6x6 nonlinear system by Newton (``jacobian="closed_form"`` or
    ``"autodiff"``); a step with no solution (``h |omega| > 1`` for a sphere) reports
    ``RESULTS.no_solution``. Takes a ``FreeBody`` or a one-body model without constraints.
    """

    def init(self, model, t0, dt0):
        body = as_free_body(model)
        M = body._active_inertia()
        mu = M @ body.twist
        tau = self._wrench(body, t0, body.pose, body.twist)
        if self.initial_momentum == "paper":
            mu = mu - 0.5 * dt0 * tau  # the paper's (4.40): first order when tau(t0) != 0
        return VariationalState(body.pose, mu), tau

    def _wrench(self, body, t, pose, twist):
        tau = body.body_wrench(t, pose, twist)
        return tau.at[:3].set(0.0) if body.pinned else tau

    def step(self, model, t0, t1, y0: VariationalState, solver_state):
        body = as_free_body(model)
        h = t1 - t0
        tau0 = solver_state
        mu = y0.momentum
        dtype = mu.dtype
        M = body._active_inertia()
        target = 0.5 * h * mu + 0.25 * h * h * tau0
        if body.pinned:
            phi, iterations, result = self._solve_rotation(M[3:, 3:], target[3:], dtype)
            x = jnp.concatenate([jnp.zeros_like(phi), phi])
            mu_minus = jnp.concatenate([jnp.zeros_like(phi), _rotation_map(M[3:, 3:], -phi)]) * (-2.0 / h)
        else:
            jac = (lambda x: discrete_momentum_map_jacobian(M, x)) if self.jacobian == "closed_form" else None
            x, iterations, result = _implicit_solve(
                lambda x: discrete_momentum_map(M, x),
                jac,
                target,
                linear.solve(M, target),
                self._rtol(dtype),
                self.max_iterations,
            )
            mu_minus = -(2.0 / h) * discrete_momentum_map(M, -x)
        pose1 = y0.pose.compose(chart(x))
        tau1 = self._wrench(body, t1, pose1, linear.solve(M, mu_minus))
        y1 = VariationalState(pose1, mu_minus + 0.5 * h * tau1)
        stats = StepStats(evaluations=iterations + 1, newton_iterations=iterations)
        return y1, None, tau1, stats, result

    def twist(self, model, y: VariationalState) -> Float[Array, "6"]:
        """Body twist ``(v, omega)`` of the reference point: ``M^-1 mu``."""
        return linear.solve(as_free_body(model)._active_inertia(), y.momentum)

    def observe(self, model, y: VariationalState) -> BodyState:
        body = as_free_body(model)
        chi = self.twist(model, y)
        R = y.pose.rotation
        v = R @ (chi[:3] + cross(chi[3:], body.com))
        return BodyState(y.pose.act(body.com)[None], R[None], v[None], chi[3:][None])

    def energy(self, model, t, y: VariationalState) -> Float[Array, ""]:
        """Kinetic plus potential energy (external wrenches excluded)."""
        return as_free_body(model).energy(t, y.pose, y.momentum)

    def spatial_momentum(self, model, y: VariationalState) -> Float[Array, "6"]:
        """World-frame ``(linear momentum, angular momentum about the world origin)``."""
        del model
        return spatial_momentum(y.pose, y.momentum)


class SO3xR3Variational(_AbstractVariational):
    """Decoupled Lie-group variational integrator on SO(3)xR3.

    Rotation: the Lee-Leok-McClamroch / Moser-Veselov discrete Euler-Poincare step about the
    centre of mass (about the pivot for a pinned body), ``R_{k+1} = R_k F_k`` with ``F_k`` the
    rotation of the unit quaternion ``(w, Phi)`` solving ``(w I + S(Phi)) J Phi = (h/2) Pi_k +
    (h^2/4) torque_k`` and ``Pi_{k+1} = (2/h)(w I - S(Phi)) J Phi + (h/2) torque_{k+1}``.
    Translation: Stormer-Verlet (velocity form) for the world centre-of-mass position. The
    state is ``VariationalState(pose, momentum)`` with ``pose`` an ``SO3xR3``
    ``(R, x)`` (``x`` the centre of mass, or the pivot when pinned) and ``momentum =
    (p_world, Pi_body)``. Added mass is not supported (translational inertia must be ``m I``).
    """

    @staticmethod
    def _mass_com_inertia(body: FreeBody):
        M, c = body.inertia, body.com
        if not isinstance(M, jax.core.Tracer):
            Mt = np.asarray(M[:3, :3])
            if np.max(np.abs(Mt - Mt[0, 0] * np.eye(3))) > 1e-12 * abs(Mt[0, 0]):
                raise ValueError("SO3xR3Variational needs a translational inertia m I (no added mass)")
        m = M[0, 0]
        if body.pinned:
            return m, c, M[3:, 3:]
        eye = jnp.eye(3, dtype=M.dtype)
        return m, c, M[3:, 3:] - m * (jnp.dot(c, c) * eye - jnp.outer(c, c))

    def _reference(self, body, pose: SO3xR3, momentum):
        """Pose and twist of the body reference frame from the decoupled state."""
        m, c, J = self._mass_com_inertia(body)
        R = pose.rotation
        omega = linear.solve(J, momentum[3:])
        if body.pinned:
            ref, v_ref = pose.translation, jnp.zeros_like(omega)
        else:
            ref, v_ref = pose.translation - R @ c, R.T @ momentum[:3] / m - cross(omega, c)
        return UnitDualQuaternion.from_rotation_translation(R, ref), jnp.concatenate([v_ref, omega])

    def _wrench(self, body, t, pose: SO3xR3, momentum):
        """``(world force, body torque about the centre of mass / pivot)``."""
        ref_pose, twist = self._reference(body, pose, momentum)
        tau = body.body_wrench(t, ref_pose, twist)
        f = tau[:3]
        if body.pinned:
            return jnp.concatenate([jnp.zeros_like(f), tau[3:]])
        return jnp.concatenate([pose.rotation @ f, tau[3:] - cross(body.com, f)])

    def init(self, model, t0, dt0):
        body = as_free_body(model)
        m, c, J = self._mass_com_inertia(body)
        R, r_ref = body.pose.rotation, body.pose.translation
        v, omega = body.twist[:3], body.twist[3:]
        if body.pinned:
            pose, p = SO3xR3(R, r_ref), jnp.zeros_like(v)
        else:
            pose, p = SO3xR3(R, r_ref + R @ c), m * (R @ (v + cross(omega, c)))
        mu = jnp.concatenate([p, J @ omega])
        tau = self._wrench(body, t0, pose, mu)
        if self.initial_momentum == "paper":
            mu = mu - 0.5 * dt0 * tau
        return VariationalState(pose, mu), tau

    def step(self, model, t0, t1, y0: VariationalState, solver_state):
        body = as_free_body(model)
        m, c, J = self._mass_com_inertia(body)
        h = t1 - t0
        tau0 = solver_state
        p, Pi = y0.momentum[:3], y0.momentum[3:]
        phi, iterations, result = self._solve_rotation(J, 0.5 * h * Pi + 0.25 * h * h * tau0[3:], Pi.dtype)
        w = jnp.sqrt(1.0 - jnp.dot(phi, phi))
        F = UnitDualQuaternion(jnp.concatenate([w[None], phi]), jnp.zeros(4, phi.dtype)).rotation
        p_half = p + 0.5 * h * tau0[:3]
        x1 = y0.pose.translation if body.pinned else y0.pose.translation + h * p_half / m
        pose1 = SO3xR3(y0.pose.rotation @ F, x1)
        mu_minus = jnp.concatenate([p_half, (2.0 / h) * (w * (J @ phi) - cross(phi, J @ phi))])
        tau1 = self._wrench(body, t1, pose1, mu_minus)
        y1 = VariationalState(pose1, mu_minus + 0.5 * h * tau1)
        stats = StepStats(evaluations=iterations + 1, newton_iterations=iterations)
        return y1, None, tau1, stats, result

    def observe(self, model, y: VariationalState) -> BodyState:
        body = as_free_body(model)
        m, c, J = self._mass_com_inertia(body)
        R = y.pose.rotation
        omega = linear.solve(J, y.momentum[3:])
        if body.pinned:
            x, v = y.pose.translation + R @ c, R @ cross(omega, c)
        else:
            x, v = y.pose.translation, y.momentum[:3] / m
        return BodyState(x[None], R[None], v[None], omega[None])

    def energy(self, model, t, y: VariationalState) -> Float[Array, ""]:
        """Kinetic plus potential energy (external wrenches excluded)."""
        body = as_free_body(model)
        m, c, J = self._mass_com_inertia(body)
        p, Pi = y.momentum[:3], y.momentum[3:]
        kinetic = 0.5 * jnp.dot(p, p) / m + 0.5 * jnp.dot(Pi, linear.solve(J, Pi))
        ref_pose, _ = self._reference(body, y.pose, y.momentum)
        return kinetic + (0.0 if body.potential is None else body.potential(t, ref_pose))

    def spatial_momentum(self, model, y: VariationalState) -> Float[Array, "6"]:
        """World-frame ``(linear momentum, angular momentum about the world origin)``."""
        del model
        p = y.momentum[:3]
        return jnp.concatenate([p, y.pose.rotation @ y.momentum[3:] + cross(y.pose.translation, p)])
