"""The Newton iteration shared by the implicit steps and the kinematic analysis.

Solves ``F(x, args) = 0`` for a pytree ``x`` with

    x_{k+1} = x_k - J^{-1} F(x_k),      J = dF/dx  (``jax.jacfwd``, one leaf of x at a time),

recomputing ``J`` every iteration (full Newton) or factoring it once at the initial guess
(modified / chord Newton); ``J`` is dense, or built and factored by blocks along a mechanism's
topology (:mod:`difflie.numerics.sparsity`). The iteration stops successfully when the
correction ``||delta|| < tol + rtol ||x||`` (or a caller's rounding test), and reports
``RESULTS.newton_failed`` when ``max_iterations`` is reached or the iterate stops being finite.

Gradients follow the implicit-function theorem, not the iterations: with ``x*(p)`` defined by
``F(x*, p) = 0``, ``dx*/dp = -J^{-1} dF/dp`` (``jax.lax.custom_root``). So differentiating an
implicit step costs one extra linear solve, whatever the number of Newton iterations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float, Int, PyTree

from . import linear
from ..results import RESULTS


class NewtonSolution(eqx.Module):
    """Root, Newton iterations taken and the result code."""

    value: PyTree
    num_steps: Int[Array, ""]
    result: RESULTS
    correction_norm: Float[Array, ""]


class Newton(eqx.Module):
    """Newton's method with a tolerance on the correction and an iteration limit.

    ``tol``, ``rtol``: stop when ``||delta|| < tol + rtol ||x||``, in the 2-norm or, with
    ``norm="max"``, the max-norm. ``max_iterations``: iteration limit (failure).
    ``modified``: factor the iteration matrix once (at the initial guess or the ``jac`` given to
    :func:`newton_solve`) and reuse it for every iteration.
    """

    tol: float = 1e-10
    max_iterations: int = eqx.field(static=True, default=20)
    modified: bool = eqx.field(static=True, default=False)
    rtol: float = 0.0
    norm: Literal["2", "max"] = eqx.field(static=True, default="2")

    def __check_init__(self):
        if self.max_iterations < 1:
            raise ValueError(f"Newton.max_iterations must be >= 1, got {self.max_iterations}")


def value_and_jacfwd(f, x):
    """``(f(x), jax.jacfwd(f)(x))``: the value is the primal of the same forward pass."""
    jac, value = jax.jacfwd(lambda z: (lambda y: (y, y))(f(z)), has_aux=True)(x)
    return value, jac


def value_and_jacobian(f: Callable[[PyTree], Float[Array, " m"]], x: PyTree) -> tuple[Array, Array]:
    """``(f(x), J)`` with ``J = df/dx`` over ``x`` flattened as ``ravel_pytree`` does, built one
    leaf of ``x`` at a time: each leaf's columns by its own ``jax.jacfwd`` with the other leaves
    held fixed. Their tangents are then symbolic zeros, so a leaf that enters ``f`` through a
    small part of it (the multipliers, through ``G^T lambda`` only) costs that part and not a pass
    of its columns through all of ``f``. ``f`` returns a flat vector."""
    leaves, treedef = jax.tree_util.tree_flatten(x)
    value, blocks = None, []
    for i, leaf in enumerate(leaves):

        def f_leaf(z, i=i):
            return f(jax.tree_util.tree_unflatten(treedef, leaves[:i] + [z] + leaves[i + 1 :]))

        value_i, jac_i = value_and_jacfwd(f_leaf, leaf)
        value = value_i if value is None else value
        blocks.append(jac_i.reshape(value_i.shape[0], -1))
    return value, jnp.concatenate(blocks, axis=1)


def implicit_derivatives(fn: Callable[[PyTree, Any], PyTree], root: PyTree, args: Any, structure=None) -> PyTree:
    """``root`` (a root of ``fn(., args)`` found without derivatives) with the derivatives of the
    root by the implicit-function theorem, ``dx*/dp = -J^{-1} dF/dp``; no cost in a forward run.
    ``structure`` (a :class:`difflie.numerics.sparsity.Sparsity`): solve with ``J`` by blocks
    instead of densely."""
    flat, unravel = ravel_pytree(jax.lax.stop_gradient(root))

    def flat_fn(x):
        return ravel_pytree(fn(unravel(x), args))[0]

    tangent_solve = linear.tangent_solve if structure is None else structure.tangent_solve
    return unravel(jax.lax.custom_root(flat_fn, flat, lambda f, x: x, tangent_solve))


def newton_solve(
    fn: Callable[[PyTree, Any], PyTree],
    x0: PyTree,
    args: Any = None,
    solver: Newton = Newton(),
    *,
    floor: tuple[Float[Array, " n"], Float[Array, ""]] | None = None,
    structure=None,
) -> NewtonSolution:
    """Solve ``fn(x, args) = 0`` from ``x0``; differentiable in ``args`` by the IFT.

    ``fn`` maps a pytree to a pytree of the same total size (flattened internally); modified
    Newton factors ``dF/dx(x0)`` once. ``floor = (weights, tol)``
    (optional): a second test, met when ``||weights * delta|| < tol`` (a correction below the
    rounding of what it moves). ``structure`` (optional, a
    :class:`difflie.numerics.sparsity.Sparsity` of ``x``'s flat leaves): build and factor the
    iteration matrix by blocks, for the iterations and the derivatives.
    """
    flat0, unravel = ravel_pytree(x0)
    n = flat0.shape[0]
    m = sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(eqx.filter_eval_shape(fn, x0, args)))
    if m != n:
        raise ValueError(f"newton_solve: residual has {m} entries but the unknown has {n}")
    tol = jnp.asarray(solver.tol, flat0.dtype)
    rtol = jnp.asarray(solver.rtol, flat0.dtype)
    _norm = (lambda v: jnp.max(jnp.abs(v))) if solver.norm == "max" else jnp.linalg.norm

    def flat_fn(x):
        return ravel_pytree(fn(unravel(x), args))[0]

    def value_and_solver(x):
        """``F(x)`` and ``b -> J(x)^{-1} b``."""
        if structure is None:
            fx, mat = value_and_jacobian(lambda xt: ravel_pytree(fn(xt, args))[0], unravel(x))
            factors = linear.factor(mat)
            return fx, lambda b: linear.solve_factored(factors, b)
        leaves = jax.tree_util.tree_leaves(unravel(x))
        treedef = jax.tree_util.tree_structure(x0)
        fx, factors = structure.value_and_factors(
            lambda parts: ravel_pytree(fn(jax.tree_util.tree_unflatten(treedef, list(parts)), args))[0],
            [leaf.reshape(-1) for leaf in leaves],
        )
        return fx, lambda b: structure.solve(factors, b)

    def solve(f, x_init):
        # The first iteration takes F(x_init) from the forward pass that builds the matrix.
        f0, solve0 = value_and_solver(x_init)

        def update(x, fx, solve_with):
            delta = solve_with(fx)
            x_new = x - delta
            dnorm = _norm(delta)
            # The correction against the tolerance: < 0 means converged.
            excess = dnorm - tol - rtol * _norm(x_new)
            if floor is not None:
                excess = jnp.minimum(excess, _norm(floor[0] * delta) - floor[1])
            return x_new, dnorm, excess, jnp.all(jnp.isfinite(x_new))

        def cond(carry):
            _, k, _, excess, ok = carry
            return (k < solver.max_iterations) & (excess >= 0) & ok

        def body(carry):
            x, k, _, _, _ = carry
            if solver.modified:
                x, dnorm, excess, ok = update(x, f(x), solve0)
            else:
                fx, solve_x = value_and_solver(x)
                x, dnorm, excess, ok = update(x, fx, solve_x)
            return x, k + 1, dnorm, excess, ok

        x1, dnorm1, excess1, ok1 = update(x_init, f0, solve0)
        init = (x1, jnp.array(1, jnp.int32), dnorm1, excess1, ok1)
        x, k, dnorm, excess, ok = jax.lax.while_loop(cond, body, init)
        # Auxiliary outputs travel as floats: custom_root gives them float tangents.
        return x, jnp.stack([k.astype(x.dtype), dnorm, excess, ok.astype(x.dtype)])

    tangent_solve = linear.tangent_solve if structure is None else structure.tangent_solve
    x, aux = jax.lax.custom_root(flat_fn, flat0, solve, tangent_solve, has_aux=True)
    aux = jax.lax.stop_gradient(aux)
    k, dnorm = aux[0].astype(jnp.int32), aux[1]
    converged = (aux[3] > 0) & (aux[2] < 0)
    result = RESULTS.where(converged, RESULTS.successful, RESULTS.newton_failed)
    return NewtonSolution(value=unravel(x), num_steps=k, result=result, correction_norm=dnorm)


def no_grad(tree: PyTree) -> PyTree:
    """``tree`` with its floating-point arrays under ``jax.lax.stop_gradient`` (other leaves
    kept): what an iteration loop runs on before its result is differentiated otherwise."""
    dynamic, static = eqx.partition(tree, eqx.is_inexact_array)
    return eqx.combine(jax.lax.stop_gradient(dynamic), static)
