"""Mechanisms of any size: chains, a tree and a ladder of closed loops, built from rods.

Every body is a rod of length ``length`` and mass ``mass`` along its body x axis, with the body
frame at its centre of mass (square section of side ``width``: ``J = diag(m w^2/6, m (w^2 +
l^2)/12, m (w^2 + l^2)/12)``). All start at rest in the horizontal plane ``z = 0`` and fall
under gravity ``-9.81 e_z``; the joints are index-3 position constraints
(``difflie.constraints``). They test how the implicit solvers scale with the number of
bodies (``benchmarks/scaling.py``).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ..body import RigidBody
from ..constraints import GROUND, ConstraintSet, revolute, spherical
from ..model import Model
from ._checks import check_counts, check_positive


def _rods(poses: list[tuple[np.ndarray, np.ndarray]], mass: float, length: float, width: float, names):
    """``(r0, R0, bodies)`` from ``(COM, direction of the body x axis)`` per rod."""
    nb = len(poses)
    side = mass * (width**2 + length**2) / 12.0
    inertia = np.broadcast_to(np.diag([mass * width**2 / 6.0, side, side]), (nb, 3, 3))
    R0 = np.stack([_frame(d) for _, d in poses])
    r0 = np.stack([c for c, _ in poses])
    bodies = RigidBody(jnp.full(nb, float(mass)), jnp.asarray(inertia), names=tuple(names))
    return r0, R0, bodies


def _frame(x_axis: np.ndarray) -> np.ndarray:
    """A rotation whose first column is ``x_axis`` and whose third is ``e_z`` (horizontal rods)."""
    x = x_axis / np.linalg.norm(x_axis)
    z = np.array([0.0, 0.0, 1.0])
    return np.stack([x, np.cross(z, x), z], axis=1)


def _model(r0, R0, bodies, joints) -> Model:
    cs = ConstraintSet(joints, bodies.num_bodies)
    return Model(bodies, r0=jnp.asarray(r0), R0=jnp.asarray(R0), constraints=cs)


def chain(n: int = 8, joint: str = "spherical", mass: float = 1.0, length: float = 1.0, width: float = 0.05) -> Model:
    """``n`` rods in a row along world x, the first hanging from the ground at the origin, on
    spherical joints or on revolute joints about the world y axis (``joint="revolute"``)."""
    if joint not in ("spherical", "revolute"):
        raise ValueError(f"chain: joint must be 'spherical' or 'revolute', got {joint!r}")
    check_counts("chain", n=n)
    check_positive("chain", length=length, width=width)
    ex = np.array([1.0, 0.0, 0.0])
    poses = [((k + 0.5) * length * ex, ex) for k in range(n)]
    r0, R0, bodies = _rods(poses, mass, length, width, [f"link{k}" for k in range(n)])
    half = np.array([0.5 * length, 0.0, 0.0])
    joints = []
    for k in range(n):
        parent, s_parent = (GROUND, np.zeros(3)) if k == 0 else (k - 1, half)
        if joint == "spherical":
            joints += spherical(parent, s_parent, k, -half, name=f"joint{k}")
        else:
            axis = np.array([0.0, 1.0, 0.0])  # world y = body y of every horizontal rod along x
            joints += revolute(parent, s_parent, axis, k, -half, axis, name=f"joint{k}")
    return _model(r0, R0, bodies, joints)


def spider(n: int = 9, arms: int = 4, mass: float = 1.0, length: float = 1.0, width: float = 0.05) -> Model:
    """A tree: a hub rod (body 0) on a spherical joint to the ground at its centre's end, and
    ``arms`` chains of rods on spherical joints from the hub's far end, spread horizontally;
    the ``n - 1`` arm rods are shared out as evenly as possible."""
    check_counts("spider", n=n, arms=arms)
    check_positive("spider", length=length, width=width)
    ex = np.array([1.0, 0.0, 0.0])
    hub_end = length * ex
    poses, joints = [(0.5 * length * ex, ex)], spherical(GROUND, np.zeros(3), 0, -0.5 * length * ex, name="hub")
    counts = [len(part) for part in np.array_split(np.arange(n - 1), arms)]
    half = np.array([0.5 * length, 0.0, 0.0])
    for a, count in enumerate(counts):
        angle = np.pi * (a + 0.5) / arms - np.pi / 2  # arms fan out ahead of the hub
        d = np.array([np.cos(angle), np.sin(angle), 0.0])
        for k in range(count):
            body = len(poses)
            poses.append((hub_end + (k + 0.5) * length * d, d))
            parent, s_parent = (0, half) if k == 0 else (body - 1, half)
            joints += spherical(parent, s_parent, body, -half, name=f"arm{a}_joint{k}")
    r0, R0, bodies = _rods(poses, mass, length, width, ["hub"] + [f"rod{k}" for k in range(1, n)])
    return _model(r0, R0, bodies, joints)


def ladder(loops: int = 3, mass: float = 1.0, length: float = 1.0, width: float = 0.05) -> Model:
    """Closed loops in a row: two rails of ``loops`` rods along world x (at ``y = 0`` and ``y =
    length``), each rail hanging from the ground at ``x = 0``, and a rung along y joining the
    rails' ends at each ``x = (k + 1) length``; all joints spherical. Every loop (two rail rods,
    a rung and the previous rung or the ground) is a spatial four-bar; ``3 loops`` bodies."""
    check_counts("ladder", loops=loops)
    check_positive("ladder", length=length, width=width)
    ex, ey = np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    half_x = np.array([0.5 * length, 0.0, 0.0])
    poses, names, joints = [], [], []
    for k in range(loops):
        left, right, rung = 3 * k, 3 * k + 1, 3 * k + 2
        poses += [((k + 0.5) * length * ex, ex), ((k + 0.5) * length * ex + length * ey, ex),
                  ((k + 1) * length * ex + 0.5 * length * ey, ey)]  # fmt: skip
        names += [f"left{k}", f"right{k}", f"rung{k}"]
        if k == 0:
            joints += spherical(GROUND, np.zeros(3), left, -half_x, name="left_ground")
            joints += spherical(GROUND, length * ey, right, -half_x, name="right_ground")
        else:
            joints += spherical(left - 3, half_x, left, -half_x, name=f"left{k}")
            joints += spherical(right - 3, half_x, right, -half_x, name=f"right{k}")
        joints += spherical(left, half_x, rung, -half_x, name=f"rung{k}_left")
        joints += spherical(right, half_x, rung, half_x, name=f"rung{k}_right")
    r0, R0, bodies = _rods(poses, mass, length, width, names)
    return _model(r0, R0, bodies, joints)
