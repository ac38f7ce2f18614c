"""What joint limits cost: the Panda and the G1 of ``robots.py`` loaded without and with
``joint_limits=True`` (``difflie.joint_laws.JointLimits``), per step and to compile.

    python benchmarks/joint_laws.py [--robots panda g1] [--repeats 7]

Each robot's scenario over its ``[0, 0.2]`` s at the step of the accuracy study (Panda
0.2/560 s, G1 1e-3 s), ``GeneralizedAlpha()`` (modified Newton), float64, a whole ``simulate``
compiled with ``difflie.xla.jit``; the variants alternate, after a warm-up, median of
``--repeats`` runs divided by the steps; Newton iterations per step. Also: how far each
variant's joint angles end from the model's without limits (the largest over the joints), and
which joints the model without limits moves past a limit (where the limits act). Run pinned
to one core (``taskset -c 0``) as the other single-system figures.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np
from robots import G1_URDF, g1_model, panda_model, robot_file

import difflie as dl

T1 = 0.2
VARIANTS = {"none": {}, "joint_limits=True": {"joint_limits": True}}


def scenarios(robots):
    out = {}
    if "panda" in robots:
        path = robot_file("panda_description/urdf/panda.urdf")
        out["Panda"] = (lambda **o: panda_model(path, **o)[0], T1 / 560)
    if "g1" in robots:
        from robots import g1  # needs Pinocchio for the torque amplitudes

        s = g1()
        names, amplitude = s["model"].joint_names, s["amplitude"]
        out["G1"] = (lambda **o: g1_model(robot_file(G1_URDF), names, amplitude, **o), 1e-3)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robots", nargs="+", choices=["panda", "g1"], default=["panda", "g1"])
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}")
    print("| robot | variant | us/step | Newton it./step | compile s | end gap to 'none', rad | joints past a limit |")
    print("|---|---|---:|---:|---:|---:|---|")
    for name, (make, h) in scenarios(args.robots).items():
        runs = {}
        for label, options in VARIANTS.items():
            model = make(**options)
            fn = dl.xla.jit(lambda m: dl.simulate(m, dl.GeneralizedAlpha(), 0.0, T1, h, saveat=dl.SaveAt(steps=True)))
            t = time.perf_counter()
            program = fn.lower(model).compile()
            runs[label] = dict(model=model, program=program, compile_s=time.perf_counter() - t, times=[])
        for r in runs.values():
            jax.block_until_ready(r["program"](r["model"]))  # warm-up
        for _ in range(args.repeats):
            for r in runs.values():
                t = time.perf_counter()
                r["sol"] = jax.block_until_ready(r["program"](r["model"]))
                r["times"].append(time.perf_counter() - t)
        steps = int(round(T1 / h))
        base = np.asarray(dl.joint_coordinates(runs["none"]["model"], runs["none"]["sol"]))
        for label, r in runs.items():
            q = np.asarray(dl.joint_coordinates(r["model"], r["sol"]))
            limits = make(joint_limits=True).forces[-1].law if label == "none" else None
            beyond = ""
            if limits is not None:
                lo = np.where(limits.has_lower, np.asarray(limits.lower), -np.inf)
                hi = np.where(limits.has_upper, np.asarray(limits.upper), np.inf)
                names = r["model"].joint_names
                beyond = ", ".join(names[j] for j in range(q.shape[1]) if np.any((q[:, j] < lo[j]) | (q[:, j] > hi[j]))) or "none"
            its = float(r["sol"].stats.newton_iterations) / steps
            print(f"| {name} | {label} | {np.median(r['times']) / steps * 1e6:.1f} | {its:.2f} | {r['compile_s']:.1f} | "
                  f"{np.max(np.abs(q[-1] - base[-1])):.1e} | {beyond} |", flush=True)


if __name__ == "__main__":
    main()
