"""The keyword arguments of ``load_robot``, checked: joint names, numbers, ball joint values,
functions of time (their shapes), joint torques and controls as signals."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ... import constraints as C
from ...expr import Expression, ExpressionError
from ...forces import JointTorques
from .compiler import _one_line
from .frames import _unit


def _by_name(value, joints: list[str], what: str, allowed: set[str] | None = None) -> dict[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"load_model: {what} must be a mapping {{joint name: value}}, got {type(value).__name__}")
    unknown = [k for k in value if k not in joints]
    if unknown:
        raise ValueError(f"load_model: {what} names unknown joints {unknown}{_guess(unknown, joints)}; movable joints are {joints}")
    if allowed is not None:
        bad = [k for k in value if k not in allowed]
        if bad:
            raise ValueError(f"load_model: {what} names locked joints {bad}")
    return dict(value)


def _guess(unknown: list, known: list[str]) -> str:
    """``" (did you mean 'x' for 'y'?)"`` for the first unknown name close to a known one, else ``""``."""
    for name in unknown:
        close = difflib.get_close_matches(str(name), known, n=1)
        if close:
            return f" (did you mean {close[0]!r} for {name!r}?)"
    return ""


def _float(value, what: str) -> float:
    if isinstance(value, jax.core.Tracer):
        raise ValueError(
            f"load_model: {what} is traced (inside jit, vmap or grad), but the initial state is computed "
            "when the file is read: load the model once, then set a traced joint state with "
            "difflie.joint_space.with_joint_state(model, q, qd)"
        )
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        x = float(np.asarray(value))
    except (TypeError, ValueError):
        raise ValueError(f"load_model: {what} must be a number, got {value!r}") from None
    if not np.isfinite(x):
        raise ValueError(f"load_model: {what} must be finite, got {x}")
    return x


def _ball_value(value, what: str, size: int) -> np.ndarray:
    """A ball joint's quaternion ``(qw, qx, qy, qz)`` (``size`` 4, normalised) or angular
    velocity (3, in the child's axes)."""
    if isinstance(value, jax.core.Tracer):
        _float(value, what)  # the message on traced initial states
    try:
        x = np.asarray(value, float).reshape(size)
    except (TypeError, ValueError):
        kind = "a quaternion (qw, qx, qy, qz)" if size == 4 else "an angular velocity (3,) in the child's axes"
        raise ValueError(f"load_model: {what} of a ball joint must be {kind}, got {value!r}") from None
    if not np.all(np.isfinite(x)):
        raise ValueError(f"load_model: {what} must be finite, got {x.tolist()}")
    return _unit(x, what) if size == 4 else x


def _checked(fn, what: str, shape: tuple[int, ...], nj: int | None = None, per: str = ""):
    """``fn`` of ``t`` (or, with ``nj``, of ``(t, q, qd)``) as a pytree-safe function, its
    value's shape checked now (abstractly, by ``jax.eval_shape``): a wrong shape or a failing
    function is an error of ``load_model``, not of a later ``simulate``."""
    fn = C.basic.as_driver(fn)
    args, at = ((jnp.zeros(()),), "t = 0") if nj is None else ((jnp.zeros(()), jnp.zeros((nj,)), jnp.zeros((nj,))), "t = 0, q = qd = 0")
    try:
        out = jax.eval_shape(lambda *a: jnp.asarray(fn(*a)), *args)
    except Exception as err:  # noqa: BLE001 - the user's function, whatever it raises
        raise ValueError(f"load_model: {what} fails at {at}: {_one_line(err) or type(err).__name__}") from None
    if out.shape != shape:
        raise ValueError(f"load_model: {what} must return shape {shape}{per}, got {out.shape}")
    return fn


def _feedback_law(law, nj: int):
    """``law(t, q, qd) -> (nj,)``, its shape checked now."""
    if not callable(law):
        raise ValueError(f"load_model: joint_feedback must be a function (t, q, qd) -> (n_joints,), got {type(law).__name__}")
    return _checked(law, "joint_feedback", (nj,), nj, per=" (one torque per joint)")


def _torques(value, joints: list[str], locked: list[str], balls: list[str] = ()):
    """The signals of the 1-DOF joints (``None``, a callable ``t -> (nj,)`` or a
    ``JointTorques``) and of the ball joints (``None`` or a ``JointTorques`` of 3-vectors in
    the children's axes) from ``{name: value}`` (a number, an expression string of ``t`` as in
    the model files, or a function of ``t``; for a ball, a 3-vector or a function of ``t``
    returning one)."""
    if value is None:
        return None, None
    if callable(value) and not isinstance(value, Mapping):
        return _checked(value, "joint_torques (one function of t for all joints)", (len(joints),)), None
    if not isinstance(value, Mapping):
        raise ValueError(
            "load_model: joint_torques must be {joint name: number, expression of t or function of t} or one "
            f"function t -> (n_joints,), got {type(value).__name__}"
        )
    bad = [k for k in value if k not in joints and k not in balls]
    if bad:
        where = "locked" if all(k in locked for k in bad) else "unknown"
        guess = _guess(bad, joints + list(balls)) if where == "unknown" else ""
        raise ValueError(f"load_model: joint_torques names {where} joints {bad}{guess}; movable joints are {joints + list(balls)}")
    ones = {k: u for k, u in value.items() if k in joints}
    threes = {k: u for k, u in value.items() if k in balls}
    return (_signal(ones, joints, ()) if ones else None), (_signal(threes, list(balls), (3,)) if threes else None)


def _signal(value: Mapping, names: list[str], shape: tuple[int, ...], kwarg: str = "joint_torques") -> JointTorques:
    """A ``JointTorques`` over ``names`` from ``{name: value}``, each value of ``shape``
    (``kwarg``: the keyword that gave it, for the messages)."""
    kind = "a number, an expression of t or a function of t" if not shape else "a 3-vector (child axes) or a function of t returning one"
    constants, functions, index = {}, [], []
    for name, u in value.items():
        k = names.index(name)
        what = f"{kwarg}[{name!r}]"
        if isinstance(u, str) and not shape:
            try:
                u = Expression(u)
            except ExpressionError as err:
                raise ValueError(f"load_model: {what}: {err}") from None
        if callable(u):
            functions.append(_checked(u, what, shape, per=" (a ball joint's torque in its child's axes)" if shape else ""))
            index.append(k)
            continue
        try:
            constants[k] = jnp.asarray(u)
        except TypeError:
            raise ValueError(f"load_model: {what} must be {kind}, got {u!r}") from None
        if constants[k].shape != shape or not jnp.issubdtype(constants[k].dtype, jnp.number):
            raise ValueError(f"load_model: {what} must be {kind}, got {u!r}")
    dtype = jnp.result_type(float, *constants.values())
    values = [jnp.asarray(constants.get(k, np.zeros(shape)), dtype) for k in range(len(names))]
    return JointTorques(jnp.stack(values), tuple(functions), tuple(index))
