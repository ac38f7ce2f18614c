"""The rotation vector (scaled rotation axis) ``rho = phi n`` as absolute rotation coordinates."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie import ops as _ops
from .chart import AbstractChart


class RotationVector(AbstractChart):
    """``R = exp(hat(rho))`` (Müller, §6.4, absolute coordinates 2).

    ``omega_body = J_r(rho) rho_dot`` (``dexp_{-rho}``), so ``H^-1 = J_r(rho)^-1`` is singular at
    ``|rho| = 2 pi k``: the naive ODE ``rho_dot = H^-1 omega`` breaks there, the LGT does not.
    The LGT composes through quaternions (``bch(rho, x) = qlog(qexp(rho) (x) qexp(x))``) and
    returns the representative ``rho' + 2 pi k n`` nearest the previous ``rho``, so ``rho`` is
    continuous through ``|rho| = pi`` (the principal value, ``|rho| <= pi``, without reference).
    """

    dim: ClassVar[int] = 3

    def to_rotation(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        return _ops.so3_exp_matrix(jnp.asarray(theta))

    def to_quaternion(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 4"]:
        return _ops.qexp(jnp.asarray(theta))

    def from_quaternion(self, quat, reference=None):
        rho = _ops.qlog(jnp.asarray(quat))
        if reference is None:
            return rho
        return _nearest_representative(rho, jnp.asarray(reference))

    def H(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        return _ops.so3_right_jacobian(jnp.asarray(theta))

    def H_inverse(self, theta: Float[Array, "*b 3"]) -> Float[Array, "*b 3 3"]:
        return _ops.so3_right_jacobian_inv(jnp.asarray(theta))


def _nearest_representative(rho: Array, reference: Array) -> Array:
    """``rho + 2 pi k n`` (``n`` the axis of ``rho``) nearest to ``reference``.

    The representatives of one rotation are ``(phi + 2 pi k) n``; the distance to ``reference``
    is smallest for ``k = round((reference.n - phi) / 2 pi)``. At ``rho = 0`` the axis is taken
    from the reference (the representatives are then the spheres ``|rho| = 2 pi k``).
    """
    phi2 = _ops.sqnorm(rho)
    small = phi2 < 1e-24
    phi = jnp.sqrt(jnp.where(small, 1.0, phi2))
    ref2 = _ops.sqnorm(reference)
    ref_norm = jnp.sqrt(jnp.where(ref2 > 0, ref2, 1.0))
    n = jnp.where(small[..., None], reference / ref_norm[..., None], rho / phi[..., None])
    phi = jnp.where(small, 0.0, phi)
    k = jnp.round((jnp.sum(reference * n, axis=-1) - phi) / (2 * jnp.pi))
    return rho + (2 * jnp.pi * k)[..., None] * n
