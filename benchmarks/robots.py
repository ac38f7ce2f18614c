"""Robots beside Pinocchio: time per step, the step each method needs for a given accuracy, and
the time to simulate at that accuracy; a vmap batch of Pandas.

    python benchmarks/robots.py [--quick] [--robots panda g1] [--tol 1e-6] [--t1 0.2]
                                [--batch 4096] [--batch-steps 10] [--repeats 5] [--json FILE]
                                [--batch-only] [--cpu-devices N]

Robots (``example-robot-data``): the Franka Panda (fixed base, 7 arm joints and 2 fingers, 9
bodies, 45 constraint rows) from the bent pose of ``tests/test_robots.py`` with its joint rates
and sinusoidal joint torques, URDF damping; the Unitree G1 (floating base, 29 joints, 30 bodies,
145 rows) flying under gravity with sinusoidal torques of about 2 rad/s^2 per joint (the
scenario of ``test_humanoid_*``). Float64.

Accuracy: the largest joint-angle error over ``[0, t1]`` (saves every 0.01 s) against
Pinocchio's ABA (Featherstone 2008; Carpentier et al. 2019) integrated by RK4 at h = 1e-4 s
(on the G1's free-flyer, the Lie-group RK4 of Munthe-Kaas 1998 through ``pin.integrate`` and
``pin.dIntegrate``), whose own error is below 1e-11 rad. For each method the error is measured
at two steps, the order fitted, the step for ``--tol`` predicted (rounded to a whole number of
steps) and, where that takes at most ``--max-steps`` steps, run and measured; beyond that the
row says "extrapolated" (backward Euler, first order, needs ~1e5 steps for 1e-6 rad).

Timing: difflie compiled with ``difflie.xla.jit`` (a whole ``simulate``), after a warm-up, with
``block_until_ready``, median of ``--repeats``, divided by the number of steps. Pinocchio: the
same rollout in Python (RK4 step: four ``pin.aba`` calls and NumPy), single thread, median of 9; and the
floor of a compiled RK4, four times the median time of one ``pin.aba`` call.

Batch (``difflie.batch.simulate_batch``): 4096 Pandas whose initial joint positions differ
(uniform +-0.1 rad about the bent pose, placed by ``difflie.joint_space.with_joint_state``) at
the step found above; ``GeneralizedAlpha(newton="modified", block_size=24)`` as one vmap and
in chunks of 4, then modified and full Newton in chunks of 4 split across ``--cpu-devices`` CPU
devices (default: one per core). The steady rate is ``(T(5k) - T(k)) / 4k`` for runs of ``k = --batch-steps``
and ``5k`` steps, which leaves out each run's start (consistent initial state, first matrix),
reported apart per system; one Panda is measured the same way. These first steps are the
easy ones (Newton's kept matrix still contracts well there, with fewer iterations): the chunked
batch on every device is also run over the whole ``--t1`` (``--horizon-batch`` systems, start
included, as the single-system table counts). Body-steps/s, system-steps/s
and their ratio to Pinocchio's single-system rate (per step). ``--batch-only``: the batch
alone, at the step of the accuracy study (0.2/560 s).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import statistics
import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import difflie as dl  # noqa: E402
from difflie.joint_space import with_joint_state  # noqa: E402

try:
    import pinocchio as pin  # noqa: E402
except ImportError:  # a machine without Pinocchio (the GPU's) runs the batch alone: gpu_mechanisms.py
    pin = None

SAVE_EVERY = 0.01
H_REF = 1e-4
PANDA_GA_STEPS = 560  # generalized-alpha steps over 0.2 s for 1e-6 rad (the accuracy study's)


def robot_file(suffix: str) -> str:
    for f in importlib.metadata.files("example-robot-data") or []:
        if str(f).endswith(suffix):
            return str(f.locate())
    raise SystemExit(f"example-robot-data has no {suffix}")


class Sinusoids(eqx.Module):
    """``u(t) = a sin(omega t + phase)`` per joint."""

    amplitude: jax.Array
    omega: jax.Array
    phase: jax.Array

    def __call__(self, t):
        return self.amplitude * jnp.sin(self.omega * t + self.phase)


# -- scenarios --------------------------------------------------------------------------------


PANDA_Q0 = {"panda_joint1": 0.3, "panda_joint2": -0.5, "panda_joint3": 0.2, "panda_joint4": -2.0,
            "panda_joint5": 0.4, "panda_joint6": 1.5, "panda_joint7": 0.7,
            "panda_finger_joint1": 0.01, "panda_finger_joint2": 0.02}  # fmt: skip
PANDA_QD0 = {"panda_joint1": 0.5, "panda_joint4": -0.8, "panda_joint7": 2.0}
PANDA_TORQUES = dict(amplitude=np.array([6.0, 10.0, 4.0, 8.0, 1.5, 1.0, 0.5, 0.02, -0.02]),
                     omega=np.array([5.0, 7.0, 3.0, 4.0, 9.0, 6.0, 11.0, 8.0, 8.0]),
                     phase=np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 0.0, 0.0]))  # fmt: skip


def panda_model(path, **options):
    """The Panda scenario's difflie model and its joint positions and rates (no Pinocchio);
    ``options``: more keywords of ``load_model`` (``joint_limits=True``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dl.load_model(path, joint_positions=PANDA_Q0, joint_velocities=PANDA_QD0,
                              joint_torques=Sinusoids(*(jnp.asarray(PANDA_TORQUES[k]) for k in ("amplitude", "omega", "phase"))),
                              **options)  # fmt: skip
    q = np.array([PANDA_Q0[n] for n in model.joint_names])
    v = np.array([PANDA_QD0.get(n, 0.0) for n in model.joint_names])
    return model, q, v


def panda_batch_state(q, v, n):
    """``n`` joint states: the arm's joints uniform within +-0.1 rad of ``q`` (fingers +-5 mm)."""
    q0 = q[None] + np.random.default_rng(0).uniform(-0.1, 0.1, (n, len(q))) * np.r_[np.ones(7), 0.05, 0.05]
    return q0, np.broadcast_to(v, q0.shape)


def panda():
    path = robot_file("panda_description/urdf/panda.urdf")
    pm = pin.buildModelFromUrdf(path)
    model, q, v = panda_model(path)
    assert model.joint_names == tuple(pm.names)[1:]
    return dict(name="Panda", model=model, pm=pm, q0=q, v0=v, **PANDA_TORQUES,
                damping=np.asarray(pm.damping), lie=False, fixed=0, tuned=dl.GeneralizedAlpha(newton="modified"),
                tuned_name='GeneralizedAlpha(newton="modified")')  # fmt: skip


G1_URDF = "g1_description/urdf/g1_29dof_rev_1_0.urdf"


def g1_state(n_joints):
    """The G1 scenario's initial state in Pinocchio's order (free-flyer ``q0`` with the
    quaternion as x, y, z, w; ``v0``) and the frequencies and phases of its joint torques."""
    rng = np.random.default_rng(2)
    q_j, v_j = rng.uniform(-0.4, 0.4, n_joints), rng.uniform(-0.3, 0.3, n_joints)
    omega, phase = rng.uniform(3.0, 11.0, n_joints), rng.uniform(0.0, 2 * np.pi, n_joints)
    quat = np.array([0.9, 0.1, -0.2, 0.3]) / np.linalg.norm([0.9, 0.1, -0.2, 0.3])
    q0 = np.concatenate([[0.1, -0.2, 0.8], quat[1:], quat[:1], q_j])
    v0 = np.concatenate([[0.3, -0.2, 0.5], [0.12, -0.24, 0.18], v_j])
    return q0, v0, omega, phase


def g1_model(path, names, amplitude, **options):
    """The G1 scenario's difflie model (no Pinocchio): joint ``names`` in file order and the
    torque ``amplitude`` per joint (``g1`` takes 2 rad/s^2 over the diagonal of M^-1);
    ``options``: more keywords of ``load_model``."""
    q0, v0, omega, phase = g1_state(len(names))
    quat = np.r_[q0[6], q0[3:6]]
    R = np.asarray(dl.lie.SO3.from_quaternion(jnp.asarray(quat)).as_matrix())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dl.load_model(path, floating_base=True, base_pose=(q0[:3], quat), base_velocity=(R @ v0[:3], v0[3:6]),
                              joint_positions=dict(zip(names, q0[7:])), joint_velocities=dict(zip(names, v0[6:])),
                              joint_torques=Sinusoids(jnp.asarray(amplitude), jnp.asarray(omega), jnp.asarray(phase)),
                              **options)  # fmt: skip
    assert model.joint_names == tuple(names)
    return model


def g1():
    path = robot_file(G1_URDF)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    names = tuple(pm.names)[2:]
    q0, v0, omega, phase = g1_state(len(names))
    pd = pm.createData()
    pin.computeMinverse(pm, pd, q0)
    amplitude = 2.0 / np.diag(pd.Minv)[6:]
    return dict(name="G1", model=g1_model(path, names, amplitude), pm=pm, q0=q0, v0=v0, amplitude=amplitude,
                omega=omega, phase=phase, damping=np.zeros(pm.nv), lie=True, fixed=7,
                tuned=dl.GeneralizedAlpha(newton="modified"), tuned_name='GeneralizedAlpha(newton="modified")')


# -- Pinocchio --------------------------------------------------------------------------------


def pinocchio_rollout(s, t1, h):
    """RK4 (Lie-group RK4 on a free-flyer) of Pinocchio's ABA; configurations every SAVE_EVERY."""
    pm, pd = s["pm"], s["pm"].createData()
    amp, om, ph, damping, nb = s["amplitude"], s["omega"], s["phase"], s["damping"], pm.nv - len(s["amplitude"])
    zero_base = np.zeros(nb)

    def acc(t, q, v):
        return pin.aba(pm, pd, q, v, np.concatenate([zero_base, amp * np.sin(om * t + ph)]) - damping * v)

    if s["lie"]:
        def rates(t, q, u, v):
            du = np.linalg.solve(pin.dIntegrate(pm, q, u, pin.ArgumentPosition.ARG1), v)
            return du, acc(t, pin.integrate(pm, q, u), v)
    else:
        def rates(t, q, u, v):
            return v, acc(t, q + u, v)

    n = int(round(t1 / h))
    every = max(1, int(round(SAVE_EVERY / h)))
    q, v, zero, qs = s["q0"], s["v0"], np.zeros(pm.nv), [s["q0"]]
    for i in range(n):
        t = i * h
        k1u, k1v = rates(t, q, zero, v)
        k2u, k2v = rates(t + h / 2, q, h / 2 * k1u, v + h / 2 * k1v)
        k3u, k3v = rates(t + h / 2, q, h / 2 * k2u, v + h / 2 * k2v)
        k4u, k4v = rates(t + h, q, h * k3u, v + h * k3v)
        du = h / 6 * (k1u + 2 * k2u + 2 * k3u + k4u)
        q = pin.integrate(pm, q, du) if s["lie"] else q + du
        v = v + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        if (i + 1) % every == 0:
            qs.append(q)
    return np.array(qs)


def aba_time(s, repeats=2000):
    pm, pd = s["pm"], s["pm"].createData()
    q, v, tau = s["q0"], s["v0"], np.zeros(pm.nv)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(repeats):
            pin.aba(pm, pd, q, v, tau)
        times.append((time.perf_counter() - t) / repeats)
    return statistics.median(times)


# -- difflie ----------------------------------------------------------------------------------


def pinocchio_step_us(s, t1, steps=20, repeats=9):
    """Pinocchio's RK4 step (the Python loop) at ``steps`` steps over ``t1``, in us (median)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        pinocchio_rollout(s, t1, t1 / steps)
        times.append(time.perf_counter() - t)
    return statistics.median(times) / steps * 1e6


def difflie_rollout(s, solver, t1, h):
    """The compiled rollout (saves every SAVE_EVERY) and its compile time."""
    ts = np.arange(int(round(t1 / SAVE_EVERY)) + 1) * SAVE_EVERY
    model = s["model"]

    def run(m):
        return dl.joint_coordinates(m, dl.simulate(m, solver, 0.0, t1, h, saveat=dl.SaveAt(ts=ts)))

    t = time.perf_counter()
    compiled = dl.xla.jit(run).lower(model).compile()
    return (lambda: compiled(model)), time.perf_counter() - t


def timed(fn, repeats):
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def error(q, q_ref, fixed):
    return float(np.abs(np.asarray(q) - q_ref[:, fixed:]).max())


def step_for_tolerance(e_of, t1, tol, h1):
    """Errors at h1 and h1/2, the fitted order, and the number of steps for ``tol`` (rounded up
    to a whole number of steps per save interval)."""
    e1, e2 = e_of(h1), e_of(h1 / 2)
    order = math.log2(e1 / e2)
    h = h1 / 2 * (tol / e2) ** (1 / order)
    per_save = math.ceil(SAVE_EVERY / h)
    return e1, e2, order, per_save * int(round(t1 / SAVE_EVERY))


def bench_robot(s, args, rows):
    t1, tol = args.t1, args.tol
    q_ref = pinocchio_rollout(s, t1, H_REF)
    fixed = s["fixed"]
    name, nb = s["name"], s["model"].num_bodies
    print(f"\n{name}: {nb} bodies, {s['model'].num_constraints} constraint rows, t1 = {t1} s, target {tol:g} rad", flush=True)

    # Pinocchio RK4
    def pin_error(h):
        return error(pinocchio_rollout(s, t1, h)[:, fixed:], q_ref, fixed)

    e1, e2, order, n = step_for_tolerance(pin_error, t1, tol, 5e-3)
    per_step = pinocchio_step_us(s, t1, n) * 1e-6
    e = error(pinocchio_rollout(s, t1, t1 / n)[:, fixed:], q_ref, fixed)
    aba = aba_time(s)
    rows.append(dict(robot=name, method="Pinocchio ABA + RK4 (Python loop)", order=order, errors=[e1, e2], steps=n,
                     error=e, extrapolated=False, step_us=per_step * 1e6, floor_us=4 * aba * 1e6))  # fmt: skip
    print(f"  Pinocchio RK4: errors {e1:.3g} at h = 5e-3, {e2:.3g} at 2.5e-3 (order {order:.2f}); {n} steps: "
          f"{e:.3g} rad; {per_step * 1e6:.1f} us/step, 4 x aba = {4 * aba * 1e6:.1f} us", flush=True)

    for label, solver, h1 in [('GeneralizedAlpha(newton="full")', dl.GeneralizedAlpha(newton="full"), 1e-3),
                              ("BackwardEuler()", dl.BackwardEuler(), 1e-3)]:
        runs = {}

        def dl_error(h, solver=solver, runs=runs):
            fn, ct = difflie_rollout(s, solver, t1, h)
            runs[h] = (fn, ct)
            return error(fn(), q_ref, fixed)

        e1, e2, order, n = step_for_tolerance(dl_error, t1, tol, h1)
        extrapolated = n > args.max_steps
        h_timed = h1 / 2 if extrapolated else t1 / n
        if extrapolated:
            fn, ct = runs[h_timed]
            e = float("nan")
        else:
            fn, ct = difflie_rollout(s, solver, t1, h_timed)
            e = error(fn(), q_ref, fixed)
        per_step = timed(fn, args.repeats) / int(round(t1 / h_timed))
        rows.append(dict(robot=name, method=label, order=order, errors=[e1, e2], steps=n, error=e,
                         extrapolated=extrapolated, step_us=per_step * 1e6, compile_s=ct))  # fmt: skip
        print(f"  {label}: errors {e1:.3g} at h = {h1:g}, {e2:.3g} at {h1 / 2:g} (order {order:.2f}); {n} steps "
              + ("(extrapolated)" if extrapolated else f": {e:.3g} rad") + f"; {per_step * 1e6:.1f} us/step, compile {ct:.1f} s", flush=True)
        if label.startswith("Generalized"):
            fn, ct = difflie_rollout(s, s["tuned"], t1, t1 / n)
            e_t = error(fn(), q_ref, fixed)
            per_step = timed(fn, args.repeats) / n
            rows.append(dict(robot=name, method=s["tuned_name"], order=order, errors=[], steps=n, error=e_t,
                             extrapolated=False, step_us=per_step * 1e6, compile_s=ct))  # fmt: skip
            print(f"  {s['tuned_name']}: {n} steps: {e_t:.3g} rad; {per_step * 1e6:.1f} us/step, compile {ct:.1f} s", flush=True)
            s["ga_steps"] = n


def bench_batch(s, args, rows, pin_step_us):
    """The Panda batch's steady rate: ``T(5k) - T(k)`` over ``4k`` steps (``k = --batch-steps``),
    which leaves out each run's start (consistent initial state, first matrix), given apart per
    system as ``T(k) - k`` steps; a single Panda measured the same way over ``8k`` and ``40k``
    steps (its start, ~25 steps, would blur a shorter difference)."""
    model, n_batch = s["model"], args.batch
    h = args.t1 / s.get("ga_steps", PANDA_GA_STEPS)
    k = args.batch_steps
    q0, qd0 = (jnp.asarray(x) for x in panda_batch_state(s["q0"], s["v0"], n_batch))
    devices = jax.devices("cpu")
    modified = dl.GeneralizedAlpha(newton="modified", block_size=24)
    where, on_devices = f"chunks of 4 on {len(devices)} CPU devices", dict(chunk_size=4, devices=devices)
    variants = [("modified Newton, one vmap", modified, {}), ("modified Newton, chunks of 4", modified, dict(chunk_size=4))]
    if len(devices) > 1:
        variants.append((f"modified Newton, {where}", modified, on_devices))
    best = variants[-1]  # modified Newton in chunks, on every device
    variants.append((f"full Newton, {where}", dl.GeneralizedAlpha(newton="full", block_size=24), on_devices))

    def rate(make, args_, k):
        """(steady s per step, start s, compile s) of the program ``make(steps)`` over ``k`` and
        ``5k`` steps."""
        times, compile_s = [], 0.0
        for steps in (k, 5 * k):
            t = time.perf_counter()
            compiled = dl.xla.jit(make(steps)).lower(*args_).compile()
            compile_s += time.perf_counter() - t
            times.append(timed(lambda: compiled(*args_), max(1, args.repeats // 2)))
        per_step = (times[1] - times[0]) / (4 * k)
        return per_step, times[0] - k * per_step, compile_s

    def batch(steps, solver, kw):
        def run(q, qd):
            return dl.batch.simulate_batch((q, qd), solver, 0.0, steps * h, h, **kw,
                                           make_model=lambda p: with_joint_state(model, *p)).position[:, -1]  # fmt: skip

        return run

    def one(steps, solver):
        return lambda q, qd: dl.simulate(with_joint_state(model, q, qd), solver, 0.0, steps * h, h).position[-1]

    single = {}  # id(solver): its single Panda's steady s per step
    for label, solver, kw in variants:
        if id(solver) not in single:
            single[id(solver)], start1, _ = rate(lambda steps: one(steps, solver), (q0[0], qd0[0]), 8 * k)
            print(f"  one Panda, {label.split(',')[0]}: {single[id(solver)] * 1e6:.1f} us per step, start {start1 * 1e3:.2f} ms", flush=True)
        s1 = single[id(solver)]
        dt, start, ct = rate(lambda steps: batch(steps, solver, kw), (q0, qd0), k)
        sys_rate = n_batch / dt
        rows.append(dict(robot=f"{n_batch} x {s['name']}", method=label, batch=n_batch, step_ms=dt * 1e3,
                         system_steps_per_s=sys_rate, body_steps_per_s=sys_rate * model.num_bodies,
                         x_single=dt / n_batch / s1, start_ms=start / n_batch * 1e3,
                         x_pinocchio=sys_rate * pin_step_us * 1e-6, compile_s=ct))  # fmt: skip
        print(f"  batch {n_batch} {label}: {dt * 1e3:.1f} ms per batch step ({dt / n_batch / s1:.2f}x one Panda per system), "
              f"{sys_rate:.4g} system-steps/s, x{sys_rate * pin_step_us * 1e-6:.2f} Pinocchio; start "
              f"{start / n_batch * 1e3:.2f} ms per system; compile {ct:.1f} s", flush=True)

    # The first 5k steps are the easy ones (Newton's kept matrix still contracts well): the best
    # variant again over the whole t1, start included, as the single-system table counts it.
    label, solver, kw = best
    n_h = min(n_batch, args.horizon_batch)
    steps = int(round(args.t1 / h))
    qh, qdh = q0[:n_h], qd0[:n_h]
    whole = dl.xla.jit(batch(steps, solver, kw)).lower(qh, qdh).compile()
    dt = timed(lambda: whole(qh, qdh), max(1, args.repeats // 2)) / steps
    sys_rate = n_h / dt
    rows.append(dict(robot=f"{n_h} x {s['name']}", method=f"{label}, whole {args.t1} s", batch=n_h, step_ms=dt * 1e3,
                     system_steps_per_s=sys_rate, body_steps_per_s=sys_rate * model.num_bodies,
                     x_pinocchio=sys_rate * pin_step_us * 1e-6, start_ms=float("nan")))  # fmt: skip
    print(f"  batch {n_h} {label}, {steps} steps (whole {args.t1} s, start included): {dt * 1e3:.2f} ms per batch step, "
          f"{sys_rate:.4g} system-steps/s, x{sys_rate * pin_step_us * 1e-6:.2f} Pinocchio", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="batch of 1024, 3 repeats")
    p.add_argument("--robots", nargs="+", default=["panda", "g1"], choices=["panda", "g1"])
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--t1", type=float, default=0.2)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--batch-steps", type=int, default=5, help="k: the batch runs k and 5k steps")
    p.add_argument("--horizon-batch", type=int, default=256, help="the batch run over the whole --t1")
    p.add_argument("--cpu-devices", type=int, default=os.cpu_count(),
                   help="CPU devices (jax_num_cpu_devices) the chunked batches are split across")
    p.add_argument("--max-steps", type=int, default=4000, help="run the predicted step only up to this many steps")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None, help="append the rows to this file (JSON lines)")
    p.add_argument("--batch-only", action="store_true",
                   help="the Panda batch alone, at the step the accuracy study finds (0.2/560 s), beside Pinocchio's RK4 step")
    args = p.parse_args()
    jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    if args.quick:
        args.batch, args.repeats = min(args.batch, 1024), 3
    print(f"jax {jax.__version__}, pinocchio {pin.__version__}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; difflie.xla.jit {dl.xla.compiler_options()}", flush=True)
    rows = []
    scenarios = {"panda": panda, "g1": g1}
    if args.batch_only:
        s = panda()
        pin_us = pinocchio_step_us(s, args.t1)
        print(f"  Pinocchio RK4 (Python loop), 20 steps over {args.t1} s: {pin_us:.1f} us/step", flush=True)
        bench_batch(s, args, rows, pin_us)
        args.robots = []
    for key in args.robots:
        s = scenarios[key]()
        bench_robot(s, args, rows)
        if key == "panda" and args.batch:
            pin_us = next(r["step_us"] for r in rows if r["robot"] == s["name"] and r["method"].startswith("Pinocchio"))
            bench_batch(s, args, rows, pin_us)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    print(f"\n| robot | method | steps for {args.tol:g} rad over {args.t1} s | error (rad) | us/step | ms per simulated {args.t1} s |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        if "batch" in r:
            continue
        err = "extrapolated" if r["extrapolated"] else f"{r['error']:.2g}"
        extra = f" (4 x aba: {r['floor_us']:.1f})" if "floor_us" in r else ""
        print(f"| {r['robot']} | {r['method']} | {r['steps']} | {err} | {r['step_us']:.1f}{extra} | {r['step_us'] * r['steps'] * 1e-3:.4g} |")
    batch = [r for r in rows if "batch" in r]
    if batch:
        print("\n| batch | method | ms per batch step | system-steps/s | body-steps/s | "
              "x Pinocchio single system (per step) | start, ms per system |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for r in batch:
            print(f"| {r['robot']} | {r['method']} | {r['step_ms']:.1f} | {r['system_steps_per_s']:.3g} | "
                  f"{r['body_steps_per_s']:.3g} | {r['x_pinocchio']:.2f} | {r['start_ms']:.2f} |")
    if args.json:
        with open(args.json, "a") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
