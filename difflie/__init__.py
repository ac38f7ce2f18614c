"""difflie: differentiable Lie-group integrators for rigid and multibody systems, in JAX.

The submodules that pull in optional or heavy dependencies (``plot``: matplotlib, ``identify``:
optax, ``batch``, ``export``) are imported on first attribute access, so ``import difflie as dl``
stays light and ``dl.plot``, ``dl.identify``, ... work without importing them first.
"""

import importlib
import sys


def _interrupted_while_starting(signum, frame):  # noqa: ARG001
    sys.stderr.write("difflie: interrupted\n")
    sys.stderr.flush()
    import os

    os._exit(130)


# ``python -m difflie``: a Ctrl-C while JAX is still being imported ends the command with one
# line and exit status 130, as one during the run does (``difflie.__main__`` takes over from there).
_argv = getattr(sys, "orig_argv", [])
if sys.argv[:1] == ["-m"] and "-m" in _argv and _argv[_argv.index("-m") + 1 :][:1] == ["difflie"]:
    import signal

    signal.signal(signal.SIGINT, _interrupted_while_starting)

from . import (
    constraints as constraints,
    coords as coords,
    diagnostics as diagnostics,
    forces as forces,
    joint_laws as joint_laws,
    kinematics as kinematics,
    lie as lie,
    models as models,
    solvers as solvers,
    xla as xla,
)
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
from .joint_space import joint_coordinates as joint_coordinates, joint_velocities as joint_velocities, link_pose as link_pose
from .joint_space import ball_joint_quaternions as ball_joint_quaternions, ball_joint_velocities as ball_joint_velocities
from .simulate import simulate as simulate
from .solution import SaveAt as SaveAt, SimulationError as SimulationError, Solution as Solution
from .step_size import ConstantStepSize as ConstantStepSize, PIDController as PIDController, ReducingStepSize as ReducingStepSize
from .solvers.backward_euler import BackwardEuler as BackwardEuler
from .results import RESULTS as RESULTS, BodyState as BodyState
from .solvers.generalized_alpha import GeneralizedAlpha as GeneralizedAlpha
from .solvers.statics import Equilibrium as Equilibrium, Modes as Modes, equilibrium as equilibrium, modes as modes
from .solvers.rkmk import RK67 as RK67, RKMK4 as RKMK4, Bosh3 as Bosh3, Dopri5 as Dopri5, Euler as Euler, Heun as Heun
from .solvers.variational import DQVI as DQVI, SO3xR3Variational as SO3xR3Variational

__version__ = "0.1.0"

_LAZY_MODULES = ("batch", "export", "identify", "plot")
_LAZY_NAMES = {"load_solution": "export", "save_solution": "export"}


def __getattr__(name: str):
    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f".{_LAZY_NAMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_MODULES) | set(_LAZY_NAMES))
