"""The three absolute-coordinate formulations of Kissel, Taves & Negrut: rA, rp and re.

A formulation says how a body's attitude is stored (``rot``) and how it changes:

    rA: rot = A (3x3),        increment x (3,):  A <- A exp(hat(x)),   omega_bar = x_dot
    rp: rot = p (4, wxyz),    increment x (4,):  p <- p + x,           omega_bar = 2 G(p) p_dot
    re: rot = (phi, theta, psi) ZXZ angles in a body frame F (re-framed near theta = 0, pi),
                                               eps <- eps + x,        omega_bar = Bbar(eps) eps_dot

``A(p) = (e0^2 - e.e) I + 2 e e^T + 2 e0 hat(e)`` (not normalised: for rp the normalisation
``(p.p - 1)/2 = 0`` is an extra constraint row per body, with its own multiplier), and
``A(eps) = F Rz(phi) Rx(theta) Rz(psi)``. In every formulation ``omega_bar = W(rot) rot_dot``
with ``W = I`` (rA), ``2 G(p)`` (rp), ``Bbar(eps)`` (re); ``W`` of re is taken by autodiff
(``hat(omega_bar) = A^T A_dot``).

Constraint Jacobians, ``nu`` and ``gamma`` come from autodiff of one function
``Psi(t, chart(q, x))`` (the model's ``Phi`` plus, for rp, the normalisation rows), so the
paper's Table 2 and eqs. (18), (24), (29) are never coded by hand; they are test references.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie import hat, vee
from ..lie.ops import mm, mtv, mv, matrix_to_quat, so3_exp_matrix


class AbstractFormulation(eqx.Module):
    """How attitudes are stored, incremented and differentiated."""

    name: ClassVar[str]
    dim: ClassVar[int]  # attitude coordinates per body
    normalization: ClassVar[bool] = False

    @abc.abstractmethod
    def rotation(self, rot: Array) -> Float[Array, "nb 3 3"]:
        """Body-to-world matrices of the stored attitudes."""

    @abc.abstractmethod
    def from_rotation(self, R: Float[Array, "nb 3 3"]) -> Array:
        """Stored attitudes of rotation matrices."""

    def retract(self, rot: Array, x: Float[Array, "nb d"]) -> Array:
        """Attitude moved by the increment ``x``."""
        return rot + x

    def local(self, rot: Array, x: Float[Array, "nb d"]) -> Array:
        """A chart that agrees with ``retract`` to second order at ``x = 0``.

        Derivatives at ``x = 0`` (Jacobians, ``nu``, ``gamma``, reactions) only need that much,
        and a polynomial chart keeps those autodiff graphs small.
        """
        return self.retract(rot, x)

    def W(self, rot: Array) -> Float[Array, "nb 3 d"]:
        """``omega_bar = W rot_dot`` (body angular velocity of the coordinate rates)."""

        def omega(rdot):
            A, Adot = jax.jvp(self.rotation, (rot,), (rdot,))
            return vee(mm(jnp.swapaxes(A, -1, -2), Adot))

        nb = rot.shape[0]
        # omega is linear in rdot and body-separable: one jacfwd, then take the diagonal blocks.
        jac = jax.jacfwd(omega)(jnp.zeros((nb, self.dim), rot.dtype))
        return jac[jnp.arange(nb), :, jnp.arange(nb), :]

    def omega(self, rot: Array, rate: Float[Array, "nb d"]) -> Float[Array, "nb 3"]:
        return mv(self.W(rot), rate)

    def omega_dot(self, rot: Array, rate: Array, rate_dot: Array) -> Float[Array, "nb 3"]:
        """Body angular acceleration ``W rate_dot + W_dot rate`` (rot moves with ``rate``)."""

        def omega(s):
            return self.omega(self.retract(rot, s * rate), rate + s * rate_dot)

        s0 = jnp.zeros((), rate.dtype)
        return jax.jvp(omega, (s0,), (jnp.ones_like(s0),))[1]

    def rate(self, rot: Array, omega: Float[Array, "nb 3"]) -> Float[Array, "nb d"]:
        """Coordinate rates of a body angular velocity (the minimum-norm ones for rp)."""
        W = self.W(rot)
        return mv(jnp.linalg.pinv(W), omega)

    def norm_rows(self, rot: Array) -> Float[Array, " k"]:
        """Extra constraint rows of the formulation (empty unless rp)."""
        return jnp.zeros((0,), rot.dtype)

    def reframe(self, rot: Array, rate: Array, rate_dot: Array) -> tuple[Array, Array, Array]:
        """Change of chart between steps, same attitude and motion (only re has one)."""
        return rot, rate, rate_dot


class RA(AbstractFormulation):
    """Rotation matrix with multiplicative exponential-map updates (the Lie-group one)."""

    name = "rA"
    dim = 3

    def rotation(self, rot):
        return rot

    def from_rotation(self, R):
        return R

    def retract(self, rot, x):
        return mm(rot, so3_exp_matrix(x))

    def local(self, rot, x):
        X = hat(x)
        return mm(rot, jnp.eye(3, dtype=x.dtype) + X + 0.5 * mm(X, X))

    def W(self, rot):
        return jnp.broadcast_to(jnp.eye(3, dtype=rot.dtype), rot.shape)

    def omega(self, rot, rate):
        return rate

    def omega_dot(self, rot, rate, rate_dot):
        return rate_dot

    def rate(self, rot, omega):
        return omega


class RP(AbstractFormulation):
    """Euler parameters ``p = (e0, e1, e2, e3)`` with a normalisation constraint."""

    name = "rp"
    dim = 4
    normalization = True

    def rotation(self, p):
        e0, e = p[..., 0], p[..., 1:]
        eye = jnp.eye(3, dtype=p.dtype)
        return (
            (e0**2 - jnp.sum(e * e, -1))[..., None, None] * eye
            + 2.0 * e[..., :, None] * e[..., None, :]
            + 2.0 * e0[..., None, None] * hat(e)
        )

    def from_rotation(self, R):
        return matrix_to_quat(R)

    def W(self, p):
        e0, e = p[..., 0], p[..., 1:]
        G = jnp.concatenate([-e[..., :, None], -hat(e) + e0[..., None, None] * jnp.eye(3, dtype=p.dtype)], -1)
        return 2.0 * G

    def rate(self, p, omega):
        # p_dot = G^T omega / 2 for a unit p (G G^T = I, G p = 0).
        return 0.25 * mtv(self.W(p), omega)

    def norm_rows(self, p):
        return 0.5 * (jnp.sum(p * p, -1) - 1.0)


def _rz(a):
    c, s = jnp.cos(a), jnp.sin(a)
    z, o = jnp.zeros_like(a), jnp.ones_like(a)
    return jnp.stack([jnp.stack([c, -s, z], -1), jnp.stack([s, c, z], -1), jnp.stack([z, z, o], -1)], -2)


def _rx(a):
    c, s = jnp.cos(a), jnp.sin(a)
    z, o = jnp.zeros_like(a), jnp.ones_like(a)
    return jnp.stack([jnp.stack([o, z, z], -1), jnp.stack([z, c, -s], -1), jnp.stack([z, s, c], -1)], -2)


class RE(AbstractFormulation):
    """ZXZ Euler angles ``(phi, theta, psi)`` in a body-fixed reference frame ``F``.

    ``A = F Rz(phi) Rx(theta) Rz(psi)``; the stored attitude is ``(eps, vec F)`` (12 numbers per
    body; a bare ``eps`` means ``F = I``). The angles are singular at ``theta = 0, pi``; where
    ``|sin theta| < sin(reframe_angle)`` ``reframe`` moves the body's chart (not the body):
    ``F <- A A(eps_c)^T`` and ``eps <- eps_c = (0, pi/2, 0)``, the rates re-expressed for the
    same ``omega_bar``. This is the re-framing of the paper's public code C2, done consistently:
    ``A``, ``s_bar`` and ``J_bar`` stay as they are (C2 rotates ``A`` and ``s_bar`` but not
    ``J_bar``).
    """

    name = "re"
    dim = 3
    reframe_angle: ClassVar[float] = 0.1

    @staticmethod
    def _euler(eps):
        return mm(mm(_rz(eps[..., 0]), _rx(eps[..., 1])), _rz(eps[..., 2]))

    def rotation(self, rot):
        A = self._euler(rot)
        if rot.shape[-1] == 3:
            return A
        return mm(rot[..., 3:].reshape(rot.shape[:-1] + (3, 3)), A)

    def retract(self, rot, x):
        return jnp.concatenate([rot[..., :3] + x, rot[..., 3:]], -1)

    def W(self, eps):
        """``omega_bar = W eps_dot``: rows ``(s_th s_psi, c_psi, 0)``, ``(s_th c_psi, -s_psi, 0)``,
        ``(c_th, 0, 1)`` (closed form; equals the generic autodiff one, tested)."""
        th, psi = eps[..., 1], eps[..., 2]
        st, ct, sp, cp = jnp.sin(th), jnp.cos(th), jnp.sin(psi), jnp.cos(psi)
        z, o = jnp.zeros_like(th), jnp.ones_like(th)
        return jnp.stack([jnp.stack([st * sp, cp, z], -1), jnp.stack([st * cp, -sp, z], -1), jnp.stack([ct, z, o], -1)], -2)

    def _singular(self, eps):
        return jnp.abs(jnp.sin(eps[..., 1])) < jnp.sin(self.reframe_angle)

    def _centred(self, R):
        """``(eps_c, vec(R A(eps_c)^T))``: the chart centred on ``R``."""
        eps_c = jnp.broadcast_to(jnp.asarray([0.0, 0.5 * jnp.pi, 0.0], R.dtype), R.shape[:-2] + (3,))
        F = mm(R, jnp.swapaxes(self._euler(eps_c), -1, -2))
        return jnp.concatenate([eps_c, F.reshape(R.shape[:-2] + (9,))], -1)

    def from_rotation(self, R):
        """ZXZ angles of ``R`` with ``F = I``, or the centred chart where those are singular."""
        theta = jnp.arccos(jnp.clip(R[..., 2, 2], -1.0, 1.0))
        phi = jnp.arctan2(R[..., 0, 2], -R[..., 1, 2])
        psi = jnp.arctan2(R[..., 2, 0], R[..., 2, 1])
        eps = jnp.stack([phi, theta, psi], -1)
        eye = jnp.broadcast_to(jnp.eye(3, dtype=R.dtype).reshape(9), R.shape[:-2] + (9,))
        plain = jnp.concatenate([eps, eye], -1)
        return jnp.where(self._singular(eps)[..., None], self._centred(R), plain)

    def rate(self, eps, omega):
        """``W^{-1} omega``: ``phi_dot = (w_x s_psi + w_y c_psi) / s_th``, ``theta_dot = w_x c_psi -
        w_y s_psi``, ``psi_dot = w_z - c_th phi_dot`` (closed form, no linear solve)."""
        th, psi = eps[..., 1], eps[..., 2]
        st, ct, sp, cp = jnp.sin(th), jnp.cos(th), jnp.sin(psi), jnp.cos(psi)
        phi_dot = (omega[..., 0] * sp + omega[..., 1] * cp) / st
        return jnp.stack([phi_dot, omega[..., 0] * cp - omega[..., 1] * sp, omega[..., 2] - ct * phi_dot], -1)

    def reframe(self, rot, rate, rate_dot):
        """Re-centre the chart of the bodies near ``theta = 0, pi`` (same ``A``, ``omega_bar``,
        ``omega_bar_dot``); the others are returned unchanged."""
        if rot.shape[-1] == 3:
            rot = jnp.concatenate([rot, jnp.broadcast_to(jnp.eye(3, dtype=rot.dtype).reshape(9), rot.shape[:-1] + (9,))], -1)
        new = self._centred(self.rotation(rot))
        new_rate = self.rate(new, self.omega(rot, rate))
        bias = self.omega_dot(new, new_rate, jnp.zeros_like(new_rate))
        new_rate_dot = self.rate(new, self.omega_dot(rot, rate, rate_dot) - bias)
        move = self._singular(rot)[..., None]
        return jnp.where(move, new, rot), jnp.where(move, new_rate, rate), jnp.where(move, new_rate_dot, rate_dot)


FORMULATIONS: dict[str, AbstractFormulation] = {"rA": RA(), "rp": RP(), "re": RE()}


def get_formulation(name: str) -> AbstractFormulation:
    if name not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {tuple(FORMULATIONS)}, got {name!r}")
    return FORMULATIONS[name]


__all__ = ["RA", "RE", "RP", "AbstractFormulation", "FORMULATIONS", "get_formulation", "so3_exp_matrix"]
