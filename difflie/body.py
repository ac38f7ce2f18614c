"""Rigid bodies: mass, inertia about the centre of mass, COM offset; a valid parameterisation.

A physically valid body has ``m > 0`` and a positive-definite pseudo-inertia

    P = [[S + m c c^T, m c], [m c^T, m]],   S = tr(J)/2 I - J,

where ``J`` is the inertia about the COM and ``S`` the second moment of mass about the COM;
``S > 0`` is equivalent to ``J > 0`` with the strict triangle inequalities
``J11 + J22 > J33`` (and cyclic). Equality (a planar body, e.g. the heavy top's disc) is
accepted by the validation but has no finite parameters. The log-Cholesky factor of ``P`` (Rucker and Wensing, 2022)
is an unconstrained 10-vector per body: every value of it is a valid body, so gradient
descent on it never leaves the physical set.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .lie import hat
from .xla import concrete


def _label(names: tuple[str, ...] | None, i: int) -> str:
    return f"body {names[i]!r} (index {i})" if names is not None else f"body {i}"


def _numbers(x, what: str):
    """``x`` as an array (``None`` stays), or a ``ValueError`` naming ``what`` where it is not
    numbers (a string, a list of strings)."""
    if x is None:
        return None
    try:
        a = jnp.asarray(x)
    except TypeError:
        a = None
    if a is None or not jnp.issubdtype(a.dtype, jnp.number):
        raise ValueError(f"RigidBody: {what} must be numbers, got {x!r}")
    return a


def _tolerances(dtype) -> tuple[float, float]:
    """Relative tolerances of the symmetry and triangle-inequality checks: 1e-10 and 1e-12 in
    float64, the rounding of the dtype where it is coarser (float32)."""
    eps = float(np.finfo(dtype).eps)
    return max(1e-10, 1e3 * eps), max(1e-12, 64 * eps)


def physical(mass: Float[Array, " nb"], inertia: Float[Array, "nb 3 3"]) -> Array:
    """Whether each body is physical, in ``jnp`` (traced values too; ``simulate`` runs it once
    at the start, where the model is traced): positive mass, inertia symmetric with a positive
    determinant, and ``S = tr(J)/2 I - J`` positive semidefinite (all its principal minors
    ``>= 0``; the triangle inequality, with positive definiteness). Its tolerances are looser
    than ``check_bodies``' (a model that passes there passes here, but for rounding at the very
    edge of positive definiteness); no eigenvalue solve and no derivative."""
    m, J = jax.lax.stop_gradient(mass), jax.lax.stop_gradient(inertia)
    sym_tol, tri_tol = _tolerances(J.dtype)
    Jt = jnp.swapaxes(J, -1, -2)
    tr = jnp.trace(J, axis1=-2, axis2=-1)
    symmetric = jnp.max(jnp.abs(J - Jt), axis=(-2, -1)) <= sym_tol * jnp.max(jnp.abs(J), axis=(-2, -1))
    S = 0.5 * tr[..., None, None] * jnp.eye(3, dtype=J.dtype) - 0.5 * (J + Jt)
    s = jnp.diagonal(S, axis1=-2, axis2=-1)
    pairs = jnp.stack([s[..., i] * s[..., j] - S[..., i, j] ** 2 for i, j in ((0, 1), (0, 2), (1, 2))], axis=-1)
    semidefinite = (jnp.all(s >= -tri_tol * tr[..., None], axis=-1) & jnp.all(pairs >= -tri_tol * tr[..., None] ** 2, axis=-1)
                    & (_det3(S) >= -tri_tol * tr**3))  # fmt: skip
    return (m > 0) & symmetric & (_det3(0.5 * (J + Jt)) > 0) & semidefinite


def _det3(A: Float[Array, "*b 3 3"]) -> Float[Array, "*b"]:
    """Determinant of 3x3 matrices by cofactors (no LU factorisation)."""
    return jnp.sum(A[..., 0, :] * jnp.cross(A[..., 1, :], A[..., 2, :]), axis=-1)


def check_bodies(mass, inertia, com, names: tuple[str, ...] | None = None) -> None:
    """Raise ``ValueError`` naming the first body whose mass or inertia is not physical.

    Traced values are not checked (they cannot be inspected; ``physical`` checks them in the
    program).
    """
    m, J, c = concrete(mass), concrete(inertia), concrete(com)
    if m is None or J is None or c is None:
        return
    if m.ndim != 1 or J.shape != m.shape + (3, 3) or c.shape != m.shape + (3,):
        raise ValueError(
            f"RigidBody: expected mass (nb,), inertia (nb, 3, 3), com (nb, 3); got {m.shape}, "
            f"{J.shape}, {c.shape}"
        )
    if names is not None and len(names) != m.shape[0]:
        raise ValueError(f"RigidBody: {len(names)} names for {m.shape[0]} bodies")
    sym_tol, tri_tol = _tolerances(J.dtype)
    finite = np.isfinite(J).all(axis=(1, 2)) & np.isfinite(m) & np.isfinite(c).all(axis=1)
    for i in np.flatnonzero(~finite)[:1]:
        raise ValueError(f"{_label(names, i)}: mass, inertia and com must be finite")
    for i in np.flatnonzero(~(m > 0))[:1]:
        raise ValueError(f"{_label(names, i)}: mass must be positive, got {m[i]}")
    scale = np.abs(J).max(axis=(1, 2))
    asymmetric = np.abs(J - np.swapaxes(J, 1, 2)).max(axis=(1, 2)) > sym_tol * np.maximum(scale, 1e-300)
    for i in np.flatnonzero(asymmetric)[:1]:
        raise ValueError(f"{_label(names, i)}: inertia is not symmetric: {J[i].tolist()}")
    eig = np.linalg.eigvalsh(0.5 * (J + np.swapaxes(J, 1, 2)))
    for i in np.flatnonzero(~(eig[:, 0] > 0))[:1]:
        raise ValueError(f"{_label(names, i)}: inertia is not positive definite (eigenvalues {eig[i]})")
    for i in np.flatnonzero(~(eig[:, 0] + eig[:, 1] >= eig[:, 2] * (1 - tri_tol)))[:1]:
        raise ValueError(f"{_label(names, i)}: principal moments {eig[i]} violate the triangle inequality J1 + J2 > J3")


class RigidBody(eqx.Module):
    """A stack of ``nb`` rigid bodies.

    ``mass`` (nb,), ``inertia`` (nb, 3, 3) about the COM in body axes, ``com`` (nb, 3) the COM
    in the body frame (offset from the body-frame origin). ``names`` is optional and only used
    in error messages. ``validate=False`` admits bodies that are not physical (the four-link
    mechanism's inertias in the public codes of Kissel, Taves & Negrut): neither ``RigidBody``,
    ``Model`` nor ``simulate`` checks them.
    """

    mass: Float[Array, " nb"]
    inertia: Float[Array, "nb 3 3"]
    com: Float[Array, "nb 3"]
    names: tuple[str, ...] | None = eqx.field(static=True, default=None)
    validate: bool = eqx.field(static=True, default=True)

    def __init__(
        self,
        mass: ArrayLike,
        inertia: ArrayLike,
        com: ArrayLike | None = None,
        names: tuple[str, ...] | None = None,
        validate: bool = True,
    ):
        mass, inertia, com = (_numbers(x, name) for x, name in ((mass, "mass"), (inertia, "inertia"), (com, "com")))
        if mass.ndim == 0:  # a single body
            if inertia.shape != (3, 3):
                raise ValueError(f"RigidBody: the inertia of one body must be 3x3, got shape {inertia.shape}"
                                 + (" (principal moments: jnp.diag(moments))" if inertia.shape == (3,) else ""))  # fmt: skip
            mass = mass[None]
            inertia = inertia[None]
            com = None if com is None else com[None]
        dtype = jnp.result_type(mass, inertia)
        if jnp.issubdtype(dtype, jnp.complexfloating):
            raise ValueError(f"RigidBody: masses and inertias must be real, got {jnp.dtype(dtype).name}")
        if not jnp.issubdtype(dtype, jnp.floating):  # integer masses: the default float
            dtype = jnp.result_type(dtype, float)
        if jnp.finfo(dtype).bits < 32:
            raise ValueError(f"RigidBody: {jnp.dtype(dtype).name} is not supported (too few digits for the "
                             "solvers' tolerances and no linear algebra); use float32 or float64")  # fmt: skip
        self.mass = mass.astype(dtype)
        self.inertia = inertia.astype(dtype)
        self.com = jnp.zeros(mass.shape + (3,), dtype) if com is None else com.astype(dtype)
        self.names = None if names is None else tuple(names)
        self.validate = bool(validate)
        if self.validate:
            check_bodies(self.mass, self.inertia, self.com, self.names)

    @property
    def num_bodies(self) -> int:
        return self.mass.shape[-1]

    def inertia_about_origin(self) -> Float[Array, "nb 3 3"]:
        """Inertia about the body-frame origin: ``J - m hat(c)^2`` (parallel axes)."""
        c = self.com
        cc = jnp.sum(c * c, axis=-1)[..., None, None] * jnp.eye(3, dtype=c.dtype)
        return self.inertia + self.mass[..., None, None] * (cc - c[..., :, None] * c[..., None, :])

    def spatial_inertia(self) -> Float[Array, "nb 6 6"]:
        """About the body-frame origin, translation first: ``[[m I, -m hat(c)], [m hat(c), J_O]]``
        (``J_O`` of ``inertia_about_origin``), so ``V^T M V / 2`` is the kinetic energy of
        the origin's body twist ``V = (U, Omega)``."""
        m, c = self.mass[..., None, None], self.com
        mc = m * hat(c)
        top = jnp.concatenate([m * jnp.eye(3, dtype=c.dtype), -mc], axis=-1)
        bottom = jnp.concatenate([mc, self.inertia_about_origin()], axis=-1)
        return jnp.concatenate([top, bottom], axis=-2)

    def pseudo_inertia(self) -> Float[Array, "nb 4 4"]:
        """``P = [[S + m c c^T, m c], [m c^T, m]]`` with ``S = tr(J)/2 I - J``."""
        J, m, c = self.inertia, self.mass, self.com
        S = 0.5 * jnp.trace(J, axis1=-2, axis2=-1)[..., None, None] * jnp.eye(3, dtype=J.dtype) - J
        h = m[..., None] * c
        top = jnp.concatenate([S + h[..., :, None] * c[..., None, :], h[..., :, None]], axis=-1)
        bottom = jnp.concatenate([h, m[..., None]], axis=-1)[..., None, :]
        return jnp.concatenate([top, bottom], axis=-2)

    def to_params(self) -> Float[Array, "nb 10"]:
        """Log-Cholesky parameters: ``P = L L^T``, ``(log diag(L), strictly-lower entries of L)``.

        Needs the strict triangle inequalities (a planar body gives ``-inf``).
        """
        L = jnp.linalg.cholesky(self.pseudo_inertia())
        rows, cols = np.tril_indices(4, -1)
        logdiag = jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1))
        return jnp.concatenate([logdiag, L[..., rows, cols]], axis=-1)

    @classmethod
    def from_params(cls, params: Float[Array, "nb 10"], names: tuple[str, ...] | None = None) -> RigidBody:
        """Inverse of ``to_params``; any real ``params`` give a physical body."""
        params = jnp.asarray(params)
        rows, cols = np.tril_indices(4, -1)
        L = jnp.zeros(params.shape[:-1] + (4, 4), params.dtype)
        L = L.at[..., np.arange(4), np.arange(4)].set(jnp.exp(params[..., :4]))
        L = L.at[..., rows, cols].set(params[..., 4:])
        P = L @ jnp.swapaxes(L, -1, -2)
        m = P[..., 3, 3]
        c = P[..., 3, :3] / m[..., None]
        S = P[..., :3, :3] - m[..., None, None] * c[..., :, None] * c[..., None, :]
        J = jnp.trace(S, axis1=-2, axis2=-1)[..., None, None] * jnp.eye(3, dtype=S.dtype) - S
        return cls(m, J, c, names=names)
