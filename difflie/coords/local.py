"""Local coordinates of one Lie-group step: the group ``G``, the chart ``psi`` and ``dpsi^-1``.

Within a step the pose is ``C(t) = C_k psi(X(t))`` with ``X(t_k) = 0`` (Müller, §4.1).
This module supplies, per body, what the local-global transition (LGT) maps and the integrators
need from ``(G, psi)``:

* the rotation increment ``psi(X)`` as a unit quaternion: ``qexp(x)`` for ``psi = exp``,
  ``(1, c) / sqrt(1 + |c|^2)`` for ``psi = cay`` (Müller, eq. (47), corrected);
* the translation increment ``dr``, in world axes for SO(3)xR3 and in the body axes of ``C_k``
  for SE(3): ``J_l(x) v`` (exp) or ``2 (I - hat(c))^-1 v`` (cay);
* the local kinematics ``X_dot = dpsi^-1_{-X}(V)`` for the left-trivialised velocity ``V``.

Tangents are translation first, ``X = (v, x)``; the rotation-only groups use ``X = x``.
``Sp(1)`` and ``Sp(1)xR3`` are accepted as names of ``SO(3)`` and ``SO(3)xR3``: unit quaternions
and rotation matrices share the Lie algebra and these tangent conventions, so their LGT maps
coincide (the quaternion is only a way to compose rotations).
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie import SE3, SO3, SO3xR3, UnitQuaternion
from ..lie import coefficients as _coefficients, ops as _ops


_GROUP_NAMES = {
    "SO3": "SO3",
    "Sp1": "SO3",
    "UnitQuaternion": "SO3",
    "SO3xR3": "SO3xR3",
    "Sp1xR3": "SO3xR3",
    "UnitQuaternionxR3": "SO3xR3",
    "SE3": "SE3",
}
_GROUP_CLASSES = {SO3: "SO3", UnitQuaternion: "SO3", SO3xR3: "SO3xR3", SE3: "SE3"}


def group_name(group) -> str:
    """Canonical name (``"SO3"``, ``"SO3xR3"`` or ``"SE3"``) of a group given by name or class."""
    if isinstance(group, str) and group in _GROUP_NAMES:
        return _GROUP_NAMES[group]
    if isinstance(group, type) and group in _GROUP_CLASSES:
        return _GROUP_CLASSES[group]
    raise ValueError(
        f"group must be one of {sorted(_GROUP_NAMES)} or the class SO3, UnitQuaternion, SO3xR3 or "
        f"SE3 from difflie.lie; got {group!r}"
    )


def _cayley_kinematics(c: Array, w: Array) -> Array:
    """``c_dot = (w + c x w + (c.w) c) / 2``: Gibbs-vector kinematics for body ``w``."""
    return 0.5 * (w + jnp.cross(c, w) + jnp.sum(c * w, axis=-1, keepdims=True) * c)


class LocalCoordinates(eqx.Module):
    """The local coordinates ``X`` of a step: group ``G`` and chart ``psi`` (exp or Cayley).

    **Arguments:**

    - `group`: ``"SO3"``, ``"SO3xR3"`` or ``"SE3"`` (or the aliases / classes of
      ``group_name``).
    - `psi`: ``"exp"`` (canonical coordinates) or ``"cay"`` (Cayley / Rodrigues). The Cayley
      chart is algebraic but covers only rotations below pi per step.
    """

    group: str = eqx.field(static=True)
    psi: str = eqx.field(static=True)

    def __init__(self, group="SO3xR3", psi: Literal["exp", "cay"] = "exp"):
        self.group = group_name(group)
        if psi not in ("exp", "cay"):
            raise ValueError(f"psi must be 'exp' or 'cay'; got {psi!r}")
        self.psi = psi

    @property
    def tangent_dim(self) -> int:
        return 3 if self.group == "SO3" else 6

    @property
    def has_translation(self) -> bool:
        return self.group != "SO3"

    def split(self, X: Float[Array, "*b d"]) -> tuple[Array | None, Array]:
        """``(v, x)``: translation part (``None`` for SO(3)) and rotation part."""
        if self.group == "SO3":
            return None, X
        return X[..., :3], X[..., 3:]

    def rotation_increment(self, x: Float[Array, "*b 3"]) -> Float[Array, "*b 4"]:
        """Unit quaternion of ``psi(x)`` restricted to SO(3)."""
        if self.psi == "exp":
            return _ops.qexp(x)
        q = jnp.concatenate([jnp.ones_like(x[..., :1]), x], axis=-1)
        return q / jnp.sqrt(1.0 + _ops.sqnorm(x))[..., None]

    def rotation_increment_minus_identity(self, x: Float[Array, "*b 3"]) -> Float[Array, "*b 4"]:
        """``psi(x) - (1, 0, 0, 0)`` as a quaternion, without cancellation in the scalar part.

        exp: ``cos(phi/2) - 1 = -2 sin(phi/4)^2``; cay: ``1/s - 1 = -|c|^2 / (s (1 + s))`` with
        ``s = sqrt(1 + |c|^2)``. Adding it to ``Q`` rounds once per component, so the norm of a
        quaternion updated step after step drifts about half as fast as with the plain product.
        """
        t = _ops.sqnorm(x)
        if self.psi == "exp":
            w = -0.5 * t * _coefficients.half_sinc_half(0.25 * t) ** 2
            v = _coefficients.half_sinc_half(t)[..., None] * x
        else:
            s = jnp.sqrt(1.0 + t)
            w = -t / (s * (1.0 + s))
            v = x / s[..., None]
        return jnp.concatenate([w[..., None], v], axis=-1)

    def translation_increment(self, X: Float[Array, "*b 6"]) -> Float[Array, "*b 3"]:
        """``dr``: world axes for SO(3)xR3, body axes at ``t_k`` for SE(3)."""
        v, x = self.split(X)
        if self.group == "SO3xR3":
            return v
        if self.psi == "exp":
            return _ops.matvec(_ops.so3_left_jacobian(x), v)
        # (I + cay(c)) d = sigma (I + hat(c) + c c^T) d,  sigma = 2 / (1 + |c|^2)
        sigma = 2.0 / (1.0 + _ops.sqnorm(x))
        return sigma[..., None] * (v + jnp.cross(x, v) + jnp.sum(x * v, axis=-1, keepdims=True) * x)

    def translation_increment_inverse(self, x: Float[Array, "*b 3"], dr: Float[Array, "*b 3"]) -> Array:
        """The ``v`` with ``translation_increment((v, x)) = dr``."""
        if self.group == "SO3xR3":
            return dr
        if self.psi == "exp":
            return _ops.matvec(_ops.so3_left_jacobian_inv(x), dr)
        return 0.5 * (dr - jnp.cross(x, dr))

    def rotation_log(self, dq: Float[Array, "*b 4"]) -> Float[Array, "*b 3"]:
        """Inverse of ``rotation_increment`` (principal branch)."""
        if self.psi == "exp":
            return _ops.qlog(dq)
        return dq[..., 1:] / dq[..., :1]

    def kinematics(self, X: Float[Array, "*b d"], V: Float[Array, "*b d"]) -> Float[Array, "*b d"]:
        """``X_dot = dpsi^-1_{-X}(V)`` for the left-trivialised (body) velocity ``V``."""
        if self.psi == "exp":
            G = {"SO3": SO3, "SO3xR3": SO3xR3, "SE3": SE3}[self.group]
            return _ops.matvec(G.dexpinv(X), V)
        v, c = self.split(X)
        u, w = self.split(V)
        c_dot = _cayley_kinematics(c, w)
        if self.group == "SO3":
            return c_dot
        if self.group == "SO3xR3":
            return jnp.concatenate([u, c_dot], axis=-1)
        # SE(3): d_dot = (I + hat(c)) (u + d x w) / 2  (Müller, eq. (63) corrected, with X -> -X)
        y = u + jnp.cross(v, w)
        return jnp.concatenate([0.5 * (y + jnp.cross(c, y)), c_dot], axis=-1)
