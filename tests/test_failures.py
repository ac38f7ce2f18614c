"""No failure passes silently: with ``throw=True`` an unsuccessful run raises eagerly (naming the
step, time and reason), under ``jit`` and under ``vmap``; non-finite inputs are refused before
running where they are concrete and fail at step 0 where they are traced."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import difflie as dl

TOP = dl.models.heavy_top()
PID = dl.PIDController(rtol=1e-6, atol=1e-6)


def _short_top(r0):
    """Five RKMK4 steps of the heavy top from COM position ``r0`` (traced or not)."""
    return dl.simulate(eqx.tree_at(lambda m: m.r0, TOP, r0), dl.RKMK4(), 0.0, 5e-3, 1e-3).position


def test_newton_failure_raises_eagerly_with_step_and_time():
    with pytest.raises(dl.SimulationError, match=r"Newton iteration did not converge at step 0 \(t = 0 s\): residual"):
        dl.simulate(dl.models.four_link(), dl.BackwardEuler(), 0.0, 1.0, 0.5)


def test_newton_failure_raises_under_jit():
    run = jax.jit(lambda m: dl.simulate(m, dl.BackwardEuler(), 0.0, 1.0, 0.5).position)
    with pytest.raises(Exception, match="Newton iteration did not converge"):
        jax.block_until_ready(run(dl.models.four_link()))
    quiet = jax.jit(lambda m: dl.simulate(m, dl.BackwardEuler(), 0.0, 1.0, 0.5, throw=False))(dl.models.four_link())
    assert quiet.failure_message().startswith("Newton iteration did not converge at step 0 (t = 0 s)")


def test_nan_row_of_a_vmap_batch_raises():
    omegas = jnp.ones((3, 3)).at[1, 0].set(jnp.nan)
    run = jax.jit(jax.vmap(lambda w: dl.simulate(dl.models.heavy_top(omega0=w), dl.RKMK4(), 0.0, 5e-3, 1e-3).position[-1]))
    with pytest.raises(Exception, match="NaN or Inf"):
        jax.block_until_ready(run(omegas))
    ok = run(jnp.ones((3, 3)))  # the same compiled function, finite inputs: no error
    assert bool(jnp.all(jnp.isfinite(ok)))


def test_nan_initial_state_refused_eagerly_and_fails_under_jit():
    bad = TOP.r0.at[0, 0].set(jnp.nan)
    with pytest.raises(ValueError, match="r0 of body 'top' is not finite"):
        _short_top(bad)
    with pytest.raises(Exception, match="NaN or Inf"):
        jax.block_until_ready(jax.jit(_short_top)(bad))
    sol = jax.jit(lambda r0: dl.simulate(eqx.tree_at(lambda m: m.r0, TOP, r0), dl.RKMK4(), 0.0, 5e-3, 1e-3, throw=False))(bad)
    assert sol.result == dl.RESULTS.nonfinite and int(sol.stats.failure_step) == 0


def test_nan_save_time_refused_eagerly_and_fails_under_jit():
    ts = jnp.array([0.01, jnp.nan, 0.05])
    with pytest.raises(ValueError, match="SaveAt\\(ts\\): times must be finite"):
        dl.simulate(TOP, dl.Dopri5(), 0.0, 0.05, 1e-3, saveat=dl.SaveAt(ts=ts), stepsize_controller=PID)

    def run(ts, throw=True):
        return dl.simulate(TOP, dl.Dopri5(), 0.0, 0.05, 1e-3, saveat=dl.SaveAt(ts=ts), stepsize_controller=PID, throw=throw)

    with pytest.raises(Exception, match="NaN or Inf"):
        jax.block_until_ready(jax.jit(run)(ts).ts)
    assert jax.jit(lambda ts: run(ts, throw=False))(ts).result == dl.RESULTS.nonfinite
    with pytest.raises(ValueError, match="dt must be finite"):
        dl.simulate(TOP, dl.RKMK4(), 0.0, 0.05, jnp.inf)


def test_solver_refuses_a_model_before_compiling():
    with pytest.raises(ValueError, match="constraints"):
        dl.simulate(dl.models.slider_crank(), dl.RKMK4(), 0.0, 0.1, 1e-3)
    with pytest.raises(ValueError, match="one body, got 3 bodies"):
        dl.simulate(dl.models.slider_crank(), dl.DQVI(), 0.0, 0.1, 1e-3)
