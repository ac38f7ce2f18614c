"""Constraint Jacobian ``G``, ``nu`` and ``gamma`` in a formulation, all by autodiff.

The configuration is ``(r, rot)``: ``r`` (nb, 3) world centres of mass, ``rot`` the stored
attitudes of the formulation. ``Psi(t, r, rot)`` stacks the model's
``Phi(t, r_origin, A)`` (:meth:`difflie.Model.constraint_residual`, pinned points included;
``r_origin = r - A com``) and the formulation's own rows (rp normalisation). With the chart
``chart(q, x) = (r + x_r, retract(rot, x_rot))`` and unknown ordering ``[all x_r, all x_rot]``:

    G     = d Psi(t, chart(q, x)) / dx  at x = 0   (Kissel, Taves & Negrut, eqs. 14, 20, 27)
    nu    = -d Psi / dt                                     (G q_dot = nu)
    gamma = -d^2/ds^2 Psi(t + s, chart(q, s q_dot)) at s = 0 (G q_ddot = gamma)

For rA the chart is ``A exp(hat(x))``, so ``q_dot = (r_dot, omega_bar)`` and the second
derivative along ``A exp(s hat(omega_bar))`` is the velocity-quadratic part of ``Phi_ddot``.
Derivatives at ``x = 0`` use ``A (I + X + X^2/2)``, equal to ``A exp(X)`` to second order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..lie.ops import mv
from .formulations import AbstractFormulation


def psi(model, form: AbstractFormulation, t, r, rot) -> Float[Array, " m"]:
    """All position-level rows: ``Phi`` of the model, then the formulation's rows."""
    R = form.rotation(rot)
    com = jnp.asarray(model.bodies.com, r.dtype)
    origin = r - mv(R, com)
    return jnp.concatenate([model.constraint_residual(t, origin, R), form.norm_rows(rot)])


def split(form: AbstractFormulation, x: Float[Array, " n"], nb: int):
    """Flat increment ``[x_r, x_rot]`` -> ``(x_r (nb, 3), x_rot (nb, d))``."""
    return x[: 3 * nb].reshape(nb, 3), x[3 * nb :].reshape(nb, form.dim)


def join(xr, xrot) -> Float[Array, " n"]:
    return jnp.concatenate([xr.reshape(-1), xrot.reshape(-1)])


def chart(form: AbstractFormulation, r, rot, x):
    xr, xrot = split(form, x, r.shape[0])
    return r + xr, form.retract(rot, xrot)


def psi_chart(model, form, t, r, rot, x):
    """``Psi(t, chart(q, x))``."""
    r1, rot1 = chart(form, r, rot, x)
    return psi(model, form, t, r1, rot1)


def psi_local(model, form, t, r, rot, x):
    """``Psi`` in the second-order-exact local chart: for derivatives at ``x = 0`` only."""
    xr, xrot = split(form, x, r.shape[0])
    return psi(model, form, t, r + xr, form.local(rot, xrot))


def num_coordinates(form: AbstractFormulation, nb: int) -> int:
    return nb * (3 + form.dim)


def jacobian(model, form, t, r, rot) -> Float[Array, "m n"]:
    x0 = jnp.zeros(num_coordinates(form, r.shape[0]), r.dtype)
    return jax.jacfwd(lambda x: psi_local(model, form, t, r, rot, x))(x0)


def nu(model, form, t, r, rot) -> Float[Array, " m"]:
    t = jnp.asarray(t, r.dtype)
    return -jax.jvp(lambda s: psi(model, form, s, r, rot), (t,), (jnp.ones_like(t),))[1]


def gamma(model, form, t, r, rot, qdot: Float[Array, " n"]) -> Float[Array, " m"]:
    t = jnp.asarray(t, r.dtype)

    def along(s):
        return psi_local(model, form, t + s, r, rot, s * qdot)

    def first(s):
        return jax.jvp(along, (s,), (jnp.ones_like(s),))[1]

    zero = jnp.zeros((), r.dtype)
    return -jax.jvp(first, (zero,), (jnp.ones_like(zero),))[1]


def psi_and_reaction(model, form, t, r, rot, lam: Float[Array, " m"]):
    """``Psi`` and ``G^T lam`` (generalised constraint forces, sign as in
    ``M q_ddot + G^T lam = Q``) from one reverse-mode pass: ``Psi`` is its primal at ``x = 0``."""
    x0 = jnp.zeros(num_coordinates(form, r.shape[0]), r.dtype)
    value, vjp = jax.vjp(lambda x: psi_local(model, form, t, r, rot, x), x0)
    return value, vjp(lam)[0]
