"""Lie groups as Equinox pytrees: SO3, UnitQuaternion, SE3, SO3xR3, UnitDualQuaternion.

No physics here, and nothing else of difflie is imported.
"""

from ._base import AbstractLieGroup as AbstractLieGroup
from .ops import cross as cross, hat as hat, vee as vee
from ._pose import AbstractPose as AbstractPose
from .dual_quaternion import UnitDualQuaternion as UnitDualQuaternion
from .quaternion import UnitQuaternion as UnitQuaternion
from .se3 import SE3 as SE3
from .so3 import SO3 as SO3
from .so3xr3 import SO3xR3 as SO3xR3

__all__ = ["AbstractLieGroup", "AbstractPose", "SE3", "SO3", "SO3xR3", "UnitDualQuaternion", "UnitQuaternion", "cross", "hat", "vee"]
