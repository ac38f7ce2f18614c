"""Starting guesses for the Newton iterations of implicit steps: polynomial extrapolation.

A ``History`` keeps the last ``order + 1`` solutions ``x_i`` of a step (e.g. accelerations
and multipliers) and their times ``t_i``, newest first. The guess for the next step is the
value at ``t`` of the interpolation polynomial through the ``k + 1`` newest points,

    x(t) ~ sum_i l_i(t) x_i,        l_i(t) = prod_{j != i} (t - t_j) / (t_i - t_j),

with ``k = min(order, number of points kept - 1)``, so a run starts with the last value
(``k = 0``) and unequal steps are handled. The guess changes only where Newton starts; the
converged solution satisfies the same tolerance, and implicit-function-theorem derivatives do not
pass through it. A smooth solution is predicted to ``O(h^(k+1))``: with ``k = 3`` the first
correction of a well-resolved step is often below the Newton tolerance, and the step takes one
iteration instead of two.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Int


class History(eqx.Module):
    """The newest ``order + 1`` times and solutions (newest first) and how many are valid."""

    times: Float[Array, " k"]
    values: Float[Array, "k n"]
    count: Int[Array, ""]

    @classmethod
    def start(cls, order: int, t: Float[Array, ""], x: Float[Array, " n"]) -> History:
        """A history holding one point ``(t, x)`` and room for ``order + 1``."""
        size = order + 1
        return cls(
            times=jnp.full((size,), t, x.dtype),
            values=jnp.broadcast_to(x, (size,) + x.shape),
            count=jnp.array(1, jnp.int32),
        )

    def weights(self, t: Float[Array, ""]) -> Float[Array, " k"]:
        """Lagrange weights ``l_i(t)`` over the valid points (zero for the others)."""
        size = self.times.shape[0]
        valid = jnp.arange(size, dtype=jnp.int32) < self.count
        dt = t - self.times
        gap = self.times[:, None] - self.times[None, :]
        off = ~jnp.eye(size, dtype=bool) & valid[None, :]
        # Invalid or diagonal pairs contribute a factor 1 (and never divide by a zero gap).
        factors = jnp.where(off, dt[None, :] / jnp.where(off, gap, 1), 1)
        return jnp.where(valid, jnp.prod(factors, axis=1), 0)

    def guess(self, t: Float[Array, ""]) -> Float[Array, " n"]:
        """The extrapolated value at ``t``."""
        return jnp.sum(self.weights(t)[:, None] * self.values, axis=0)

    def push(self, t: Float[Array, ""], x: Float[Array, " n"], restart: Array | bool = False) -> History:
        """Add ``(t, x)`` as the newest point; ``restart`` keeps only it (e.g. after a change of
        chart that makes older values incomparable)."""
        size = self.times.shape[0]
        times = jnp.concatenate([t[None].astype(self.times.dtype), self.times[:-1]])
        values = jnp.concatenate([x[None], self.values[:-1]])
        count = jnp.where(restart, 1, jnp.minimum(self.count + 1, size)).astype(jnp.int32)
        return History(times, values, count)
