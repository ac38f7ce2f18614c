"""The one Newton iteration of the library: implicit steps, kinematic analysis, assembly.

Solves ``F(x) = 0`` for a pytree ``x`` by

    x_{k+1} = retract(x_k, J^{-1} F(x_k))        (default ``x_k - J^{-1} F(x_k)``),

where the iteration matrix ``J = dF/dx`` (or a caller's operator: a least-norm solve for
assembly) is built and factored by a *linear system* given to ``newton_iterate``: dense
(``jax.jacfwd``, one leaf of ``x`` at a time), by blocks along a mechanism's topology
(``difflie.numerics.sparsity``), or from a closed-form Jacobian. What varies between the
callers is a policy, not a loop:

- **full** Newton builds ``J`` at every iterate; **modified** (chord) Newton keeps it, within a
  solve and, when the caller passes a ``kept`` matrix, across solves (Hairer & Wanner, Solving
  ODEs II, §IV.8). A kept matrix is rebuilt at the iterate when the contraction rate
  ``theta = ||F_{k+1}|| / ||F_k||`` (or ``||delta_k|| / ||delta_{k-1}||`` for a test on the
  correction) exceeds ``contractivity``, or after ``max_reuse`` iterations; an iteration that
  diverges (not finite, outside ``admissible``, or ``theta > divergence``) on a matrix not
  built at ``x0`` restarts from ``x0`` on a fresh one, and one that runs out of iterations on a
  matrix from an earlier solve is run again from ``x0`` on a fresh one (once).
  Implicit solvers carry a kept matrix from step to step in one record, ``IterationMatrix``
  (the factors, the step size they fit, the builds so far and ``MatrixCost``'s renewal rule),
  which generalized-alpha and backward Euler read the same way.
- the stopping **test** is on the correction, ``||delta|| < tol + rtol ||x||``, or on the
  residual, ``||F(x_{k+1})|| <= tol``; a caller may add its own (``converged``).

``newton_iterate`` runs without derivatives. ``implicit_derivatives`` attaches them to
the root by the implicit-function theorem: with ``x*(p)`` defined by ``F(x*, p) = 0``,
``dx*/dp = -J^{-1} dF/dp`` (a custom JVP), so differentiating a solve costs one
extra linear solve, whatever the number of iterations. ``newton_solve`` is the two together.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Bool, Float, Int, PyTree

from . import linear
from ..results import RESULTS


@jax.custom_batching.custom_vmap
def any_in_batch(p: Bool[Array, ""]) -> Bool[Array, ""]:
    """``p`` for one system; under ``jax.vmap``, whether it holds for any system of the batch
    (one unbatched flag, so a ``lax.cond`` or loop it decides stays one for the batch)."""
    return p


@any_in_batch.def_vmap
def _any_in_batch_vmap(axis_size, in_batched, p):
    del axis_size, in_batched
    return any_in_batch(jnp.any(p)), False


@jax.custom_batching.custom_vmap
def in_batch(x: Array) -> Bool[Array, ""]:
    """Whether the caller runs under ``jax.vmap`` (``x``: any array of its own): a constant
    that XLA folds, false for one system."""
    del x
    return jnp.array(False)


@in_batch.def_vmap
def _in_batch_vmap(axis_size, in_batched, x):
    del axis_size, in_batched, x
    return jnp.array(True), False


class Newton(eqx.Module):
    """Newton's method: the stopping test, the iteration limit and the matrix policy.

    ``tol``, ``rtol``, ``norm``: with ``test="correction"`` stop when
    ``||delta|| < tol + rtol ||x||``; with ``test="residual"`` when ``||F(x)|| <= tol`` (after at
    least one iteration), in the 2-norm or, with ``norm="max"``, the max-norm.
    ``max_iterations``: iteration limit (failure). ``modified``: keep the iteration matrix (built
    at the initial guess, or the ``kept`` one) instead of rebuilding it at every iterate;
    ``contractivity``, ``max_reuse``, ``divergence`` (modified only, ``None``: off): rebuild it when
    the contraction rate exceeds ``contractivity`` or after ``max_reuse`` iterations, restart
    from the initial guess when the rate exceeds ``divergence``.

    **Under ``jax.vmap``** modified Newton solves the batch together (``any_in_batch``). A
    ``vmap`` would turn the rebuild of a kept matrix, a ``lax.cond`` per system, into a select
    that builds a matrix at every iteration of every system; instead the batch builds matrices
    when any of its systems needs one, so iterations on kept matrices cost a solve, and every
    system takes its new matrix, built at its own iterate: the batch has paid for them, and
    systems that kept older matrices would each ask for a build of the whole batch later (a
    batch of 64 Pandas over 0.2 s ran 3.1x faster so). The batch also iterates in one loop,
    until its last system stops: a system that has stopped keeps its iterate and counts but
    takes the matrices built after it, so the factors are never selected system by system (a
    ``vmap``'s loop selects every carried array at every iteration; 16 Pandas 1.4x faster per
    step). A system's iterates thus depend on its batch within Newton's tolerance, as a
    full-Newton step's do not. A single system runs the same code with none of this.
    """

    tol: float | Array = 1e-10
    max_iterations: int = eqx.field(static=True, default=20)
    modified: bool = eqx.field(static=True, default=False)
    rtol: float | Array = 0.0
    norm: Literal["2", "max"] = eqx.field(static=True, default="2")
    test: Literal["correction", "residual"] = eqx.field(static=True, default="correction")
    contractivity: float | None = eqx.field(static=True, default=None)
    max_reuse: int | None = eqx.field(static=True, default=None)
    divergence: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.max_iterations < 1:
            raise ValueError(f"Newton.max_iterations must be >= 1, got {self.max_iterations}")
        if self.test not in ("correction", "residual"):
            raise ValueError(f"Newton.test must be 'correction' or 'residual', got {self.test!r}")

    def measure(self, v: Array) -> Array:
        return jnp.max(jnp.abs(v)) if self.norm == "max" else jnp.linalg.norm(v)


class KeptMatrix(eqx.Module):
    """Factors of an iteration matrix carried from an earlier solve, and whether they apply."""

    factors: PyTree
    valid: Bool[Array, ""]


class MatrixCost(eqx.Module):
    """What a matrix kept across solves has cost so far, for the renewal rule: a matrix whose
    build counts as ``rebuild_cost`` iterations is renewed before a solve when the last solve
    took more iterations than the matrix's average cost per solve, its build included. This
    replacement rule minimises the long-run cost per solve when a matrix costs more iterations
    the older it gets (renewal theory: renew when the marginal cost exceeds the average)."""

    cost: Float[Array, ""]  # rebuild_cost + the iterations since the matrix was built
    solves: Int[Array, ""]  # solves since it was built
    last: Int[Array, ""]  # iterations of the last solve

    @classmethod
    def start(cls, dtype) -> MatrixCost:
        zero = jnp.array(0, jnp.int32)
        return cls(jnp.zeros((), dtype), zero, zero)

    def stale(self) -> Bool[Array, ""]:
        """Whether the last solve cost more than the average: ``last > cost / solves``."""
        return (self.last * self.solves).astype(self.cost.dtype) > self.cost

    def after(self, built: Bool[Array, ""], iterations: Int[Array, ""], rebuild_cost: float) -> MatrixCost:
        """The record after a solve that did ``iterations`` on the matrix it ends with, ``built``
        in it or kept. Iterations on an earlier matrix, retired during the solve, are that
        matrix's cost, not this one's."""
        its = iterations.astype(self.cost.dtype)
        return MatrixCost(
            cost=jnp.where(built, rebuild_cost + its, self.cost + its),
            solves=jnp.where(built, 1, self.solves + 1).astype(jnp.int32),
            last=iterations.astype(jnp.int32),
        )


class IterationMatrix(eqx.Module):
    """An implicit solver's iteration matrix kept from step to step (modified Newton), as every
    solver carries it: the factors, whether they may serve again, the step size they were built
    for (the matrix depends on it), the builds so far (a diagnostic) and what the matrix has
    cost (``MatrixCost``)."""

    factors: PyTree
    valid: Bool[Array, ""]
    dt: Float[Array, ""]
    updates: Int[Array, ""]
    cost: MatrixCost

    @classmethod
    def start(cls, factors: PyTree, dtype) -> IterationMatrix:
        """Placeholder ``factors`` (of the right shape), not valid: the first step builds."""
        return cls(factors, jnp.array(False), jnp.zeros((), dtype), jnp.array(0, jnp.int32), MatrixCost.start(dtype))

    def for_step(self, h, rebuild_cost: float | None, max_solves: int | None = None) -> KeptMatrix:
        """The factors for the solve of a step ``h``: valid when they were built for that size
        (to 1e-6 relative), the renewal rule keeps them (``rebuild_cost``; ``None``: off) and
        they have served fewer than ``max_solves`` solves (``None``: no limit)."""
        valid = self.valid & (jnp.abs(self.dt - h) <= 1e-6 * jnp.abs(h))
        if rebuild_cost is not None:
            valid = valid & ~self.cost.stale()
        if max_solves is not None:
            valid = valid & (self.cost.solves < max_solves)
        return KeptMatrix(self.factors, valid)

    def after(self, out: NewtonResult, h, rebuild_cost: float | None, keep: Bool[Array, ""] | bool = True) -> IterationMatrix:
        """The record after a step of size ``h`` solved by ``out`` (``newton_iterate``'s result;
        full Newton keeps no matrix and leaves the factors as they were). ``keep``: false
        retires the matrix whatever Newton says (a change of chart)."""
        matrix = out.matrix if out.matrix is not None else KeptMatrix(self.factors, self.valid)
        return IterationMatrix(
            factors=matrix.factors,
            valid=matrix.valid & keep,
            dt=jnp.asarray(h, self.dt.dtype),
            updates=self.updates + out.updates,
            cost=self.cost.after(out.updates > 0, out.iterations if out.on_matrix is None else out.on_matrix, rebuild_cost or 0.0),
        )


class NewtonResult(eqx.Module):
    """What ``newton_iterate`` returns.

    ``value``: the last iterate; ``num_steps``: iterations of the last attempt (``iterations``:
    of all attempts); ``converged``; ``diverged`` (failed, with a last iterate not finite or
    outside ``admissible``); ``correction_norm``; ``residual``: ``F`` at the last iterate
    (residual test only, else ``None``) and its auxiliary output; ``matrix``: the factors in use
    at the end and whether they may be kept (modified Newton; ``None`` for full); ``fresh``: a
    matrix was built in this solve; ``updates``: how many; ``on_matrix``: the iterations done on
    the matrix in use at the end (modified Newton; ``None`` for full).
    """

    value: PyTree
    num_steps: Int[Array, ""]
    iterations: Int[Array, ""]
    converged: Bool[Array, ""]
    diverged: Bool[Array, ""]
    correction_norm: Float[Array, ""]
    residual: Any
    matrix: KeptMatrix | None
    fresh: Bool[Array, ""]
    updates: Int[Array, ""]
    on_matrix: Int[Array, ""] | None = None

    @property
    def result(self) -> RESULTS:
        return RESULTS.where(self.converged, RESULTS.successful, RESULTS.newton_failed)


class NewtonSolution(eqx.Module):
    """Root (with implicit-function-theorem derivatives), Newton iterations and result code."""

    value: PyTree
    num_steps: Int[Array, ""]
    result: RESULTS
    correction_norm: Float[Array, ""]


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


def linear_system(fn: Callable[[PyTree], Array], x0: PyTree, structure=None, jacobian=None):
    """``(value_and_factors, solve)`` of ``dF/dx`` for ``newton_iterate``: dense by
    ``value_and_jacobian``, from a closed-form ``jacobian(x)`` (a matrix over the flat
    ``x``), or by blocks of a ``difflie.numerics.sparsity.Sparsity`` ``structure`` of
    ``x``'s flat leaves (solved in the form for a ``vmap`` batch under one,
    ``Sparsity.solve(..., indexed=None)``). ``fn`` maps ``x`` to a flat residual."""
    if structure is not None:
        treedef = jax.tree_util.tree_structure(x0)

        def value_and_factors(x):
            leaves = [leaf.reshape(-1) for leaf in jax.tree_util.tree_leaves(x)]
            return structure.value_and_factors(lambda parts: fn(jax.tree_util.tree_unflatten(treedef, list(parts))), leaves)

        return value_and_factors, functools.partial(structure.solve, indexed=None)

    def value_and_factors(x):
        if jacobian is not None:
            return fn(x), linear.factor(jacobian(x))
        value, mat = value_and_jacobian(fn, x)
        return value, linear.factor(mat)

    return value_and_factors, linear.solve_factored


def newton_iterate(
    fn: Callable[[PyTree], Array | tuple[Array, Any]],
    x0: PyTree,
    system: tuple[Callable, Callable],
    solver: Newton = Newton(),
    *,
    has_aux: bool = False,
    converged: Callable[..., Bool[Array, ""]] | None = None,
    floor: tuple[Float[Array, " n"], Float[Array, ""]] | None = None,
    retract: Callable[[PyTree, Array], PyTree] | None = None,
    admissible: Callable[[PyTree], Bool[Array, ""]] | None = None,
    kept: KeptMatrix | None = None,
) -> NewtonResult:
    """Newton's iteration on ``fn(x) = 0`` from ``x0`` (no derivatives; see the module docstring).

    ``system = (value_and_factors, solve)``: ``value_and_factors(x) -> (F(x), factors)`` and
    ``solve(factors, F) -> delta`` (``linear_system``). ``fn`` returns the flat residual,
    or ``(F, aux)`` with ``has_aux``. ``converged(x, delta, F, aux)`` replaces the default test
    (``F``, ``aux`` are ``None`` under the correction test). ``floor = (weights, tol)``: a second
    correction test, met when ``||weights * delta|| < tol`` (a correction below the rounding of
    what it moves). ``retract(x, delta)`` is the update
    (default ``x - delta``). ``admissible(x)``: iterates outside it count as divergence.
    ``kept``: a modified-Newton matrix from an earlier solve, used while valid.
    """
    value_and_factors, solve = system
    residual_test = solver.test == "residual"
    modified = solver.modified
    flat0, unravel = ravel_pytree(x0)
    dtype = flat0.dtype
    tol, rtol = jnp.asarray(solver.tol, dtype), jnp.asarray(solver.rtol, dtype)
    tiny = jnp.finfo(dtype).tiny

    def residual_and_aux(x):
        out = fn(x)
        return out if has_aux else (out, None)

    if retract is None:

        def retract(x, delta):
            return unravel(ravel_pytree(x)[0] - delta)

    def test(x1, delta, F1, aux1):
        if converged is not None:
            return converged(x1, delta, F1, aux1)
        if residual_test:
            return solver.measure(F1) <= tol
        if isinstance(solver.rtol, (int, float)) and solver.rtol == 0:
            ok = solver.measure(delta) < tol
        else:
            ok = solver.measure(delta) < tol + rtol * solver.measure(ravel_pytree(x1)[0])
        if floor is not None:
            ok = ok | (solver.measure(floor[0] * delta) < floor[1])
        return ok

    # The carry holds only what the policy needs (every scalar is a kernel on a small system).
    keeps = kept is not None
    zero = jnp.array(0, jnp.int32)
    F_start = aux_start = None
    if residual_test and keeps:
        F_start, aux_start = residual_and_aux(x0)

    def iterate(c, F, factors, refresh):
        """One update with ``factors`` (``F = F(x)``, or ``None`` when the test does not need
        it); then the policy: converged, go on, rebuild, restart from ``x0`` or fail."""
        delta = solve(factors, F)
        x1 = retract(c["x"], delta)
        dnorm = solver.measure(delta)
        finite = jnp.all(jnp.isfinite(ravel_pytree(x1)[0]))
        F1 = aux1 = None
        if residual_test:
            F1, aux1 = residual_and_aux(x1)
            finite = finite & jnp.all(jnp.isfinite(F1))
        diverged = ~finite if admissible is None else ~(finite & admissible(x1))
        done = ~diverged & test(x1, delta, F1, aux1)
        k = c["k"] + 1
        exhausted = (k >= solver.max_iterations) & ~done
        out = dict(dnorm=dnorm, done=done)
        if residual_test:
            out.update(aux=aux1)
        if not modified:
            out.update(x=x1, k=k, failed=~done & (diverged | exhausted))
            if residual_test:
                out.update(F=F1)
            return out
        if residual_test:
            theta = jnp.linalg.norm(F1) / jnp.maximum(jnp.linalg.norm(F), tiny)
        else:
            theta = dnorm / jnp.maximum(c["dnorm"], tiny)
        at_start = jnp.where(refresh, c["at_x0"], c["at_start"])  # the matrix was built at x0
        diverging = diverged
        if solver.divergence is not None:
            diverging = diverging | (theta > solver.divergence)
        restart = ~done & diverging & ~at_start
        if keeps:
            fresh = c["fresh"] | refresh
            restart = restart | (exhausted & ~fresh)
            reset = restart & ~fresh  # the attempt ran on a matrix from an earlier solve
            out.update(fresh=fresh, total=c["total"] + 1, k=jnp.where(reset, 0, k))
        else:
            out.update(k=k)
        valid = ~restart & finite
        if solver.contractivity is not None:
            valid = valid & (theta <= solver.contractivity)
        out.update(
            x=jax.tree_util.tree_map(lambda a, b: jnp.where(restart, a, b), x0, x1),
            failed=~done & ~restart & (diverging | exhausted),
            factors=factors,
            valid=valid | done,
            at_x0=restart,
            at_start=at_start,
            updates=c["updates"] + jnp.asarray(refresh, jnp.int32),
            on_matrix=jnp.where(refresh, 1, c["on_matrix"] + 1),
        )
        if residual_test:
            out.update(F=jnp.where(restart, F_start, F1))
        return out

    def body(c):
        if not modified:
            F, factors = value_and_factors(c["x"])
            return iterate(c, F, factors, True)
        refresh = ~c["valid"]
        if solver.max_reuse is not None:
            refresh = refresh | (c["on_matrix"] >= solver.max_reuse)
        # Under vmap: one decision for the batch, and every system takes the matrices it pays
        # for; a system that has stopped (one loop for the batch, ``batch_body``) has no say.
        refresh = any_in_batch(refresh & cond(c))
        factors = jax.lax.cond(refresh, lambda: value_and_factors(c["x"])[1], lambda: c["factors"])
        F = c["F"] if residual_test else residual_and_aux(c["x"])[0]
        return iterate(c, F, factors, refresh)

    def cond(c):
        return ~c["done"] & ~c["failed"]

    def batch_body(c):
        """``body`` for modified Newton, in one loop until the last system of a ``vmap`` batch
        stops: a system that has stopped keeps its iterate and counts but takes the matrices
        the batch builds, so the factors, most of the carry, are not selected system by system
        at every iteration. Alone, a system is going whenever the body runs, and the selects
        fold away."""
        out, going = body(c), cond(c) | ~in_batch(c["done"])
        took = ("factors", "updates", "fresh")
        new = {k: v if k in took else jax.tree.map(lambda a, b: jnp.where(going, a, b), v, c[k]) for k, v in out.items()}
        # A matrix taken after stopping has served no iteration of this system.
        new["on_matrix"] = jnp.where(going, out["on_matrix"], jnp.where(out["updates"] > c["updates"], 0, c["on_matrix"]))
        return new

    # Every iteration, the first included, runs in the loop: the iteration (a Jacobian pushed
    # through the residual) is traced and compiled once.
    no = jnp.array(False)
    init = dict(x=x0, k=zero, dnorm=jnp.asarray(jnp.inf, dtype), done=no, failed=no)
    if residual_test:
        if F_start is None and modified:
            F_start, aux_start = residual_and_aux(x0)  # the restart's F(x0)
        if F_start is None:
            F_start, aux_start = _zeros_like_shape(jax.eval_shape(residual_and_aux, x0))
        init.update(F=F_start, aux=aux_start)
    if modified:
        factors = kept.factors if keeps else _zeros_like_shape(jax.eval_shape(lambda x: value_and_factors(x)[1], x0))
        init.update(
            factors=factors, valid=kept.valid if keeps else no, at_x0=jnp.array(True), at_start=jnp.array(not keeps),
            updates=zero, on_matrix=zero,
        )  # fmt: skip
        if keeps:
            init.update(fresh=no, total=zero)
    if modified:
        out = jax.lax.while_loop(lambda c: any_in_batch(cond(c)), batch_body, init)
    else:
        out = jax.lax.while_loop(cond, body, init)
    x = out["x"]
    diverged = ~jnp.all(jnp.isfinite(ravel_pytree(x)[0]))
    if admissible is not None:
        diverged = diverged | ~admissible(x)
    return NewtonResult(
        value=x,
        num_steps=out["k"],
        iterations=out["total"] if keeps else out["k"],
        converged=out["done"],
        diverged=out["failed"] & diverged,
        correction_norm=out["dnorm"],
        residual=(out["F"], out["aux"]) if residual_test else None,
        matrix=KeptMatrix(out["factors"], out["valid"]) if modified else None,
        fresh=out["fresh"] if keeps else jnp.array(True),
        updates=out["updates"] if modified else out["k"],
        on_matrix=out["on_matrix"] if modified else None,
    )


def _zeros_like_shape(tree: PyTree) -> PyTree:
    """Zeros for a tree of ``jax.ShapeDtypeStruct`` (a loop carry's first value)."""
    return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), tree)


def implicit_derivatives(fn: Callable[[PyTree, Any], PyTree], root: PyTree, args: Any, structure=None) -> PyTree:
    """``root`` (a root of ``fn(., args)`` found without derivatives) with the derivatives of the
    root by the implicit-function theorem, ``dx*/dp = -J^{-1} dF/dp`` for ``p`` in ``args`` and
    in ``fn``'s closure; no cost in a forward run. ``structure`` (a
    ``difflie.numerics.sparsity.Sparsity``): solve with ``J`` by blocks instead of densely.

    A custom JVP whose rule is traced only when a derivative is taken: a program without
    derivatives holds none of it (``jax.lax.custom_root`` traces its linearised solve, a second
    Jacobian, into every program)."""
    flat, unravel = ravel_pytree(jax.lax.stop_gradient(root))
    arrays, static = eqx.partition(args, eqx.is_array)

    def flat_fn(x, arrays):
        return ravel_pytree(fn(unravel(x), eqx.combine(arrays, static)))[0]

    # The traced values fn closes over become arguments, so that their tangents reach the rule.
    converted, consts = jax.closure_convert(flat_fn, flat, arrays)
    # Empty arrays (the multipliers of a model without constraint rows) carry no derivative and
    # stay out of the rule's operands: XLA 0.10's CPU compiler loses the LAPACK calls' attributes
    # in a program whose custom-JVP call takes an empty operand.
    dynamic, empty = eqx.partition((arrays, consts), lambda a: eqx.is_array(a) and a.size > 0)
    empty = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), empty)
    tangent_solve = linear.tangent_solve if structure is None else structure.tangent_solve

    def residual(x, dynamic):
        arrays, consts = eqx.combine(dynamic, empty)
        return converted(x, arrays, *consts)

    @jax.custom_jvp
    def attach(x, dynamic):
        return x

    @attach.defjvp
    def attach_jvp(primals, tangents):
        x, dynamic = primals
        _, rhs = jax.jvp(lambda d: residual(x, d), (dynamic,), (tangents[1],))
        dx = tangent_solve(lambda v: jax.jvp(lambda z: residual(z, dynamic), (x,), (v,))[1], rhs)
        return x, -dx

    return unravel(attach(flat, dynamic))


def newton_solve(
    fn: Callable[[PyTree, Any], PyTree],
    x0: PyTree,
    args: Any = None,
    solver: Newton = Newton(),
    *,
    floor: tuple[Float[Array, " n"], Float[Array, ""]] | None = None,
    structure=None,
    jacobian: Callable[[PyTree], Array] | None = None,
    admissible: Callable[[PyTree], Bool[Array, ""]] | None = None,
) -> NewtonSolution:
    """Solve ``fn(x, args) = 0`` from ``x0`` by ``newton_iterate``; differentiable in
    ``args`` (and in ``x0``'s closure) by the implicit-function theorem.

    ``fn`` maps a pytree to a pytree of the same total size (flattened internally).
    ``floor``: as in ``newton_iterate``. ``structure`` (a
    ``difflie.numerics.sparsity.Sparsity`` of ``x``'s flat leaves) or ``jacobian`` (a
    closed form over the flat ``x``): how the iteration matrix is built (default: dense by
    autodiff). ``admissible``: iterates outside it fail with ``RESULTS.no_solution``.
    """
    n = ravel_pytree(x0)[0].shape[0]
    m = sum(math.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(eqx.filter_eval_shape(fn, x0, args)))
    if m != n:
        raise ValueError(f"newton_solve: residual has {m} entries but the unknown has {n}")
    args_ng, x0_ng = no_grad((args, x0))

    def flat_fn(x):
        return ravel_pytree(fn(x, args_ng))[0]

    system = linear_system(flat_fn, x0_ng, structure, jacobian)
    out = newton_iterate(flat_fn, x0_ng, system, solver, floor=floor, admissible=admissible)
    value = implicit_derivatives(fn, out.value, args, structure)
    failure = RESULTS.newton_failed if admissible is None else RESULTS.where(out.diverged, RESULTS.no_solution, RESULTS.newton_failed)
    result = RESULTS.where(out.converged, RESULTS.successful, failure)
    return NewtonSolution(value=value, num_steps=out.num_steps, result=result, correction_norm=out.correction_norm)


def no_grad(tree: PyTree) -> PyTree:
    """``tree`` with its floating-point arrays under ``jax.lax.stop_gradient`` (other leaves
    kept): what an iteration loop runs on before its result is differentiated otherwise."""
    dynamic, static = eqx.partition(tree, eqx.is_inexact_array)
    return eqx.combine(jax.lax.stop_gradient(dynamic), static)
