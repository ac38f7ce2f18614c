"""XLA compile options for CPU, and ``jit`` with them.

On CPU, jaxlib 0.10 hands reductions of more than a few thousand elements to YNNPACK (the XLA
debug option ``xla_cpu_experimental_ynn_fusion_type``; its default offloads dots and
reductions). A simulation's reductions are many short ones (3-vectors, 3x3 blocks, over bodies,
constraint rows, Jacobian columns or a ``vmap`` batch), and for those the library call is
5-20x slower than XLA's own loop: a batch of 4096 ``J @ omega`` products takes 300 us instead of
16 us, a four link step 430 us instead of 160-280 us (``benchmarks/RESULTS.md``).

:data:`CPU_COMPILER_OPTIONS` keeps YNNPACK for dots and leaves reductions to XLA. It is a
per-compilation option: pass it as ``jax.jit(f, compiler_options=...)``, or use :func:`jit`.
difflie never changes a global flag.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

CPU_COMPILER_OPTIONS: dict[str, str] = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}


@functools.cache
def compiler_options() -> dict[str, str]:
    """:data:`CPU_COMPILER_OPTIONS` when the default backend is a CPU that accepts them, else ``{}``.

    A jaxlib without the option (older or newer than 0.10) gets ``{}`` and one warning.
    """
    if jax.default_backend() != "cpu":
        return {}
    try:
        jax.jit(lambda x: x + 1, compiler_options=CPU_COMPILER_OPTIONS).lower(jnp.zeros(())).compile()
    except Exception as err:  # noqa: BLE001 - any refusal means: compile with XLA's defaults
        warnings.warn(f"difflie.xla: this jaxlib refuses {CPU_COMPILER_OPTIONS} ({err}); using XLA's defaults",
                      stacklevel=2)  # fmt: skip
        return {}
    return dict(CPU_COMPILER_OPTIONS)


def jit(fun: Callable, **kwargs: Any) -> Callable:
    """``jax.jit(fun, **kwargs)`` compiled with :func:`compiler_options` (merged under any given)."""
    options = {**compiler_options(), **(kwargs.pop("compiler_options", None) or {})}
    return jax.jit(fun, compiler_options=options or None, **kwargs)
