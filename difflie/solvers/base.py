"""The solver interface every time integrator implements, and what a step reports.

A solver owns its state representation ``y`` (group element and velocity for explicit
Lie-group methods, Euler parameters for the ``rp`` formulation, ...). ``simulate`` only ever
calls the three methods below, so explicit, implicit and variational methods share one loop.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PyTree

from ..results import RESULTS, BodyState


class StepStats(eqx.Module):
    """Per-step counters that ``simulate`` sums into ``Solution.stats``."""

    evaluations: Int[Array, ""]  # right-hand-side or residual evaluations
    newton_iterations: Int[Array, ""]  # zero for explicit methods
    # size of the last Newton residual (or correction) of an implicit step; None when explicit
    residual: Float[Array, ""] | None = None


class AbstractSolver(eqx.Module):
    """A one-step method ``y(t0) -> y(t1)`` for a ``difflie.Model``."""

    order: ClassVar[int]
    # True when ``step`` returns an error estimate usable by an adaptive controller.
    adaptive: ClassVar[bool] = False

    def check_model(self, model: Any) -> None:
        """Raise ``ValueError`` naming why, if this solver cannot take ``model``; called by
        ``difflie.simulate`` (and the command line) before anything is compiled."""

    @abc.abstractmethod
    def init(self, model: Any, t0: Float[Array, ""], dt0: Float[Array, ""]) -> tuple[PyTree, PyTree]:
        """Return ``(y0, solver_state)`` built from the model's initial conditions."""

    @abc.abstractmethod
    def step(
        self,
        model: Any,
        t0: Float[Array, ""],
        t1: Float[Array, ""],
        y0: PyTree,
        solver_state: PyTree,
    ) -> tuple[PyTree, PyTree | None, PyTree, StepStats, RESULTS]:
        """Advance one step: ``(y1, y_error or None, solver_state, stats, result)``.

        ``y_error`` is a pytree of error estimates (tangent-space increments) for adaptive
        methods and ``None`` otherwise.
        """

    @abc.abstractmethod
    def observe(self, model: Any, y: PyTree) -> BodyState:
        """The user-facing quantities of state ``y``."""

    def error_norm(self, y0: PyTree, y1: PyTree, y_error: PyTree, rtol, atol) -> Float[Array, ""]:
        """RMS of ``y_error / (atol + rtol max(|y0|, |y1|))``; <= 1 accepts an adaptive step.

        This default needs ``y_error`` to have the structure of ``y``; solvers whose error lives
        in a tangent space override it.
        """
        scale = jax.tree.map(lambda a, b: atol + rtol * jnp.maximum(jnp.abs(a), jnp.abs(b)), y0, y1)
        ratios = jax.tree.leaves(jax.tree.map(lambda e, s: (e / s) ** 2, y_error, scale))
        total = sum(jnp.sum(r) for r in ratios)
        count = sum(r.size for r in ratios)
        return jnp.sqrt(total / count)
