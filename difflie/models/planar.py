"""The four mechanisms of Kissel, Taves & Negrut: single and double pendulum, four link, slider
crank.

Geometry, initial states and constraints follow the model files of the rA/rp/re paper's public
codes (the C2 ``*.json`` files); masses, inertias and drivers follow the scripts of those codes
and the paper's §4.2. Every body frame sits at the centre of mass. Physical parameters are
keyword arguments that may be traced (``jax.grad`` / ``jax.vmap`` over them work).

The four-link and slider-crank drivers are written as rank-safe angle rows
(``difflie.constraints.angle``): the DP1 drivers ``cos(theta(t))`` of the paper's public codes
(C1/C2) lose rank at ``theta = 0, pi`` and the codes swap in an "alternate" DP1 there; the angle row ``(a.c) cos
theta - (a.b) sin theta`` combines the primary DP1 (``a.b = cos theta``) and the alternate one
(``a.c = sin theta``) and never does. ``driver="dp1"`` gives the plain DP1 driver, ``driver="swap"`` the codes' switch.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ..body import RigidBody
from ..constraints import GROUND, ConstraintSet, Driver, angle, d, dp1, dp1_swap, dp2, spherical
from ..model import Model

G = GROUND
_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
_GRAVITY = (0.0, 0.0, -9.81)


def _rod_inertia(mass, length, width):
    """Square-section slender rod along body x: ``diag(m w^2/6, m(w^2 + l^2)/12, same)``."""
    side = mass * (width**2 + length**2) / 12.0
    return jnp.stack([mass * width**2 / 6.0, side, side])


def _bodies(mass, inertia, names, check: bool = True) -> RigidBody:
    """Stacked bodies; ``check=False`` admits the public codes' non-physical four-link inertias."""
    mass = jnp.stack([jnp.asarray(m, float) for m in mass])
    inertia = jnp.stack([jnp.asarray(j) if np.ndim(j) == 2 else jnp.diag(jnp.asarray(j)) for j in inertia])
    inertia = inertia.astype(mass.dtype)
    return RigidBody(mass, inertia, names=names, validate=check)


def nearest_rotation(R) -> np.ndarray:
    """Closest rotation matrices (SVD) to the 9-digit matrices printed in the model files."""
    U, _, Vt = np.linalg.svd(np.asarray(R, float))
    return U @ Vt


def _rev_ground(body, point):
    """The revolute to ground written as in the paper's model files: DP1 x, y perp x_G; CD x, y, z."""
    return [dp1(body, _X, G, _X), dp1(body, _Y, G, _X)] + spherical(body, point, G, (0.0, 0.0, 0.0))


def _pendulum_driver(t, params):
    amplitude, frequency = params
    return jnp.cos(jnp.pi / 2 + amplitude * jnp.cos(frequency * t))


def single_pendulum(
    length=4.0,
    width=0.05,
    density=7800.0,
    amplitude=math.pi / 4,
    frequency=2.0,
    gravity=_GRAVITY,
) -> Model:
    """Driven rod on a revolute joint about global x (Kissel, Taves & Negrut, single pendulum).

    The angle between body y and global -z is ``pi/2 + amplitude cos(frequency t)``, i.e. the
    rod makes ``phi(t) = amplitude cos(frequency t)`` with the downward vertical; COM at
    ``(0, L sin phi, -L cos phi)`` with ``L = length / 2``. Zero degrees of freedom.
    """
    length, width, density = (jnp.asarray(v, float) for v in (length, width, density))
    mass = density * length * width**2
    half = length / 2
    phi0 = jnp.asarray(amplitude, float)
    s, c = jnp.sin(phi0), jnp.cos(phi0)
    zero, one = jnp.zeros_like(s), jnp.ones_like(s)
    R0 = jnp.stack([jnp.stack([zero, zero, one]), jnp.stack([s, c, zero]), jnp.stack([-c, s, zero])])
    r0 = jnp.stack([zero, half * s, -half * c])
    driver = Driver(_pendulum_driver, (jnp.asarray(amplitude, float), jnp.asarray(frequency, float)))
    rows = _rev_ground(0, jnp.stack([-half, 0.0 * half, 0.0 * half])) + [dp1(0, _Y, G, (0.0, 0.0, -1.0), f=driver, name="driver")]
    bodies = _bodies([mass], [_rod_inertia(mass, length, width)], ("pendulum",))
    return Model(bodies, r0=r0[None], R0=R0[None], gravity=gravity, constraints=ConstraintSet(rows, 1), body_names=("pendulum",))


def double_pendulum(length1=4.0, length2=2.0, width=0.05, density=7800.0, gravity=_GRAVITY) -> Model:
    """Two rods on revolute joints about global x, free (2 DOF), released from rest.

    Rod 1 starts horizontal along +y, rod 2 hangs from its tip along -z (Kissel, Taves & Negrut, Fig. 3).
    """
    l1, l2, width, density = (jnp.asarray(v, float) for v in (length1, length2, width, density))
    m1, m2 = density * l1 * width**2, density * l2 * width**2
    R1 = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    R2 = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
    zero = 0.0 * l1
    r0 = jnp.stack([jnp.stack([zero, l1 / 2, zero]), jnp.stack([zero, l1, -l2 / 2])])
    rows = (
        _rev_ground(0, jnp.stack([-l1 / 2, zero, zero]))
        + [dp1(1, _X, G, _X), dp1(1, _Y, G, _X)]
        + spherical(0, jnp.stack([l1 / 2, zero, zero]), 1, jnp.stack([-l2 / 2, zero, zero]))
    )
    bodies = _bodies([m1, m2], [_rod_inertia(m1, l1, width), _rod_inertia(m2, l2, width)], ("rod1", "rod2"))
    return Model(
        bodies,
        r0=r0,
        R0=jnp.asarray(np.stack([R1, R2])),
        gravity=gravity,
        constraints=ConstraintSet(rows, 2),
        body_names=("rod1", "rod2"),
    )


def _angle_theta(t, params):
    rate, phase = params
    return rate * t + phase


def four_link(
    masses=(2.0, 1.0, 1.0),
    inertias=((4.0, 2.0, 0.0), (12.4, 0.01, 0.0), (4.54, 0.01, 0.0)),
    rate=math.pi,
    gravity=_GRAVITY,
    driver: str = "angle",
) -> Model:
    """Haug's spatial four link (Kissel, Taves & Negrut; the "rotated" file ``four_link.json``).

    Rotor (revolute to ground at the origin, axis global x) driven at ``rate`` rad/s; coupler
    joined to the rotor by a universal joint and to the rocker by a spherical joint; rocker on a
    revolute to ground about global y at (-4, -8.5, 0). The inertias are those of the paper's
    public codes (singular, and violating the triangle inequality; they only affect the
    multipliers of this zero-DOF model). The initial pose is the file's, which violates the constraints by 8.7e-3: solvers
    and ``difflie.kinematics.kinematics`` assemble it at ``t0``. The rotor's initial
    angular velocity is the driven one, ``(0, 0, rate)``.
    """
    R = [
        [[0, 0, 1], [0, 1, 0], [-1, 0, 0]],
        [
            [0.750157212, 0.614025856, 0.24543106],
            [-0.661259471, 0.696721311, 0.278056337],
            [-0.000263269879, -0.37087958, 0.928680929],
        ],
        [[0, 0.474123134, 0.880458547], [-1, 0, 0], [0, -0.880458546, 0.474123135]],
    ]
    r0 = [[0.0, 0.0, 0.0], [-3.74555772, -4.25, 4.26236544], [-5.74555772, -8.5, 3.26236544]]
    v0 = [[0.0, 0.0, 0.0], [-5.26684752, -3.14159265, -2.81807373], [-5.26684752, 0.0, -2.81807373]]
    rate = jnp.asarray(rate, float)
    omega0 = jnp.stack([jnp.stack([0.0 * rate, 0.0 * rate, rate]), jnp.asarray([0.49773763, 1.9303387, -0.98813601]), jnp.asarray([1.61443, 0.0, 0.0])])
    rotor_a = (-1.0, 0.0, 0.0)
    if driver == "angle":
        drive = angle(0, rotor_a, G, _Y, _Z, Driver(_angle_theta, (rate, jnp.asarray(math.pi / 2))), name="driver")
    elif driver == "swap":
        drive = dp1_swap(0, rotor_a, G, _Y, _Z, Driver(_angle_theta, (rate, jnp.asarray(math.pi / 2))), name="driver")
    elif driver == "dp1":
        drive = dp1(0, rotor_a, G, _Y, f=Driver(lambda t, w: jnp.cos(w * t + jnp.pi / 2), rate), name="driver")
    else:
        raise ValueError(f"four_link: driver must be 'angle', 'swap' or 'dp1', got {driver!r}")
    rows = (
        _rev_ground(0, (0.0, 0.0, 0.0))
        + [dp1(2, _Z, G, _Y), dp1(2, _Y, G, _Y)]
        + spherical(2, (0.0, 3.7, 0.0), G, (-4.0, -8.5, 0.0))
        + spherical(2, (0.0, -3.7, 0.0), 1, (0.0, -6.1, 0.0))
        + spherical(0, (-2.0, 0.0, 0.0), 1, (0.0, 6.1, 0.0))
        + [dp1(0, (0.0, -0.662, 0.75), 1, _Z), drive]
    )
    names = ("rotor", "coupler", "rocker")
    bodies = _bodies(masses, inertias, names, check=False)
    return Model(
        bodies, r0=r0, R0=nearest_rotation(R), v0=v0, omega0=omega0, gravity=gravity,
        constraints=ConstraintSet(rows, 3), body_names=names,
    )


def slider_crank(
    masses=(0.12, 0.5, 2.0),
    inertias=((1e-4, 1e-5, 1e-4), (4e-3, 4e-4, 4e-3), (1e-4, 1e-4, 1e-4)),
    rate=2 * math.pi,
    gravity=_GRAVITY,
    driver: str = "angle",
) -> Model:
    """Haug's spatial slider crank (Kissel, Taves & Negrut, Fig. 1; the file ``slider_crank.json``).

    Crank (revolute A to ground at (0, 0.1, 0.12), axis global x) driven at ``rate`` rad/s about
    its -x axis; rod joined to the crank by a spherical joint B and to the slider by the
    composite joint C (DP1 + 2 DP2 + D); slider on a translational joint D along global x.
    """
    # Assembled pose and velocities, derived in closed form from the joint geometry (the
    # file's 9-digit values violate the constraints by 8e-7). Crank (radius 0.08) at angle 0:
    # B = (0, 0.1, 0.2); rod (length 0.3) from B to C = (0.2, 0, 0) on the slider line, COM at
    # the midpoint; rod x = (C - B)/0.3 = (2, -1, -2)/3, rod y = (0, 2, -1)/sqrt5 (normal to
    # global x, joint C), z = x cross y = (5, 2, 4)/(3 sqrt5). Velocities at crank rate w about
    # -x: v_B = (0, 0.08 w, 0), v_C = (-0.04 w, 0, 0) (|C - B| fixed), rod world angular velocity
    # w (-0.32, 0.16, -0.08) (from v_C - v_B = omega x (C - B) and rod y staying normal to x).
    s5 = math.sqrt(5.0)
    rod = [[2 / 3, 0.0, 5 / (3 * s5)], [-1 / 3, 2 / s5, 2 / (3 * s5)], [-2 / 3, -1 / s5, 4 / (3 * s5)]]
    R = np.asarray([[[1, 0, 0], [0, 0, -1], [0, 1, 0]], rod, [[0, 0, 1], [0, 1, 0], [-1, 0, 0]]], float)
    r0 = [[0.0, 0.1, 0.12], [0.1, 0.05, 0.1], [0.2, 0.0, 0.0]]
    rate = jnp.asarray(rate, float)
    v0 = rate * jnp.asarray([[0.0, 0.0, 0.0], [-0.02, 0.04, 0.0], [-0.04, 0.0, 0.0]])
    rod_omega = jnp.asarray([-0.64 / 3, 0.4 / s5, -1.6 / (3 * s5)])  # R_rod^T (-0.32, 0.16, -0.08)
    omega0 = rate * jnp.stack([jnp.asarray([-1.0, 0.0, 0.0]), rod_omega, jnp.zeros(3)])
    if driver == "angle":
        drive = angle(0, _Y, G, _Y, _Z, Driver(_angle_theta, (-rate, jnp.asarray(math.pi / 2))), name="driver")
    elif driver == "swap":
        drive = dp1_swap(0, _Y, G, _Y, _Z, Driver(_angle_theta, (-rate, jnp.asarray(math.pi / 2))), name="driver")
    elif driver == "dp1":
        drive = dp1(G, _Y, 0, _Y, f=Driver(lambda t, w: jnp.cos(-w * t + jnp.pi / 2), rate), name="driver")
    else:
        raise ValueError(f"slider_crank: driver must be 'angle', 'swap' or 'dp1', got {driver!r}")
    origin = (0.0, 0.0, 0.0)
    rows = (
        spherical(G, (0.0, 0.1, 0.12), 0, origin)
        + [dp1(G, _Y, 0, _X), dp1(G, _Z, 0, _X)]
        + spherical(1, (-0.15, 0.0, 0.0), 0, (0.0, 0.08, 0.0))
        + [dp1(1, _Y, 2, _Z), dp2(1, _Y, (0.15, 0.0, 0.0), 2, origin), dp2(1, _Z, (0.15, 0.0, 0.0), 2, origin)]
        + [dp1(2, (-1.0, 0.0, 0.0), G, _X), dp1(2, _Y, G, _X)]
        + [dp2(2, (-1.0, 0.0, 0.0), origin, G, (0.2, 0.0, 0.0)), dp2(2, _Y, origin, G, (0.2, 0.0, 0.0))]
        + [dp1(2, (-1.0, 0.0, 0.0), G, _Y), d(1, (0.15, 0.0, 0.0), 2, _Z, 1.0), drive]
    )
    names = ("crank", "rod", "slider")
    bodies = _bodies(masses, inertias, names)
    return Model(
        bodies, r0=r0, R0=R, v0=v0, omega0=omega0, gravity=gravity,
        constraints=ConstraintSet(rows, 3), body_names=names,
    )


__all__ = ["double_pendulum", "four_link", "single_pendulum", "slider_crank"]
