"""Throughput of batched heavy tops, cost and memory of reverse-mode gradients, compile times.

    python benchmarks/throughput.py [--quick] [--max-batch N] [--xla-defaults]

* body-steps per second of ``vmap``-ed heavy tops (RKMK4, random inertias and spins) for batch
  sizes 1 .. 10^5 in float32 and float64, beside Exudyn's rate for one heavy top (rigid body
  with Euler parameters + spherical joint, its default implicit generalized-alpha solver)
  measured in the same run;
* the time of a reverse-mode gradient over a 1000-step rollout divided by the forward time,
  with ``simulate``'s default checkpointing and with ``checkpoint="steps"``;
* temporary memory of the compiled gradient against the number of steps, for both and without
  checkpointing (XLA's ``memory_analysis``);
* compile times.

Timings are medians of repeated runs after a warm-up, with ``block_until_ready``. Everything is
compiled with ``difflie.xla.jit`` (XLA's own loops for reductions on CPU), or plain ``jax.jit``
with ``--xla-defaults``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from difflie import xla
from difflie.batch import simulate_batch
from difflie.lie import SO3
from difflie.models.rigid import heavy_top
from difflie.simulate import simulate
from difflie.solvers.rkmk import RKMK4


DT = 1e-3
JIT = {"jit": xla.jit}  # --xla-defaults: jax.jit


def random_tops(key, n, dtype):
    k1, k2, k3 = jax.random.split(key, 3)
    u = jax.random.uniform(k1, (n, 3), dtype, 0.05, 0.5)
    Q = SO3.sample_uniform(k2, (n,), dtype=dtype).matrix
    J = jnp.einsum("nij,nj,nkj->nik", Q, jnp.sum(u, -1, keepdims=True) - u, Q)
    omega0 = jax.random.normal(k3, (n, 3), dtype) * jnp.asarray([2.0, 20.0, 2.0], dtype)
    return {"inertia": J, "omega0": omega0}


def make_top(p):
    return heavy_top(inertia=p["inertia"], omega0=p["omega0"])


def timed(fn, *args, repeats=5):
    jax.block_until_ready(fn(*args))  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def compile_time(fn, *args):
    t = time.perf_counter()
    compiled = JIT["jit"](fn).lower(*args).compile()
    return time.perf_counter() - t, compiled


# -- Exudyn ----------------------------------------------------------------------------------


def exudyn_rate(steps: int) -> tuple[float | None, str]:
    """Body-steps per second of one heavy top in Exudyn (or None and the reason)."""
    try:
        import exudyn as exu
        from exudyn.utilities import RigidBodyInertia
    except Exception as err:  # noqa: BLE001 - any import failure is reported, not raised
        return None, f"exudyn not importable: {err}"
    SC = exu.SystemContainer()
    mbs = SC.AddSystem()
    ground = mbs.CreateGround()
    inertia = RigidBodyInertia(mass=15.0, inertiaTensor=np.diag([0.234375, 0.46875, 0.234375]))
    body = mbs.CreateRigidBody(
        inertia=inertia,
        referencePosition=[0.0, 1.0, 0.0],
        initialVelocity=list(np.cross([0.0, 150.0, -4.61538], [0.0, 1.0, 0.0])),
        initialAngularVelocity=[0.0, 150.0, -4.61538],
        gravity=[0.0, 0.0, -9.81],
        nodeType=exu.NodeType.RotationEulerParameters,
    )
    mbs.CreateSphericalJoint(itemNumbers=[ground, body], position=[0.0, 0.0, 0.0])
    mbs.Assemble()
    settings = exu.SimulationSettings()
    settings.timeIntegration.numberOfSteps = steps
    settings.timeIntegration.endTime = steps * DT
    settings.timeIntegration.verboseMode = 0
    settings.solutionSettings.writeSolutionToFile = False
    settings.displayComputationTime = False
    settings.displayStatistics = False
    times = []
    for _ in range(3):
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            mbs.SolveDynamic(settings)
        times.append(time.perf_counter() - t)
    return steps / statistics.median(times), f"exudyn {exu.GetVersionString()} generalized-alpha, dt={DT}"


# -- difflie ---------------------------------------------------------------------------------


def throughput(batches, dtype, steps_for, chunk_size):
    rows = []
    for n in batches:
        steps = steps_for(n, chunk_size)
        params = random_tops(jax.random.PRNGKey(n), n, dtype)
        chunk = chunk_size if chunk_size and n > chunk_size else None

        def run(p, steps=steps, chunk=chunk):
            sol = simulate_batch(p, RKMK4(), 0.0, steps * DT, DT, make_model=make_top, n_steps=steps, chunk_size=chunk)
            return sol.rotation

        ct, compiled = compile_time(run, params)
        t = timed(compiled, params, repeats=3 if n >= 10_000 else 5)
        rows.append((n, steps, t, n * steps / t, ct))
        print(f"  {jnp.dtype(dtype).name} chunk {chunk} batch {n:>7d}  steps {steps:>5d}  {t * 1e3:9.2f} ms  "
              f"{n * steps / t:12.4g} body-steps/s  compile {ct:5.1f} s", flush=True)
    return rows


def gradient_cost(steps=1000, checkpoint=True):
    p = jnp.concatenate([jnp.array([0.3, 0.47, 0.25]), jnp.array([0.5, 20.0, -1.0])])
    w = jnp.asarray(np.random.default_rng(0).normal(size=(3, 3)))

    def f(p):
        m = heavy_top(inertia=jnp.diag(p[:3]), omega0=p[3:])
        sol = simulate(m, RKMK4(), 0.0, steps * DT, DT, checkpoint=checkpoint)
        return jnp.sum(w * sol.rotation[-1, 0])

    ct_f, fwd = compile_time(f, p)
    ct_g, grad = compile_time(jax.grad(f), p)
    # Interleaved, so that a change of the machine's speed hits both alike.
    jax.block_until_ready((fwd(p), grad(p)))
    times = {fwd: [], grad: []}
    for _ in range(11):
        for fn in times:
            t = time.perf_counter()
            jax.block_until_ready(fn(p))
            times[fn].append(time.perf_counter() - t)
    return statistics.median(times[fwd]), statistics.median(times[grad]), ct_f, ct_g


def gradient_memory(steps_list, checkpoint):
    out = []
    p = jnp.array([0.3, 0.47, 0.25])
    for steps in steps_list:
        def f(p, steps=steps):
            m = heavy_top(inertia=jnp.diag(p))
            sol = simulate(m, RKMK4(), 0.0, steps * DT, DT, checkpoint=checkpoint)
            return jnp.sum(sol.rotation[-1, 0])

        compiled = JIT["jit"](jax.grad(f)).lower(p).compile()
        mem = compiled.memory_analysis()
        out.append((steps, mem.temp_size_in_bytes))
        print(f"  grad, {steps:>6d} steps, checkpoint={checkpoint}: temp {mem.temp_size_in_bytes / 1024:10.1f} KiB",
              flush=True)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer batch sizes")
    parser.add_argument("--max-batch", type=int, default=100_000)
    parser.add_argument("--xla-defaults", action="store_true", help="plain jax.jit, not difflie.xla.jit")
    args = parser.parse_args()
    if args.xla_defaults:
        JIT["jit"] = jax.jit
    jax.config.update("jax_enable_x64", True)  # the script's choice; float32 runs pass float32 inputs
    print(f"jax {jax.__version__}, devices {jax.devices()}, "
          + ("jax.jit (XLA defaults)" if args.xla_defaults else f"difflie.xla.jit {xla.compiler_options()}"))
    batches = [1, 16, 256, 4096] if args.quick else [1, 10, 100, 1000, 4096, 10_000, 100_000]
    batches = [b for b in batches if b <= args.max_batch]

    def steps_for(n, chunk):
        budget = 1_000_000 if chunk or n <= 100 else 200_000  # short runs: --xla-defaults makes them slow
        return int(min(1000, max(10, budget // n)))

    rate_exu, exu_note = exudyn_rate(2000)
    print(f"Exudyn: {rate_exu} body-steps/s ({exu_note})", flush=True)
    results = {}
    for dtype in (jnp.float32, jnp.float64):
        for chunk in (128, None):
            name = f"{jnp.dtype(dtype).name}, " + (f"chunks of {chunk}" if chunk else "one vmap")
            sizes = batches if chunk else [b for b in batches if b <= 4096]
            results[name] = throughput(sizes, dtype, steps_for, chunk)
    for checkpoint in (True, "steps"):
        tf, tg, ctf, ctg = gradient_cost(checkpoint=checkpoint)
        print(f"1000-step rollout, checkpoint={checkpoint}: forward {tf * 1e3:.2f} ms, reverse gradient "
              f"{tg * 1e3:.2f} ms, ratio {tg / tf:.2f}; compile forward {ctf:.1f} s, gradient {ctg:.1f} s", flush=True)
    mem_ck = gradient_memory([100, 1000, 10_000], True)
    mem_steps = gradient_memory([100, 1000, 10_000], "steps")
    mem_no = gradient_memory([100, 1000, 10_000], False)

    print("\n| dtype, batching | batch | steps | time (ms) | body-steps/s | x Exudyn | compile (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, rows in results.items():
        for n, steps, t, rate, ct in rows:
            ratio = f"{rate / rate_exu:.1f}" if rate_exu else "n/a"
            print(f"| {name} | {n} | {steps} | {t * 1e3:.2f} | {rate:.3g} | {ratio} | {ct:.1f} |")
    print('\n| steps | grad temp memory, checkpointed (KiB) | checkpoint="steps" (KiB) | without checkpointing (KiB) |')
    print("|---:|---:|---:|---:|")
    for (s, a), (_, b), (_, c) in zip(mem_ck, mem_steps, mem_no):
        print(f"| {s} | {a / 1024:.1f} | {b / 1024:.1f} | {c / 1024:.1f} |")


if __name__ == "__main__":
    main()
