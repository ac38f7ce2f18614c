"""Heavy top on a spherical joint: difflie's Lie-group generalized-alpha beside Exudyn's.

    python benchmarks/gen_alpha.py [--repeats 7] [--xla-defaults]

Accuracy: COM error at t = 1 s against a DOP853 reference (rtol 1e-13) for h = 1e-3 ... 6.25e-5.
Speed: wall time per step at h = 1e-3 (1000 steps) and h = 1e-4 (10000 steps), compiled and
warm for difflie (``difflie.xla.jit`` of ``simulate``, or ``jax.jit`` with ``--xla-defaults``;
``block_until_ready``), ``SolveDynamic`` with no
solution file for Exudyn; the runs alternate and we report medians. rho_inf = 0.9 everywhere.
Exudyn runs twice: with ``lieGroupSimplifiedKinematicRelations`` (the Brüls-Cardona form) and with
its default settings. If exudyn is not importable, only difflie runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from difflie import xla  # noqa: E402
from difflie.models.spatial import heavy_top_spherical  # noqa: E402
from difflie.simulate import simulate  # noqa: E402
from difflie.solvers.generalized_alpha import GeneralizedAlpha  # noqa: E402

# COM at t = 1 s of the top of Holzinger, Arnold & Gerstmayr 2024, §4.1 (DOP853, rtol 1e-13).
REF = np.array([0.173343964098, 0.640088592070, -0.748490791134])
MASS, INERTIA, COM, OMEGA0 = 15.0, (0.234375, 0.46875, 0.234375), (0.0, 1.0, 0.0), (0.0, 150.0, -4.61538)
STEPS = [1e-3 / 2**k for k in range(5)]
JIT = {"jit": xla.jit}  # --xla-defaults: jax.jit

try:
    import exudyn as exu
    from exudyn.itemInterface import (
        LoadMassProportional,
        MarkerBodyMass,
        MarkerBodyRigid,
        NodeRigidBodyRotVecLG,
        ObjectGround,
        ObjectJointSpherical,
        ObjectRigidBody,
    )
except ImportError:  # pragma: no cover - depends on the environment
    exu = None


def difflie_runner(solver, h):
    model = heavy_top_spherical()
    n = int(round(1.0 / h))

    @JIT["jit"]
    def run():
        sol = simulate(model, solver, 0.0, 1.0, h)
        return sol.position[-1, 0], sol.stats.newton_iterations / sol.stats.steps, sol.result._value

    return run, n


def exudyn_runner(h, simplified):
    """Build the model once; each call integrates it from its initial state to t = 1."""
    sc = exu.SystemContainer()
    mbs = sc.AddSystem()
    X, w0 = np.array(COM), np.array(OMEGA0)
    ground = mbs.AddObject(ObjectGround())
    node = mbs.AddNode(NodeRigidBodyRotVecLG(referenceCoordinates=list(X) + [0.0] * 3,
                                             initialVelocities=list(np.cross(w0, X)) + list(w0)))  # fmt: skip
    body = mbs.AddObject(ObjectRigidBody(physicsMass=MASS, physicsInertia=list(INERTIA) + [0.0] * 3, nodeNumber=node))
    m_ground = mbs.AddMarker(MarkerBodyRigid(bodyNumber=ground, localPosition=[0.0, 0.0, 0.0]))
    m_body = mbs.AddMarker(MarkerBodyRigid(bodyNumber=body, localPosition=list(-X)))
    mbs.AddObject(ObjectJointSpherical(markerNumbers=[m_ground, m_body]))
    mbs.AddLoad(LoadMassProportional(markerNumber=mbs.AddMarker(MarkerBodyMass(bodyNumber=body)),
                                     loadVector=[0.0, 0.0, -9.81]))  # fmt: skip
    mbs.Assemble()
    s = exu.SimulationSettings()
    n = int(round(1.0 / h))
    s.timeIntegration.numberOfSteps = n
    s.timeIntegration.endTime = 1.0
    s.timeIntegration.verboseMode = 0
    s.timeIntegration.generalizedAlpha.spectralRadius = 0.9
    s.timeIntegration.generalizedAlpha.lieGroupSimplifiedKinematicRelations = simplified
    s.solutionSettings.writeSolutionToFile = False

    def run():
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                ok = exu.SolveDynamic(mbs, s)
            except Exception:  # Exudyn raises when its Newton iteration fails
                ok = False
        return np.asarray(mbs.GetNodeOutput(node, exu.OutputVariableType.Position)), ok

    run.container = sc  # the system lives as long as its container
    return run, n


def timed(fn, block=lambda out: out):
    t = time.perf_counter()
    out = block(fn())
    return time.perf_counter() - t, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--xla-defaults", action="store_true", help="plain jax.jit, not difflie.xla.jit")
    args = parser.parse_args()
    if args.xla_defaults:
        JIT["jit"] = jax.jit
    solvers = {
        "difflie full Newton": GeneralizedAlpha(newton="full"),
        "difflie modified Newton (matrix per step)": GeneralizedAlpha(newton="modified", reuse_across_steps=False),
        "difflie modified Newton (matrix kept across steps)": GeneralizedAlpha(newton="modified"),
        # Newton started from vdot1 = vdot0, lambda1 = lambda0 as in Holzinger, Arnold & Gerstmayr 2024
        # (no extrapolation):
        "difflie modified Newton (matrix per step), paper's start": GeneralizedAlpha(
            newton="modified", reuse_across_steps=False, extrapolation=0
        ),
    }
    if exu is None:
        print("exudyn is not importable: only difflie runs (pip install exudyn to compare)")
    print(f"jax {jax.__version__}, backend {jax.default_backend()}, "
          + ("jax.jit (XLA defaults)" if args.xla_defaults else f"difflie.xla.jit {xla.compiler_options()}")
          + ("" if exu is None else f", exudyn {exu.__version__}"))  # fmt: skip

    print("\n## Accuracy: COM error at t = 1 s against the DOP853 reference\n")
    print("| h | " + " | ".join(list(solvers) + ([] if exu is None else ["Exudyn Brüls-Cardona", "Exudyn default"])) + " |")
    print("|---" * (1 + len(solvers) + (0 if exu is None else 2)) + "|")
    for h in STEPS:
        row = [f"{h:.4g}"]
        for solver in solvers.values():
            run, _ = difflie_runner(solver, h)
            pos, its, res = jax.block_until_ready(run())
            ok = int(res) == 0
            row.append(f"{np.linalg.norm(np.asarray(pos) - REF):.4e} ({float(its):.2f} it)" if ok else "failed")
        if exu is not None:
            for simplified in (True, False):
                run, _ = exudyn_runner(h, simplified)
                pos, ok = run()
                pos2, _ = run()  # a second call starts again from the initial state
                assert not ok or np.allclose(pos, pos2, atol=1e-12)
                row.append(f"{np.linalg.norm(pos - REF):.4e}" if ok else "failed")
        print("| " + " | ".join(row) + " |")

    print(f"\n## Time per step (median of {args.repeats}, runs alternating)\n")
    print("| h (steps) | method | us/step median | us/step min | Exudyn / method (median) |")
    print("|---|---|---|---|---|")
    for h in (1e-3, 1e-4):
        runners = {}
        for name, solver in solvers.items():
            run, n = difflie_runner(solver, h)
            jax.block_until_ready(run())  # compile and warm up
            runners[name] = (lambda run=run: jax.block_until_ready(run()), n)
        if exu is not None:
            run, n = exudyn_runner(h, True)
            run()
            runners["Exudyn Brüls-Cardona"] = (run, n)
        times = {name: [] for name in runners}
        for _ in range(args.repeats):
            for name, (run, n) in runners.items():
                times[name].append(timed(run)[0] / n)
        ref = np.median(times["Exudyn Brüls-Cardona"]) if exu is not None else None
        for name, t in times.items():
            med = np.median(t)
            ratio = "" if ref is None else f"{ref / med:.2f}"
            print(f"| {h:g} ({runners[name][1]}) | {name} | {med * 1e6:.1f} | {np.min(t) * 1e6:.1f} | {ratio} |")


if __name__ == "__main__":
    main()
