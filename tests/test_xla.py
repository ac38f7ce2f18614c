"""difflie.xla: per-compilation CPU options (no YNNPACK reductions) and GPU options (no fusion
autotuner), same numbers as jax.jit."""

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


@pytest.mark.skipif(jax.default_backend() != "gpu", reason="GPU compile options")
def test_options_accepted_on_gpu():
    assert xla.compiler_options() == xla.GPU_COMPILER_OPTIONS


def _batched_products():
    # 4096 products J @ omega as broadcast-and-sum: 36864 summed elements, above the size XLA
    # hands to YNNPACK by default.
    return (lambda J, w: jnp.sum(J * w[:, None, :], -1)), jnp.ones((4096, 3, 3)), jnp.ones((4096, 3))


def _offloaded(compiled) -> bool:
    return "__ynn_fusion" in compiled.as_text()


@cpu_only
def test_batched_reduction_stays_in_xla():
    f, J, w = _batched_products()
    assert _offloaded(jax.jit(f).lower(J, w).compile())  # what the options are for
    assert not _offloaded(xla.jit(f).lower(J, w).compile())


@cpu_only
def test_filter_jit_compiles_with_the_options():
    f, J, w = _batched_products()
    assert not _offloaded(xla.filter_jit(f).lower(J, w).lowered.compile())
    assert isinstance(identify._value_and_grad, xla.filter_jit)  # the identification steps use it


@cpu_only
def test_filter_jit_takes_the_options_outside_traces_only():
    f, J, w = _batched_products()
    g = xla.filter_jit(f)
    assert not _offloaded(g.lower(J, w).lowered.compile())  # called outside any trace
    # Inside a caller's jit or grad, where JAX refuses options on a nested jit: XLA's defaults.
    np.testing.assert_allclose(jax.jit(g)(J, w), f(J, w))
    np.testing.assert_allclose(jax.grad(lambda J: g(J, w).sum())(J), jnp.broadcast_to(w[:, None, :], J.shape))
    assert all(isinstance(fn, xla.filter_jit) for fn in (dl.simulate.__globals__["_fixed"], dl.simulate.__globals__["_adaptive"]))


@cpu_only
def test_given_options_are_merged_over_the_defaults():
    f, J, w = _batched_products()
    # Another option keeps the defaults; a given value of a default key wins.
    assert not _offloaded(xla.jit(f, compiler_options={"xla_cpu_enable_fast_math": False}).lower(J, w).compile())
    reduce_to_ynn = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_REDUCE"}
    assert _offloaded(xla.jit(f, compiler_options=reduce_to_ynn).lower(J, w).compile())


def test_same_trajectory_as_jax_jit():
    model = four_link()
    run = lambda m: dl.simulate(m, dl.BackwardEuler(), 0.0, 0.02, 1e-3).position  # noqa: E731
    a = np.asarray(xla.jit(run)(model))
    b = np.asarray(jax.jit(run)(model))
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_a_call_that_does_not_fit_names_the_function():
    """A compiled diagnostic called with the arguments of another (``energy`` takes no times)
    says which function and signature, not the wrapper's bare ``too many positional
    arguments``."""
    model = four_link()
    states = dl.BodyState(model.r0[None], model.R0[None], model.v0[None], model.omega0[None])
    with pytest.raises(TypeError, match=r"difflie\.diagnostics\.energy\(model, states.*: too many positional arguments"):
        dl.diagnostics.energy(model, jnp.zeros(1), states)
    assert dl.diagnostics.energy(model, states).shape == (1,)
