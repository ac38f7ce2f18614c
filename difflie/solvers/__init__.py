"""Time integrators: explicit RKMK methods and the implicit ones beside them.

Every solver reads a ``difflie.Model`` through the same interface (initial state, Newton-Euler
rows, constraint rows with pinned points) and shares one vocabulary of options:

- ``max_iterations``: Newton iterations per step before ``RESULTS.newton_failed``
  (``BackwardEuler``, ``GeneralizedAlpha``, ``LGTGeneralizedAlpha``, ``DQVI``,
  ``SO3xR3Variational``; also ``difflie.kinematics.assemble``). ``max_steps`` is only ever
  the number of time steps of ``difflie.simulate``.
- ``newton="modified"`` (an iteration matrix kept over iterations, and across steps where the
  solver says so) or ``"full"`` (a fresh one every iteration); ``GeneralizedAlpha``'s default
  ``"auto"`` is full Newton for one body and modified for more.
- ``rtol``, ``atol`` (and ``tol`` for ``BackwardEuler``'s correction norm): ``None`` picks
  defaults for the dtype (float64 or float32).
- ``extrapolation``: degree of the polynomial predictor that starts Newton (0: last values).
- ``rho_inf``: spectral radius at infinity, in ``[0, 1)`` for the index-3 ``GeneralizedAlpha``
  and ``[0, 1]`` for the ODE solver ``LGTGeneralizedAlpha``.
- Coordinates are the solver's choice, each under one name: ``velocity`` for the explicit RKMK
  solvers (``"so3xr3"``, ``"se3"``, ``"ulvc"``: ``difflie.eom``), ``formulation`` for the
  configuration of ``BackwardEuler`` (``"rA"``, ``"rp"``, ``"re"``), and a chart for the LGT
  solvers (``difflie.coords.AbsoluteModel.from_model``).

All Newton iterations (implicit steps, kinematic analysis, assembly) are one loop,
``difflie.numerics.newton.newton_iterate``, with derivatives by the implicit-function theorem.

A solver that cannot take a model raises ``ValueError`` naming why before anything runs.
``equilibrium`` (``statics``) finds a model's static equilibrium on a generalized-alpha step's
unknowns, with the same Newton and linear solves, and ``modes`` the small oscillations about it.
"""

from ..results import RESULTS as RESULTS, BodyState as BodyState
from .base import AbstractSolver as AbstractSolver, StepStats as StepStats
from .rkmk import (
    AbstractRKMK as AbstractRKMK,
    Bosh3 as Bosh3,
    Dopri5 as Dopri5,
    Euler as Euler,
    Heun as Heun,
    RK67 as RK67,
    RKMK4 as RKMK4,
)
