"""Cost per step and compile time against the number of bodies, beside Exudyn.

    python benchmarks/scaling.py [--sizes 1 2 4 ... 256] [--models chain ...] [--solvers ga ga-mod be-rA be-rp]
                                 [--steps 100] [--repeats 3] [--json rows.jsonl] [--plot benchmarks/scaling.png]
    python benchmarks/scaling.py --plot-only --json rows.jsonl --plot benchmarks/scaling.png

Models (:mod:`difflie.models.mechanisms`): ``chain`` (rods on spherical joints hanging from the
ground, released from the horizontal), ``revolute`` (the same on revolute joints about world
y), ``spider`` (a tree: a hub and four arms), ``star`` (a wide tree: a hub and ``(N - 1) / 4``
arms of four bodies), ``ladder`` (a row of closed spatial four-bar loops, three bodies per
loop); h = 1e-3, rho_inf = 0.9, float64. For each size:

- difflie: ``GeneralizedAlpha()`` with full Newton (``ga``: a fresh iteration matrix every
  iteration) and with modified Newton (``ga-mod``: kept matrices, as Exudyn does by default;
  ``GeneralizedAlpha()``'s default, ``newton="auto"``, is ``ga`` for one body and ``ga-mod``
  for more), and ``BackwardEuler()`` (rA, rp; modified Newton). Compile time of the whole
  ``simulate`` program (``difflie.xla.jit``, lowered and compiled once); memory of its buffers
  (XLA's memory analysis: arguments, outputs and temporaries). Per step: a jitted loop of the
  solver's ``step`` with the number of steps as an argument, timed at 1 and 1 + ``steps`` steps
  (the difference over ``steps``), after a warm-up, ``block_until_ready``, minimum of
  ``repeats``.
- Exudyn's Lie-group generalized-alpha (``NodeRigidBodyRotVecLG``, spherical / revolute
  joints, ``SolveDynamic`` without output files), timed the same way (``steps + 1`` against
  one step), in the same process. The end positions of all bodies after ``steps`` steps are
  compared with difflie's generalized-alpha (same method, same step).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import difflie as dl  # noqa: E402
from difflie.models import chain, ladder, spider  # noqa: E402

H = 1e-3
MODELS = {
    "chain": lambda n: chain(n),
    "revolute": lambda n: chain(n, joint="revolute"),
    "spider": lambda n: spider(max(n, 2)),
    "star": lambda n: spider(max(n, 2), arms=max(1, (n - 1) // 4)),
    "ladder": lambda n: ladder(max(1, n // 3)),
}
SOLVERS = {
    "ga": lambda: dl.GeneralizedAlpha(rho_inf=0.9, newton="full"),
    "ga-mod": lambda: dl.GeneralizedAlpha(rho_inf=0.9, newton="modified"),
    "be-rA": lambda: dl.BackwardEuler(formulation="rA"),
    "be-rp": lambda: dl.BackwardEuler(formulation="rp"),
}

try:
    import exudyn as exu
    from exudyn.itemInterface import (
        LoadMassProportional,
        MarkerBodyMass,
        MarkerBodyRigid,
        NodeRigidBodyRotVecLG,
        ObjectGround,
        ObjectJointRevoluteZ,
        ObjectJointSpherical,
        ObjectRigidBody,
    )
except ImportError:  # pragma: no cover - depends on the environment
    exu = None


def best(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def difflie_case(model, solver, steps, repeats):
    """``(compile s, buffers MB, us per step, positions after steps)``."""
    def run(m):
        sol = dl.simulate(m, solver, 0.0, steps * H, H, saveat=dl.SaveAt(t1=True), throw=False)
        return sol.position[-1], sol.result == dl.RESULTS.successful

    sim = dl.xla.jit(run)
    t = time.perf_counter()
    compiled = sim.lower(model).compile()
    compile_s = time.perf_counter() - t
    mem = compiled.memory_analysis()
    mbytes = (mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes) / 1e6 if mem else float("nan")
    end, ok = compiled(model)
    if not bool(ok):  # reported in the table; the per-step time is still measured
        end = np.full(end.shape, np.nan)

    init = dl.xla.jit(lambda m: solver.init(m, 0.0, H))

    @dl.xla.jit
    def advance(m, y, state, n):
        def body(k, carry):
            y, state = carry
            t0 = k * H
            y, _, state, _, _ = solver.step(m, t0, t0 + H, y, state)
            return y, state

        y, state = jax.lax.fori_loop(0, n, body, (y, state))
        return y

    y0, s0 = init(model)
    for n in (1, 1 + steps):  # warm-up
        jax.block_until_ready(advance(model, y0, s0, n))
    one = best(lambda: jax.block_until_ready(advance(model, y0, s0, 1)), repeats)
    many = best(lambda: jax.block_until_ready(advance(model, y0, s0, 1 + steps)), repeats)
    return compile_s, mbytes, 1e6 * (many - one) / steps, np.asarray(end)


def exudyn_case(model, steps, repeats, revolute):
    """``(us per step, positions after steps)``: the same bodies and joints in Exudyn."""
    sc = exu.SystemContainer()
    mbs = sc.AddSystem()
    ground = mbs.AddObject(ObjectGround())
    nodes, bodies = [], []
    r0, R0 = np.asarray(model.r0), np.asarray(model.R0)
    mass, inertia = np.asarray(model.bodies.mass), np.asarray(model.bodies.inertia)
    for i in range(model.num_bodies):
        rotvec = _rotation_vector(R0[i])
        node = mbs.AddNode(NodeRigidBodyRotVecLG(referenceCoordinates=list(r0[i]) + list(rotvec)))
        J = inertia[i]
        body = mbs.AddObject(ObjectRigidBody(mass=float(mass[i]), nodeNumber=node,
                                             inertia=[J[0, 0], J[1, 1], J[2, 2], J[1, 2], J[0, 2], J[0, 1]]))  # fmt: skip
        mbs.AddLoad(LoadMassProportional(markerNumber=mbs.AddMarker(MarkerBodyMass(bodyNumber=body)),
                                         loadVector=[0.0, 0.0, -9.81]))  # fmt: skip
        nodes.append(node)
        bodies.append(body)
    # Joints: every CD triple of the model's constraint set is one spherical joint (a revolute
    # adds two DP1 rows, then it becomes one revolute joint about world y).
    cs = model.constraints
    cd = np.asarray([k == "CD" for k in cs.row_kinds])
    bi, bj, vec = np.asarray(cs.body_i)[cd], np.asarray(cs.body_j)[cd], np.asarray(cs.vectors)[cd]
    to_z = np.array([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]])  # marker z along body y
    for k in range(0, bi.shape[0], 3):
        markers = []
        for b, s in ((bi[k], vec[k, 1]), (bj[k], vec[k, 2])):
            owner = ground if b < 0 else bodies[b]
            markers.append(mbs.AddMarker(MarkerBodyRigid(bodyNumber=owner, localPosition=list(s))))
        if revolute:
            mbs.AddObject(ObjectJointRevoluteZ(markerNumbers=markers, rotationMarker0=to_z, rotationMarker1=to_z))
        else:
            mbs.AddObject(ObjectJointSpherical(markerNumbers=markers))
    mbs.Assemble()

    def run(n):
        s = exu.SimulationSettings()
        s.timeIntegration.numberOfSteps = n
        s.timeIntegration.endTime = n * H
        s.timeIntegration.verboseMode = 0
        s.timeIntegration.generalizedAlpha.spectralRadius = 0.9
        s.solution.file.write = False
        s.linearSolver.solverType = exu.LinearSolverType.EigenSparse
        with contextlib.redirect_stdout(io.StringIO()):
            exu.SolveDynamic(mbs, s)

    run(1)
    one = best(lambda: run(1), repeats)
    many = best(lambda: run(1 + steps), repeats)
    run(steps)
    end = np.stack([mbs.GetNodeOutput(n, exu.OutputVariableType.Position) for n in nodes])
    del sc
    return 1e6 * (many - one) / steps, end


def _rotation_vector(R):
    angle = np.arccos(np.clip((np.trace(R) - 1) / 2, -1, 1))
    if angle < 1e-12:
        return np.zeros(3)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if np.pi - angle < 1e-6:  # half turn: the axis from R + I
        axis = np.linalg.eigh(R + np.eye(3))[1][:, -1]
        return np.pi * axis
    return angle * w / (2 * np.sin(angle))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--solvers", nargs="+", default=list(SOLVERS), choices=list(SOLVERS))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None, help="append the rows to this file (JSON lines)")
    parser.add_argument("--plot", default=None, help="draw the log-log plot from --json's file here")
    parser.add_argument("--plot-only", action="store_true", help="only draw --plot from --json's rows")
    args = parser.parse_args()
    if args.plot_only:
        return plot(args.json, args.plot)
    print(f"jax {jax.__version__}, {os.cpu_count()} cpus, affinity {sorted(os.sched_getaffinity(0))}"
          + ("" if exu is None else f", exudyn {exu.__version__}"))  # fmt: skip
    print("model     N  solver  compile_s  buffers_MB  us/step  exudyn_us/step  ratio  max|x - x_exudyn|")
    for name in args.models:
        for n in args.sizes:
            model = MODELS[name](n)
            nb = model.num_bodies
            exu_us, exu_end = (float("nan"), None)
            if exu is not None:
                exu_us, exu_end = exudyn_case(model, args.steps, args.repeats, revolute=name == "revolute")
            for key in args.solvers:
                compile_s, mb, us, end = difflie_case(model, SOLVERS[key](), args.steps, args.repeats)
                diff = np.abs(end - exu_end).max() if (exu_end is not None and key.startswith("ga")) else float("nan")
                ok = bool(np.all(np.isfinite(end)))
                row = dict(model=name, bodies=nb, solver=key, compile_s=compile_s, buffers_mb=mb, us_per_step=us,
                           exudyn_us_per_step=exu_us, ratio=us / exu_us, diff=diff, successful=ok)  # fmt: skip
                print(f"{name:8s} {nb:4d}  {key:6s} {compile_s:8.2f} {mb:10.2f} {us:9.1f} {exu_us:12.1f} "
                      f"{us / exu_us:8.2f}  {diff:.1e}" + ("" if ok else "  (the run failed: Newton)"), flush=True)  # fmt: skip
                if args.json:
                    with open(args.json, "a") as fh:
                        fh.write(json.dumps(row) + "\n")
    if args.plot:
        plot(args.json, args.plot)


def plot(path, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in open(path)]
    models = sorted({r["model"] for r in rows})
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.8), sharey=True, squeeze=False)
    for ax, name in zip(axes[0], models):
        sel = [r for r in rows if r["model"] == name]
        for key in sorted({r["solver"] for r in sel}):
            pts = sorted((r["bodies"], r["us_per_step"]) for r in sel if r["solver"] == key)
            ax.loglog(*zip(*pts), "o-", label=f"difflie {key}")
        pts = sorted({(r["bodies"], r["exudyn_us_per_step"]) for r in sel})
        ax.loglog(*zip(*pts), "k^--", label="Exudyn GA")
        ax.set_title(name)
        ax.set_xlabel("bodies")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("time per step [us]")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    jnp.zeros(())  # initialise the backend before timing
    main()
