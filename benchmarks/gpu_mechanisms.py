"""Batches of mechanisms and robots on whatever device JAX runs on: chains and Pandas.

    python benchmarks/gpu_mechanisms.py [--chains 1024 8192] [--bodies 32] [--pandas 1024 4096]
                                        [--urdf panda.urdf] [--pinocchio-us 32.1] [--budget 300]

* **Chains** (the model and initial tilts of ``chains.py``): ``jax.vmap`` of ``simulate`` over
  ``n`` spherical-joint chains of ``--bodies`` rods, ``GeneralizedAlpha(rho_inf=0.9)`` and
  ``BackwardEuler()`` (rA), 20 steps of 1e-3 s, float64; beside one chain alone on the same
  device. The batch's first chain must end where the lone chain ends (to 1e-9).
* **Pandas** (the scenario of ``robots.py``: sinusoidal torques, URDF damping, initial joint
  positions spread by +-0.1 rad): ``jax.vmap`` over ``n`` Pandas, h = 0.2/560 s (the step that
  reaches 1e-6 rad), 5 steps, float64. ``--pinocchio-us``: Pinocchio's single-thread RK4 step,
  measured by ``robots.py`` on a CPU (Pinocchio need not be installed where this runs), for the
  "x Pinocchio" column.

Timing: compiled once (``difflie.xla.jit``), a warm-up, then the median of ``--repeats`` runs
with ``block_until_ready``. ``--budget`` seconds: no new configuration starts after that. The first solver of each kind
runs at every size, the others at the first size only.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np
from chains import compile_time, median_time, tilted
from robots import panda_batch_state, panda_model, robot_file

import difflie as dl
from difflie.joint_space import with_joint_state
from difflie.models import chain

H_CHAIN, CHAIN_STEPS = 1e-3, 20
H_PANDA, PANDA_STEPS = 0.2 / 560, 5


def chain_rows(n, bodies, solver, repeats):
    model = chain(bodies)
    t1 = CHAIN_STEPS * H_CHAIN

    def tip(angle):
        m = tilted(model, angle)
        return dl.simulate(m, solver, 0.0, t1, H_CHAIN, saveat=dl.SaveAt(t1=True), throw=False).position[-1, -1]

    angles = jax.numpy.linspace(0.0, 0.5, n)
    many, c_many = compile_time(dl.xla.jit(jax.vmap(tip)), angles)
    one, c_one = compile_time(dl.xla.jit(tip), angles[0])
    t_many = median_time(lambda: many(angles), repeats)
    t_one = median_time(lambda: one(angles[0]), repeats)
    gap = float(np.max(np.abs(np.asarray(many(angles))[0] - np.asarray(one(angles[0])))))
    assert gap < 1e-9, gap
    work = bodies * CHAIN_STEPS
    return [dict(what=f"{n} chains of {bodies}", n=n, compile_s=c_many, step_ms=t_many / CHAIN_STEPS * 1e3,
                 body_steps_per_s=n * work / t_many, gap=gap),
            dict(what=f"1 chain of {bodies}", n=1, compile_s=c_one, step_ms=t_one / CHAIN_STEPS * 1e3,
                 body_steps_per_s=work / t_one, gap=0.0)]  # fmt: skip


def panda_rows(n, solver, repeats, urdf, pinocchio_us):
    model, q, v = panda_model(urdf)
    q0, qd0 = panda_batch_state(q, v, n)

    def end(a, b):
        return dl.simulate(with_joint_state(model, a, b), solver, 0.0, PANDA_STEPS * H_PANDA, H_PANDA,
                           saveat=dl.SaveAt(t1=True), throw=False).position[-1]  # fmt: skip

    many, c_many = compile_time(dl.xla.jit(jax.vmap(end)), q0, qd0)
    t = median_time(lambda: many(q0, qd0), repeats) / PANDA_STEPS
    ends = np.asarray(many(q0, qd0))
    assert np.all(np.isfinite(ends)), "a Panda of the batch went non-finite"
    rate = n / t
    return [dict(what=f"{n} Pandas", n=n, compile_s=c_many, step_ms=t * 1e3, system_steps_per_s=rate,
                 body_steps_per_s=rate * model.num_bodies,
                 x_pinocchio=rate * pinocchio_us * 1e-6 if pinocchio_us else float("nan"))]  # fmt: skip


CHAIN_SOLVERS = {"GeneralizedAlpha()": lambda: dl.GeneralizedAlpha(rho_inf=0.9),
                 "BackwardEuler()": lambda: dl.BackwardEuler()}  # fmt: skip
PANDA_SOLVERS = {"GeneralizedAlpha(block_size=24)": lambda: dl.GeneralizedAlpha(block_size=24),
                 'GeneralizedAlpha(newton="modified")': lambda: dl.GeneralizedAlpha(newton="modified"),
                 "GeneralizedAlpha()": lambda: dl.GeneralizedAlpha()}  # fmt: skip


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chains", type=int, nargs="*", default=[1024, 8192])
    p.add_argument("--bodies", type=int, default=32)
    p.add_argument("--pandas", type=int, nargs="*", default=[1024, 4096])
    p.add_argument("--urdf", default=None, help="the Panda's URDF (default: example-robot-data's)")
    p.add_argument("--pinocchio-us", type=float, default=None)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget", type=float, default=300.0)
    args = p.parse_args()
    start = time.perf_counter()
    dev = jax.devices()[0]
    print(f"jax {jax.__version__}, {dev.platform}: {dev.device_kind}, {os.cpu_count()} CPUs "
          f"(affinity {len(os.sched_getaffinity(0))})", flush=True)
    rows = []
    chain_first, *chain_rest = CHAIN_SOLVERS
    panda_first, *panda_rest = PANDA_SOLVERS
    jobs = [("chain", chain_first, n) for n in args.chains] + [("panda", panda_first, n) for n in args.pandas]
    jobs += [("chain", s, n) for s in chain_rest for n in args.chains[:1]]  # the rest at the first size
    jobs += [("panda", s, n) for s in panda_rest for n in args.pandas[:1]]
    for kind, label, n in jobs:
        if time.perf_counter() - start > args.budget:
            print(f"  budget spent: {kind} {label} {n} not run", flush=True)
            continue
        if kind == "chain":
            new = chain_rows(n, args.bodies, CHAIN_SOLVERS[label](), args.repeats)
        else:
            urdf = args.urdf or robot_file("panda_description/urdf/panda.urdf")
            new = panda_rows(n, PANDA_SOLVERS[label](), args.repeats, urdf, args.pinocchio_us)
        for r in new:
            r["solver"] = label
            print("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()),
                  flush=True)
        rows += new
    print(f"\n| system | solver | ms per step | body-steps/s | system-steps/s | x Pinocchio | compile s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        sys_rate = r.get("system_steps_per_s", r["n"] / r["step_ms"] * 1e3)
        print(f"| {r['what']} | `{r['solver']}` | {r['step_ms']:.3g} | {r['body_steps_per_s']:.3g} | "
              f"{sys_rate:.3g} | {r.get('x_pinocchio', float('nan')):.2g} | {r['compile_s']:.1f} |")
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
