"""difflie.xla: per-compilation CPU options (no YNNPACK reductions), same numbers as jax.jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie import identify, xla
from difflie.models import four_link

cpu_only = pytest.mark.skipif(jax.default_backend() != "cpu", reason="CPU compile options")


@cpu_only
def test_options_accepted_on_cpu():
    assert xla.compiler_options() == xla.CPU_COMPILER_OPTIONS


@cpu_only
def test_batched_reduction_stays_in_xla():
    # 4096 products J @ omega as broadcast-and-sum: 36864 summed elements, above the size XLA
    # hands to YNNPACK by default; with the options no library fusion is left.
    J = jnp.ones((4096, 3, 3))
    w = jnp.ones((4096, 3))
    text = xla.jit(lambda J, w: jnp.sum(J * w[:, None, :], -1)).lower(J, w).compile().as_text()
    assert "__ynn_fusion" not in text


@cpu_only
def test_filter_jit_compiles_with_the_options():
    # The identification steps' compilations go through it.
    J = jnp.ones((4096, 3, 3))
    w = jnp.ones((4096, 3))
    lowered = xla.filter_jit(lambda J, w: jnp.sum(J * w[:, None, :], -1)).lower(J, w)
    assert "__ynn_fusion" not in lowered.lowered.compile().as_text()
    assert isinstance(identify._value_and_grad, xla.filter_jit)


def test_given_options_are_merged():
    f = xla.jit(lambda x: 2 * x, compiler_options={"xla_cpu_enable_fast_math": False})
    assert float(f(jnp.asarray(1.5))) == 3.0


def test_same_trajectory_as_jax_jit():
    model = four_link()
    run = lambda m: dl.simulate(m, dl.BackwardEuler(), 0.0, 0.02, 1e-3).position  # noqa: E731
    a = np.asarray(xla.jit(run)(model))
    b = np.asarray(jax.jit(run)(model))
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
