"""Joints assembled from the basic constraints (Kissel, Taves & Negrut, Table 1, corrected).

Every function returns a list of ``BasicConstraint`` rows;
pass the concatenated lists to ``ConstraintSet``. Points ``s_*`` and
vectors are in body axes; body ``-1`` (``GROUND``) is the fixed world frame.

    spherical        3 CD        the points P_i and Q_j coincide
    perpendicular1   2 DP1       c_j is perpendicular to a_i and b_i
    perpendicular2   2 DP2       P_iQ_j is perpendicular to a_i and b_i
    revolute         SJ + perp1  (5 rows) common point, common axis
    universal        SJ + DP1    (4 rows) cross arms a_i, a_j stay perpendicular
    cylindrical      perp1 + perp2 (4 rows)
    prismatic        cylindrical + DP1 (5 rows) no relative spin either
    fixed            SJ + 3 DP1  (6 rows) constant relative rotation
    revolute_cylindrical  perp2 + DP1 + D (4 rows) the slider-crank composite joint C
"""

from __future__ import annotations

import re

import jax.numpy as jnp
from jaxtyping import Array

from .basic import BasicConstraint, cd, d, dp1, dp2

_E = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


def perpendicular_pair(axis) -> tuple[Array, Array]:
    """Two unit vectors completing ``axis / |axis|`` to a right-handed orthonormal frame."""
    u = jnp.asarray(axis, dtype=jnp.result_type(float, jnp.asarray(axis)))
    u = u / jnp.linalg.norm(u)
    k = jnp.argmin(jnp.abs(u))
    e = jnp.zeros(3, u.dtype).at[k].set(1.0)
    a = jnp.cross(u, e)
    a = a / jnp.linalg.norm(a)
    return a, jnp.cross(u, a)


def _name(name: str, part: str) -> str:
    return f"{name}_{part}" if name else ""


_PART = re.compile(r"_(CD|DP1|DP2|D)(_\w+)?$")


def joint_name(row: str) -> str:
    """The joint a constraint row belongs to: the row's name without the ``_KIND[_part]`` the
    joint functions append (``"hinge_CD_x"`` -> ``"hinge"``); other rows keep their name."""
    return _PART.sub("", row)


def spherical(body_i: int, s_i, body_j: int, s_j, name: str = "") -> list[BasicConstraint]:
    """Point ``s_i`` of body i coincides with point ``s_j`` of body j (3 CD rows)."""
    return [cd(_E[k], body_i, s_i, body_j, s_j, name=_name(name, f"CD_{'xyz'[k]}")) for k in range(3)]


def perpendicular1(body_i: int, a_i, b_i, body_j: int, c_j, name: str = "") -> list[BasicConstraint]:
    """``c_j`` perpendicular to the plane of ``a_i`` and ``b_i`` (2 DP1 rows)."""
    return [
        dp1(body_i, a_i, body_j, c_j, name=_name(name, "DP1_a")),
        dp1(body_i, b_i, body_j, c_j, name=_name(name, "DP1_b")),
    ]


def perpendicular2(body_i: int, a_i, b_i, s_i, body_j: int, s_j, name: str = "") -> list[BasicConstraint]:
    """``P_i Q_j`` perpendicular to the plane of ``a_i`` and ``b_i`` (2 DP2 rows)."""
    return [
        dp2(body_i, a_i, s_i, body_j, s_j, name=_name(name, "DP2_a")),
        dp2(body_i, b_i, s_i, body_j, s_j, name=_name(name, "DP2_b")),
    ]


def revolute(body_i: int, s_i, axis_i, body_j: int, s_j, axis_j, name: str = "") -> list[BasicConstraint]:
    """Common point and common axis: rotation about ``axis_i`` (body i) = ``axis_j`` (body j)."""
    a, b = perpendicular_pair(axis_i)
    return spherical(body_i, s_i, body_j, s_j, name) + perpendicular1(body_i, a, b, body_j, axis_j, name)


def universal(body_i: int, s_i, a_i, body_j: int, s_j, a_j, name: str = "") -> list[BasicConstraint]:
    """Common point; the cross arms ``a_i`` and ``a_j`` stay perpendicular."""
    return spherical(body_i, s_i, body_j, s_j, name) + [dp1(body_i, a_i, body_j, a_j, name=_name(name, "DP1"))]


def cylindrical(body_i: int, s_i, axis_i, body_j: int, s_j, axis_j, name: str = "") -> list[BasicConstraint]:
    """Body j slides along and turns about the line through ``s_i`` along ``axis_i``."""
    a, b = perpendicular_pair(axis_i)
    return perpendicular1(body_i, a, b, body_j, axis_j, name) + perpendicular2(body_i, a, b, s_i, body_j, s_j, name)


def prismatic(
    body_i: int, s_i, axis_i, body_j: int, s_j, axis_j, ref_i, ref_j, name: str = ""
) -> list[BasicConstraint]:
    """Translation along ``axis_i`` only: cylindrical + ``ref_i`` perpendicular to ``ref_j``.

    ``ref_i`` (body i) and ``ref_j`` (body j) are perpendicular to the axis and to each other in
    the assembled configuration; keeping them perpendicular removes the relative spin.
    """
    return cylindrical(body_i, s_i, axis_i, body_j, s_j, axis_j, name) + [
        dp1(body_i, ref_i, body_j, ref_j, name=_name(name, "DP1_spin"))
    ]


def fixed(body_i: int, s_i, body_j: int, s_j, relative_rotation=None, name: str = "") -> list[BasicConstraint]:
    """Weld: common point and ``A_i^T A_j = C`` (default ``C = I``).

    With ``v_k = C^T e_k`` on body j, ``A_j v_k = A_i e_k``, so ``e_x . v_y``, ``e_y . v_z`` and
    ``e_z . v_x`` vanish: three DP1 rows that fix the three relative rotation angles.
    """
    C = jnp.eye(3) if relative_rotation is None else jnp.asarray(relative_rotation)
    v = C.T
    rows = [
        dp1(body_i, _E[0], body_j, v[:, 1], name=_name(name, "DP1_xy")),
        dp1(body_i, _E[1], body_j, v[:, 2], name=_name(name, "DP1_yz")),
        dp1(body_i, _E[2], body_j, v[:, 0], name=_name(name, "DP1_zx")),
    ]
    return spherical(body_i, s_i, body_j, s_j, name) + rows


def revolute_cylindrical(
    body_i: int, s_i, a_i, b_i, body_j: int, s_j, c_j, s2_j, distance, name: str = ""
) -> list[BasicConstraint]:
    """The composite joint C of the slider crank (Kissel, Taves & Negrut, Fig. 1).

    ``Q_j`` (point ``s_j``) lies on the line of body i through ``P_i`` normal to ``a_i``, ``b_i``
    (perpendicular-2); ``a_i`` stays perpendicular to ``c_j`` (DP1); and the point ``s2_j`` keeps
    the distance ``distance`` from ``P_i`` (D with ``f = distance^2``).
    """
    return (
        [dp1(body_i, a_i, body_j, c_j, name=_name(name, "DP1"))]
        + perpendicular2(body_i, a_i, b_i, s_i, body_j, s_j, name)
        + [d(body_i, s_i, body_j, s2_j, jnp.asarray(distance) ** 2, name=_name(name, "D"))]
    )
