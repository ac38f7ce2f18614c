"""The Wiener-Milenkovic (conformal rotation) vector ``p = 4 tan(phi/4) n``."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie import ops as _ops
from .chart import AbstractChart


class WienerMilenkovic(AbstractChart):
    """Conformal rotation vector (second-order Cayley; mentioned in Müller, §6.4).

    With ``s = |p|^2 / 16`` the quaternion is ``((1 - s)/(1 + s), p / (2 (1 + s)))``; back,
    ``p = 4 e / (1 + e0)`` for ``Q = (e0, e)``. It covers rotations below ``2 pi`` (singular at
    ``|p| -> inf``). ``Q`` and ``-Q`` give the two representatives ``4 e/(1 + e0)`` and
    ``-4 e/(1 - e0)``; the LGT keeps the one nearest the previous ``p`` while its angle stays below
    ``3 pi/2`` (so ``p`` is continuous and bounded by ``4 tan(3 pi/8)``; it jumps to the other
    representative beyond). ``H`` comes from
    autodiff of the rotation, ``H^-1`` by inversion.
    """

    dim: ClassVar[int] = 3

    def to_quaternion(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 4"]:
        p = jnp.asarray(theta)
        s = _ops.sqnorm(p)[..., None] / 16.0
        return jnp.concatenate([(1.0 - s) / (1.0 + s), p / (2.0 * (1.0 + s))], axis=-1)

    def to_rotation(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        return _ops.quat_to_matrix(self.to_quaternion(theta))

    def from_quaternion(self, quat, reference=None):
        quat = jnp.asarray(quat)
        e0, e = quat[..., :1], quat[..., 1:]
        # A representative is admissible while its angle stays within 3 pi / 2 (|p| <= 4 tan(3 pi/8)):
        # that keeps the denominators away from zero and gives the branch choice a hysteresis.
        ok_plus, ok_minus = e0 >= -_COS_3PI_4, e0 <= _COS_3PI_4
        plus = 4.0 * e / jnp.where(ok_plus, 1.0 + e0, 1.0)
        minus = -4.0 * e / jnp.where(ok_minus, 1.0 - e0, 1.0)
        if reference is None:
            return jnp.where(e0 >= 0, plus, minus)
        reference = jnp.asarray(reference)
        d_plus = jnp.where(ok_plus, _ops.sqnorm(plus - reference)[..., None], jnp.inf)
        d_minus = jnp.where(ok_minus, _ops.sqnorm(minus - reference)[..., None], jnp.inf)
        return jnp.where(d_plus <= d_minus, plus, minus)


_COS_3PI_4 = 0.5**0.5  # -cos(3 pi / 4)
