"""Position-level constraints: basic DP1, DP2, D, CD (and a rank-safe angle driver), joints."""

from .basic import (
    GROUND as GROUND,
    BasicConstraint as BasicConstraint,
    Driver as Driver,
    angle as angle,
    cd as cd,
    d as d,
    dp1 as dp1,
    dp1_swap as dp1_swap,
    dp2 as dp2,
)
from .constraint_set import ConstraintSet as ConstraintSet
from .joints import (
    cylindrical as cylindrical,
    fixed as fixed,
    perpendicular1 as perpendicular1,
    perpendicular2 as perpendicular2,
    perpendicular_pair as perpendicular_pair,
    prismatic as prismatic,
    revolute as revolute,
    revolute_cylindrical as revolute_cylindrical,
    spherical as spherical,
    universal as universal,
)

__all__ = [
    "GROUND",
    "BasicConstraint",
    "ConstraintSet",
    "Driver",
    "angle",
    "cd",
    "cylindrical",
    "d",
    "dp1",
    "dp1_swap",
    "dp2",
    "fixed",
    "perpendicular1",
    "perpendicular2",
    "perpendicular_pair",
    "prismatic",
    "revolute",
    "revolute_cylindrical",
    "spherical",
    "universal",
]
