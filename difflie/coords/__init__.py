"""Absolute rotation coordinates and the local-global transition (LGT) maps of Müller,
"Singularity-free Lie group integration and geometrically consistent evaluation of multibody
system models described in terms of standard absolute coordinates".

Charts: ``RotationMatrix``, ``EulerParameters``, ``EulerAngles`` (twelve
sequences), ``RotationVector``, ``Rodrigues``, ``WienerMilenkovic``. Each maps
coordinates to rotations and back, gives ``H`` (``omega_body = H theta_dot``) and the LGT map
``lgt(q, X)`` for SO(3), SO(3)xR3 (= Sp(1)xR3) and SE(3) with exp or Cayley local coordinates.

Integration of models written in these coordinates: ``AbsoluteModel`` with
``LGTRungeKutta`` (Lie-group Runge-Kutta through the LGT) or ``LGTGeneralizedAlpha``
(Lie-group generalized-alpha through the LGT), both for ``difflie.simulate``, or
``LGTSolver`` around any one-step ``diffrax`` solver (imported on first use).
"""

from .absolute_model import AbsoluteModel as AbsoluteModel
from .chart import AbstractChart as AbstractChart
from .euler_angles import EulerAngles as EulerAngles
from .euler_parameters import EulerParameters as EulerParameters
from .lgt_alpha import LGTAlphaState as LGTAlphaState, LGTGeneralizedAlpha as LGTGeneralizedAlpha
from .lie_rk import LGTRungeKutta as LGTRungeKutta, Tableau as Tableau, integrate as integrate
from .local import LocalCoordinates as LocalCoordinates
from .rodrigues import Rodrigues as Rodrigues
from .rotation_matrix import RotationMatrix as RotationMatrix
from .rotation_vector import RotationVector as RotationVector
from .wiener_milenkovic import WienerMilenkovic as WienerMilenkovic


def __getattr__(name):
    # diffrax is needed only by the wrapper.
    if name == "LGTSolver":
        from .diffrax_lgt import LGTSolver

        return LGTSolver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AbsoluteModel",
    "AbstractChart",
    "EulerAngles",
    "EulerParameters",
    "LGTAlphaState",
    "LGTGeneralizedAlpha",
    "LGTRungeKutta",
    "LGTSolver",
    "LocalCoordinates",
    "Rodrigues",
    "RotationMatrix",
    "RotationVector",
    "Tableau",
    "WienerMilenkovic",
    "integrate",
]
