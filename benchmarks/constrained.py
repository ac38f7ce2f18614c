"""Constrained mechanisms under BackwardEuler: the rA/rp/re paper's Table 10 protocol.

Seconds of wall time per simulated second at h = 1e-3 for the single pendulum, double pendulum,
four link and slider crank in the rA, rp and re formulations (dynamics, index 3), compiled, warm,
``block_until_ready``, median of repeats, with mean Newton iterations per step. Beside them: the
paper's Table 10 speed-ups relative to rp, and the paper's public Python code C2.

C2 runs in the same script when given (``--c2``): it is the folder ``2021/ASME/rA-formulation/C2``
of the public repository uwsbel/sbel-reproducibility (not part of this project) and needs its own
environment with numpy < 2, e.g. ``python -m venv c2env && c2env/bin/pip install numpy==1.24.4
scipy==1.10.1 sympy==1.12 matplotlib==3.7.5``; ``--c2-python c2env/bin/python``. C2 times itself
(``time_<model>``: CPU seconds of its step loop, dynamics, its default tolerances). Without
``--c2`` our earlier measurements of C2 on this machine class are printed instead (2-core AMD
EPYC VM, CPython 3.11.7, numpy 1.24.4: single pendulum rA 0.909 s/s, rp 2.119 s/s, re 1.41 s/s).

    python benchmarks/constrained.py [--repeats 5] [--t1 3] [--theta 1e-3] [--quick]
        [--c2 PATH/C2 --c2-python PATH/python] [--models "single pendulum,four link"] [--xla-defaults]
        [--extrapolation 3] [--matrix-reuse 1]

Compiled with ``difflie.xla.jit`` (XLA's own loops for reductions on CPU); ``--xla-defaults`` uses
plain ``jax.jit``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import difflie as dl  # noqa: E402
from difflie import xla  # noqa: E402
from difflie.models import double_pendulum, four_link, single_pendulum, slider_crank  # noqa: E402

MODELS = {
    "single pendulum": single_pendulum,
    "double pendulum": double_pendulum,
    "four link": four_link,
    "slider crank": slider_crank,
}
FORMULATIONS = ("rA", "rp", "re")
# Paper Table 10: speed-up relative to rp, C1 (rA, re) and C2 (rA, re).
PAPER = {
    "single pendulum": ((2.43, 1.29), (2.46, 1.69)),
    "double pendulum": ((2.63, 1.21), (2.39, 1.53)),
    "four link": ((2.62, 1.21), (2.41, 1.44)),
    "slider crank": ((2.93, 1.31), (2.29, 1.30)),
}
# Our earlier runs of the paper's public code C2 (2-core AMD EPYC VM, CPython 3.11.7, numpy 1.24.4):
# single pendulum, h = 1e-3, s per simulated s.
C2_SINGLE = {"rA": 0.909, "rp": 2.119, "re": 1.41}


C2_MODULES = {
    "single pendulum": "single_pendulum",
    "double pendulum": "double_pendulum",
    "four link": "four_link",
    "slider crank": "slider_crank",
}
C2_FORMS = {"rA": "rA", "rp": "rp", "re": "reps"}


def c2_seconds_per_second(c2_dir, python, model, form, t1, repeats):
    """Median CPU seconds per simulated second of C2's own timed run (a subprocess)."""
    mod = C2_MODULES[model]
    code = (
        f"import sys, json, logging; logging.disable(logging.CRITICAL); sys.path.insert(0, {str(c2_dir)!r})\n"
        f"from SimEngineMBD.example_models.{mod} import time_{mod}\n"
        f"args = ['--form', {C2_FORMS[form]!r}, '--mode', 'dynamics', '--end_time', {str(t1)!r}]\n"
        f"print(json.dumps([time_{mod}(args) for _ in range({repeats})]))\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, cwd=c2_dir)
    return float(np.median(json.loads(out.stdout.strip().splitlines()[-1]))) / t1


def timed(fn, model, repeats):
    out = jax.block_until_ready(fn(model))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(model))
        times.append(time.perf_counter() - t)
    return float(np.median(times)), float(np.min(times)), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--t1", type=float, default=3.0)
    parser.add_argument("--dt", type=float, default=1e-3)
    parser.add_argument("--theta", type=float, default=None,
                        help="Newton tolerance on ||delta||; default difflie's 1e-11 / h^2")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="t1 = 0.5, 3 repeats")
    parser.add_argument("--c2", default=None, help="the C2 folder of uwsbel/sbel-reproducibility (runs it too)")
    parser.add_argument("--c2-python", default="python", help="a Python with numpy < 2 for C2")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    parser.add_argument("--xla-defaults", action="store_true", help="plain jax.jit, not difflie.xla.jit")
    parser.add_argument("--extrapolation", type=int, default=3,
                        help="degree of Newton's extrapolated start (0: the last values, as C2)")  # fmt: skip
    parser.add_argument("--matrix-reuse", type=int, default=30,
                        help="steps one iteration matrix serves (1: a new one every step, as C2)")  # fmt: skip
    args = parser.parse_args()
    jit = jax.jit if args.xla_defaults else xla.jit
    if args.quick:
        args.t1, args.repeats = 0.5, 3
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"platform: {platform.machine()}, jax {jax.__version__}, devices {jax.devices()}, load average {load:.1f}")
    print(f"compiled with {'jax.jit (XLA defaults)' if args.xla_defaults else f'difflie.xla.jit {xla.compiler_options()}'}")
    theta = "1e-11/h^2" if args.theta is None else f"{args.theta:g}"
    print(f"BackwardEuler, h = {args.dt}, t1 = {args.t1} s, Theta = {theta}, extrapolation {args.extrapolation}, "
          f"matrix reuse {args.matrix_reuse}, "
          f"median of {args.repeats}\n")
    c2 = args.c2 is not None
    head = "| model | formulation | s per simulated s (median) | min | us/step | Newton it./step | rp/this | paper C1, C2 |"
    print(head + (" C2 s/s (same run) | C2 / difflie |" if c2 else ""))
    print("|---|---|---:|---:|---:|---:|---:|---|" + ("---:|---:|" if c2 else ""))
    results = {}
    for name in args.models.split(","):
        model = MODELS[name]()
        row = {}
        for form in FORMULATIONS:
            solver = dl.BackwardEuler(formulation=form, tol=args.theta, extrapolation=args.extrapolation,
                                      matrix_reuse=args.matrix_reuse)  # fmt: skip

            def run(m, solver=solver):
                sol = dl.simulate(m, solver, 0.0, args.t1, args.dt)
                return sol.position[-1], sol.stats.newton_iterations, sol.stats.steps

            med, best, (_, iters, steps) = timed(jit(run), model, args.repeats)
            peer = c2_seconds_per_second(args.c2, args.c2_python, name, form, args.t1, args.repeats) if c2 else None
            row[form] = (med / args.t1, best / args.t1, med / int(steps) * 1e6, int(iters) / int(steps), peer)
        results[name] = row
        for form in FORMULATIONS:
            s, smin, us, it, peer = row[form]
            ratio = row["rp"][0] / s
            paper = PAPER[name]
            ref = {"rA": f"{paper[0][0]}, {paper[1][0]}", "re": f"{paper[0][1]}, {paper[1][1]}", "rp": "1, 1"}[form]
            line = f"| {name} | {form} | {s:.4f} | {smin:.4f} | {us:.1f} | {it:.2f} | {ratio:.2f} | {ref} |"
            print(line + (f" {peer:.3f} | {peer / s:.0f}x |" if c2 else ""), flush=True)
    if not c2 and "single pendulum" in results:
        print("\nAgainst the paper's C2 code (single pendulum, our earlier runs, same machine class):")
        for form in FORMULATIONS:
            s = results["single pendulum"][form][0]
            print(f"  {form}: C2 {C2_SINGLE[form]:.3f} s/s, difflie {s:.4f} s/s: {C2_SINGLE[form] / s:.0f}x faster")


if __name__ == "__main__":
    main()
