"""Safe expression evaluator for driver strings such as ``"cos(pi/4*cos(2*t) + pi/2)"``.

The string is parsed with :mod:`ast` and only a small whitelist is accepted: numbers, the
variable ``t``, the constants ``pi`` and ``e``, ``+ - * / ** %``, unary ``+ -`` and calls of
elementary functions. Nothing is ever passed to ``eval``. The result is a JAX function of ``t``,
so its time derivatives come from autodiff (:func:`time_derivatives`), never from the
hand-written ``f_dot`` / ``f_ddot`` strings of the model files of the rA/rp/re paper's public
codes (some are wrong).
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

_FUNCTIONS: dict[str, Callable] = {
    "sin": jnp.sin,
    "cos": jnp.cos,
    "tan": jnp.tan,
    "arcsin": jnp.arcsin,
    "asin": jnp.arcsin,
    "arccos": jnp.arccos,
    "acos": jnp.arccos,
    "arctan": jnp.arctan,
    "atan": jnp.arctan,
    "arctan2": jnp.arctan2,
    "atan2": jnp.arctan2,
    "sinh": jnp.sinh,
    "cosh": jnp.cosh,
    "tanh": jnp.tanh,
    "exp": jnp.exp,
    "log": jnp.log,
    "sqrt": jnp.sqrt,
    "abs": jnp.abs,
    "sign": jnp.sign,
    "minimum": jnp.minimum,
    "maximum": jnp.maximum,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class ExpressionError(ValueError):
    """A driver string that is not a valid expression of ``t``."""


def _compile(node: ast.AST, source: str) -> Callable:
    """Turn a whitelisted AST node into a closure ``t -> value``."""
    if isinstance(node, ast.Expression):
        return _compile(node.body, source)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = float(node.value)
        return lambda t: value
    if isinstance(node, ast.Name):
        if node.id == "t":
            return lambda t: t
        if node.id in _CONSTANTS:
            value = _CONSTANTS[node.id]
            return lambda t: value
        raise ExpressionError(f"unknown name {node.id!r} in {source!r} (allowed: t, pi, e)")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        op, left, right = _BINARY[type(node.op)], _compile(node.left, source), _compile(node.right, source)
        return lambda t: op(left(t), right(t))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        op, operand = _UNARY[type(node.op)], _compile(node.operand, source)
        return lambda t: op(operand(t))
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name is None and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            if node.func.value.id in ("np", "numpy", "jnp", "math"):
                name = node.func.attr
        if name not in _FUNCTIONS or node.keywords:
            raise ExpressionError(f"function {ast.unparse(node.func)!r} not allowed in {source!r}")
        fn, args = _FUNCTIONS[name], [_compile(a, source) for a in node.args]
        return lambda t: fn(*(a(t) for a in args))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id in ("np", "numpy", "math") and node.attr in _CONSTANTS:
            value = _CONSTANTS[node.attr]
            return lambda t: value
    raise ExpressionError(f"unsupported syntax {ast.unparse(node)!r} in {source!r}")


@functools.lru_cache(maxsize=256)
def _parse(source: str) -> Callable:
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError(f"expected a non-empty expression string, got {source!r}")
    if len(source) > 2000:
        raise ExpressionError("expression longer than 2000 characters")
    try:
        tree = ast.parse(source.strip().replace("^", "**"), mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"cannot parse {source!r}: {err.msg}") from None
    return _compile(tree, source)


class Expression(eqx.Module):
    """A parsed expression of ``t``; call it with a scalar (traced or not)."""

    source: str = eqx.field(static=True)

    def __init__(self, source: str):
        _parse(source)  # validate now, so errors appear where the string is read
        self.source = source

    def __call__(self, t):
        t = jnp.asarray(t)
        if not jnp.issubdtype(t.dtype, jnp.floating):
            t = t.astype(float)
        return jnp.asarray(_parse(self.source)(t), t.dtype) + jnp.zeros_like(t)

    def is_constant(self) -> bool:
        """True when ``t`` does not appear (a scleronomic ``f``)."""
        tree = ast.parse(self.source.strip().replace("^", "**"), mode="eval")
        return not any(isinstance(n, ast.Name) and n.id == "t" for n in ast.walk(tree))


def parse(source: str) -> Expression:
    """Parse ``source`` into an :class:`Expression` (raises :class:`ExpressionError`)."""
    return Expression(source)


def time_derivatives(f: Callable, t):
    """``(f(t), f'(t), f''(t))`` by forward-mode autodiff."""
    df = lambda s: jax.jvp(f, (s,), (jnp.ones_like(s),))[1]  # noqa: E731
    value, first = jax.jvp(f, (t,), (jnp.ones_like(t),))
    second = jax.jvp(df, (t,), (jnp.ones_like(t),))[1]
    return value, first, second
