"""Batches of mechanisms and robots on whatever device JAX runs on: chains, Pandas and G1s.

    python benchmarks/gpu_mechanisms.py [--chains 1024 8192] [--bodies 32] [--pandas 1024 4096]
                                        [--g1 256 1024] [--urdf panda.urdf] [--g1-urdf g1.urdf]
                                        [--g1-scenario g1.npz] [--pinocchio-us 32.1]
                                        [--g1-pinocchio-us 204] [--whole 0.2]
                                        [--options NAME] [--solvers all] [--budget 300]

* **Chains** (the model and initial tilts of ``chains.py``): ``jax.vmap`` of ``simulate`` over
  ``n`` spherical-joint chains of ``--bodies`` rods, ``GeneralizedAlpha(rho_inf=0.9, newton="full")``,
  ``BackwardEuler()`` (rA) and modified-Newton generalized-alpha (``--solvers modified``), 20 steps of 1e-3 s, float64; beside one chain alone on the same
  device. The batch's first chain must end where the lone chain ends (to 1e-9).
* **Pandas** (the scenario of ``robots.py``: sinusoidal torques, URDF damping, initial joint
  positions spread by +-0.1 rad): ``jax.vmap`` over ``n`` Pandas, h = 0.2/560 s (the step that
  reaches 1e-6 rad), runs of 5 and 25 steps (the steady rate from their difference, each run's
  start apart), float64. ``--pinocchio-us``: Pinocchio's single-thread RK4 step,
  measured by ``robots.py`` on a CPU (Pinocchio need not be installed where this runs), for the
  "x Pinocchio" column (``--g1-pinocchio-us`` for the G1s). ``--whole T``: each Panda and G1
  batch also runs over the whole ``[0, T]``, start included (Newton needs more iterations per
  step later in the motion than in its first steps).
* **G1s** (the flying humanoid of ``robots.py``: floating base, 30 bodies, sinusoidal torques):
  ``jax.vmap`` over ``n`` G1s whose joint positions are spread by +-0.1 rad, h = 1e-3 s (the
  step that reaches 1e-6 rad), runs of 5 and 25 steps as for the Pandas. Its torque amplitudes come from Pinocchio's mass matrix:
  where Pinocchio is missing, from ``--g1-scenario`` (an ``.npz`` of ``names`` and ``amplitude``
  written by ``--write-g1-scenario`` on a machine that has it).

``--options NAME`` merges one of ``GPU_OPTIONS`` into ``difflie.xla.jit``'s options (XLA's
per-compilation debug options), to compare compile times: ``xla-default`` turns XLA's fusion
autotuner back on (``difflie.xla.GPU_COMPILER_OPTIONS`` turns it off).
``--solvers all`` runs every solver of a kind at its first size (default: the first solver only);
any other word runs, at every size, the solvers whose label holds it (``--solvers modified``).
The batches are ``jax.vmap``s; under one, modified Newton rebuilds its kept matrices for the
batch together (``difflie.numerics.newton.Newton``).

Timing: compiled once (``difflie.xla.jit``), a warm-up, then the median of ``--repeats`` runs
with ``block_until_ready``; the compile time is split into tracing and lowering (``lower_s``)
and XLA's compile. ``--budget`` seconds: no new configuration starts after that.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np
from chains import median_time, tilted
from robots import G1_URDF, g1_model, g1_state, panda_batch_state, panda_model, robot_file

import difflie as dl
from difflie.joint_space import with_joint_state
from difflie.models import chain

H_CHAIN, CHAIN_STEPS = 1e-3, 20
H_PANDA, PANDA_STEPS = 0.2 / 560, 5
H_G1, G1_STEPS = 1e-3, 5
GPU_OPTIONS = {"difflie": {},  # difflie.xla.jit's own: GPU_COMPILER_OPTIONS
               "xla-default": {"xla_gpu_experimental_enable_fusion_autotuner": True}}  # fmt: skip
OPTIONS = {}  # the chosen entry of GPU_OPTIONS


def compiled(fn, *args):
    """``fn`` compiled by ``difflie.xla.jit`` with ``OPTIONS``; trace+lower and compile seconds."""
    t = time.perf_counter()
    lowered = dl.xla.jit(fn, compiler_options=OPTIONS).lower(*args)
    t1 = time.perf_counter()
    program = lowered.compile()
    return program, t1 - t, time.perf_counter() - t1


def chain_rows(n, bodies, solver, repeats):
    model = chain(bodies)
    t1 = CHAIN_STEPS * H_CHAIN

    def tip(angle):
        m = tilted(model, angle)
        return dl.simulate(m, solver, 0.0, t1, H_CHAIN, saveat=dl.SaveAt(t1=True), throw=False).position[-1, -1]

    angles = jax.numpy.linspace(0.0, 0.5, n)
    many, l_many, c_many = compiled(jax.vmap(tip), angles)
    one, l_one, c_one = compiled(tip, angles[0])
    t_many = median_time(lambda: many(angles), repeats)
    t_one = median_time(lambda: one(angles[0]), repeats)
    gap = float(np.max(np.abs(np.asarray(many(angles))[0] - np.asarray(one(angles[0])))))
    assert gap < 1e-9, gap
    work = bodies * CHAIN_STEPS
    return [dict(what=f"{n} chains of {bodies}", n=n, lower_s=l_many, compile_s=c_many, step_ms=t_many / CHAIN_STEPS * 1e3,
                 body_steps_per_s=n * work / t_many, gap=gap),
            dict(what=f"1 chain of {bodies}", n=1, lower_s=l_one, compile_s=c_one, step_ms=t_one / CHAIN_STEPS * 1e3,
                 body_steps_per_s=work / t_one, gap=0.0)]  # fmt: skip


def batch_rows(what, model, q0, qd0, h, steps, solver, repeats, pinocchio_us=None, whole_t1=None):
    """``jax.vmap`` of ``simulate`` over joint states ``q0``, ``qd0`` (n, joints), run for
    ``steps`` and ``5 steps``: the steady rate ``(T(5 steps) - T(steps)) / 4 steps`` leaves out
    each run's start (consistent initial state, first matrix), given apart per system. With
    ``whole_t1``, a second row: the run over the whole ``[0, whole_t1]``, start included."""
    n = len(q0)
    times = {}
    whole = int(round(whole_t1 / h)) if whole_t1 else None
    for k in (steps, 5 * steps) + ((whole,) if whole else ()):
        def end(a, b, k=k):
            return dl.simulate(with_joint_state(model, a, b), solver, 0.0, k * h, h,
                               saveat=dl.SaveAt(t1=True), throw=False).position[-1]  # fmt: skip

        many, l_many, c_many = compiled(jax.vmap(end), q0, qd0)
        times[k] = median_time(lambda: many(q0, qd0), repeats if k != whole else max(1, repeats // 2))
        ends = np.asarray(many(q0, qd0))
        assert np.all(np.isfinite(ends)), f"a system of the batch of {what} went non-finite"

    def row(label, t, **extra):
        rate = n / t
        return dict(what=label, n=n, lower_s=l_many, compile_s=c_many, step_ms=t * 1e3, system_steps_per_s=rate,
                    body_steps_per_s=rate * model.num_bodies,
                    x_pinocchio=rate * pinocchio_us * 1e-6 if pinocchio_us else float("nan"), **extra)  # fmt: skip

    t = (times[5 * steps] - times[steps]) / (4 * steps)
    rows = [row(f"{n} {what}, steps {steps}-{5 * steps}", t, start_ms=(times[steps] - steps * t) / n * 1e3)]
    if whole:
        rows.append(row(f"{n} {what}, whole {whole_t1} s ({whole} steps, start included)", times[whole] / whole))
    return rows


def panda_rows(n, solver, repeats, args):
    model, q, v = panda_model(args.urdf or robot_file("panda_description/urdf/panda.urdf"))
    q0, qd0 = panda_batch_state(q, v, n)
    return batch_rows("Pandas", model, q0, qd0, H_PANDA, PANDA_STEPS, solver, repeats, args.pinocchio_us, args.whole)


def g1_scenario(args):
    """Joint names and torque amplitudes of the G1 scenario: from Pinocchio (``robots.g1``)
    where it is installed, else from ``--g1-scenario``."""
    if args.g1_scenario:
        data = np.load(args.g1_scenario)
        return tuple(str(x) for x in data["names"]), data["amplitude"]
    from robots import g1

    s = g1()
    return s["model"].joint_names, s["amplitude"]


def g1_rows(n, solver, repeats, args):
    names, amplitude = g1_scenario(args)
    model = g1_model(args.g1_urdf or robot_file(G1_URDF), names, amplitude)
    q0, v0, _, _ = g1_state(len(names))
    spread = np.random.default_rng(0).uniform(-0.1, 0.1, (n, len(names)))
    q_j = q0[None, 7:] + spread
    return batch_rows("G1s", model, q_j, np.broadcast_to(v0[6:], q_j.shape), H_G1, G1_STEPS, solver, repeats,
                      args.g1_pinocchio_us, args.whole)


CHAIN_SOLVERS = {'GeneralizedAlpha(newton="full")': lambda: dl.GeneralizedAlpha(rho_inf=0.9, newton="full"),
                 "BackwardEuler()": lambda: dl.BackwardEuler(),
                 'GeneralizedAlpha(newton="modified")': lambda: dl.GeneralizedAlpha(rho_inf=0.9, newton="modified"),
                 'GeneralizedAlpha(newton="modified", block_size=24)':
                 lambda: dl.GeneralizedAlpha(rho_inf=0.9, newton="modified", block_size=24)}  # fmt: skip
PANDA_SOLVERS = {'GeneralizedAlpha(newton="full", block_size=24)': lambda: dl.GeneralizedAlpha(newton="full", block_size=24),
                 'GeneralizedAlpha(newton="modified", block_size=24)':
                 lambda: dl.GeneralizedAlpha(newton="modified", block_size=24),
                 'GeneralizedAlpha(newton="modified")': lambda: dl.GeneralizedAlpha(newton="modified"),
                 'GeneralizedAlpha(newton="full")': lambda: dl.GeneralizedAlpha(newton="full"),
                 "BackwardEuler()": lambda: dl.BackwardEuler()}  # fmt: skip
G1_SOLVERS = {'GeneralizedAlpha(newton="full", block_size=24)': lambda: dl.GeneralizedAlpha(newton="full", block_size=24),
              'GeneralizedAlpha(newton="modified", block_size=24)':
              lambda: dl.GeneralizedAlpha(newton="modified", block_size=24)}  # fmt: skip
KINDS = {"chain": (CHAIN_SOLVERS, "chains"), "panda": (PANDA_SOLVERS, "pandas"), "g1": (G1_SOLVERS, "g1")}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chains", type=int, nargs="*", default=[1024, 8192])
    p.add_argument("--bodies", type=int, default=32)
    p.add_argument("--pandas", type=int, nargs="*", default=[1024, 4096])
    p.add_argument("--g1", type=int, nargs="*", default=[256, 1024])
    p.add_argument("--urdf", default=None, help="the Panda's URDF (default: example-robot-data's)")
    p.add_argument("--g1-urdf", default=None, help="the G1's URDF (default: example-robot-data's)")
    p.add_argument("--g1-scenario", default=None, help="the G1's joint names and torque amplitudes (.npz)")
    p.add_argument("--write-g1-scenario", default=None, help="write that .npz (needs Pinocchio) and stop")
    p.add_argument("--pinocchio-us", type=float, default=None, help="Pinocchio's RK4 step of the Panda")
    p.add_argument("--g1-pinocchio-us", type=float, default=None, help="Pinocchio's RK4 step of the G1")
    p.add_argument("--whole", type=float, default=None, help="also run Pandas and G1s over [0, WHOLE] s")
    p.add_argument("--options", choices=list(GPU_OPTIONS), default="difflie")
    p.add_argument("--solvers", default="first", help="first, all, or a word of the solvers' labels")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget", type=float, default=300.0)
    args = p.parse_args()
    if args.write_g1_scenario:
        names, amplitude = g1_scenario(args)
        np.savez(args.write_g1_scenario, names=np.array(names), amplitude=amplitude)
        return
    OPTIONS.update(GPU_OPTIONS[args.options])
    start = time.perf_counter()
    dev = jax.devices()[0]
    print(f"jax {jax.__version__}, {dev.platform}: {dev.device_kind}, {os.cpu_count()} CPUs "
          f"(affinity {len(os.sched_getaffinity(0))}); options {args.options}: {dl.xla.compiler_options() | OPTIONS}", flush=True)
    rows = []
    jobs = []
    for kind, (solvers, sizes) in KINDS.items():
        first, *rest = solvers
        sizes = getattr(args, sizes)
        if args.solvers not in ("first", "all"):
            jobs += [(kind, s, n) for s in solvers if args.solvers in s for n in sizes]
            continue
        jobs += [(kind, first, n) for n in sizes]
        if args.solvers == "all":
            jobs += [(kind, s, n) for s in rest for n in sizes[:1]]  # the rest at the first size
    runners = {"chain": lambda n, solver: chain_rows(n, args.bodies, solver, args.repeats),
               "panda": lambda n, solver: panda_rows(n, solver, args.repeats, args),
               "g1": lambda n, solver: g1_rows(n, solver, args.repeats, args)}  # fmt: skip
    for kind, label, n in jobs:
        if time.perf_counter() - start > args.budget:
            print(f"  budget spent: {kind} {label} {n} not run", flush=True)
            continue
        new = runners[kind](n, KINDS[kind][0][label]())
        for r in new:
            r["solver"] = label
            print("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()),
                  flush=True)
        rows += new
    print("\n| system | solver | ms per step | body-steps/s | system-steps/s | x Pinocchio | start, ms per system "
          "| trace s | compile s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        sys_rate = r.get("system_steps_per_s", r["n"] / r["step_ms"] * 1e3)
        print(f"| {r['what']} | `{r['solver']}` | {r['step_ms']:.3g} | {r['body_steps_per_s']:.3g} | "
              f"{sys_rate:.3g} | {r.get('x_pinocchio', float('nan')):.2g} | {r.get('start_ms', float('nan')):.2g} | "
              f"{r['lower_s']:.1f} | {r['compile_s']:.1f} |")
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
