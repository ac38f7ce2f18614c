"""Time integrators: explicit RKMK methods (this package) and the implicit ones beside them."""

from .base import RESULTS as RESULTS, AbstractSolver as AbstractSolver, BodyState as BodyState, StepStats as StepStats
from .rkmk import (
    AbstractRKMK as AbstractRKMK,
    Bosh3 as Bosh3,
    Dopri5 as Dopri5,
    Euler as Euler,
    Heun as Heun,
    RK67 as RK67,
    RKMK4 as RKMK4,
)
