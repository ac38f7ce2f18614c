"""The rotation matrix itself (nine numbers, row-major) as absolute rotation coordinates."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie import ops as _ops
from .chart import AbstractChart


class RotationMatrix(AbstractChart):
    """``theta = vec(R)`` (row-major, 9 numbers).

    ``omega_body = vee(R^T R_dot)``, so ``H`` is the 3x9 matrix of that linear map and
    ``H_inverse`` maps ``omega`` to ``vec(R hat(omega))``. The LGT is ``R' = R psi(x)``: the
    product of orthogonal matrices keeps ``R^T R = I`` to round-off without re-orthonormalising.
    """

    dim: ClassVar[int] = 9

    def to_rotation(self, theta: Float[Array, "*b 9"]) -> Float[Array, "*b 3 3"]:
        theta = jnp.asarray(theta)
        return theta.reshape(theta.shape[:-1] + (3, 3))

    def from_rotation(self, R, reference=None):
        del reference
        R = jnp.asarray(R)
        return R.reshape(R.shape[:-2] + (9,))

    def from_quaternion(self, quat, reference=None):
        return self.from_rotation(_ops.quat_to_matrix(jnp.asarray(quat)))

    def compose(self, theta, dquat):
        return self.from_rotation(_ops.matmul(self.to_rotation(theta), _ops.quat_to_matrix(dquat)))

    def H(self, theta: Float[Array, "*b 9"]) -> Float[Array, "*b 3 9"]:
        # omega_a = (1/2) eps_abc (R^T R_dot)_cb, linear in R_dot = vec^-1(theta_dot).
        R = self.to_rotation(theta)
        basis = _ops.hat(jnp.eye(3, dtype=R.dtype))  # hat(e_a)
        # omega_a = (1/2) tr(hat(e_a)^T R^T R_dot) = (1/2) <R hat(e_a), R_dot>_F
        RE = jnp.einsum("...ij,ajk->...aik", R, basis)
        return 0.5 * RE.reshape(RE.shape[:-2] + (9,))

    def H_inverse(self, theta: Float[Array, "*b 9"]) -> Float[Array, "*b 9 3"]:
        R = self.to_rotation(theta)
        RE = jnp.einsum("...ij,ajk->...aik", R, _ops.hat(jnp.eye(3, dtype=R.dtype)))
        return _ops.transpose(RE.reshape(RE.shape[:-2] + (9,)))
