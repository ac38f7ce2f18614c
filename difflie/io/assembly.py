"""The initial configuration of a loaded model: assembled onto its constraints at ``t0``
(Gauss-Newton) and its velocities projected onto the velocity constraints, each with a warning
stating what changed; and the rank checks of the constraint rows there, which name the rows
that depend on the others (``check_independent``) or remove them (``remove_dependent_rows``)."""

from __future__ import annotations

import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ..constraints.joints import joint_name
from ..model import Model
from ..xla import eager

ASSEMBLY_WARN = 1e-6
_ASSEMBLY_TOL = 1e-12  # the 2-norm of the rows below which the initial configuration is kept


@eager
def _initial_rows(model: Model, t0) -> Array:
    """The constraint rows at the model's initial configuration."""
    return model.constraint_residual(t0, model.r0 - jnp.einsum("bij,bj->bi", model.R0, model.bodies.com), model.R0)


# Up to this many constraint rows the loader checks them for independence (a dense SVD of G).
_RANK_CHECK_ROWS = 1200


def check_independent(model: Model, t0, r, R, label: str) -> Array | None:
    """``ValueError`` when the constraint rows are dependent at ``(r, R)``: the rank of ``G``
    (rA, singular values above ``1e-9`` of the largest) is less than its rows. The implicit
    solvers need independent rows (their saddle-point matrices are singular otherwise); the
    message names the rows of the dependent combinations (the left null space of ``G``).
    Returns the dense ``G`` it checked (``None`` without rows or above ``_RANK_CHECK_ROWS``)."""
    from ..constraints import jacobians as jac
    from ..constraints.formulations import get_formulation

    m = model.num_constraints
    if m == 0 or m > _RANK_CHECK_ROWS:
        return None
    G = jac.jacobian(model, get_formulation("rA"), jnp.asarray(t0, r.dtype), r, R)
    u, s, _ = np.linalg.svd(np.asarray(G), full_matrices=True)
    rank = int(np.sum(s > 1e-9 * max(s[0], 1e-300)))
    if rank == m:
        return G
    null = u[:, rank:]  # combinations of rows that vanish
    involved = np.flatnonzero(np.max(np.abs(null), axis=1) > 1e-6)
    names = model.constraint_names
    joints = list(dict.fromkeys(joint_name(names[k]) for k in involved))
    raise ValueError(
        f"{label}: the constraints are redundant: {m} rows, {rank} independent at t = {float(t0)} "
        f"({m - rank} dependent); the dependent rows belong to {joints}. The implicit solvers need "
        "independent rows. A closed loop of revolute joints with parallel axes (a planar four-bar) "
        "is overconstrained in space: make one of its joints universal and another spherical, give only "
        "the rows that are needed, or let connect / load_model(..., redundant='remove') drop the dependent rows"
    )


def remove_dependent_rows(model: Model, t0, r, R, label: str) -> tuple[Model, Array | None]:
    """``model`` without the constraint rows that depend on the others at ``(r, R)``, and the
    ``G`` (rA) of the rows kept (``None`` above ``_RANK_CHECK_ROWS`` rows, where nothing is
    checked or removed).

    Rows are kept greedily in this order, each when it adds to the rank of those before it
    (a pivoted Gram-Schmidt on the rows of ``G``): pinned points, the joints' point rows (CD,
    D, DP2), their direction rows (DP1, fixed angles), then drivers. A planar loop of revolute
    joints thus keeps all its common points and loses the out-of-plane direction rows of its
    last joints (Adams' removal of redundant constraints does the like). Refused, naming the
    rows: a driver that depends on the joints (it drives a motion they lock), and rows that
    depend on the others only at this configuration (a singular position, where removing them
    would free the mechanism elsewhere): the mechanism is moved at random by 1e-2 of its size
    and 1e-2 rad and assembled again on the rows kept, twice, and the rows removed must still
    hold there. The reactions the removed rows would share are carried by the rows kept."""
    from ..constraints import jacobians as jac
    from ..constraints.formulations import get_formulation
    from ..kinematics import assemble
    from ..lie.ops import so3_exp_matrix

    m = model.num_constraints
    cs = model.constraints
    if cs is None or m > _RANK_CHECK_ROWS:  # no rows, or pinned points only (independent)
        return model, None
    G = np.asarray(jac.jacobian(model, get_formulation("rA"), jnp.asarray(t0, r.dtype), r, R))
    own = cs.num_constraints
    driven = set(cs.driven_rows)
    point = [k for k in range(own) if k not in driven and cs.row_kinds[k] in ("CD", "D", "DP2")]
    direction = [k for k in range(own) if k not in driven and k not in point]
    order = list(range(own, m)) + point + direction + sorted(driven)
    keep = _independent_rows(G, order)
    if len(keep) == m:
        return model, G
    names = model.constraint_names
    removed = sorted(set(range(m)) - set(keep))
    if any(k >= own for k in removed) or driven & set(removed):
        bad = [names[k] for k in removed if k >= own or k in driven]
        raise ValueError(
            f"{label}: the rows {bad} depend on the other constraints at t = {float(t0)}: a driver that drives a "
            "motion the joints lock (or another driver drives) cannot be removed; drop it or free the joint"
        )
    kept_rows = sorted(k for k in keep if k < own)
    reduced = eqx.tree_at(lambda mo: mo.constraints, model, cs.take(kept_rows))
    size = max(float(np.ptp(np.asarray(r), axis=0).max()), float(np.abs(np.asarray(cs.vectors)).max()), 1e-3)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(2):
        r1 = np.asarray(r) + 1e-2 * size * rng.standard_normal(r.shape)
        R1 = np.asarray(R) @ np.asarray(so3_exp_matrix(jnp.asarray(1e-2 * rng.standard_normal(r.shape))))
        r1, R1, _, res = assemble(reduced, jnp.asarray(t0, r.dtype), "rA", jnp.asarray(r1, r.dtype), jnp.asarray(R1, r.dtype),
                                  tol=_ASSEMBLY_TOL)  # fmt: skip
        moved = eqx.tree_at(lambda mo: (mo.r0, mo.R0), model, (r1, R1))
        phi = np.asarray(_initial_rows(moved, t0))
        if not float(res) < 1e-9:
            raise ValueError(f"{label}: the rows {[names[k] for k in removed]} depend on the others at t = {float(t0)}, "
                             f"but the mechanism could not be moved to check that they stay dependent (residual "
                             f"{float(res):.1e}); remove them by hand")  # fmt: skip
        worst = max(worst, float(np.abs(phi[removed]).max()))
    if worst > 1e-8 * max(size, 1.0):
        raise ValueError(
            f"{label}: the rows {[names[k] for k in removed]} depend on the others at t = {float(t0)} only: moved a "
            f"little and assembled on the other rows, the mechanism violates them by {worst:.1e}. The initial "
            "configuration is a singular position; removing the rows would free the mechanism elsewhere"
        )
    joints = list(dict.fromkeys(joint_name(names[k]) for k in removed))
    warnings.warn(
        f"{label}: removed {len(removed)} of {m} constraint rows that depend on the others at t = {float(t0)}: "
        f"{[names[k] for k in removed]} (joints {joints}); they still hold after moving the mechanism "
        f"(to {worst:.1e}). Their share of the reactions is carried by the rows kept",
        stacklevel=4,
    )
    return reduced, G[np.asarray(kept_rows + list(range(own, m)))]


def _independent_rows(G: np.ndarray, order: list[int]) -> list[int]:
    """The rows of ``G``, taken in ``order``, that each add to the rank of those taken before
    (their part orthogonal to those above ``1e-9`` of ``G``'s largest singular value)."""
    tol = 1e-9 * max(float(np.linalg.norm(G, 2)), 1e-300)
    basis = np.zeros((0, G.shape[1]))
    keep = []
    for k in order:
        g = G[k]
        for _ in range(2):  # twice is enough (Giraud et al. 2005)
            g = g - basis.T @ (basis @ g)
        norm = float(np.linalg.norm(g))
        if norm > tol:
            basis = np.vstack([basis, g / norm])
            keep.append(k)
    return keep


def consistent_initial_state(model: Model, t0: float = 0.0, label: str = "model", redundant: str = "error") -> Model:
    """Assemble the initial configuration and project the velocities (rA), warning on changes.

    ``redundant``: what to do with constraint rows that depend on the others at the assembled
    configuration: ``"error"`` (``ValueError`` naming their joints) or ``"remove"``
    (``remove_dependent_rows``, with a warning naming the rows removed)."""
    if redundant not in ("error", "remove"):
        raise ValueError(f"{label}: redundant must be 'error' or 'remove', got {redundant!r}")
    from ..kinematics import assemble, project_velocity

    form = "rA"
    dtype = jnp.result_type(model.r0)
    r0, R0 = jnp.asarray(model.r0), jnp.asarray(model.R0)
    # The rows' rounding level in this dtype (float32: about 1e-7 of the mechanism's size).
    rounding = float(jnp.finfo(dtype).eps) * max(1.0, float(np.abs(np.asarray(r0)).max(initial=0.0)))
    tol, accept = max(_ASSEMBLY_TOL, 10 * rounding), max(1e-9, 100 * rounding)
    phi0 = np.asarray(_initial_rows(model, t0))
    res0 = float(np.max(np.abs(phi0), initial=0.0))
    worst = model.constraint_names[int(np.argmax(np.abs(phi0)))] if phi0.size else None
    if np.linalg.norm(phi0) < tol:  # consistent: no Gauss-Newton program to compile
        r, R, iters, res = r0, R0, 0, res0
    else:
        # Gauss-Newton's steps need independent rows: dependent ones (a planar loop in space)
        # are named, or removed, before it starts.
        try:
            if redundant == "remove":
                model, _ = remove_dependent_rows(model, t0, r0, R0, label)
            else:
                check_independent(model, t0, r0, R0, label)
        except ValueError as err:
            raise ValueError(
                f"{err}. The initial configuration violates the constraints by {res0:.3e} (row {worst!r}); where it is far from any "
                "configuration its joints allow (a revolute joint's two axes across each other), its rows may depend "
                "on each other there only: start the bodies nearer a configuration their joints allow"
            ) from None
        r, R, iters, res = assemble(model, jnp.asarray(t0, dtype), form, tol=tol)
    its = f"{int(iters)} Gauss-Newton iteration{'' if int(iters) == 1 else 's'}"
    if not float(res) < accept:
        raise ValueError(
            f"{label}: cannot assemble the initial configuration: it violates the constraints by {res0:.3e} (row "
            f"{worst!r}), and {its} left a residual of {float(res):.3e}; start the bodies nearer a configuration "
            "their joints allow"
        )
    if res0 > ASSEMBLY_WARN:
        moved = np.linalg.norm(np.asarray(r) - np.asarray(r0), axis=1)  # of each COM
        b = int(np.argmax(moved))
        warnings.warn(
            f"{label}: initial configuration violates the constraints by {res0:.3e} (row {worst!r}); assembled at "
            f"t = {t0} ({its}, residual now {float(res):.1e}), moving the COM of body {model.body_names[b]!r} "
            f"most, by {moved[b]:.3e} m",
            stacklevel=3,
        )
    if redundant == "remove":
        model, G = remove_dependent_rows(model, t0, r, R, label)
    else:
        G = check_independent(model, t0, r, R, label)
    v, w = project_velocity(model, jnp.asarray(t0, dtype), form, r, R, jnp.asarray(model.v0), jnp.asarray(model.omega0), G=G)
    dv = float(jnp.max(jnp.abs(jnp.concatenate([(v - model.v0).ravel(), (w - model.omega0).ravel()]))))
    if dv > ASSEMBLY_WARN:
        warnings.warn(f"{label}: initial velocities inconsistent by {dv:.3e}; projected onto the velocity constraints", stacklevel=3)
    return eqx.tree_at(lambda m: (m.r0, m.R0, m.v0, m.omega0), model, (r, R, v, w))
