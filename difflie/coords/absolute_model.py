"""A rigid-body model written in absolute coordinates: the "legacy" form of Müller, singularity-free
Lie group integration in absolute coordinates, eqs. (13)-(14).

    V_dot = f(t, q, V),        q_dot = H(q)^-1 V,

for ``nb`` stacked bodies. The user supplies ``f`` (e.g. from a mass matrix and forces written
in Euler angles) and a ``AbstractChart``; the LGT solvers replace the
kinematic equation by the local one, ``X_dot = dpsi^-1_{-X}(V)``, and evaluate ``f`` at
``q = lgt(q_k, X)`` (Müller, §6.2, "Algorithm A" here; §6.3, "Algorithm B").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from .. import eom
from ..lie import SO3xR3
from ..lie import ops as _ops
from ..numerics import linear
from ..results import BodyState
from .chart import AbstractChart
from .local import LocalCoordinates


def group_velocity(
    local: LocalCoordinates, R: Float[Array, "*b 3 3"], V: Float[Array, "*b d"], velocity: str
) -> Float[Array, "*b d"]:
    """The model velocity ``V`` as the left-trivialised velocity of ``local.group``.

    ``velocity="mixed"``: ``V = (r_dot, omega_body)``; ``"body"``: ``V = (R^T r_dot, omega_body)``.
    SO(3)xR3 needs the mixed one, SE(3) the body twist: the local kinematics of Müller, §6.3, take
    the left-trivialised velocity of the chosen group.
    """
    if local.group == "SO3":
        return V
    if local.group == "SO3xR3" and velocity == "body":
        return jnp.concatenate([_ops.matvec(R, V[..., :3]), V[..., 3:]], axis=-1)
    if local.group == "SE3" and velocity == "mixed":
        return jnp.concatenate([_ops.matvec(_ops.transpose(R), V[..., :3]), V[..., 3:]], axis=-1)
    return V


def world_velocity(R: Float[Array, "*b 3 3"], V: Float[Array, "*b 6"], velocity: str) -> Float[Array, "*b 3"]:
    """World velocity of the body-frame origin."""
    return V[..., :3] if velocity == "mixed" else _ops.matvec(R, V[..., :3])


class AbsoluteModel(eqx.Module):
    """Rigid bodies in absolute coordinates ``q`` with velocities ``V`` (one row per body).

    **Arguments:**

    - `chart`: the rotation coordinates, e.g. ``EulerAngles("xyz")``.
    - `acceleration`: ``f(t, q, V, args) -> V_dot`` with ``q`` of shape ``(nb, n)`` and ``V``
      of shape ``(nb, d)``. It may use ``chart`` (``chart.rotation(q)`` etc.) freely.
    - `q0`, `V0`: initial state. ``V0`` with last axis 3 makes a rotation-only model
      (``q = theta``, ``V = omega_body``: a body turning about a fixed point); last axis 6 a free
      body (``q = (r, theta)``, ``V = (v, omega_body)``, ``v`` as given by `velocity`).
    - `velocity`: ``"mixed"`` (``v = r_dot``, world) or ``"body"`` (``v = R^T r_dot``).
    - `args`: passed to `acceleration`.
    - `body_names`: one name per body (default ``body0, body1, ...``).
    - `pivot`, `com` (rotation-only models): where each body turns and its centre of mass in
      body axes, for the positions and velocities ``body_state`` reports (default zero).
    """

    chart: AbstractChart
    acceleration: Callable[..., Array]
    q0: Float[Array, "nb n"]
    V0: Float[Array, "nb d"]
    args: PyTree[Any] = None
    velocity: Literal["mixed", "body"] = eqx.field(static=True, default="mixed")
    body_names: tuple[str, ...] = eqx.field(static=True)
    pivot: Float[Array, "nb 3"] | None = None
    com: Float[Array, "nb 3"] | None = None

    def __init__(self, chart, acceleration, q0, V0, args=None, velocity="mixed", body_names=None, *, pivot=None, com=None):
        self.chart, self.acceleration, self.args, self.velocity = chart, acceleration, args, velocity
        self.q0, self.V0 = jnp.asarray(q0), jnp.asarray(V0)
        self.pivot = None if pivot is None else jnp.asarray(pivot)
        self.com = None if com is None else jnp.asarray(com)
        nb = self.q0.shape[0] if self.q0.ndim else 0
        self.body_names = tuple(f"body{i}" for i in range(nb)) if body_names is None else tuple(body_names)

    def __check_init__(self):
        if not isinstance(self.chart, AbstractChart):
            raise ValueError(f"AbsoluteModel: chart must be an AbstractChart, got {type(self.chart).__name__}")
        if self.velocity not in ("mixed", "body"):
            raise ValueError(f"AbsoluteModel: velocity must be 'mixed' or 'body', got {self.velocity!r}")
        q0, V0 = jnp.shape(self.q0), jnp.shape(self.V0)
        if len(q0) != 2 or len(V0) != 2 or q0[0] != V0[0] or V0[1] not in (3, 6):
            raise ValueError(f"AbsoluteModel: q0 must be (nb, n) and V0 (nb, 3 or 6); got {q0} and {V0}")
        if len(self.body_names) != q0[0]:
            raise ValueError(f"AbsoluteModel: {len(self.body_names)} body_names for {q0[0]} bodies")
        n = self.chart.dim + (3 if V0[1] == 6 else 0)
        if q0[1] != n:
            raise ValueError(
                f"AbsoluteModel: {type(self.chart).__name__} with V0 of width {V0[1]} needs q0 of width {n}, "
                f"got {q0[1]}"
            )

    @classmethod
    def from_model(cls, model, chart: AbstractChart) -> AbsoluteModel:
        """A ``difflie.Model`` without constraints in the coordinates of ``chart``, for the
        LGT solvers: its dynamics are the model's own (``difflie.Model.newton_euler``), not a
        second statement of them.

        Free bodies: ``q = (r, theta)`` (world COM), ``V = (r_dot, omega_body)``
        (``velocity="mixed"``), ``V_dot = (f / m, J^-1 (tau - omega x J omega))``. A model whose
        bodies all have fixed origins turns about them: ``q = theta``, ``V = omega_body``, with
        the pivoted equations of ``difflie.eom``.
        """
        if model.constraints is not None:
            raise ValueError("AbsoluteModel.from_model: the model has constraints; the LGT solvers take ODE models")
        fixed = np.asarray(model.fixed_origin)
        if fixed.any() and not fixed.all():
            raise ValueError("AbsoluteModel.from_model: some bodies have fixed origins and some not; give all or none")
        r0, R0, v0, omega0 = model.initial_state()
        theta0 = chart.from_rotation(R0)
        if fixed.all():
            com = model.bodies.com
            pivot = r0 - _ops.matvec(R0, com)
            args = (model, eom.prepare(model, "so3xr3"), pivot)
            return cls(chart, _PivotedAcceleration(chart), theta0, omega0, args, "mixed", model.body_names, pivot=pivot, com=com)
        q0 = jnp.concatenate([r0, theta0], axis=-1)
        V0 = jnp.concatenate([v0, omega0], axis=-1)
        args = (model, linear.inv(model.bodies.inertia))
        return cls(chart, _ModelAcceleration(chart), q0, V0, args, "mixed", model.body_names)

    @property
    def num_bodies(self) -> int:
        return jnp.shape(self.q0)[0]

    @property
    def rotation_only(self) -> bool:
        return jnp.shape(self.V0)[-1] == 3

    def group(self, group) -> str:
        """The group actually used: SO(3) for rotation-only models."""
        return "SO3" if self.rotation_only else LocalCoordinates(group).group

    def rotation(self, q: Float[Array, "nb n"]) -> Float[Array, "nb 3 3"]:
        return self.chart.rotation(q, "SO3" if self.rotation_only else "SO3xR3")

    def body_state(self, q: Float[Array, "nb n"], V: Float[Array, "nb d"]) -> BodyState:
        """World position, rotation, COM velocity and body angular velocity at ``(q, V)``."""
        R = self.rotation(q)
        if self.rotation_only:
            zero = jnp.zeros(q.shape[:-1] + (3,), q.dtype)
            com = zero if self.com is None else self.com
            pivot = zero if self.pivot is None else self.pivot
            position, velocity = pivot + _ops.matvec(R, com), _ops.matvec(R, jnp.cross(V, com))
            return BodyState(position=position, rotation=R, velocity=velocity, angular_velocity=V)
        velocity = world_velocity(R, V, self.velocity)
        return BodyState(position=q[..., :3], rotation=R, velocity=velocity, angular_velocity=V[..., 3:])

    def q_dot(self, q: Float[Array, "nb n"], V: Float[Array, "nb d"]) -> Float[Array, "nb n"]:
        """The classical kinematics (14), ``q_dot = H(q)^-1 V``: singular where the chart is."""
        theta = q if self.rotation_only else q[..., 3:]
        theta_dot = _ops.matvec(self.chart.H_inverse(theta), V[..., -3:])
        if self.rotation_only:
            return theta_dot
        return jnp.concatenate([world_velocity(self.chart.to_rotation(theta), V, self.velocity), theta_dot], -1)

    def vector_field(self, t, y: tuple[Array, Array], args) -> tuple[Array, Array]:
        """``(q_dot, V_dot)``: the legacy ODE, e.g. for ``diffrax.ODETerm`` (``args`` as given)."""
        q, V = y
        return self.q_dot(q, V), self.acceleration(t, q, V, args)



class _ModelAcceleration(eqx.Module):
    """``V_dot(t, q, V, (model, J^-1))`` of free bodies in ``chart`` coordinates from
    ``difflie.Model.newton_euler`` at zero acceleration: ``(f / m, -J^-1 (omega x J omega - tau))``."""

    chart: AbstractChart

    def __call__(self, t, q, V, args):
        model, inertia_inverse = args
        R = self.chart.to_rotation(q[..., 3:])
        zero = jnp.zeros_like(V[..., :3])
        lin, ang = model.newton_euler(t, q[..., :3], R, V[..., :3], V[..., 3:], zero, None)
        return -jnp.concatenate([lin / model.bodies.mass[:, None], _ops.matvec(inertia_inverse, ang)], axis=-1)


class _PivotedAcceleration(eqx.Module):
    """``omega_dot(t, theta, omega, (model, cache, pivots))`` of bodies turning about fixed
    origins (``difflie.eom.vector_field``)."""

    chart: AbstractChart

    def __call__(self, t, theta, omega, args):
        model, cache, pivots = args
        R = self.chart.to_rotation(theta)
        vel = jnp.concatenate([jnp.zeros_like(omega), omega], axis=-1)
        return eom.vector_field(model, cache, t, SO3xR3(R, pivots), vel)[1][..., 3:]
