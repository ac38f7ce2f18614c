"""``Stats`` prints its values; under tracing, the default repr (the shapes)."""

import jax
import jax.numpy as jnp

import difflie as dl
from difflie.simulate import Stats


def _stats(steps):
    i, f = jnp.asarray(0, jnp.int32), jnp.asarray(jnp.nan)
    return Stats(jnp.asarray(steps, jnp.int32), i, i + 4 * steps, i, i - 1, f, i, f)


def test_concrete_stats_print_values():
    assert repr(_stats(1000)) == (
        "Stats(steps=1000, rejected_steps=0, evaluations=4000, newton_iterations=0, failure_step=-1, "
        "failure_time=nan, failure_iterations=0, failure_residual=nan)"
    )
    batched = jax.vmap(_stats)(jnp.asarray([10, 20]))
    assert repr(batched).startswith("Stats(steps=[10, 20], rejected_steps=[0, 0], evaluations=[40, 80],")


def test_traced_stats_fall_back_to_shapes():
    seen = []
    jax.jit(lambda n: seen.append(repr(_stats(n))))(jnp.asarray(3, jnp.int32))
    assert "steps=i32[]" in seen[0]


def test_stats_of_a_simulation():
    sol = dl.simulate(dl.models.heavy_top(), dl.RKMK4(), 0.0, 0.01, 1e-3)
    assert repr(sol.stats).startswith("Stats(steps=10, rejected_steps=0, evaluations=40, newton_iterations=0,")
