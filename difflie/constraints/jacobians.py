"""Constraint Jacobian ``G``, ``nu`` and ``gamma`` in a formulation, all by autodiff.

The configuration is ``(r, rot)``: ``r`` (nb, 3) world centres of mass, ``rot`` the stored
attitudes of the formulation. ``Psi(t, r, rot)`` stacks the model's
``Phi(t, r_origin, A)`` (``difflie.Model.constraint_residual``, pinned points included;
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

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..lie.ops import mv
from ..numerics import linear, sparsity
from ..xla import eager
from .formulations import AbstractFormulation


@eager
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


@eager
def jacobian(model, form, t, r, rot) -> Float[Array, "m n"]:
    x0 = jnp.zeros(num_coordinates(form, r.shape[0]), r.dtype)
    return jax.jacfwd(lambda x: psi_local(model, form, t, r, rot, x))(x0)


@eager
def nu(model, form, t, r, rot) -> Float[Array, " m"]:
    t = jnp.asarray(t, r.dtype)
    return -jax.jvp(lambda s: psi(model, form, s, r, rot), (t,), (jnp.ones_like(t),))[1]


@eager
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


def structure(model, form: AbstractFormulation, block_size: int | None) -> sparsity.Sparsity:
    """Blocks of a matrix over ``[x (all r, all rot), lambda (the rows of Psi)]`` that couples
    a body's coordinates with those it acts on and with the rows it enters: the saddle-point
    matrices below and the backward-Euler iteration matrix. The rp normalisation rows are
    carried by their bodies."""
    nb = model.num_bodies
    bodies = np.arange(nb)
    rows = _row_bodies(model, form)
    own = np.concatenate([np.repeat(bodies, 3), np.repeat(bodies, form.dim)])
    return sparsity.block_structure(nb, model.coupling(), own, rows, (own.shape[0], rows.shape[0]), block_size)


def _row_bodies(model, form: AbstractFormulation) -> np.ndarray:
    """The bodies of each row of ``Psi``: the model's, then rp's normalisation rows, each its
    body's own."""
    if not form.normalization:
        return model.row_bodies
    bodies = np.arange(model.num_bodies)
    return np.concatenate([model.row_bodies, np.stack([bodies, bodies], axis=1)])


# Saddle-point systems (and assembly's minimum-norm steps) up to this many unknowns are solved
# densely: the block elimination compiles 0.8-1.3 s longer (three instances at the start:
# assembly, rates, accelerations; 256-body chains, trees and revolute chains) and runs faster
# from a few bodies up, the dense matrices growing with the square of the unknowns and their
# LU with the cube. Consistent start of a chain of 256 bodies (2304 unknowns): 305 ms and
# 113 MB dense, 3.0 ms and 3.5 MB in blocks; of 512 bodies in blocks 5.9 ms and 6.9 MB (one
# core, 2026-11-27). Near 3000 unknowns the time saved pays for the longer compile.
DENSE_SADDLE_LIMIT = 3072


def num_unknowns(model, form: AbstractFormulation) -> int:
    """The unknowns of ``structure``'s matrices: the coordinates and the rows of ``Psi``."""
    return num_coordinates(form, model.num_bodies) + _row_bodies(model, form).shape[0]


def saddle_structure(model, form: AbstractFormulation, block_size: int | None = 16) -> sparsity.Sparsity:
    """The structure ``solve_saddle`` is given for a model: one dense block up to
    ``DENSE_SADDLE_LIMIT`` unknowns, else ``structure``."""
    return structure(model, form, None if num_unknowns(model, form) <= DENSE_SADDLE_LIMIT else block_size)


def solve_saddle(
    model, form: AbstractFormulation, t, r, rot, top: Callable[[Array], Array], c: Float[Array, " m"],
    st: sparsity.Sparsity, G: Float[Array, "m n"] | None = None,
) -> tuple[Float[Array, " n"], Float[Array, " m"]]:  # fmt: skip
    """``(x, lambda)`` with ``top(x) + G^T lambda = 0`` and ``G x = c``, for ``top`` affine in
    ``x``: the saddle-point system ``[[A, G^T], [G, 0]] [x; lambda] = [-top(0); c]``, dense
    when ``st`` is one block, else factored in its blocks with ``G`` and ``G^T`` applied as
    linear maps (no dense ``G``). ``top(x) = x - b`` gives the point nearest ``b`` on ``G x = c``.
    ``G``: the dense Jacobian at ``(t, r, rot)`` where the caller has it already."""
    x0 = jnp.zeros(num_coordinates(form, r.shape[0]), r.dtype)
    n = x0.shape[0]
    if st.is_dense:
        G = jacobian(model, form, t, r, rot) if G is None else G
        m = G.shape[0]
        kkt = jnp.block([[jax.jacfwd(top)(x0), G.T], [G, jnp.zeros((m, m), r.dtype)]])
        sol = linear.solve(kkt, jnp.concatenate([-top(x0), c]))
        return sol[:n], sol[n:]
    value, factors = _saddle_factors(model, form, t, r, rot, top, c, st)
    sol = -st.solve(factors, value)
    return sol[:n], sol[n:]


def _saddle_factors(model, form, t, r, rot, top, c, st: sparsity.Sparsity):
    """``([top(0); -c], factors)`` of the saddle-point matrix in ``st``'s blocks, ``G`` and
    ``G^T`` applied as linear maps (one forward and one reverse pass of ``Psi``)."""
    x0 = jnp.zeros(num_coordinates(form, r.shape[0]), r.dtype)

    def psi0(x):
        return psi_local(model, form, t, r, rot, x)

    _, GT = jax.vjp(psi0, x0)

    def f(parts):
        x, lam = parts
        return jnp.concatenate([top(x) + GT(lam)[0], jax.jvp(psi0, (x0,), (x,))[1] - c])

    return st.value_and_factors(f, (x0, jnp.zeros(c.shape, r.dtype)))


def least_norm_system(model, form: AbstractFormulation, t, st: sparsity.Sparsity):
    """``(value_and_factors, solve)`` of the Gauss-Newton step with minimum norm on
    ``Psi(t, .) = 0`` over ``(r, rot)``, for ``difflie.numerics.newton.newton_iterate``:
    ``delta = G^T (G G^T)^{-1} Psi``. Dense (``G``, then ``G G^T`` factored) when ``st`` is
    one block, else the saddle-point system ``[[I, G^T], [G, 0]] [delta; mu] = [0; Psi]`` in
    ``st``'s blocks, whose matrices grow with the bodies, not their square."""
    if st.is_dense:

        def value_and_jacobian(x):
            return psi(model, form, t, *x), jacobian(model, form, t, *x)

        return value_and_jacobian, least_norm

    def value_and_factors(x):
        r, rot = x
        m = psi(model, form, t, r, rot)
        return m, _saddle_factors(model, form, t, r, rot, lambda z: z, jnp.zeros_like(m), st)[1]

    def solve(factors, b):
        n = st.n - b.shape[0]
        return st.solve(factors, jnp.concatenate([jnp.zeros(n, b.dtype), b]))[:n]

    return value_and_factors, solve


def least_norm(G: Float[Array, "m n"], b: Float[Array, " m"]) -> Float[Array, " n"]:
    """``G^T (G G^T)^{-1} b``: the smallest ``x`` with ``G x = b`` (``G`` of full row rank)."""
    return G.T @ linear.solve(G @ G.T, b)
