"""Identification of the Franka Panda's link inertial parameters: through difflie's simulator
against the classical inverse-dynamics least squares.

    python benchmarks/robot_identification.py [--quick] [--seed 0] [--json FILE]

Data (independent of difflie): Pinocchio (Carpentier et al., 2019) computes the joint torques of
exciting trajectories by its recursive Newton-Euler algorithm plus the URDF's viscous joint
damping. The fingers are locked (welded to the hand, as ``pin.buildReducedModel`` does), so the
unknowns are the ten inertial parameters of each of the 7 arm links (70). Excitation: a finite
Fourier series per joint (Swevers, Ganseman, Tukel, De Schutter & Van Brussel, 1997),
``q(t) = q_mid + sum_l (a_l sin(l w t) - b_l cos(l w t)) / (l w)``, period ``PERIOD``,
``HARMONICS`` harmonics, the best conditioned of a few random draws. Measurements at 1 kHz
with white noise of 1 % of each channel's RMS (positions about their mean, torques).
A second Fourier trajectory (another seed) is held out for validation.

Methods:

(a) **simulator** — log-Cholesky parameters (Rucker & Wensing, 2022; every value is a physically
    consistent body, Wensing, Kim & Slotine, 2017) -> link bodies (:func:`difflie.joint_space.with_bodies`)
    -> ``GeneralizedAlpha`` (index-3 DAE, implicit steps differentiated by the implicit-function
    theorem) driven by the measured torques (linear between samples), by multiple shooting over
    short windows (:class:`difflie.identify.JointMeasurements`; window starts at the filtered
    measured joint states), residual: simulated minus measured joint positions. Adam is not
    needed: Levenberg-Marquardt from the prior (:func:`difflie.identify.fit`) with Levenberg's
    identity damping (``damping="levenberg"``): only 43 combinations of the 70 parameters are
    identifiable, and Marquardt's (1963) diagonal scaling lets the steps run off along the
    coordinates the data hardly see (link 1's mass and most of its inertia), so that no trial
    step of the first iteration lowered the loss.
(b) **least squares** — the inverse-dynamics regressor ``tau - D qd = Y(q, qd, qdd) phi``
    (``pin.computeJointTorqueRegressor``), base parameters by QR of the regressor stacked at
    random states (Gautier & Khalil, 1990; Gautier, 1991), velocities and accelerations from the
    noisy positions by a zero-phase 4th-order Butterworth low-pass and central differences, the
    torques filtered alike, then weighted least squares (weights from the residuals of ordinary
    least squares per joint, Gautier & Poignet, 2001). The base estimate fixes only the base
    combinations; the full vector closest to the prior with those combinations is checked for
    physical consistency (pseudo-inertia positive definite, Wensing et al., 2017).

Both start from the same prior: the CAD values with masses, centres of mass and inertias
perturbed (``PRIOR_ERROR``). Reported on the held-out motion: the RMS torque error of the
inverse dynamics at the true states (relative to the RMS torque) and the joint-position error of
the open-loop simulation (difflie ``GeneralizedAlpha``, driven by the true torques) over windows
of ``HOLDOUT_WINDOW`` s from the true states, and the error of the base parameters.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import platform
import time
import warnings

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import scipy.signal  # noqa: E402

import difflie as dl  # noqa: E402
from difflie.identify import InertiaParameters, JointMeasurements, fit, windowed_joint_positions  # noqa: E402
from difflie.io import RobotModelWarning  # noqa: E402
from difflie.joint_space import LinearInterpolation, with_bodies  # noqa: E402

JOINTS = tuple(f"panda_joint{k}" for k in range(1, 8))
FINGERS = {"panda_finger_joint1": 0.02, "panda_finger_joint2": 0.02}
Q_MID = np.array([0.0, 0.0, 0.0, -1.6, 0.0, 1.9, 0.0])  # mid-range of the joint limits
EXCURSION = 0.7  # rad: largest |q - q_mid| of every joint
MAX_RATE = 1.5  # rad/s: speeds above this are scaled down
PERIOD, HARMONICS = 4.0, 5
SAMPLE_DT = 1e-3
NOISE = 0.01  # of each channel's RMS
PRIOR_ERROR = 0.2  # relative error of the prior's masses and inertias; COM off by 2 cm
CUTOFF = 8.0  # Hz, Butterworth low-pass of the least-squares pipeline
EDGE = 100  # samples left out at each end by the least squares
PIN_NAMES = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")  # Pinocchio's order, about the link origin


# -- robot models ----------------------------------------------------------------------------------


def panda_urdf() -> str | None:
    """Path of the Panda URDF of ``example-robot-data`` (``None`` when not installed)."""
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).endswith("panda_description/urdf/panda.urdf"):
            return str(f.locate())
    return None


def pinocchio_arm(path: str):
    """Pinocchio model of the arm with the fingers locked at ``FINGERS``."""
    import pinocchio as pin

    full = pin.buildModelFromUrdf(path)
    q = pin.neutral(full)
    for name, value in FINGERS.items():
        q[full.joints[full.getJointId(name)].idx_q] = value
    return pin.buildReducedModel(full, [full.getJointId(n) for n in FINGERS], q)


def difflie_arm(path: str, q0=None, torque: LinearInterpolation | None = None) -> dl.Model:
    """difflie model of the arm (fingers locked at ``FINGERS``) at joint positions ``q0``."""
    q0 = Q_MID if q0 is None else q0
    if torque is None:
        torque = LinearInterpolation(jnp.array([0.0, 1.0]), jnp.zeros((2, 7)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)  # joint limits are not modelled
        return dl.load_model(path, locked_joints=tuple(FINGERS), joint_positions={**FINGERS, **dict(zip(JOINTS, map(float, q0)))},
                             joint_torques=torque)  # fmt: skip


# -- parameters ------------------------------------------------------------------------------------


def pin_parameters(bodies) -> np.ndarray:
    """``(nb * 10,)`` Pinocchio dynamic parameters ``(m, m c, I_O)`` of difflie bodies (inertia
    about the link origin, entries xx, xy, yy, xz, yz, zz)."""
    m, c = np.asarray(bodies.mass), np.asarray(bodies.com)
    J = np.asarray(bodies.inertia)
    I = J + m[:, None, None] * (np.einsum("bi,bi->b", c, c)[:, None, None] * np.eye(3) - np.einsum("bi,bj->bij", c, c))
    entries = np.stack([I[:, 0, 0], I[:, 0, 1], I[:, 1, 1], I[:, 0, 2], I[:, 1, 2], I[:, 2, 2]], axis=-1)
    return np.concatenate([m[:, None], m[:, None] * c, entries], axis=-1).reshape(-1)


def bodies_from_pin(phi: np.ndarray, names=None) -> dl.RigidBody:
    """difflie bodies of Pinocchio parameters, without any physical check (a least-squares
    estimate may be non-physical)."""
    p = np.asarray(phi).reshape(-1, 10)
    m, c = p[:, 0], p[:, 1:4] / p[:, :1]
    I = np.stack([p[:, [4, 5, 7]], p[:, [5, 6, 8]], p[:, [7, 8, 9]]], axis=1)
    J = I - m[:, None, None] * (np.einsum("bi,bi->b", c, c)[:, None, None] * np.eye(3) - np.einsum("bi,bj->bij", c, c))
    body = object.__new__(dl.RigidBody)  # skip RigidBody's positivity checks
    for k, v in dict(mass=jnp.asarray(m), inertia=jnp.asarray(J), com=jnp.asarray(c), names=names).items():
        object.__setattr__(body, k, v)
    return body


def pseudo_inertia_min_eig(phi: np.ndarray) -> np.ndarray:
    """Smallest eigenvalue of each link's pseudo-inertia ``[[tr(I)/2 - I, h], [h^T, m]]``
    (Wensing et al., 2017): positive iff the link is a physical body."""
    p = np.asarray(phi).reshape(-1, 10)
    I = np.stack([p[:, [4, 5, 7]], p[:, [5, 6, 8]], p[:, [7, 8, 9]]], axis=1)
    S = 0.5 * np.trace(I, axis1=1, axis2=2)[:, None, None] * np.eye(3) - I
    Q = np.zeros((len(p), 4, 4))
    Q[:, :3, :3], Q[:, :3, 3], Q[:, 3, :3], Q[:, 3, 3] = S, p[:, 1:4], p[:, 1:4], p[:, 0]
    return np.linalg.eigvalsh(Q)[:, 0]


def prior_bodies(true: dl.RigidBody, seed: int) -> dl.RigidBody:
    """The CAD bodies with errors: masses and the principal second moments of the mass
    (``tr(J)/2 - J_i``) scaled by ``1 + PRIOR_ERROR u`` (u uniform in [-1, 1]), centres of mass
    moved by up to 2 cm per axis."""
    rng = np.random.default_rng(1000 + seed)
    nb = true.mass.shape[0]
    m = np.asarray(true.mass) * (1 + PRIOR_ERROR * rng.uniform(-1, 1, nb))
    c = np.asarray(true.com) + 0.02 * rng.uniform(-1, 1, (nb, 3))
    lam, V = np.linalg.eigh(np.asarray(true.inertia))
    second = 0.5 * lam.sum(-1, keepdims=True) - lam  # principal second moments of the mass (>= 0)
    second = second * (1 + PRIOR_ERROR * rng.uniform(-1, 1, lam.shape))
    lam = second.sum(-1, keepdims=True) - second  # so the triangle inequalities hold
    return dl.RigidBody(jnp.asarray(m), jnp.asarray(np.einsum("bij,bj,bkj->bik", V, lam, V)), jnp.asarray(c), names=true.names)


# -- excitation and data ---------------------------------------------------------------------------


class Fourier:
    """``q(t) = q_mid + sum_l (a_l sin(l w t) - b_l cos(l w t)) / (l w)`` per joint, and its
    first two derivatives (Swevers et al., 1997)."""

    def __init__(self, a: np.ndarray, b: np.ndarray, period: float = PERIOD):
        self.a, self.b, self.w = a, b, 2 * np.pi / period
        self.l = np.arange(1, a.shape[1] + 1)

    def __call__(self, t):
        lw = self.l * self.w
        arg = np.asarray(t)[:, None, None] * lw  # (n, 1, L)
        s, c = np.sin(arg), np.cos(arg)
        q = Q_MID + np.sum((self.a * s - self.b * c) / lw, axis=-1)
        qd = np.sum(self.a * c + self.b * s, axis=-1)
        qdd = np.sum(lw * (-self.a * s + self.b * c), axis=-1)
        return q, qd, qdd


def random_fourier(rng) -> Fourier:
    a, b = rng.normal(size=(2, 7, HARMONICS))
    traj = Fourier(a, b)
    q, qd, _ = traj(np.linspace(0, PERIOD, 2001))
    scale = np.minimum(EXCURSION / np.abs(q - Q_MID).max(0), MAX_RATE / np.abs(qd).max(0))
    return Fourier(a * scale[:, None], b * scale[:, None])


def regressor(pm, q, qd, qdd) -> np.ndarray:
    """``(n * nj, 10 nb)`` stacked joint-torque regressor."""
    import pinocchio as pin

    data = pm.createData()
    return np.concatenate([pin.computeJointTorqueRegressor(pm, data, *x).copy() for x in zip(q, qd, qdd)])


def inverse_dynamics(pm, q, qd, qdd) -> np.ndarray:
    """Joint torques ``RNEA + D qd`` (Pinocchio), ``(n, nj)``."""
    import pinocchio as pin

    data = pm.createData()
    return np.stack([pin.rnea(pm, data, *x) for x in zip(q, qd, qdd)]) + np.asarray(pm.damping) * qd


def exciting_trajectory(pm, seed: int, candidates: int = 20) -> Fourier:
    """The best-conditioned (base regressor at 100 samples, unit columns) of ``candidates``
    random draws."""
    rng = np.random.default_rng(seed)
    base = base_parameters(pm)
    best, best_cond = None, np.inf
    for _ in range(candidates):
        traj = random_fourier(rng)
        Y = regressor(pm, *traj(np.linspace(0, PERIOD, 100, endpoint=False)))
        Yb = Y[:, base.independent]
        cond = np.linalg.cond(Yb / np.linalg.norm(Yb, axis=0))
        if cond < best_cond:
            best, best_cond = traj, cond
    return best


def measure(pm, traj: Fourier, duration: float, rng, noise: bool = True):
    """True and measured samples every ``SAMPLE_DT`` over ``[0, duration]``; the measurement
    noise is white, ``NOISE`` times each channel's RMS (``sigma_q``, ``sigma_tau``; the
    measurements are exact with ``noise=False``, and the sigmas still whiten)."""
    ts = np.arange(int(round(duration / SAMPLE_DT)) + 1) * SAMPLE_DT
    q, qd, qdd = traj(ts)
    tau = inverse_dynamics(pm, q, qd, qdd)
    sq = NOISE * np.sqrt(np.mean((q - q.mean(0)) ** 2, axis=0))
    st = NOISE * np.sqrt(np.mean(tau**2, axis=0))
    eq, et = (sq * rng.normal(size=q.shape), st * rng.normal(size=tau.shape)) if noise else (0.0, 0.0)
    return dict(ts=ts, q=q, qd=qd, qdd=qdd, tau=tau, sigma_q=sq, sigma_tau=st, q_meas=q + eq, tau_meas=tau + et)


def filtered(x: np.ndarray, cutoff: float = CUTOFF, dt: float = SAMPLE_DT) -> np.ndarray:
    """Zero-phase 4th-order Butterworth low-pass along axis 0."""
    b, a = scipy.signal.butter(4, cutoff * 2 * dt)
    return scipy.signal.filtfilt(b, a, x, axis=0, padlen=min(500, x.shape[0] - 1))  # odd extension: short edge transients


def differentiate(q_meas: np.ndarray, dt: float = SAMPLE_DT):
    """Filtered positions, velocities and accelerations (central differences of the filtered
    positions), as a practitioner computes them."""
    qf = filtered(q_meas)
    qd = np.gradient(qf, dt, axis=0)
    return qf, qd, np.gradient(qd, dt, axis=0)


# -- base parameters (Gautier & Khalil, 1990) --------------------------------------------------------


class BaseParameters:
    """Base parameters ``phi_b = phi[independent] + K phi[dependent]`` from the QR decomposition
    of the regressor stacked at random states: a column whose diagonal entry ``|R_ii|`` is below
    ``tol |R|_max`` depends on the columns before it."""

    def __init__(self, independent, dependent, K):
        self.independent, self.dependent, self.K = independent, dependent, K
        n = len(independent) + len(dependent)
        self.matrix = np.zeros((len(independent), n))  # phi_b = matrix @ phi
        self.matrix[np.arange(len(independent)), independent] = 1.0
        self.matrix[:, dependent] += K

    def __len__(self):
        return len(self.independent)

    def combinations(self, tol: float = 1e-9) -> list[str]:
        """Each base parameter as a readable combination (link index from 1)."""
        name = lambda j: f"{PIN_NAMES[j % 10]}{j // 10 + 1}"  # noqa: E731
        out = []
        for i, j in enumerate(self.independent):
            terms = [name(j)] + [f"{k:+.4g} {name(d)}" for k, d in zip(self.K[i], self.dependent) if abs(k) > tol]
            out.append(" ".join(terms))
        return out


@functools.cache
def _base_cache(path: str, samples: int, seed: int, tol: float) -> BaseParameters:
    pm = pinocchio_arm(path)
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(pm.lowerPositionLimit), np.asarray(pm.upperPositionLimit)
    q = rng.uniform(lo, hi, (samples, 7))
    Y = regressor(pm, q, rng.uniform(-2, 2, (samples, 7)), rng.uniform(-5, 5, (samples, 7)))
    R = scipy.linalg.qr(Y, mode="r")[0]
    d = np.abs(np.diag(R))
    dependent = np.flatnonzero(d <= tol * d.max())
    independent = np.flatnonzero(d > tol * d.max())
    K = np.linalg.lstsq(Y[:, independent], Y[:, dependent], rcond=None)[0]
    K[np.abs(K) < 1e-10] = 0.0
    return BaseParameters(independent, dependent, K)


def base_parameters(pm=None, samples: int = 200, seed: int = 12345, tol: float = 1e-8) -> BaseParameters:
    return _base_cache(panda_urdf(), samples, seed, tol)


# -- (b) least squares on the inverse-dynamics regressor ---------------------------------------------


def least_squares(pm, d, base: BaseParameters, prior_phi: np.ndarray):
    """Weighted least squares of the base parameters from the noisy measurements ``d``; returns
    ``(phi_b, phi_full)`` with ``phi_full`` the vector closest to ``prior_phi`` whose base
    combinations are ``phi_b``. Ends of the record (filter transients) are left out."""
    qf, qd, qdd = differentiate(d["q_meas"])
    tau = filtered(d["tau_meas"]) - np.asarray(pm.damping) * qd
    keep = slice(EDGE, -EDGE)
    Y = regressor(pm, qf[keep], qd[keep], qdd[keep])[:, base.independent]
    y = tau[keep].reshape(-1)
    phi_b = np.linalg.lstsq(Y, y, rcond=None)[0]
    sigma = np.sqrt(np.mean((y - Y @ phi_b).reshape(-1, 7) ** 2, axis=0))  # per joint
    w = np.tile(1.0 / sigma, len(y) // 7)
    phi_b = np.linalg.lstsq(Y * w[:, None], y * w, rcond=None)[0]
    P = base.matrix
    phi_full = prior_phi + np.linalg.pinv(P) @ (phi_b - P @ prior_phi)
    return phi_b, phi_full


# -- (a) through the simulator ---------------------------------------------------------------------------


def joint_measurements(d, window: int, every: int, measured: bool = True) -> JointMeasurements:
    """Multiple-shooting data: windows of ``window`` samples starting at the filtered measured
    joint states, ``EDGE`` samples in from the ends (the true ones, from the start, with
    ``measured=False``)."""
    q, qd = (differentiate(d["q_meas"])[:2]) if measured else (d["q"], d["qd"])
    q_meas, tau = (d["q_meas"], d["tau_meas"]) if measured else (d["q"], d["tau"])
    if measured:  # the filter's edge transients: leave out EDGE samples at each end
        q, qd, q_meas, tau = (x[EDGE:-EDGE] for x in (q, qd, q_meas, tau))
    nw = (len(q) - 1) // window
    st = np.arange(nw) * window
    return JointMeasurements(SAMPLE_DT, window, every, jnp.asarray(q_meas), jnp.asarray(tau),
                             jnp.asarray(q[st]), jnp.asarray(qd[st]), jnp.asarray(d["sigma_q"]))  # fmt: skip


def simulator_fit(model: dl.Model, prior: dl.RigidBody, data: JointMeasurements, *, dt: float, steps: int, verbose: bool = False):
    """Levenberg-Marquardt on the log-Cholesky parameters of the 7 links, from the prior."""
    params = InertiaParameters(functools.partial(with_bodies, model))
    result = fit(params, params.init(prior), data, dl.GeneralizedAlpha(), dt=dt, refine_steps=steps, damping="levenberg",
                 callback=None if not verbose else dl.identify.print_progress,
                 simulate_kwargs=dict(throw=False))  # a diverging trial step is refused by its loss  # fmt: skip
    return params.bodies(result.theta), result


# -- evaluation on the held-out motion -----------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("dt",))
def _predict(model, bodies, data, dt):
    return windowed_joint_positions(with_bodies(model, bodies), dl.GeneralizedAlpha(), data, dt=dt, throw=False)


def evaluate(pm, model, base: BaseParameters, phi: np.ndarray, bodies, held, held_data: JointMeasurements, dt: float, phi_true):
    """Torque error (RMS over RMS torque, inverse dynamics at the true states), open-loop
    joint-position error (RMS and largest, rad) over the held-out windows, base-parameter error
    (norm relative to the true base parameters' norm), physical consistency."""
    Y = regressor(pm, held["q"][::10], held["qd"][::10], held["qdd"][::10])
    tau = held["tau"][::10] - np.asarray(pm.damping) * held["qd"][::10]
    pred = (Y @ phi).reshape(tau.shape)
    torque_err = float(np.sqrt(np.mean((pred - tau) ** 2)) / np.sqrt(np.mean(tau**2)))
    q = np.asarray(_predict(model, bodies, held_data, dt))
    e = q - np.asarray(held_data.q)[held_data.compared]
    pb, pb_true = base.matrix @ phi, base.matrix @ phi_true
    eig = pseudo_inertia_min_eig(phi)
    return dict(torque_rel_rms=torque_err, q_rms=float(np.sqrt(np.mean(e**2))) if np.all(np.isfinite(e)) else float("nan"),
                q_max=float(np.abs(e).max()) if np.all(np.isfinite(e)) else float("nan"),
                base_rel_err=float(np.linalg.norm(pb - pb_true) / np.linalg.norm(pb_true)),
                nonphysical_links=int(np.sum(eig <= 0)), min_pseudo_eig=float(eig.min()))  # fmt: skip


# -- the study -------------------------------------------------------------------------------------------


SETTINGS = {
    # duration of the identification record (s), shooting window (samples), compared every (samples),
    # simulator step (s), Levenberg-Marquardt steps, held-out duration (s) and window (samples)
    "full": dict(duration=4.0, window=250, every=10, dt=2.5e-3, steps=12, held=4.0, held_window=500),
    "quick": dict(duration=1.0, window=125, every=25, dt=5e-3, steps=4, held=1.0, held_window=500),
    "medium": dict(duration=2.0, window=125, every=25, dt=5e-3, steps=4, held=1.0, held_window=500),
    "long": dict(duration=4.0, window=125, every=25, dt=5e-3, steps=4, held=1.0, held_window=500),
}


def run(settings: dict, seed: int = 0, noise: bool = True, verbose: bool = True) -> dict:
    path = panda_urdf()
    pm = pinocchio_arm(path)
    model = difflie_arm(path)
    base = base_parameters()
    true = model.bodies
    phi_true = pin_parameters(true)
    prior = prior_bodies(true, seed)
    phi_prior = pin_parameters(prior)
    rng = np.random.default_rng(seed)
    d = measure(pm, exciting_trajectory(pm, seed), settings["duration"], rng, noise=noise)
    held = measure(pm, exciting_trajectory(pm, seed + 100), settings["held"], rng, noise=False)
    held_data = joint_measurements(held, settings["held_window"], settings["every"], measured=False)
    ev = functools.partial(evaluate, pm, model, base, held=held, held_data=held_data, dt=settings["dt"], phi_true=phi_true)
    rows = {}
    t = time.perf_counter()
    phi_b, phi_ls = least_squares(pm, d, base, phi_prior)
    t_ls = time.perf_counter() - t
    t = time.perf_counter()
    data = joint_measurements(d, settings["window"], settings["every"])
    est, result = simulator_fit(model, prior, data, dt=settings["dt"], steps=settings["steps"], verbose=verbose)
    t_sim = time.perf_counter() - t
    rows["true (CAD)"] = dict(ev(phi_true, true), wall_s=0.0)
    rows["prior"] = dict(ev(phi_prior, prior), wall_s=0.0)
    rows["least squares (b)"] = dict(ev(phi_ls, bodies_from_pin(phi_ls, true.names)), wall_s=t_ls)
    rows["simulator, log-Cholesky (a)"] = dict(ev(pin_parameters(est), est), wall_s=t_sim, iterations=result.iterations,
                                                loss=result.loss, residuals=result.num_residuals)  # fmt: skip
    return dict(rows=rows, base_count=len(base), base_combinations=base.combinations(), settings=settings, seed=seed,
                noise=NOISE if noise else 0.0, machine=f"{platform.processor() or platform.machine()}, {platform.system()}",
                jax=jax.__version__)  # fmt: skip


def table(out: dict) -> str:
    lines = [
        f"base parameters: {out['base_count']} of 70 (QR of the regressor at random states)",
        "",
        "| method | held-out torque error (RMS / RMS) | held-out joint error RMS / max (rad) | base-parameter error | non-physical links | wall time (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in out["rows"].items():
        lines.append(f"| {name} | {r['torque_rel_rms']:.2e} | {r['q_rms']:.2e} / {r['q_max']:.2e} | {r['base_rel_err']:.2e} | "
                     f"{r['nonphysical_links']} (min eig {r['min_pseudo_eig']:.1e}) | {r['wall_s']:.1f} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 s of data, 4 steps (same as --setting quick)")
    parser.add_argument("--setting", choices=sorted(SETTINGS), default="full", help="size of the study (see SETTINGS)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise-free", action="store_true", help="exact measurements")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    if panda_urdf() is None:
        raise SystemExit("needs `pin` and `example-robot-data` (pip install -e '.[test]')")
    out = run(SETTINGS["quick" if args.quick else args.setting], args.seed, noise=not args.noise_free)
    print(table(out))
    print("\nbase combinations (Pinocchio's parameters about the link origin, link index from 1):")
    for c in out["base_combinations"]:
        print("  ", c)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()
