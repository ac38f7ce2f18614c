"""Heavy top (Holzinger, Arnold & Gerstmayr 2024, §4.1), explicit RK4 on the Lie group: difflie vs
Exudyn vs MuJoCo.

Times per step of RK4 at h = 1e-3 (1000 steps to t = 1 s, compiled and warm, median and
minimum of round-robin repeats, ``block_until_ready``) for difflie's ``RKMK4`` through ``simulate``, a bare
``lax.scan`` RK4 written by hand for this one model, Exudyn's Lie-group RK44 and MuJoCo's
RK4; then a work-precision plot (COM error at t = 1 s against wall time) of all of them.

    python benchmarks/heavy_top.py [--repeats 20] [--plot benchmarks/heavy_top.png]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from difflie.models import heavy_top  # noqa: E402
from difflie.simulate import simulate  # noqa: E402
from difflie.solvers import RKMK4  # noqa: E402


REF = np.array([0.173343964098, 0.640088592070, -0.748490791134])  # COM at t = 1 s
MASS, G = 15.0, 9.81
J_COM = np.array([0.234375, 0.46875, 0.234375])
X = np.array([0.0, 1.0, 0.0])
OMEGA0 = np.array([0.0, 150.0, -4.61538])
J_FP = J_COM + MASS * np.array([1.0, 0.0, 1.0])  # inertia about the fixed point


def min_time(fn, repeats: int) -> float:
    fn()  # warm-up (compilation)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


# -- difflie -------------------------------------------------------------------------------------


def difflie_runner(h: float):
    n = int(round(1.0 / h))
    run = jax.jit(lambda m: simulate(m, RKMK4(), 0.0, 1.0, h, n_steps=n, checkpoint=False, throw=False).position)
    model = heavy_top()
    return lambda: np.asarray(run(model).block_until_ready())[0, 0]


def bare_runner(h: float):
    """Hand-written RK4 on SO(3) for this model only: state (R, omega), no abstractions."""
    n = int(round(1.0 / h))
    Jfp, Jinv = jnp.asarray(J_FP), jnp.asarray(1.0 / J_FP)
    f = jnp.array([0.0, 0.0, -MASS * G])
    Xj = jnp.asarray(X)

    def expm(w):
        t2 = w @ w
        t = jnp.sqrt(t2)
        a, b = jnp.sin(t) / t, (1 - jnp.cos(t)) / t2
        W = jnp.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
        return jnp.eye(3) + a * W + b * W @ W

    def dexpinv(q, x):
        t2 = q @ q
        t = jnp.sqrt(t2)
        k = (1 - 0.5 * t / jnp.tan(0.5 * t)) / t2
        qx = jnp.cross(q, x)
        return x + 0.5 * qx + k * jnp.cross(q, qx)

    def acc(R, w):
        return Jinv * (jnp.cross(Xj, R.T @ f) - jnp.cross(w, Jfp * w))

    def step(carry, _):
        R, w = carry
        k1w, k1q = acc(R, w), w
        w2, q2 = w + 0.5 * h * k1w, 0.5 * h * k1q
        k2w, k2q = acc(R @ expm(q2), w2), dexpinv(q2, w2)
        w3, q3 = w + 0.5 * h * k2w, 0.5 * h * k2q
        k3w, k3q = acc(R @ expm(q3), w3), dexpinv(q3, w3)
        w4, q4 = w + h * k3w, h * k3q
        k4w, k4q = acc(R @ expm(q4), w4), dexpinv(q4, w4)
        q = h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        return (R @ expm(q), w + h / 6 * (k1w + 2 * k2w + 2 * k3w + k4w)), None

    @jax.jit
    def run(w0):
        (R, _), _ = jax.lax.scan(step, (jnp.eye(3), w0), None, length=n)
        return R @ Xj

    w0 = jnp.asarray(OMEGA0)
    return lambda: np.asarray(run(w0).block_until_ready())


# -- Exudyn --------------------------------------------------------------------------------------


def exudyn_runner(h: float):
    import exudyn as exu
    from exudyn.itemInterface import (
        CoordinateConstraint,
        LoadForceVector,
        MarkerBodyPosition,
        MarkerNodeCoordinate,
        NodePointGround,
        NodeRigidBodyRotVecLG,
        ObjectRigidBody,
    )

    SC = exu.SystemContainer()
    mbs = SC.AddSystem()
    # Node at the fixed point: mass m and inertia about the fixed point, gravity at the COM.
    node = mbs.AddNode(NodeRigidBodyRotVecLG(referenceCoordinates=[0.0] * 6, initialVelocities=[0.0, 0.0, 0.0] + list(OMEGA0)))
    body = mbs.AddObject(ObjectRigidBody(mass=MASS, inertia=list(J_FP) + [0.0, 0.0, 0.0], nodeNumber=node))
    marker = mbs.AddMarker(MarkerBodyPosition(bodyNumber=body, localPosition=list(X)))
    mbs.AddLoad(LoadForceVector(markerNumber=marker, loadVector=[0.0, 0.0, -MASS * G]))
    ground = mbs.AddNode(NodePointGround())
    for i in range(3):  # translations fixed: eliminated by the explicit solver
        mg = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=ground, coordinate=0))
        mn = mbs.AddMarker(MarkerNodeCoordinate(nodeNumber=node, coordinate=i))
        mbs.AddObject(CoordinateConstraint(markerNumbers=[mg, mn]))
    mbs.Assemble()
    ss = exu.SimulationSettings()
    ss.timeIntegration.numberOfSteps = int(round(1.0 / h))
    ss.timeIntegration.endTime = 1.0
    ss.timeIntegration.verboseMode = 0
    ss.solution.file.write = False  # no solution file
    ss.solution.sensors.writePeriod = 1e10
    ss.show.statistics = False
    ss.show.computationTime = False

    def run():  # SolveDynamic starts from the initial conditions every time
        exu.SolveDynamic(mbs, ss, solverType=exu.DynamicSolverType.RK44, showHints=False, autoAssemble=False)
        return np.array(
            mbs.GetObjectOutputBody(body, exu.OutputVariableType.Position, localPosition=list(X),
                                    configuration=exu.ConfigurationType.Current)  # fmt: skip
        )

    return run


# -- MuJoCo --------------------------------------------------------------------------------------

MJCF = """
<mujoco>
  <option timestep="{h}" integrator="RK4" gravity="0 0 -9.81">
    <flag contact="disable" constraint="disable"/>
  </option>
  <worldbody>
    <body name="top">
      <joint type="ball"/>
      <inertial pos="0 1 0" mass="15" diaginertia="0.234375 0.46875 0.234375"/>
    </body>
  </worldbody>
</mujoco>
"""


def mujoco_runner(h: float):
    import mujoco
    from mujoco import rollout

    model = mujoco.MjModel.from_xml_string(MJCF.format(h=repr(h)))
    data = mujoco.MjData(model)
    n = int(round(1.0 / h))
    data.qvel[:] = OMEGA0  # ball joint: body-frame angular velocity
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state0, spec)

    def run():
        states, _ = rollout.rollout(model, data, state0[None], nstep=n)
        mujoco.mj_setState(model, data, states[0, -1], spec)
        mujoco.mj_kinematics(model, data)
        return np.array(data.xipos[1])

    return run


# -- main ----------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--plot", default="benchmarks/heavy_top.png")
    args = parser.parse_args()

    runners = {"difflie RKMK4 (simulate)": difflie_runner, "bare lax.scan RK4": bare_runner}
    for name, factory in [("Exudyn RK44 (Lie group)", exudyn_runner), ("MuJoCo RK4", mujoco_runner)]:
        try:
            factory(1e-3)
            runners[name] = factory
        except ImportError as e:
            print(f"{name}: not importable ({e}); skipped")
    print(f"platform: {platform.processor() or platform.machine()}, jax {jax.__version__}, devices {jax.devices()}")

    h0 = 1e-3
    # Round robin (one run of each per round) so that load on a shared machine hits all alike;
    # median and minimum over the rounds.
    runs = {name: factory(h0) for name, factory in runners.items()}
    finals = {name: run() for name, run in runs.items()}  # also the warm-up (compilation)
    times = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            t = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t)
    print(f"\nRK4 at h = {h0}, 1000 steps to t = 1 s, {args.repeats} rounds (us/step: median, min)")
    base_name = "difflie RKMK4 (simulate)"
    for name in runs:
        med, best = statistics.median(times[name]) / 1000, min(times[name]) / 1000
        err = np.linalg.norm(finals[name] - REF)
        diff = np.linalg.norm(finals[name] - finals[base_name])
        print(f"  {name:28s} {1e6 * med:8.3f} {1e6 * best:8.3f}   COM error {err:.6e}   |x - x_difflie| {diff:.1e}")
    for name in runs:
        print(
            f"  ratio {name:28s} / difflie: median {statistics.median(times[name]) / statistics.median(times[base_name]):5.2f}"
            f"   min {min(times[name]) / min(times[base_name]):5.2f}"
        )

    hs = [2e-3, 1e-3, 5e-4, 2.5e-4, 1.25e-4]
    curves = {}
    for name, factory in runners.items():
        pts = []
        for h in hs:
            run = factory(h)
            t = min_time(run, max(3, args.repeats // 4))
            pts.append((t, np.linalg.norm(run() - REF)))
        curves[name] = pts
        print(f"  {name:28s} " + "  ".join(f"h={h:.2e}: {e:.2e} in {1e3 * t:.2f} ms" for h, (t, e) in zip(hs, pts)))

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: no plot")
        return
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for (name, pts), marker in zip(curves.items(), "osd^"):
        t, e = zip(*pts)
        ax.loglog(t, e, marker + "-", label=name)
    ax.set_xlabel("wall time to t = 1 s [s] (min of repeats)")
    ax.set_ylabel("COM error at t = 1 s [m]")
    ax.set_title(f"Heavy top, RK4, h = {hs[0]:g} ... {hs[-1]:g}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"saved {args.plot}")


if __name__ == "__main__":
    main()
