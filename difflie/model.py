"""Model: bodies, forces, gravity, optional constraints and the initial state.

The one place a model is read. Every solver takes from it the same few things: the bodies'
inertias, the applied wrenches (``Model.applied_forces``), the Newton-Euler rows of each body
(``Model.newton_euler``), the constraint rows with pinned points included
(``Model.constraint_residual``) and the initial state (``Model.initial_state``). A
solver never reads ``fixed_origin`` or ``constraints`` itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .body import RigidBody, check_bodies, physical
from .xla import concrete
from .forces import AbstractForce, gravity_forces
from .lie import cross
from .lie.ops import mv


# The static fields of force elements that hold body indices (-1 the ground, except ``body``).
_BODY_FIELDS = {"body": 0, "body_a": -1, "body_b": -1, "parent": -1, "child": 0}


def _check_body_indices(element, where: str, nb: int) -> None:
    """A ``ValueError`` naming the field of ``element`` (or of a module inside it, such as a
    ``JointInertia``'s joints) that holds a body index outside the model's ``nb`` bodies: a
    gather would clamp it to the last body, a scatter drop it, without a word."""
    for field in dataclasses.fields(element) if dataclasses.is_dataclass(element) else ():
        value = getattr(element, field.name, None)
        if isinstance(value, eqx.Module):
            _check_body_indices(value, f"{where}.{field.name}", nb)
        elif field.name in _BODY_FIELDS and isinstance(value, tuple) and all(isinstance(i, (int, np.integer)) for i in value):
            low = _BODY_FIELDS[field.name]
            bad = [i for i in value if not low <= i < nb]
            if bad:
                ground = ", -1 the ground" if low < 0 else ""
                raise ValueError(f"Model: {where}.{field.name} names body {bad[0]}, but the model has {nb} "
                                 f"{'body' if nb == 1 else 'bodies'} (indices 0 to {nb - 1}{ground})")  # fmt: skip


def _per_body(x, default, name: str, shape: tuple[int, ...], dtype) -> Array:
    """``x`` (``default`` where ``None``) broadcast to ``shape``, or a ``ValueError`` naming
    ``name``, the shape it needs and the one it has."""
    try:
        a = jnp.asarray(default if x is None else x)
    except TypeError:
        a = None
    if a is None or not jnp.issubdtype(a.dtype, jnp.number) or jnp.issubdtype(a.dtype, jnp.complexfloating):
        raise ValueError(f"Model: {name} must be real numbers, got {x!r}")
    try:
        return jnp.broadcast_to(a.astype(dtype), shape)
    except (TypeError, ValueError):
        one = f" (one per body) or {shape[1:]}" if len(shape) > 1 else ""
        raise ValueError(f"Model: {name} must have shape {shape}{one}, got {a.shape}") from None


def _rotation_tolerance(dtype) -> float:
    """Largest ``|R^T R - I|`` of an initial rotation: 1e-6, or the dtype's rounding where coarser."""
    return max(1e-6, 100 * float(np.finfo(dtype).eps))


class Model(eqx.Module):
    """A multibody model with ``nb`` stacked bodies.

    Initial conditions: ``r0`` world COM positions, ``R0`` body-to-world rotations, ``v0`` world
    COM velocities, ``omega0`` body angular velocities (all with leading axis nb).

    ``fixed_origin[i]`` pins the body-frame origin of body ``i`` where it starts (a spherical
    joint to the ground there; the heavy top without constraints): its COM is then ``com`` away
    from the pivot and ``v0`` is implied by ``omega0`` (it is ignored). Explicit solvers write
    such a body's equations about the pivot; implicit ones get three constraint rows per pinned
    body from ``constraint_residual``.
    ``ulvc_lengths``: half-sides of each body's hexahedron of projection points, read by
    explicit solvers in unified local velocity coordinates (``RKMK4(velocity="ulvc")``): the
    velocity coordinates are the solver's choice, not the model's.
    ``joints`` (optional) is the joint-space description of a robot read from a URDF or MJCF
    file (``difflie.joint_space.JointSpace``): joint names, kinds and frames, used by
    ``difflie.joint_coordinates``; the dynamics never read it.
    """

    bodies: RigidBody
    r0: Float[Array, "nb 3"]
    R0: Float[Array, "nb 3 3"]
    v0: Float[Array, "nb 3"]
    omega0: Float[Array, "nb 3"]
    gravity: Float[Array, "3"]
    forces: tuple[AbstractForce, ...]
    constraints: Any
    ulvc_lengths: Float[Array, "nb 3"]
    body_names: tuple[str, ...] = eqx.field(static=True)
    fixed_origin: tuple[bool, ...] = eqx.field(static=True)
    joints: Any = None  # joint-space metadata of a robot (difflie.joint_space.JointSpace)

    def __init__(
        self,
        bodies: RigidBody,
        *,
        r0: ArrayLike | None = None,
        R0: ArrayLike | None = None,
        v0: ArrayLike | None = None,
        omega0: ArrayLike | None = None,
        gravity: ArrayLike = (0.0, 0.0, -9.81),
        forces: tuple[AbstractForce, ...] | list = (),
        constraints: Any = None,
        body_names: tuple[str, ...] | None = None,
        fixed_origin: tuple[bool, ...] | bool = False,
        ulvc_lengths: ArrayLike = 1.0,
        joints: Any = None,
        formulation: None = None,
    ):
        if formulation is not None:
            raise ValueError(
                f"Model(formulation={formulation!r}): the velocity coordinates are now the explicit solver's "
                f"choice, e.g. RKMK4(velocity={formulation!r}); drop the argument from Model"
            )
        if not isinstance(bodies, RigidBody):
            raise ValueError(f"Model: bodies must be a RigidBody, got {type(bodies).__name__}")
        nb = bodies.num_bodies
        dtype = bodies.mass.dtype
        self.bodies = bodies
        self.r0 = _per_body(r0, 0.0, "r0", (nb, 3), dtype)
        self.R0 = _per_body(R0, np.eye(3), "R0", (nb, 3, 3), dtype)
        self.v0 = _per_body(v0, 0.0, "v0", (nb, 3), dtype)
        self.omega0 = _per_body(omega0, 0.0, "omega0", (nb, 3), dtype)
        self.gravity = _per_body(gravity, 0.0, "gravity", (3,), dtype)
        self.forces = tuple(forces)
        self.constraints = constraints
        self.ulvc_lengths = _per_body(ulvc_lengths, 1.0, "ulvc_lengths", (nb, 3), dtype)
        if body_names is None:
            body_names = bodies.names if bodies.names is not None else tuple(f"body{i}" for i in range(nb))
        self.body_names = tuple(str(n) for n in body_names)
        if isinstance(fixed_origin, (bool, np.bool_)):
            fixed_origin = (bool(fixed_origin),) * nb
        self.fixed_origin = tuple(bool(f) for f in fixed_origin)
        self.joints = joints
        self._validate(nb)

    def _validate(self, nb: int) -> None:
        if len(self.body_names) != nb:
            raise ValueError(f"Model: {len(self.body_names)} body_names for {nb} bodies")
        if len(set(self.body_names)) != nb:
            raise ValueError(f"Model: body_names must be unique, got {self.body_names}")
        if len(self.fixed_origin) != nb:
            raise ValueError(f"Model: fixed_origin has {len(self.fixed_origin)} entries for {nb} bodies")
        for k, f in enumerate(self.forces):
            if not callable(f):
                raise ValueError(f"Model: force element {f!r} is not callable")
            _check_body_indices(f, f"forces[{k}] ({type(f).__name__})", nb)
        self.check_finite()
        self.check_physical()
        lengths = concrete(self.ulvc_lengths)
        if lengths is not None and not np.all(lengths > 0):
            raise ValueError("Model: ulvc_lengths must be positive")

    def check_finite(self) -> None:
        """Raise ``ValueError`` naming the field and body of a NaN or Inf in the initial state,
        and the path of one among the parameters (masses, inertias, gravity, force elements,
        constraint vectors), however they were set (``eqx.tree_at`` included). Nothing is
        checked where the values are traced."""
        for name in ("r0", "R0", "v0", "omega0"):
            x = concrete(getattr(self, name))
            if x is None:
                continue
            bad = ~np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1)
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise ValueError(f"Model: {name} of body {self.body_names[i]!r} is not finite: {x[i].tolist()}")
        for path, leaf in jax.tree_util.tree_flatten_with_path(self)[0]:
            x = concrete(leaf) if eqx.is_inexact_array(leaf) else None
            if x is not None and not np.all(np.isfinite(x)):
                where = tuple(int(i) for i in np.argwhere(~np.isfinite(x))[0])
                raise ValueError(f"Model: model{jax.tree_util.keystr(path)}{list(where) if where else ''} is not finite ({x[where]})")

    def check_physical(self) -> None:
        """Raise ``ValueError`` naming the first body whose mass or inertia is not physical
        (``difflie.body.check_bodies``; not for bodies made with ``validate=False``) or whose
        ``R0`` is not a rotation matrix, however they were set (``eqx.tree_at`` included).
        Nothing is checked where the values are traced: ``is_physical`` checks them in the
        program."""
        if self.bodies.validate:
            check_bodies(self.bodies.mass, self.bodies.inertia, self.bodies.com, self.body_names)
        R = concrete(self.R0)
        if R is not None:
            err = np.abs(np.swapaxes(R, -1, -2) @ R - np.eye(3)).max(axis=(-1, -2))
            det = np.linalg.det(R)
            for i in np.flatnonzero(~((err < _rotation_tolerance(R.dtype)) & (det > 0)))[:1]:
                raise ValueError(f"Model: R0 of body {self.body_names[i]!r} is not a rotation matrix (|R^T R - I| up to {err[i]:.2e}, "
                                 f"det {det[i]:.6g})")  # fmt: skip

    def is_physical(self) -> Array:
        """Whether every body is physical and every ``R0`` a rotation matrix, as
        ``check_physical`` asks, in ``jnp`` (traced values too); no derivative flows through it."""
        R = jax.lax.stop_gradient(self.R0)
        err = jnp.max(jnp.abs(jnp.swapaxes(R, -1, -2) @ R - jnp.eye(3, dtype=R.dtype)), axis=(-2, -1))
        rotations = (err < _rotation_tolerance(R.dtype)) & (jnp.linalg.det(R) > 0)
        bodies = jnp.all(physical(self.bodies.mass, self.bodies.inertia)) if self.bodies.validate else True
        return bodies & jnp.all(rotations)

    @property
    def num_bodies(self) -> int:
        return self.bodies.num_bodies

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The movable joints of a robot model, in file order (``()`` without ``joints``)."""
        return () if self.joints is None else tuple(self.joints.names)

    @property
    def ball_joint_names(self) -> tuple[str, ...]:
        """The ball joints of a robot model (MJCF), in file order (``()`` without any)."""
        return () if self.joints is None else tuple(self.joints.ball_names)

    def applied_forces(
        self, t, r: Array, R: Array, rdot: Array, omega: Array
    ) -> tuple[Float[Array, "nb 3"], Float[Array, "nb 3"]]:
        """World force at the COM and body-axes torque about the COM, gravity included."""
        f, tau = gravity_forces(self.bodies.mass, self.gravity, r)
        for element in self.forces:  # one element per force type, each stacked
            fe, te = element(t, r, R, rdot, omega)
            f, tau = f + fe, tau + te
        return f, tau

    # -- what the solvers read ------------------------------------------------------------------

    @property
    def pinned(self) -> np.ndarray:
        """Indices of the bodies whose origin is pinned (static)."""
        return np.flatnonzero(np.asarray(self.fixed_origin, dtype=bool))

    @property
    def num_constraints(self) -> int:
        """Rows of ``constraint_residual``: the constraint set's, then 3 per pinned body."""
        own = 0 if self.constraints is None else self.constraints.num_constraints
        return own + 3 * self.pinned.size

    @property
    def constraint_names(self) -> tuple[str, ...]:
        """A name for every row of ``constraint_residual``: the constraint set's, then the
        pinned points' (static)."""
        own = () if self.constraints is None else tuple(self.constraints.names)
        return own + tuple(f"pin of {self.body_names[b]} ({a})" for b in self.pinned for a in "xyz")

    @property
    def row_bodies(self) -> np.ndarray:
        """``(m, 2)`` bodies ``(i, j)`` of each row of ``constraint_residual`` (ground: -1;
        static)."""
        own = [] if self.constraints is None else list(self.constraints.row_bodies)
        rows = own + [(int(i), -1) for i in self.pinned for _ in range(3)]
        return np.asarray(rows, dtype=np.int64).reshape(-1, 2)

    def coupling(self) -> np.ndarray | None:
        """``(e, 2)`` pairs of bodies whose equations depend on each other's state (ground: -1;
        static): the constraint rows' and the force elements' (``AbstractForce.coupling``).
        ``None`` when a force element may couple any bodies."""
        pairs = [self.row_bodies]
        for element in self.forces:
            c = element.coupling()
            if c is None:
                return None
            pairs.append(np.asarray(c, dtype=np.int64).reshape(-1, 2))
        return np.concatenate(pairs)

    def initial_state(self) -> tuple[Array, Array, Array, Array]:
        """``(r0, R0, v0, omega0)``: world COM, body-to-world rotation, world COM velocity and
        body angular velocity, with a pinned body's COM velocity ``R0 (omega0 x com)``."""
        r, R, v, w = self.r0, self.R0, self.v0, self.omega0
        if self.pinned.size:
            spun = mv(R, cross(w, self.bodies.com))
            v = jnp.where(jnp.asarray(self.fixed_origin)[:, None], spun, v)
        return r, R, v, w

    def constraint_residual(self, t, origins: Float[Array, "nb 3"], R: Float[Array, "nb 3 3"]) -> Float[Array, " m"]:
        """``Phi(t, origins, R)``: the constraint set's rows, then ``origin - pivot`` for each
        pinned body (its origin where it starts). ``origins`` are the body-frame origins
        ``r - R com``."""
        rows = [] if self.constraints is None else [self.constraints.residual(t, origins, R)]
        idx = self.pinned
        if idx.size:
            pivots = self.r0[idx] - mv(self.R0[idx], self.bodies.com[idx])
            rows.append((origins[idx] - pivots).reshape(-1))
        return jnp.concatenate(rows) if rows else jnp.zeros((0,), origins.dtype)

    def newton_euler(
        self, t, r, R, v, omega, acceleration: Float[Array, "nb 3"], angular_acceleration: Float[Array, "nb 3"] | None
    ) -> tuple[Float[Array, "nb 3"], Float[Array, "nb 3"]]:
        """The Newton-Euler rows of every body without constraint forces:
        ``m a - f`` (world) and ``J omega_dot + omega x J omega - tau`` (body axes, about the COM),
        with ``(f, tau)`` from ``applied_forces`` at ``(t, r, R, v, omega)``;
        ``angular_acceleration=None`` is zero. The one statement of rigid-body dynamics: implicit
        solvers use the rows as they are; the explicit field (``difflie.eom``) is their
        projection on the origin's twist."""
        f, tau = self.applied_forces(t, r, R, v, omega)
        J = self.bodies.inertia
        ang = cross(omega, mv(J, omega)) - tau
        inertial = [element for element in self.forces if element.accelerated]
        if angular_acceleration is not None:
            ang = ang + mv(J, angular_acceleration)
            for element in inertial:  # rotor inertias: wrenches of the accelerations
                fe, te = element.inertial(t, r, R, v, omega, acceleration, angular_acceleration)
                f, ang = f + fe, ang - te
        elif inertial:
            raise ValueError(
                f"the model's {type(inertial[0]).__name__} (joint rotor inertias, MJCF armature) acts through the "
                "accelerations, which only the implicit solvers (GeneralizedAlpha, BackwardEuler) have as unknowns"
            )
        return self.bodies.mass[:, None] * acceleration - f, ang
