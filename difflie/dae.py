"""The index-3 DAE of a model in absolute coordinates, as the implicit solvers write it.

With coordinates ``q = (r, rot)`` of a formulation (rA, rp, re; Kissel, Taves & Negrut, §3),
rates ``q_dot = (r_dot, rot_rate)`` and accelerations ``a = (r_ddot, rot_rate_dot)``:

    E(t, q, q_dot, a) + Psi_q(t, q)^T lambda = 0,     Psi(t, q) = 0,

where ``E`` are the Newton-Euler rows of ``difflie.Model.newton_euler`` projected on the
rates, ``(m r_ddot - f, W^T (J omega_dot + omega x J omega - tau))`` with ``omega = W rot_rate``
(``W = I`` for rA, whose rates are the body angular velocities), and ``Psi`` the model's
constraint rows (pinned points included) and the formulation's own (rp normalisation). Every
implicit solver starts from ``consistent_state``: the configuration assembled onto
``Psi = 0``, the rates projected onto ``Psi_q q_dot = nu``, and the accelerations and
multipliers of the DAE at ``t0``.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from .constraints import jacobians as jac
from .constraints.formulations import AbstractFormulation
from .kinematics import assemble, project_velocity
from .lie.ops import mtv


def dynamics_residual(model, form: AbstractFormulation, t, r, rot, rdot, rate, acc: Float[Array, " n"]) -> Float[Array, " n"]:
    """``E(t, q, q_dot, a)``: the projected Newton-Euler rows without constraint forces, flat
    in the order ``[all r, all rot]``."""
    rddot, rate_dot = jac.split(form, acc, r.shape[0])
    R = form.rotation(rot)
    omega = form.omega(rot, rate)
    omega_dot = form.omega_dot(rot, rate, rate_dot)
    rows_r, euler = model.newton_euler(t, r, R, rdot, omega, rddot, omega_dot)
    rows_rot = mtv(form.W(rot), euler)
    return jac.join(rows_r, rows_rot)


def consistent_state(
    model, form: AbstractFormulation, t0, block_size: int | None = 16
) -> tuple[Array, Array, Array, Array, Array, Array]:
    """``(r, rot, r_dot, rate, a, lambda)`` at ``t0`` that satisfy the DAE and its first two
    derivatives: the model's initial state (``difflie.Model.initial_state``) assembled and
    projected when it has constraint rows, then

        [[M_q, G^T], [G, 0]] [a; lambda] = [-E(t0, q, q_dot, 0); gamma],

    dense for small systems, else in the blocks of the mechanism's topology
    (``difflie.constraints.jacobians.saddle_structure``; ``block_size=None``: always dense).
    """
    r, R, v, w = model.initial_state()
    dtype = jnp.result_type(r)
    t0 = jnp.asarray(t0, dtype)
    rot = form.from_rotation(jnp.asarray(R, dtype))
    rate = form.rate(rot, jnp.asarray(w, dtype))
    st = jac.saddle_structure(model, form, block_size)
    if model.num_constraints:
        r, rot, _, _ = assemble(model, t0, form, r, rot, block_size=block_size)
    # Dense systems share one Jacobian (one program fewer to compile).
    G = jac.jacobian(model, form, t0, r, rot) if st.is_dense else None
    if jac.psi(model, form, t0, r, rot).shape[0]:
        v, rate = project_velocity(model, t0, form, r, rot, v, rate, st, G)
    gam = jac.gamma(model, form, t0, r, rot, jac.join(v, rate))

    def E(a):
        return dynamics_residual(model, form, t0, r, rot, v, rate, a)

    acc, lam = jac.solve_saddle(model, form, t0, r, rot, E, gam, st, G)
    return r, rot, v, rate, acc, lam
