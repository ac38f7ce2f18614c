"""Step-size control: fixed steps, a PID controller on a solver's error estimate, and steps
that shrink where a step fails and grow back."""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .xla import concrete_float


class ConstantStepSize(eqx.Module):
    """Fixed steps of ``dt`` (shortened evenly so that they end exactly at ``t1``)."""


class PIDController(eqx.Module):
    """PID step-size controller (Soderlind; as in diffrax) on the solver's error norm.

    A step is accepted iff ``err <= 1``; the next step is ``dt * clip(safety * err_n^(-b1/k)
    err_{n-1}^(-b2/k) err_{n-2}^(-b3/k), factormin, factormax)`` clipped to ``[dtmin, dtmax]``,
    with ``k`` the solver's order, ``b1 = p + i + d``, ``b2 = -(p + 2 d)``, ``b3 = d``
    (``pcoeff=0, icoeff=1, dcoeff=0`` is the classical I controller). A rejected step at
    ``dtmin`` (or below ``4 eps max(|t|, t1 - t0)``) stops the simulation with
    ``RESULTS.dt_underflow``.
    """

    rtol: Float[Array, ""] = eqx.field(converter=jnp.asarray)
    atol: Float[Array, ""] = eqx.field(converter=jnp.asarray)
    dtmin: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=0.0)
    dtmax: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=math.inf)
    pcoeff: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=0.0)
    icoeff: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=1.0)
    dcoeff: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=0.0)
    safety: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=0.9)
    factormin: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=0.2)
    factormax: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=10.0)

    def __check_init__(self):
        for name in ("rtol", "atol", "dtmin", "dtmax", "safety", "factormin", "factormax"):
            value = concrete_float(getattr(self, name))
            if value is not None and not value >= 0:
                raise ValueError(f"PIDController: {name} must be >= 0, got {value}")
        rtol, atol = concrete_float(self.rtol), concrete_float(self.atol)
        if rtol == 0 and atol == 0:
            raise ValueError("PIDController: rtol and atol cannot both be zero")
        dtmin, dtmax = concrete_float(self.dtmin), concrete_float(self.dtmax)
        if dtmin is not None and dtmax is not None and dtmin > dtmax:
            raise ValueError(f"PIDController: dtmin = {dtmin} exceeds dtmax = {dtmax}")


class ReducingStepSize(eqx.Module):
    """Steps of ``dt`` that shrink where the step fails and grow back, as Exudyn's
    ``adaptiveStep`` does for its implicit solvers: a step whose Newton iteration does not converge,
    or whose state is not finite, is retried at ``decrease * dt``; after ``recovery_steps``
    accepted steps in a row the step grows by ``increase``, up to the ``dt`` given to
    ``simulate``. No error estimate: for any solver. A failed step at ``dtmin`` (or below ``4 eps
    max(|t|, t1 - t0)``) stops the simulation with ``RESULTS.dt_underflow``;
    ``Solution.stats.rejected_steps`` counts the retried steps.
    """

    decrease: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=0.5)
    increase: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=2.0)
    recovery_steps: int = eqx.field(static=True, default=10)
    dtmin: Float[Array, ""] = eqx.field(converter=jnp.asarray, default=0.0)

    def __check_init__(self):
        decrease, increase = concrete_float(self.decrease), concrete_float(self.increase)
        if decrease is not None and not 0 < decrease < 1:
            raise ValueError(f"ReducingStepSize: decrease must lie in (0, 1), got {decrease}")
        if increase is not None and not increase >= 1:
            raise ValueError(f"ReducingStepSize: increase must be >= 1, got {increase}")
        if not (isinstance(self.recovery_steps, int) and self.recovery_steps >= 1):
            raise ValueError(f"ReducingStepSize: recovery_steps must be an int >= 1, got {self.recovery_steps!r}")
        dtmin = concrete_float(self.dtmin)
        if dtmin is not None and not dtmin >= 0:
            raise ValueError(f"ReducingStepSize: dtmin must be >= 0, got {dtmin}")


def pid_step(c: PIDController, k: int, err, dt, inv_errs):
    """``(next step, accept, 1/err of the last two accepted steps)`` of the PID controller."""
    b1, b2, b3 = c.pcoeff + c.icoeff + c.dcoeff, -(c.pcoeff + 2 * c.dcoeff), c.dcoeff
    finite = jnp.isfinite(err)
    accept = finite & (err <= 1)
    inv = 1 / jnp.maximum(jnp.where(finite, err, 1.0), 1e-10)
    factor = c.safety * inv ** (b1 / k) * inv_errs[0] ** (b2 / k) * inv_errs[1] ** (b3 / k)
    factor = jnp.where(finite, factor, c.factormin)
    factor = jnp.where(accept, factor, jnp.minimum(factor, 1.0))
    factor = jnp.clip(factor, c.factormin, c.factormax)
    return jnp.clip(dt * factor, c.dtmin, c.dtmax), accept, jnp.where(accept, jnp.stack([inv, inv_errs[0]]), inv_errs)
