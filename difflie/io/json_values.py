"""Readers of a model file's JSON values that name the value's JSON path in their errors
(``$.bodies[1].r: expected numbers with shape (3,), ...``): numbers, arrays, strings, body
ids, known keys, expressions of ``t``, inertias, rotation matrices, and the caller's masses,
inertias and drivers; and ``ModelFileError``, the error they raise."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

import jax
import numpy as np

from ..expr import Expression, ExpressionError


class ModelFileError(ValueError):
    """A model file entry that is missing or malformed; the message names its JSON path."""


def _show(value, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _numbers(value, depth: int) -> bool:
    """``value`` is a number (``depth`` 0) or lists nested ``depth`` deep with numbers at the
    bottom: no booleans, no numeric strings."""
    if depth == 0:
        return _is_number(value)
    return isinstance(value, list) and all(_numbers(v, depth - 1) for v in value)


def _array(value, path: str, shape: tuple[int, ...]) -> np.ndarray:
    if not _numbers(value, len(shape)):
        raise ModelFileError(f"{path}: expected numbers with shape {shape}, got {_show(value)}")
    try:
        arr = np.asarray(value, dtype=float)
    except ValueError:  # ragged
        raise ModelFileError(f"{path}: expected shape {shape}, got rows of different lengths {_show(value)}") from None
    except OverflowError:
        raise ModelFileError(f"{path}: values must be finite, got {_show(value)}") from None
    if arr.shape != shape:
        raise ModelFileError(f"{path}: expected shape {shape}, got {arr.shape} ({_show(value)})")
    if not np.all(np.isfinite(arr)):
        raise ModelFileError(f"{path}: values must be finite, got {_show(value)}")
    return arr


def _string(entry: Mapping, key: str, path: str, default: str | None = None) -> str:
    value = entry.get(key, default) if default is not None else _get(entry, key, path)
    if not isinstance(value, str):
        raise ModelFileError(f"{path}.{key}: expected a string, got {_show(value)}")
    return value


def _id(value, path: str):
    """A body id: an integer or a string."""
    if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
        raise ModelFileError(f"{path}: a body id must be an integer or a string, got {_show(value)}")
    return value



def _known_keys(entry: Mapping, known, path: str) -> None:
    """Refuse a key the format does not have (a typo would otherwise be ignored silently)."""
    absent = [str(k) for k in known if k not in entry]  # a renamed key: guess among these first
    for key in entry:
        if key not in known:
            close = difflib.get_close_matches(str(key), absent, n=1) or difflib.get_close_matches(str(key), [str(k) for k in known], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
            raise ModelFileError(f"{path}.{key}: unknown key{hint}")


def _get(entry: Mapping, key: str, path: str):
    if key not in entry:
        raise ModelFileError(f"{path}: missing key {key!r}")
    return entry[key]


def _expression(value, path: str):
    """A constant float or an ``Expression`` of ``t``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if callable(value):
        return value
    if not isinstance(value, str):
        raise ModelFileError(f"{path}: expected a number or an expression string of t, got {value!r}")
    try:
        expr = Expression(value)
    except ExpressionError as err:
        raise ModelFileError(f"{path}: {err}") from None
    if expr.is_constant():
        return float(expr(0.0))
    return expr


def _inertia(value, path: str) -> np.ndarray:
    """A 3x3 inertia, or its 3 principal moments (a list of numbers)."""
    diagonal = isinstance(value, list) and not any(isinstance(v, list) for v in value)
    return np.diag(_array(value, path, (3,))) if diagonal else _array(value, path, (3, 3))


def _per_body(value, names: list[str], what: str, shape) -> list[np.ndarray | None]:
    """Caller-supplied mass / inertia: a mapping by body name or a sequence in file order."""
    if value is None:
        return [None] * len(names)
    if isinstance(value, Mapping):
        unknown = set(value) - set(names)
        if unknown:
            raise ValueError(f"load_model: {what} given for unknown bodies {sorted(unknown)}; bodies are {names}")
        items = [value.get(n) for n in names]
    else:
        items = list(value)
        if len(items) != len(names):
            raise ValueError(f"load_model: {what} has {len(items)} entries for {len(names)} bodies {names}")
    return [None if v is None else _given(v, f"{what} of body {n!r}", shape) for n, v in zip(names, items)]


def _given(value, what: str, shape) -> np.ndarray:
    """A caller-supplied mass (``shape`` ``()``) or inertia (``(3, 3)``, or 3 principal moments)."""
    if isinstance(value, jax.core.Tracer):
        raise ValueError(
            f"load_model: {what}: a traced value (under jax.grad, jit or vmap); a file is read once, outside: load the "
            "model with numbers, then put the traced ones in with eqx.tree_at (for example eqx.tree_at(lambda m: "
            "m.bodies.mass, model, masses))"
        )
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"load_model: {what}: expected numbers, got {_show(value)}") from None
    if shape == (3, 3) and arr.shape == (3,):
        arr = np.diag(arr)
    if arr.shape != shape:
        raise ValueError(f"load_model: {what} must have shape {shape}, got {arr.shape}")
    return arr


def _nearest_rotation(A: np.ndarray, path: str) -> np.ndarray:
    """Project the printed (rounded) matrix onto SO(3); reject anything far from a rotation."""
    U, _, Vt = np.linalg.svd(A)
    R = U @ Vt
    if np.linalg.det(R) < 0:
        raise ModelFileError(f"{path}: not a rotation matrix (a reflection: det A = {np.linalg.det(A):.3g})")
    if np.abs(R - A).max() > 1e-4:
        raise ModelFileError(f"{path}: not a rotation matrix (A^T A - I up to {np.abs(A.T @ A - np.eye(3)).max():.2e})")
    return R


def _driver(value, path: str):
    if isinstance(value, str):
        try:
            return Expression(value)
        except ExpressionError as err:
            raise ModelFileError(f"{path}: {err}") from None
    if callable(value):
        return value
    raise ModelFileError(f"{path}: a driver must be an expression string or a callable of t, got {value!r}")
