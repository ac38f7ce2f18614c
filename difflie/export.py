"""Trajectory files: a ``Solution`` to and from ``.npz``.

The file holds the arrays of the command line's ``--out`` (``t`` (n,), ``position`` (n, nb, 3)
world COM, ``rotation`` (n, nb, 3, 3) body to world, ``velocity`` (n, nb, 3) world COM,
``angular_velocity`` (n, nb, 3) body axes, ``body_names`` (nb,)), plus the run's result and its
counters (``result``, ``stats_*``), so ``python -m difflie simulate ... --out f.npz`` files load
too. Unused save slots (``inf`` times of an adaptive run saving every step) are not written.
"""

from __future__ import annotations

import dataclasses
import os
import zipfile

import jax.numpy as jnp
import numpy as np

from .results import RESULTS, BodyState
from .solution import Solution, Stats

_STATES = ("position", "rotation", "velocity", "angular_velocity")
_UNKNOWN = {"failure_time": np.nan, "failure_residual": np.nan}  # other counters: -1 (not in the file)


def save_solution(path: str | os.PathLike, sol: Solution) -> None:
    """Write ``sol`` (one run, not a ``vmap`` batch) to ``path`` (``.npz``)."""
    ts = np.asarray(sol.ts)
    if ts.ndim != 1:
        raise ValueError(f"save_solution: expected one run with ts of shape (n,), got {ts.shape}; save a batch per run")
    keep = np.isfinite(ts)
    arrays = {"t": ts[keep], "body_names": np.asarray(sol.body_names, dtype=str)}
    arrays |= {k: np.asarray(getattr(sol.states, k))[keep] for k in _STATES}
    arrays |= {f"stats_{f.name}": np.asarray(getattr(sol.stats, f.name)) for f in dataclasses.fields(Stats)}
    arrays["result"] = np.asarray(RESULTS[sol.result])
    np.savez(path, **arrays)


def load_solution(path: str | os.PathLike) -> Solution:
    """Read a file of ``save_solution`` or of the command line's ``--out``.

    Counters that the file lacks (the command line writes none) read as ``-1`` (times and
    residuals as NaN), and its result as successful (the command line writes no file otherwise).
    """
    try:
        with np.load(path) as f:
            data = dict(f)
    except (ValueError, EOFError, TypeError, zipfile.BadZipFile):  # text (or pickles), empty, a .npy array, a broken zip
        raise ValueError(f"load_solution: {os.fspath(path)}: not a difflie trajectory (.npz) file") from None
    missing = [k for k in ("t", "body_names", *_STATES) if k not in data]
    if missing:
        raise ValueError(f"load_solution: {os.fspath(path)} lacks {missing}; is it a difflie trajectory file?")
    states = BodyState(*(jnp.asarray(data[k]) for k in _STATES))
    dtype = states.position.dtype
    fields = {}
    for k in (f.name for f in dataclasses.fields(Stats)):
        default = np.asarray(_UNKNOWN.get(k, -1), dtype if k in _UNKNOWN else np.int32)
        fields[k] = jnp.asarray(data.get(f"stats_{k}", default))
    messages = {RESULTS[item]: item for item in RESULTS._name_to_item.values()}
    result = messages[str(data["result"])] if "result" in data else RESULTS.successful
    return Solution(
        ts=jnp.asarray(data["t"]),
        states=states,
        stats=Stats(**fields),
        result=result,
        body_names=tuple(str(n) for n in data["body_names"]),
    )
