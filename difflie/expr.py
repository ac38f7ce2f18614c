"""Safe expression evaluator for driver strings such as ``"cos(pi/4*cos(2*t) + pi/2)"``.

The string is parsed with ``ast`` and only a small whitelist is accepted: numbers, the
variable ``t``, the constants ``pi`` and ``e``, ``+ - * / ** %``, unary ``+ -`` and calls of
elementary functions. Nothing is ever passed to ``eval``. The result is a JAX function of ``t``,
so its time derivatives come from autodiff (``time_derivatives``), never from the
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


MAX_DEPTH = 100  # nesting of the expression tree (a driver needs about 10)


def _depth(tree: ast.AST) -> int:
    """Nesting depth of ``tree``, without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _fold(node: ast.AST, source: str, op, *values) -> float:
    """``op(*values)`` of constant operands, evaluated now: a real, finite float or an
    ``ExpressionError`` naming the sub-expression."""
    where = f"{_short(ast.unparse(node))!r} in {_short(source)!r}"
    try:
        value = op(*values)
    except (ArithmeticError, ValueError) as err:
        raise ExpressionError(f"cannot evaluate {where}: {err.args[-1] if err.args else type(err).__name__}") from None
    if isinstance(value, complex):
        raise ExpressionError(f"{where} is complex ({value}); drivers must be real")
    if not math.isfinite(value):
        raise ExpressionError(f"{where} evaluates to {value}")
    return value


def _compile(node: ast.AST, source: str) -> tuple[Callable, float | None]:
    """Turn a whitelisted AST node into a closure ``t -> value``, and its value when it does
    not depend on ``t`` (constant arithmetic is evaluated here, so that its errors are found
    while the string is read)."""
    if isinstance(node, ast.Expression):
        return _compile(node.body, source)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = _fold(node, source, float, node.value)
        return (lambda t: value), value
    if isinstance(node, ast.Name):
        if node.id == "t":
            return (lambda t: t), None
        if node.id in _CONSTANTS:
            value = _CONSTANTS[node.id]
            return (lambda t: value), value
        raise ExpressionError(f"unknown name {node.id!r} in {source!r} (allowed: t, pi, e)")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        op = _BINARY[type(node.op)]
        (left, a), (right, b) = _compile(node.left, source), _compile(node.right, source)
        if a is not None and b is not None:
            value = _fold(node, source, op, a, b)
            return (lambda t: value), value
        return (lambda t: op(left(t), right(t))), None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        op, (operand, a) = _UNARY[type(node.op)], _compile(node.operand, source)
        if a is not None:
            value = op(a)
            return (lambda t: value), value
        return (lambda t: op(operand(t))), None
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name is None and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            if node.func.value.id in ("np", "numpy", "jnp", "math"):
                name = node.func.attr
        if name not in _FUNCTIONS or node.keywords:
            raise ExpressionError(f"function {ast.unparse(node.func)!r} not allowed in {source!r}")
        fn, args = _FUNCTIONS[name], [_compile(a, source)[0] for a in node.args]
        return (lambda t: fn(*(a(t) for a in args))), None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id in ("np", "numpy", "math") and node.attr in _CONSTANTS:
            value = _CONSTANTS[node.attr]
            return (lambda t: value), value
    raise ExpressionError(f"unsupported syntax {ast.unparse(node)!r} in {source!r}")


@functools.lru_cache(maxsize=256)
def _parse(source: str) -> Callable:
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError(f"expected a non-empty expression string, got {source!r}")
    if len(source) > 2000:
        raise ExpressionError("expression longer than 2000 characters")
    try:
        tree = ast.parse(source.strip().replace("^", "**"), mode="eval")
    except (SyntaxError, ValueError) as err:
        raise ExpressionError(f"cannot parse {_short(source)!r}: {getattr(err, 'msg', err)}") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"cannot parse {_short(source)!r}: nested too deeply") from None
    if _depth(tree) > MAX_DEPTH:
        raise ExpressionError(f"expression {_short(source)!r} nested deeper than {MAX_DEPTH} levels")
    return _compile(tree, source)[0]


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
        value = _parse(self.source)(t)
        if jnp.iscomplexobj(value):
            raise ExpressionError(f"{self.source!r} has a complex value; drivers must be real")
        return jnp.asarray(value, t.dtype) + jnp.zeros_like(t)

    def is_constant(self) -> bool:
        """True when ``t`` does not appear (a scleronomic ``f``)."""
        tree = ast.parse(self.source.strip().replace("^", "**"), mode="eval")
        return not any(isinstance(n, ast.Name) and n.id == "t" for n in ast.walk(tree))


def parse(source: str) -> Expression:
    """Parse ``source`` into an ``Expression`` (raises ``ExpressionError``)."""
    return Expression(source)


def time_derivatives(f: Callable, t):
    """``(f(t), f'(t), f''(t))`` by forward-mode autodiff."""
    df = lambda s: jax.jvp(f, (s,), (jnp.ones_like(s),))[1]  # noqa: E731
    value, first = jax.jvp(f, (t,), (jnp.ones_like(t),))
    second = jax.jvp(df, (t,), (jnp.ones_like(t),))[1]
    return value, first, second
