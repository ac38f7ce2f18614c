"""Built-in single rigid-body models: heavy top, torque-free body, rotor on flexible supports.

Every physical parameter is a keyword argument that may be a traced array, so
``jax.grad``/``jax.vmap`` over parameters work through ``difflie.simulate``.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import ArrayLike

from ..body import RigidBody
from ..forces import CartesianSpringDamper, Wrench
from ..model import Model
from ._checks import check_finite, check_positive, check_shapes


def _arr(x, dtype=None):
    return jnp.asarray(x, dtype=dtype)


def heavy_top(
    *,
    mass: ArrayLike = 15.0,
    inertia: ArrayLike = ((0.234375, 0.0, 0.0), (0.0, 0.46875, 0.0), (0.0, 0.0, 0.234375)),
    com: ArrayLike = (0.0, 1.0, 0.0),
    omega0: ArrayLike = (0.0, 150.0, -4.61538),
    R0: ArrayLike | None = None,
    gravity: ArrayLike = (0.0, 0.0, -9.81),
) -> Model:
    """Heavy top turning about a fixed point at the world origin (Holzinger, Arnold & Gerstmayr 2024, §4.1).

    The body frame sits at the fixed point (``fixed_origin=True``); ``inertia`` is about the
    COM, which is ``com`` away from the fixed point in body axes; ``omega0`` is the body
    angular velocity. Defaults: Brus, Cardona and Arnold (2012) / Exudyn's heavy top,
    ``m = 15``, ``J = diag(0.234375, 0.46875, 0.234375)``, ``X = (0, 1, 0)``, ``R0 = I``.
    Shapes: ``mass`` a scalar, ``inertia`` and ``R0`` (3, 3), ``com``, ``omega0`` and ``gravity``
    (3,) (under ``jax.vmap`` these are the shapes of one element).
    """
    check_shapes("heavy_top", mass=(mass, ()), inertia=(inertia, (3, 3)), com=(com, (3,)), omega0=(omega0, (3,)),
                 R0=(R0, (3, 3)), gravity=(gravity, (3,)))  # fmt: skip
    mass = _arr(mass)
    dtype = jnp.result_type(mass, _arr(inertia), float)
    R0 = jnp.eye(3, dtype=dtype) if R0 is None else _arr(R0, dtype)
    com = _arr(com, dtype)
    omega0 = _arr(omega0, dtype)
    check_finite("heavy_top", omega0=omega0)  # before v0 = R0 (omega0 x com) turns it into NaN
    body = RigidBody(mass.astype(dtype), _arr(inertia, dtype), com, names=("top",))
    return Model(
        body,
        r0=(R0 @ com)[None],
        R0=R0[None],
        omega0=omega0[None],
        v0=(R0 @ jnp.cross(omega0, com))[None],
        gravity=_arr(gravity, dtype),
        fixed_origin=True,
    )


def torque_free(
    *,
    mass: ArrayLike = 1.0,
    inertia: ArrayLike = ((5.2988, 0.0, 0.0), (0.0, 1.1775, 0.0), (0.0, 0.0, 4.3568)),
    omega0: ArrayLike = (0.01, 0.0, 100.0),
    v0: ArrayLike = (0.0, 0.0, 0.0),
    r0: ArrayLike = (0.0, 0.0, 0.0),
    R0: ArrayLike | None = None,
    ulvc_lengths: ArrayLike = 1.0,
) -> Model:
    """Free asymmetric body without forces: the intermediate-axis flip of Holzinger,
    Gerstmayr & Schöberl, §6.

    ``J = diag(5.2988, 1.1775, 4.3568)`` (axis 3 is the intermediate one), ``m = 1``,
    ``Omega0 = (0.01, 0, 100)``, no gravity. The flip period is ``2 K(k) / omega_tau``
    (about 0.2993 s, Jacobi elliptic functions). Shapes: ``mass`` a scalar, ``inertia`` and
    ``R0`` (3, 3), ``omega0``, ``v0`` and ``r0`` (3,).
    """
    check_shapes("torque_free", mass=(mass, ()), inertia=(inertia, (3, 3)), omega0=(omega0, (3,)), v0=(v0, (3,)),
                 r0=(r0, (3,)), R0=(R0, (3, 3)))  # fmt: skip
    mass = _arr(mass)
    dtype = jnp.result_type(mass, _arr(inertia), float)
    body = RigidBody(mass.astype(dtype), _arr(inertia, dtype), names=("box",))
    return Model(
        body,
        r0=_arr(r0, dtype)[None],
        R0=None if R0 is None else _arr(R0, dtype)[None],
        v0=_arr(v0, dtype)[None],
        omega0=_arr(omega0, dtype)[None],
        gravity=jnp.zeros(3, dtype),
        ulvc_lengths=ulvc_lengths,
    )


def rotor(
    *,
    mass: ArrayLike = 30.0,
    length: ArrayLike = 0.5,
    radius: ArrayLike = 0.05,
    left_offset: ArrayLike = 0.2,
    stiffness: ArrayLike = 1.0e6,
    damping: ArrayLike = 100.0,
    spin: ArrayLike = 300.0,
    gravity: ArrayLike = 9.81,
    torque_in_body_frame: bool = True,
) -> Model:
    """High-speed rotor on two flexible bearings (Holzinger, Arnold & Gerstmayr 2024, §4.2).

    Chosen values (ours: the contents of the paper's Table 6 were not available to us): a solid
    cylinder of ``mass`` 30 kg, ``length`` L = 0.5 m and ``radius`` 0.05 m along body x, so
    ``J = diag(m r^2 / 2, m (3 r^2 + L^2) / 12, same)``; body frame at the COM. Bearings at
    the body points ``p1 = (-L_L, 0, 0)`` (``left_offset`` L_L = 0.2 m) and
    ``p2 = (+L_L, 0, 0)`` (symmetric supports); each ties its point to the
    world point where it starts with springs ``stiffness`` 1e6 N/m and dampers ``damping``
    100 N s/m along the three world axes. Initial spin ``spin`` 300 rad/s about body x, the
    COM at rest at the origin. The load is the paper's eq. (44), ``t = (0, 0, (L/2 - L_L) m g)``,
    a torque about body z (``torque_in_body_frame=False`` applies it about world z);
    no gravity force. The monitored point of the paper is ``p1``.
    """
    check_positive("rotor", length=length, radius=radius)
    mass = _arr(mass)
    dtype = jnp.result_type(mass, _arr(length), float)
    m, L, r, LL = mass.astype(dtype), _arr(length, dtype), _arr(radius, dtype), _arr(left_offset, dtype)
    Jx = m * r**2 / 2
    Jt = m * (3 * r**2 + L**2) / 12
    body = RigidBody(m, jnp.diag(jnp.stack([Jx, Jt, Jt])), names=("rotor",))
    zero = jnp.zeros((), dtype)
    p1 = jnp.stack([-LL, zero, zero])
    p2 = jnp.stack([LL, zero, zero])
    points = jnp.stack([p1, p2])
    bearings = CartesianSpringDamper((0, 0), points, points, stiffness, damping)
    torque = jnp.stack([zero, zero, (L / 2 - LL) * m * _arr(gravity, dtype)])
    load = Wrench(jnp.zeros((1, 3), dtype), torque[None], torque_in_body_frame=torque_in_body_frame)
    return Model(
        body,
        omega0=jnp.stack([_arr(spin, dtype), zero, zero])[None],
        gravity=jnp.zeros(3, dtype),
        forces=(bearings, load),
    )
