"""difflie: differentiable Lie-group integrators for rigid and multibody systems, in JAX."""

from . import lie as lie
from .lie import SE3 as SE3, SO3 as SO3, SO3xR3 as SO3xR3, UnitDualQuaternion as UnitDualQuaternion, UnitQuaternion as UnitQuaternion

__version__ = "0.1.0"
