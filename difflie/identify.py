"""Inertia identification: fit masses, centres of mass and inertias to a measured trajectory.

The unknowns of body ``i`` are the log-Cholesky coordinates ``theta`` of its pseudo-inertia
about the body-frame origin, written mass first,

    Q = [[m, h^T], [h, S_O]] = L L^T,   h = m c,   S_O = S + m c c^T,   S = tr(J)/2 I - J,

``theta = (log L00, log L11, log L22, log L33, L10, L20, L30, L21, L31, L32)``. Every real
``theta`` is a physical body (``Q > 0``: positive mass, positive-definite inertia obeying the
triangle inequalities), so an unconstrained optimiser never leaves the physical set. Mass first
(``difflie.body.RigidBody.to_params`` puts it last) makes ``theta_0 = log(m)/2``, so a
known mass is one frozen coordinate (``InertiaParameters(mass=...)`` fits the other nine).

The fit minimises ``sum r^2 / 2`` over the whitened residuals ``r`` (marker positions over
``sigma_position``, ``log(R_sim^T R_meas)`` over ``sigma_rotation``): a first-order stage
(optax Adam) from a rough guess, then Gauss-Newton with Levenberg-Marquardt damping (or optax
L-BFGS). The Jacobian is taken in forward mode (few parameters, many residuals). The
covariance of the estimate is ``s^2 (J^T J)^-1`` with ``s^2 = |r|^2 / (N - p)`` (about 1 when the
sigmas are right), and ``physical_std`` carries it to mass, COM and inertia.

**What a trajectory can identify.** Only forces other than gravity fix the scale of the
inertial parameters: gravity acts like inertia (equivalence principle), so with gravity alone
``(m, c, J) -> (lambda m, c, lambda J)`` leaves every motion unchanged. A body turning about a
fixed pivot (the heavy top) obeys ``J_O Omega_dot = tau + h x R^T g - Omega x J_O Omega``: it
depends on ``h = m c`` and ``J_O`` (nine numbers) only; its mass alone enters the pivot reaction,
never the motion. So for the heavy top: weigh it (known mass), excite it with a known torque
(scale), and give it a spin that is not about a principal axis and lasts long enough for the
precession and nutation to couple all inertia entries (see ``tests/test_identify.py``: one
second, ``Omega_0 = (2, 5, -3)`` rad/s, a constant body torque); then centre of mass and
inertia (nine numbers) are identifiable. A free body with a known force also yields its mass.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, ArrayLike, Float

from . import xla
from .body import RigidBody
from .forces import JointForce
from .joint_space import LinearInterpolation, joint_coordinates, with_joint_state
from .lie import SO3
from .simulate import simulate
from .solution import SaveAt
from .step_size import ConstantStepSize


# -- parameterisation ------------------------------------------------------------------------

_OFF = [(1, 0), (2, 0), (3, 0), (2, 1), (3, 1), (3, 2)]  # order of theta[4:]
_OFF_R, _OFF_C = np.array([i for i, _ in _OFF]), np.array([j for _, j in _OFF])


def pseudo_inertia(body: RigidBody) -> Float[Array, "nb 4 4"]:
    """``Q = [[m, h^T], [h, S + m c c^T]]`` about the body-frame origin, mass first."""
    m, c, J = body.mass, body.com, body.inertia
    eye = jnp.eye(3, dtype=J.dtype)
    S = 0.5 * jnp.trace(J, axis1=-2, axis2=-1)[..., None, None] * eye - J
    h = m[..., None] * c
    S_O = S + h[..., :, None] * c[..., None, :]
    top = jnp.concatenate([m[..., None, None], h[..., None, :]], axis=-1)
    rest = jnp.concatenate([h[..., :, None], S_O], axis=-1)
    return jnp.concatenate([top, rest], axis=-2)


def log_cholesky(body: RigidBody) -> Float[Array, "nb 10"]:
    """``theta`` of each body (inverse of ``body_from_log_cholesky``); needs strict triangle
    inequalities (a flat body has no finite coordinates)."""
    L = jnp.linalg.cholesky(pseudo_inertia(body))
    logdiag = jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1))
    return jnp.concatenate([logdiag, L[..., _OFF_R, _OFF_C]], axis=-1)


def body_from_log_cholesky(theta: Float[Array, "nb 10"], names: tuple[str, ...] | None = None) -> RigidBody:
    """The body of coordinates ``theta``; any real ``theta`` gives a physical body."""
    theta = jnp.asarray(theta)
    L = jnp.zeros(theta.shape[:-1] + (4, 4), theta.dtype)
    L = L.at[..., np.arange(4), np.arange(4)].set(jnp.exp(theta[..., :4]))
    L = L.at[..., _OFF_R, _OFF_C].set(theta[..., 4:])
    Q = L @ jnp.swapaxes(L, -1, -2)
    m = Q[..., 0, 0]
    c = Q[..., 1:, 0] / m[..., None]
    S = Q[..., 1:, 1:] - m[..., None, None] * c[..., :, None] * c[..., None, :]
    J = jnp.trace(S, axis1=-2, axis2=-1)[..., None, None] * jnp.eye(3, dtype=S.dtype) - S
    return RigidBody(m, J, c, names=names)


def physical(body: RigidBody) -> Float[Array, "nb 10"]:
    """``(m, c1, c2, c3, J11, J22, J33, J12, J13, J23)`` per body."""
    J = body.inertia
    entries = jnp.stack(
        [J[..., 0, 0], J[..., 1, 1], J[..., 2, 2], J[..., 0, 1], J[..., 0, 2], J[..., 1, 2]], axis=-1
    )
    return jnp.concatenate([body.mass[..., None], body.com, entries], axis=-1)


PHYSICAL_NAMES = ("m", "c1", "c2", "c3", "J11", "J22", "J33", "J12", "J13", "J23")


class InertiaParameters(eqx.Module):
    """Parameters ``theta`` (flat) -> model: the identified bodies built from log-Cholesky
    coordinates and handed to ``make_model(bodies: RigidBody) -> Model``.

    ``mass`` (nb,), optional: known masses; then ``theta_0 = log(m)/2`` is frozen and each body
    has nine free coordinates, else ten.
    """

    make_model: Callable[[RigidBody], Any] = eqx.field(static=True)
    mass: Float[Array, " nb"] | None = None

    @property
    def per_body(self) -> int:
        return 10 if self.mass is None else 9

    def full_theta(self, theta: Float[Array, " p"]) -> Float[Array, "nb 10"]:
        theta = theta.reshape(-1, self.per_body)
        if self.mass is None:
            return theta
        log_sqrt_m = 0.5 * jnp.log(jnp.asarray(self.mass, theta.dtype))[:, None]
        return jnp.concatenate([jnp.broadcast_to(log_sqrt_m, (theta.shape[0], 1)), theta], axis=-1)

    def bodies(self, theta: Float[Array, " p"]) -> RigidBody:
        return body_from_log_cholesky(self.full_theta(theta))

    def __call__(self, theta: Float[Array, " p"]):
        return self.make_model(self.bodies(theta))

    def init(self, bodies: RigidBody) -> Float[Array, " p"]:
        """Flat ``theta`` of ``bodies`` (the known masses, if any, are taken from ``self``)."""
        theta = log_cholesky(bodies)
        if self.mass is not None:
            m = np.asarray(bodies.mass)
            if not np.allclose(m, np.asarray(self.mass), rtol=1e-12):
                raise ValueError(f"InertiaParameters.init: bodies have mass {m}, known mass is {self.mass}")
            theta = theta[:, 1:]
        return theta.reshape(-1)


# -- measurements and residuals --------------------------------------------------------------


class Measurements(eqx.Module):
    """A measured trajectory: sample times ``ts`` (static, increasing, > ``t0``), marker
    positions ``position`` (n, k, 3) in world axes and/or rotations ``rotation`` (n, k, 3, 3)
    (body to world) of the model bodies ``bodies`` (k indices).

    ``markers`` (k, 3): the measured body points, in body axes from the body-frame origin
    (default: the centre of mass). ``axes``: the measured position components (e.g. ``(0,)`` for a
    slider). ``sigma_position``, ``sigma_rotation`` (radians): standard deviations that whiten
    the residuals.
    """

    ts: tuple[float, ...] = eqx.field(static=True, converter=lambda ts: tuple(float(t) for t in np.ravel(ts)))
    bodies: tuple[int, ...] = eqx.field(static=True, converter=lambda b: tuple(int(i) for i in b))
    position: Float[Array, "n k 3"] | None = None
    rotation: Float[Array, "n k 3 3"] | None = None
    markers: Float[Array, "k 3"] | None = None
    axes: tuple[int, ...] = eqx.field(static=True, default=(0, 1, 2))
    sigma_position: Float[Array, ""] = eqx.field(default=1.0, converter=jnp.asarray)
    sigma_rotation: Float[Array, ""] = eqx.field(default=1.0, converter=jnp.asarray)

    def __check_init__(self):
        n, k = len(self.ts), len(self.bodies)
        if n == 0 or np.any(np.diff(np.asarray(self.ts)) <= 0):
            raise ValueError("Measurements: ts must be a non-empty strictly increasing sequence")
        if self.position is None and self.rotation is None:
            raise ValueError("Measurements: give position and/or rotation")
        if self.position is not None and tuple(self.position.shape) != (n, k, 3):
            raise ValueError(f"Measurements: position must have shape {(n, k, 3)}, got {self.position.shape}")
        if self.rotation is not None and tuple(self.rotation.shape) != (n, k, 3, 3):
            raise ValueError(f"Measurements: rotation must have shape {(n, k, 3, 3)}, got {self.rotation.shape}")
        if self.markers is not None and tuple(self.markers.shape) != (k, 3):
            raise ValueError(f"Measurements: markers must have shape {(k, 3)}, got {self.markers.shape}")
        if not set(self.axes) <= {0, 1, 2} or len(self.axes) == 0:
            raise ValueError(f"Measurements: axes must be a non-empty subset of (0, 1, 2), got {self.axes}")


class JointMeasurements(eqx.Module):
    """A robot's measured joint trajectory for identification through the simulator by
    multiple shooting (Bock & Plitt, 1984): joint positions ``q`` and joint torques ``torque``
    (n, nj), sampled every ``sample_dt`` seconds from ``t = 0``, in the order of
    ``model.joint_names``.

    The record is cut into windows of ``window`` sample intervals starting at samples ``0,
    window, 2 window, ...`` (``start_q``/``start_qd`` (nw, nj): the joint state at each start,
    e.g. the filtered measurements). Each window is simulated from its start state, driven by
    the measured torques (linear between samples), and every ``every``-th sample of the window
    after its start is compared: residual ``(q_sim - q) / sigma_q`` (``sigma_q`` (nj,) or a
    number). Short windows keep the open-loop error growth of an unstable robot small; the
    windows run one after another in one compiled loop (``lax.map``).
    """

    sample_dt: float = eqx.field(static=True, converter=float)
    window: int = eqx.field(static=True, converter=int)
    every: int = eqx.field(static=True, converter=int)
    q: Float[Array, "n nj"]
    torque: Float[Array, "n nj"]
    start_q: Float[Array, "nw nj"]
    start_qd: Float[Array, "nw nj"]
    sigma_q: Float[Array, "*nj"] = eqx.field(default=1.0, converter=jnp.asarray)

    def __check_init__(self):
        n = self.q.shape[0]
        if self.q.ndim != 2 or self.torque.shape != self.q.shape:
            raise ValueError(f"JointMeasurements: q and torque must both be (n, n_joints), got {self.q.shape}, {self.torque.shape}")
        if self.window < 1 or self.every < 1 or self.window % self.every:
            raise ValueError(f"JointMeasurements: window ({self.window}) must be a positive multiple of every ({self.every})")
        if self.start_q.shape != (self.num_windows, self.q.shape[1]) or self.start_qd.shape != self.start_q.shape:
            raise ValueError(
                f"JointMeasurements: {n} samples make {self.num_windows} windows of {self.window}; start_q and "
                f"start_qd must be {(self.num_windows, self.q.shape[1])}, got {self.start_q.shape}, {self.start_qd.shape}"
            )
        if self.num_windows < 1 or not self.sample_dt > 0:
            raise ValueError(f"JointMeasurements: need sample_dt > 0 and at least window + 1 = {self.window + 1} samples, got {n}")

    @property
    def num_windows(self) -> int:
        return (self.q.shape[0] - 1) // self.window

    @property
    def starts(self) -> np.ndarray:
        """Sample index of each window's start."""
        return np.arange(self.num_windows) * self.window

    @property
    def compared(self) -> np.ndarray:
        """``(nw, k)`` sample indices compared in each window."""
        return self.starts[:, None] + np.arange(self.every, self.window + 1, self.every)[None, :]


def _with_torque(model, signal):
    """``model`` with the joint-torque signal of its ``JointForce`` replaced."""
    idx = [i for i, f in enumerate(model.forces) if isinstance(f, JointForce)]
    if len(idx) != 1:
        raise ValueError("JointMeasurements: the model needs one JointForce (load the robot with joint_torques=...)")
    return eqx.tree_at(lambda m: m.forces[idx[0]].torque, model, signal, is_leaf=lambda x: x is None)


def windowed_joint_positions(model, solver, data: JointMeasurements, *, dt: float, **kwargs) -> Float[Array, "nw k nj"]:
    """Joint positions simulated over every window of ``data`` at its compared samples."""
    local = (np.arange(data.every, data.window + 1, data.every) * data.sample_dt).tolist()
    t1 = data.window * data.sample_dt
    ts_all = jnp.arange(data.q.shape[0], dtype=data.q.dtype) * data.sample_dt

    def one(t_start, q0, qd0):
        m = _with_torque(model, LinearInterpolation(ts_all - t_start, data.torque))
        m = with_joint_state(m, q0, qd0)
        sol = simulate(m, solver, 0.0, t1, dt, saveat=SaveAt(ts=np.asarray(local)), **kwargs)
        return joint_coordinates(m, sol)

    t_start = jnp.asarray(data.starts * data.sample_dt, data.q.dtype)
    return jax.lax.map(lambda x: one(*x), (t_start, data.start_q, data.start_qd))


def marker_positions(model, sol, bodies: tuple[int, ...], markers) -> Float[Array, "n k 3"]:
    """World positions of body points ``markers`` (body axes, from the body-frame origin)."""
    idx = np.asarray(bodies)
    if markers is None:
        return sol.position[:, idx]
    offset = jnp.asarray(markers) - model.bodies.com[idx]
    return sol.position[:, idx] + jnp.einsum("nkij,kj->nki", sol.rotation[:, idx], offset)


def residuals(model, solver, data: Measurements, *, dt: float, t0: float = 0.0, **kwargs) -> Float[Array, " N"]:
    """Whitened residuals of ``model`` simulated by ``solver`` against ``data`` (flat); for
    ``JointMeasurements``, the joint positions of all windows (``t0`` unused)."""
    if isinstance(data, JointMeasurements):
        q = windowed_joint_positions(model, solver, data, dt=dt, **kwargs)
        return ((q - data.q[data.compared]) / data.sigma_q).reshape(-1)
    sol = simulate(model, solver, t0, data.ts[-1], dt, saveat=SaveAt(ts=np.asarray(data.ts)), **kwargs)
    parts = []
    if data.position is not None:
        p = marker_positions(model, sol, data.bodies, data.markers)
        axes = np.asarray(data.axes)
        parts.append(((p - data.position)[..., axes] / data.sigma_position).reshape(-1))
    if data.rotation is not None:
        R = sol.rotation[:, np.asarray(data.bodies)]
        delta = SO3.from_matrix(jnp.swapaxes(R, -1, -2) @ data.rotation).log()
        parts.append((delta / data.sigma_rotation).reshape(-1))
    return jnp.concatenate(parts)


def measure(
    model,
    solver,
    ts: ArrayLike,
    *,
    dt: float,
    bodies: tuple[int, ...] | None = None,
    markers: ArrayLike | None = None,
    sigma_position: float = 0.0,
    sigma_rotation: float = 0.0,
    key: Array | None = None,
    t0: float = 0.0,
    **kwargs,
) -> Measurements:
    """Synthetic measurements: simulate ``model`` and add Gaussian noise (positions
    ``N(0, sigma_position^2)`` per component, rotations ``R exp(eps)`` with
    ``eps ~ N(0, sigma_rotation^2 I)``). Zero sigmas give noise-free data (whitening by 1)."""
    ts = tuple(float(t) for t in np.ravel(ts))
    bodies = tuple(range(model.num_bodies)) if bodies is None else tuple(bodies)
    sol = simulate(model, solver, t0, ts[-1], dt, saveat=SaveAt(ts=np.asarray(ts)), **kwargs)
    position = marker_positions(model, sol, bodies, markers)
    rotation = sol.rotation[:, np.asarray(bodies)]
    if sigma_position > 0 or sigma_rotation > 0:
        if key is None:
            raise ValueError("measure: noise needs a PRNG key")
        kp, kr = jax.random.split(key)
        position = position + sigma_position * jax.random.normal(kp, position.shape, position.dtype)
        eps = sigma_rotation * jax.random.normal(kr, rotation.shape[:-1], rotation.dtype)
        rotation = rotation @ SO3.exp(eps).matrix
    return Measurements(
        ts,
        bodies,
        position,
        rotation,
        None if markers is None else jnp.asarray(markers, position.dtype),
        sigma_position=sigma_position if sigma_position > 0 else 1.0,
        sigma_rotation=sigma_rotation if sigma_rotation > 0 else 1.0,
    )


# -- compiled pieces (shared across fits of the same structure) ------------------------------


@xla.filter_jit
def _value_and_grad(theta, model_fn, solver, data, dt, t0, kwargs):
    def loss(th):
        r = residuals(model_fn(th), solver, data, dt=dt, t0=t0, **kwargs)
        return 0.5 * jnp.sum(r * r)

    return jax.value_and_grad(loss)(theta)


def _forward_mode(kwargs: dict) -> dict:
    """``simulate``'s keywords for forward-mode derivatives: an adaptive run differentiates in
    reverse mode only unless told ``adjoint="forward"``."""
    if "adjoint" in kwargs or isinstance(kwargs.get("stepsize_controller", ConstantStepSize()), ConstantStepSize):
        return kwargs
    return {**kwargs, "adjoint": "forward"}


@xla.filter_jit
def _residuals_and_jacobian(theta, model_fn, solver, data, dt, t0, kwargs):
    kwargs = _forward_mode(kwargs)

    def fn(th):
        r = residuals(model_fn(th), solver, data, dt=dt, t0=t0, **kwargs)
        return r, r

    jac, r = jax.jacfwd(fn, has_aux=True)(theta)
    return r, jac


@eqx.filter_jit  # also traced inside the L-BFGS step: a nested jit takes no compiler options
def _loss(theta, model_fn, solver, data, dt, t0, kwargs):
    """The loss at a trial ``theta``: a run that fails there gives NaN (a rejected trial), not an
    error that would end the fit."""
    r = residuals(model_fn(theta), solver, data, dt=dt, t0=t0, **{**kwargs, "throw": False})
    return 0.5 * jnp.sum(r * r)


# -- fitting ---------------------------------------------------------------------------------


def print_progress(stage: str, iteration: int, loss: float, grad_norm: float) -> None:
    """Default progress report: one line per reported iteration."""
    print(f"{stage:>12s}  it {iteration:5d}  loss {loss:.6e}  |grad| {grad_norm:.3e}", flush=True)


class FitResult(eqx.Module):
    """Estimate ``theta``, final ``loss`` (``|r|^2 / 2``) and gradient norm, the covariance of
    ``theta`` (``s^2 (J^T J)^-1``), ``residual_variance`` ``s^2``, iterations per stage and the
    history ``(stage, iteration, loss, grad_norm)``."""

    theta: Float[Array, " p"]
    loss: float
    grad_norm: float
    covariance: Float[Array, "p p"]
    residual_variance: float
    num_residuals: int
    iterations: dict
    history: list


def fit(
    model_fn: Callable[[Array], Any],
    theta0: ArrayLike,
    data: Measurements,
    solver,
    *,
    dt: float,
    t0: float = 0.0,
    adam_steps: int = 0,
    learning_rate: float = 1e-2,
    refine: str = "gauss_newton",
    refine_steps: int = 30,
    gtol: float = 1e-10,
    xtol: float = 1e-12,
    damping: str = "marquardt",
    callback: Callable[[str, int, float, float], None] | None = print_progress,
    report_every: int = 10,
    simulate_kwargs: dict | None = None,
) -> FitResult:
    """Fit ``theta`` so that ``model_fn(theta)`` simulated by ``solver`` matches ``data``.

    ``model_fn``: ``theta -> Model``, e.g. ``InertiaParameters`` (it must be hashable:
    an ``eqx.Module`` or a module-level function). Stages: ``adam_steps`` of Adam at
    ``learning_rate``, then ``refine_steps`` of ``"gauss_newton"`` (Levenberg-Marquardt) or
    ``"lbfgs"`` (optax). Stops when ``|grad| <= gtol (1 + loss)`` or the relative step is below
    ``xtol``. ``callback(stage, iteration, loss, grad_norm)`` reports progress (every
    ``report_every`` Adam steps, every refinement step). A trial ``theta`` whose simulation
    fails counts as one that does not lower the loss. A ``UserWarning`` names each coordinate of
    ``theta`` that the data hardly see (its estimate means little).

    ``damping`` of the Gauss-Newton step ``(J^T J + lam D) s = -J^T r``: ``"marquardt"``
    (Marquardt, 1963: ``D = diag(J^T J)``, invariant to the scale of each coordinate; suits a
    problem where every coordinate is identifiable) or ``"levenberg"`` (Levenberg, 1944: ``D =
    mean(diag(J^T J)) I``). Take ``"levenberg"`` when combinations of the parameters are not
    identifiable (a robot's inertial parameters: only the base parameters of Gautier & Khalil,
    1990, are): there ``diag(J^T J)`` is tiny or zero for a coordinate that the data hardly see,
    Marquardt's damping hardly restrains it and the steps run off along it; Levenberg's keeps the
    step small in every direction the data do not fix (as ``lam -> 0`` it tends to the
    minimum-norm Gauss-Newton step, which leaves the unidentifiable combinations where they
    start). Marquardt's ``D`` is floored at ``1e-12 max(D)`` so that a coordinate with a zero
    column (not in the residuals at all) is not moved and the damped matrix stays regular.
    """
    if refine not in ("gauss_newton", "lbfgs"):
        raise ValueError(f"fit: refine must be 'gauss_newton' or 'lbfgs', got {refine!r}")
    if damping not in ("marquardt", "levenberg"):
        raise ValueError(f"fit: damping must be 'marquardt' or 'levenberg', got {damping!r}")
    kwargs = dict(simulate_kwargs or {})
    theta = jnp.asarray(theta0)
    if theta.ndim != 1:
        raise ValueError(f"fit: theta0 must be a flat vector, got shape {theta.shape}")
    args = (model_fn, solver, data, dt, t0, kwargs)
    history = []
    report = callback or (lambda *a: None)

    def note(stage, it, loss, g):
        history.append((stage, it, loss, g))
        report(stage, it, loss, g)

    def finite_or_raise(value, stage, it):
        if not all(np.all(np.isfinite(np.asarray(v))) for v in jax.tree.leaves(value)):
            raise ValueError(f"fit: non-finite loss or gradient in {stage} at iteration {it}")

    iterations = {"adam": 0, refine: 0}
    # -- stage 1: Adam
    if adam_steps:
        opt = optax.adam(learning_rate)
        state = opt.init(theta)
        for it in range(adam_steps):
            loss, g = _value_and_grad(theta, *args)
            finite_or_raise((loss, g), "adam", it)
            if it % report_every == 0 or it == adam_steps - 1:
                note("adam", it, float(loss), float(jnp.linalg.norm(g)))
            updates, state = opt.update(g, state, theta)
            theta = optax.apply_updates(theta, updates)
            iterations["adam"] = it + 1
    # -- stage 2: Gauss-Newton (Levenberg-Marquardt) or L-BFGS
    if refine == "gauss_newton":
        theta, r, jac = _levenberg_marquardt(
            theta,
            lambda th: _residuals_and_jacobian(th, *args),
            lambda th: _loss(th, *args),
            refine_steps, gtol, xtol, note, finite_or_raise, iterations, damping,
        )  # fmt: skip
    else:
        theta = _lbfgs(theta, args, refine_steps, gtol, note, finite_or_raise, iterations)
        r, jac = _residuals_and_jacobian(theta, *args)
    loss = 0.5 * float(jnp.sum(r * r))
    grad_norm = float(jnp.linalg.norm(jac.T @ r))
    n, p = jac.shape
    s2 = 2.0 * loss / max(n - p, 1)
    cov = s2 * jnp.linalg.pinv(jac.T @ jac, hermitian=True)
    _warn_if_undetermined(np.asarray(theta), np.asarray(jac), s2)
    note("final", sum(iterations.values()), loss, grad_norm)
    return FitResult(theta, loss, grad_norm, cov, s2, n, iterations, history)


def _warn_if_undetermined(theta: np.ndarray, jac: np.ndarray, s2: float) -> None:
    """Warn about each coordinate of ``theta`` that the data hardly see: a change by its own size
    (or by 1 near 0) moves the whitened residuals by less than a hundredth of their spread,
    ``sqrt(s2)`` (its standard deviation is then over 100 times that size), or by nothing at
    all. A combination of coordinates the data do not see is not caught here."""
    seen = np.linalg.norm(jac, axis=0) * np.maximum(np.abs(theta), 1.0)
    loose = np.flatnonzero((seen == 0) | (seen < 1e-2 * np.sqrt(s2)))
    if loose.size:
        which = ", ".join(f"theta[{i}] = {theta[i]:.4g}" for i in loose[:8]) + (f" and {loose.size - 8} more" if loose.size > 8 else "")
        warnings.warn(f"fit: the data hardly determine {which}: the measured motion hardly depends on them, and "
                      "their estimates mean little (a robot link's parameters outside the base parameters; with "
                      "gravity the only force, every body's mass and inertia scaled together); fix them, or measure "
                      "a motion that depends on them", stacklevel=3)  # fmt: skip


def _levenberg_marquardt(theta, residuals_and_jacobian, loss_fn, steps, gtol, xtol, note, check, iterations, damping="marquardt"):
    """Levenberg-Marquardt on ``residuals_and_jacobian(theta) -> (r, J)`` with the trial losses
    ``loss_fn(theta)``: the damping ``lam`` is raised (x4) until a step lowers the loss, lowered
    (/3) after each accepted step. A non-finite trial loss (a simulation that failed with
    ``throw=False``) counts as no decrease. Returns ``theta`` and its residuals and Jacobian."""
    lam = 1e-3
    r, jac = residuals_and_jacobian(theta)
    loss = 0.5 * float(jnp.sum(r * r))
    for it in range(steps):
        check((r, jac), "gauss_newton", it)
        g = jac.T @ r
        gnorm = float(jnp.linalg.norm(g))
        note("gauss_newton", it, loss, gnorm)
        if gnorm <= gtol * (1.0 + loss):
            break
        A = jac.T @ jac
        d = jnp.diag(A)
        if damping == "marquardt":
            D = jnp.maximum(d, 1e-12 * jnp.max(d))  # a zero column would make A + lam D singular
        else:
            D = jnp.full_like(d, jnp.mean(d))
        for _ in range(20):  # raise the damping until the loss decreases
            step = -jnp.linalg.solve(A + lam * jnp.diag(D), g)
            trial = theta + step
            trial_loss = float(loss_fn(trial)) if bool(jnp.all(jnp.isfinite(step))) else float("nan")
            if np.isfinite(trial_loss) and trial_loss <= loss:
                break
            lam *= 4.0
        else:
            break  # no decrease at any damping: at the minimum to rounding
        theta = trial
        lam = max(lam / 3.0, 1e-12)
        iterations["gauss_newton"] = it + 1
        r, jac = residuals_and_jacobian(theta)
        loss = 0.5 * float(jnp.sum(r * r))
        if float(jnp.linalg.norm(step)) <= xtol * (1.0 + float(jnp.linalg.norm(theta))):
            break
    return theta, r, jac


def _lbfgs(theta, args, steps, gtol, note, check, iterations):
    opt = optax.lbfgs()

    def value(th):
        return _loss(th, *args)

    @xla.filter_jit
    def update(th, state):
        loss, g = optax.value_and_grad_from_state(value)(th, state=state)
        updates, state = opt.update(g, state, th, value=loss, grad=g, value_fn=value)
        return optax.apply_updates(th, updates), state, loss, g

    state = opt.init(theta)
    for it in range(steps):
        new, state, loss, g = update(theta, state)
        if not bool(jnp.isfinite(loss) & jnp.all(jnp.isfinite(g))):
            _value_and_grad(theta, *args)  # a run that fails at theta raises its own error here
        check((loss, g), "lbfgs", it)
        gnorm = float(jnp.linalg.norm(g))
        note("lbfgs", it, float(loss), gnorm)
        if gnorm <= gtol * (1.0 + float(loss)):
            break
        theta = new
        iterations["lbfgs"] = it + 1
    return theta


# -- uncertainty -----------------------------------------------------------------------------


def physical_covariance(params: InertiaParameters, theta: Array, covariance: Array) -> Float[Array, "q q"]:
    """Covariance of ``physical`` (flattened over bodies) by the delta method."""
    jac = jax.jacfwd(lambda th: physical(params.bodies(th)).reshape(-1))(theta)
    return jac @ covariance @ jac.T


def physical_std(params: InertiaParameters, theta: Array, covariance: Array) -> Float[Array, "nb 10"]:
    """Predicted standard deviations of ``(m, c, J entries)`` per body."""
    var = jnp.diagonal(physical_covariance(params, theta, covariance))
    return jnp.sqrt(jnp.maximum(var, 0.0)).reshape(-1, 10)
