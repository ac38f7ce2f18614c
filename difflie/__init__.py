"""difflie: differentiable Lie-group integrators for rigid and multibody systems, in JAX."""

from . import coords as coords, diagnostics as diagnostics, lie as lie, models as models, solvers as solvers, xla as xla
from .body import RigidBody as RigidBody
from .constraints import ConstraintSet as ConstraintSet
from .io import ModelFileError as ModelFileError, load_model as load_model
from .lie import (
    SE3 as SE3,
    SO3 as SO3,
    SO3xR3 as SO3xR3,
    UnitDualQuaternion as UnitDualQuaternion,
    UnitQuaternion as UnitQuaternion,
)
from .model import Model as Model
from .simulate import (
    ConstantStepSize as ConstantStepSize,
    PIDController as PIDController,
    SaveAt as SaveAt,
    SimulationError as SimulationError,
    Solution as Solution,
    simulate as simulate,
)
from .solvers.backward_euler import BackwardEuler as BackwardEuler
from .results import RESULTS as RESULTS, BodyState as BodyState
from .solvers.generalized_alpha import GeneralizedAlpha as GeneralizedAlpha
from .solvers.rkmk import RK67 as RK67, RKMK4 as RKMK4, Bosh3 as Bosh3, Dopri5 as Dopri5, Euler as Euler, Heun as Heun
from .solvers.variational import DQVI as DQVI, SO3xR3Variational as SO3xR3Variational

__version__ = "0.1.0"
