"""Batches of simulations: ``vmap`` over parameters or initial states, sharded over devices.

``difflie.simulate`` is itself ``vmap``-compatible, so a batch is

    jax.vmap(lambda p: simulate(make_model(p), solver, t0, t1, dt))(params)

and these helpers only add the plumbing: ``simulate_batch`` (the line above, over every
array leaf's leading axis), ``stack`` (models or parameters of equal structure into one
batched pytree) and ``shard`` (place the batch axis across devices with a
``jax.sharding.NamedSharding`` on a one-dimensional mesh; XLA then partitions the batched
computation, so the same code runs on one CPU, several GPUs or, after
``jax.distributed.initialize()``, several hosts). ``simulate_batch(..., devices=...)`` splits the
batch itself (``jax.shard_map``), each device running its share in cache-sized chunks: the
fastest form on CPU cores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .results import RESULTS, carrying_error
from .simulate import simulate
from .solution import SaveAt, SimulationError, Solution
from .xla import concrete, filter_jit


def stack(trees: Sequence[Any]) -> Any:
    """Stack pytrees of equal structure (models, parameter sets) along a new leading axis."""
    trees = list(trees)
    if not trees:
        raise ValueError("stack: no trees given")
    structure = jax.tree.structure(trees[0])
    for i, tree in enumerate(trees[1:], 1):
        if jax.tree.structure(tree) != structure:
            raise ValueError(f"stack: tree {i} has a different structure from tree 0")
    return jax.tree.map(lambda *xs: jax.numpy.stack(xs), *trees)


def batch_size(tree: Any) -> int:
    """The common leading dimension of the array leaves of ``tree``."""
    sizes = {np.shape(x)[0] for x in jax.tree.leaves(tree) if eqx.is_array(x) and np.ndim(x) > 0}
    scalars = [x for x in jax.tree.leaves(tree) if eqx.is_array(x) and np.ndim(x) == 0]
    if len(sizes) != 1 or scalars:
        raise ValueError(f"batch: every array leaf needs the same leading (batch) dimension; got {sorted(sizes)}")
    return sizes.pop()


def simulate_batch(
    params: Any,
    solver,
    t0,
    t1,
    dt,
    *,
    make_model: Callable[[Any], Any] | None = None,
    chunk_size: int | None = None,
    devices: Mesh | Sequence[Any] | None = None,
    **kwargs,
) -> Solution:
    """``simulate`` over the leading axis of every array leaf of ``params``.

    ``params`` is a batched model (``make_model=None``, e.g. from ``stack``) or any batched
    pytree handed element by element to ``make_model(p) -> Model`` (traced, so it may build
    bodies, initial states, forces from ``p``). ``kwargs`` go to ``difflie.simulate`` and
    are shared by the batch. Returns a ``Solution`` whose arrays have a leading batch axis.

    ``chunk_size``: run the batch as a sequential ``lax.map`` over vmapped chunks of this size
    instead of one vmap. On CPU a vmap over many systems streams every small kernel over the
    whole batch, out of cache; chunks keep it in cache for systems with many kernels per step: a
    chunk of 4 Pandas costs per system about what one Panda costs alone, one vmap over 1024
    2.2x that (``benchmarks/robots.py``). A small system such as a heavy top gains nothing:
    one vmap over 4096 is as fast (``benchmarks/throughput.py``). Leave it ``None`` on GPUs.

    ``devices``: split the batch across these devices (a one-dimensional ``Mesh`` from
    ``mesh``, or a list of devices), each running its share, chunked by ``chunk_size``, with
    ``jax.shard_map``; the batch size must be a multiple of their number. On CPU,
    ``jax.config.update("jax_num_cpu_devices", k)`` before JAX's first use gives ``k`` CPU
    devices, one per core: XLA runs a CPU program's small kernels on one core otherwise.
    Without ``devices`` a batch placed by ``shard`` is partitioned by XLA (unchunked only).

    With modified Newton, as under any ``jax.vmap``, an implicit solver's kept matrices are
    rebuilt for the batch (or chunk) together, when any system needs one
    (``difflie.numerics.newton.Newton``), not at every iteration, and every system takes its new
    matrix: a system's results depend on the systems it shares a vmap with (``chunk_size``,
    ``devices``) only within Newton's tolerance.

    Called outside any trace, the batch is one program compiled with ``difflie.xla``'s options
    and kept: later calls with other values of ``params`` (same shapes) reuse it. ``t0``,
    ``t1``, ``dt`` and ``SaveAt(ts)`` are constants of that program (other times compile
    another); pass ``make_model`` as the same function each time (a new ``lambda`` per call
    compiles anew).

    ``throw=True`` (the default, as for ``simulate``): a failed run raises. Called outside any
    trace, a ``SimulationError`` says how many runs failed, their batch indices and the first
    one's step, time and reason (``Solution.failure_message``); traced, every returned array
    carries the first failed run's reason, as ``simulate``'s do.
    """
    n = batch_size(params)
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size >= 1):
        raise ValueError(f"simulate_batch: chunk_size must be a positive int or None, got {chunk_size!r}")
    m = None
    if devices is not None:
        m = devices if isinstance(devices, Mesh) else mesh(devices)
        if n % m.devices.size:
            raise ValueError(f"simulate_batch: batch size {n} is not a multiple of the {m.devices.size} devices")
    times = tuple(_constant(x) for x in (t0, t1, dt))
    if isinstance(kwargs.get("saveat"), SaveAt) and kwargs["saveat"].ts is not None:
        kwargs["saveat"] = eqx.tree_at(lambda s: s.ts, kwargs["saveat"], _constant(kwargs["saveat"].ts))
    throw = kwargs.pop("throw", True)
    sol = _batch(params, _as_given if make_model is None else make_model, solver, times, kwargs | {"throw": False}, chunk_size, m)
    return _thrown(sol) if throw else sol


def _thrown(sol: Solution) -> Solution:
    """``sol`` if every run succeeded; else, eagerly, a ``SimulationError`` naming the failed runs,
    and traced, the outputs carrying the first failed run's error (``results.carrying_error``)."""
    codes = sol.result._value.reshape(-1)
    failed = codes != RESULTS.successful._value
    known = concrete(failed)
    if known is not None:
        if np.any(known):
            raise SimulationError(sol.failure_message())
        return sol
    first = eqx.tree_at(lambda r: r._value, sol.result, codes[jax.numpy.argmax(failed)])
    ts, states = carrying_error(first, jax.numpy.any(failed), (sol.ts, sol.states))
    return eqx.tree_at(lambda s: (s.ts, s.states), sol, (ts, states))


def _as_given(params: Any) -> Any:
    return params


class _Constant:
    """A concrete array as a compile-time constant, hashed and compared by value: the times that
    fix ``simulate``'s step grid (``t0``, ``t1``, ``dt``, ``SaveAt(ts)``), which it needs
    concrete, as static arguments of the batch's compiled program."""

    def __init__(self, value: np.ndarray):
        self.value = value

    def _key(self):
        return self.value.shape, self.value.dtype.str, self.value.tobytes()

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Constant) and self._key() == other._key()


def _constant(x: Any) -> Any:
    value = concrete(x)
    return x if value is None else _Constant(value)


def _values(tree: Any) -> Any:
    return jax.tree.map(lambda x: x.value if isinstance(x, _Constant) else x, tree)


@filter_jit
def _batch(params, build, solver, times, kwargs, chunk_size, m):
    """The batch as one compiled program, cached across calls (an eager ``lax.map`` or
    ``shard_map`` would trace and compile again at every call)."""
    (t0, t1, dt), kwargs = _values((times, kwargs))
    arrays, static = eqx.partition(params, eqx.is_array)

    def run(arrays):
        one = jax.vmap(lambda a: simulate(build(eqx.combine(a, static)), solver, t0, t1, dt, **kwargs))
        return one(arrays) if chunk_size is None else _chunked(one, arrays, chunk_size)

    if m is None:
        return run(arrays)
    spec = PartitionSpec(m.axis_names[0])
    # check_vma=False: the model's own scans (forward kinematics, chains) carry values that are
    # the same on every device into per-device loops, which the check would refuse.
    return jax.shard_map(run, mesh=m, in_specs=spec, out_specs=spec, check_vma=False)(arrays)


def _chunked(fn: Callable[[Any], Any], arrays: Any, size: int) -> Any:
    """``fn`` (vmapped) over the leading axis of ``arrays`` in a sequential ``lax.map`` over
    chunks of ``size``, the remainder as one more chunk."""
    whole, rest = divmod(batch_size(arrays), size)
    parts = []
    if whole:
        head = jax.tree.map(lambda x: x[: whole * size].reshape(whole, size, *x.shape[1:]), arrays)
        parts.append(jax.tree.map(lambda x: x.reshape(whole * size, *x.shape[2:]), jax.lax.map(fn, head)))
    if rest:
        parts.append(fn(jax.tree.map(lambda x: x[whole * size :], arrays)))
    return parts[0] if len(parts) == 1 else jax.tree.map(lambda *xs: jax.numpy.concatenate(xs), *parts)


def mesh(devices: Sequence[Any] | None = None, axis_name: str = "batch") -> Mesh:
    """A one-dimensional device mesh (all devices of all processes by default)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), (axis_name,))


def shard(tree: Any, devices: Mesh | Sequence[Any] | None = None, axis_name: str = "batch") -> Any:
    """Place the leading axis of every array leaf of ``tree`` across ``devices``.

    The batch size must be a multiple of the number of devices (pad the batch otherwise).
    Non-array leaves are left alone.
    """
    m = devices if isinstance(devices, Mesh) else mesh(devices, axis_name)
    axis = m.axis_names[0]
    n = batch_size(tree)
    if n % m.devices.size:
        raise ValueError(f"shard: batch size {n} is not a multiple of the {m.devices.size} devices")
    sharding = NamedSharding(m, PartitionSpec(axis))
    arrays, rest = eqx.partition(tree, eqx.is_array)
    return eqx.combine(jax.device_put(arrays, sharding), rest)
