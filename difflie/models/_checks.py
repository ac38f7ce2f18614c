"""Checks of the built-in models' sizes, on concrete values (traced ones pass: ``jax.grad``
and ``jax.vmap`` over the parameters)."""

from __future__ import annotations

import numpy as np

from ..xla import concrete


def check_counts(label: str, **values) -> None:
    """Each value is an integer of at least 1 (a number of bodies, arms, loops)."""
    for key, n in values.items():
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"{label}: {key} must be an integer >= 1, got {n!r}")


def check_positive(label: str, **values) -> None:
    """Each value (a length, a width) is positive and finite."""
    for key, x in values.items():
        x = concrete(x)
        if x is not None and not np.all((x > 0) & np.isfinite(x)):
            raise ValueError(f"{label}: {key} must be positive, got {_show(x)}")


def check_shapes(label: str, **values) -> None:
    """Each value has its shape: ``name=(value, shape)``, ``None`` values skipped (shapes are
    known under ``jit`` and ``vmap`` too, where a wrong one would fail far inside the model)."""
    for key, (x, shape) in values.items():
        if x is not None and np.shape(x) != shape:
            raise ValueError(f"{label}: {key} must have shape {shape}, got {np.shape(x)}")


def check_finite(label: str, **values) -> None:
    """Each value (an initial velocity) is finite."""
    for key, x in values.items():
        x = concrete(x)
        if x is not None and not np.all(np.isfinite(x)):
            raise ValueError(f"{label}: {key} must be finite, got {_show(x)}")


def _show(x: np.ndarray):
    return np.asarray(x, float).tolist()
