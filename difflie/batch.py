"""Batches of simulations: ``vmap`` over parameters or initial states, sharded over devices.

``difflie.simulate`` is itself ``vmap``-compatible, so a batch is

    jax.vmap(lambda p: simulate(make_model(p), solver, t0, t1, dt))(params)

and these helpers only add the plumbing: ``simulate_batch`` (the line above, over every
array leaf's leading axis), ``stack`` (models or parameters of equal structure into one
batched pytree) and ``shard`` (place the batch axis across devices with a
``jax.sharding.NamedSharding`` on a one-dimensional mesh; XLA then partitions the batched
computation, so the same code runs on one CPU, several GPUs or, after
``jax.distributed.initialize()``, several hosts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .simulate import Solution, simulate

BATCH_AXIS = "simulate_batch"  # the name of simulate_batch's vmap axis


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
    **kwargs,
) -> Solution:
    """``simulate`` over the leading axis of every array leaf of ``params``.

    ``params`` is a batched model (``make_model=None``, e.g. from ``stack``) or any batched
    pytree handed element by element to ``make_model(p) -> Model`` (traced, so it may build
    bodies, initial states, forces from ``p``). ``kwargs`` go to ``difflie.simulate`` and
    are shared by the batch. Returns a ``Solution`` whose arrays have a leading batch axis.

    ``chunk_size``: run the batch as a sequential ``lax.map`` over vmapped chunks of this size
    instead of one vmap. On CPU, XLA splits element-wise kernels over large arrays into
    thread-pool tasks, whose dispatch dominates these small per-step kernels: chunks of about
    128 were 10-40x faster than one vmap over 4096 heavy tops on a loaded 2-core machine
    (``benchmarks/throughput.py``). Leave it ``None`` on GPUs and for sharded batches.

    An implicit solver whose ``batch_axis`` is ``None`` gets this vmap's axis (``BATCH_AXIS``):
    with modified Newton its kept matrices are then rebuilt for the batch together, when any
    system needs one (``difflie.numerics.newton.Newton``), not at every iteration.
    """
    n = batch_size(params)
    build = (lambda p: p) if make_model is None else make_model
    if getattr(solver, "batch_axis", BATCH_AXIS) is None:
        solver = dataclasses.replace(solver, batch_axis=BATCH_AXIS)

    def one(p):
        return simulate(build(p), solver, t0, t1, dt, **kwargs)

    if chunk_size is None:
        return eqx.filter_vmap(one, axis_name=BATCH_AXIS)(params)
    if not (isinstance(chunk_size, int) and chunk_size >= 1):
        raise ValueError(f"simulate_batch: chunk_size must be a positive int or None, got {chunk_size!r}")
    arrays, static = eqx.partition(params, eqx.is_array)
    whole, rest = divmod(n, chunk_size)
    chunk = jax.vmap(lambda a: one(eqx.combine(a, static)), axis_name=BATCH_AXIS)
    parts = []
    if whole:  # a sequential map over vmapped chunks, the remainder as one more chunk
        head = jax.tree.map(lambda x: x[: whole * chunk_size].reshape(whole, chunk_size, *x.shape[1:]), arrays)
        parts.append(jax.tree.map(lambda x: x.reshape(whole * chunk_size, *x.shape[2:]), jax.lax.map(chunk, head)))
    if rest:
        parts.append(chunk(jax.tree.map(lambda x: x[whole * chunk_size :], arrays)))
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
