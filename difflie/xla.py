"""XLA compile options for CPU and GPU, and ``jit`` with them.

On CPU, jaxlib 0.10 hands reductions of more than a few thousand elements to YNNPACK (the XLA
debug option ``xla_cpu_experimental_ynn_fusion_type``; its default offloads dots and
reductions). A simulation's reductions are many short ones (3-vectors, 3x3 blocks, over bodies,
constraint rows, Jacobian columns or a ``vmap`` batch), and for those the library call is
5-20x slower than XLA's own loop: a batch of 4096 ``J @ omega`` products takes 300 us instead of
16 us, a four link step 430 us instead of 160-280 us (``benchmarks/history/2026-11.md``, 2026-11-23).

It also turns off XLA's newer MLIR fusion emitters (``xla_cpu_use_fusion_emitters``): the
classic emitters run the same fusions 6-27 % faster here (single pendulum, four link,
generalized-alpha heavy top, RKMK4 forward and gradient; same process, alternating runs).

``CPU_COMPILER_OPTIONS`` holds both.

On a GPU, XLA's fusion autotuner (``xla_gpu_experimental_enable_fusion_autotuner``) compiles
competing code for a fusion once it is large enough, and a ``vmap`` batch makes a simulation's
fusions large: 4096 Pandas compiled in 120.4 s with it and in 4.3 s without, each batch step then
taking as long (H100, ``benchmarks/RESULTS.md``, GPU batches).
``GPU_COMPILER_OPTIONS`` turns it off.

``RUN_ONCE_OPTIONS`` compile without LLVM's optimisation, for a program that runs once, such
as an implicit solver's consistent start (``simulate(..., start=...)``): half the compile and a
1.5-3x slower run (milliseconds for a small mechanism; 0.3 -> 0.5 s for the start of a 256-body
chain). The command line compiles the start so.

They are per-compilation options: pass them as ``jax.jit(f, compiler_options=...)``, or use
``jit`` or ``filter_jit``. JAX accepts compiler options only on a top-level ``jit``:
``simulate``, the identification steps and the functions of ``eager`` take them when called
outside any trace (``filter_jit``; a notebook's first ``simulate`` of the four link waits 4.1 s
instead of 5.0 s), and XLA's defaults inside the caller's ``jit``, ``vmap`` or ``grad``: wrap
your own top-level function. difflie never changes a global flag.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

CPU_COMPILER_OPTIONS: dict[str, Any] = {
    "xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT",
    "xla_cpu_use_fusion_emitters": False,
}
GPU_COMPILER_OPTIONS: dict[str, Any] = {"xla_gpu_experimental_enable_fusion_autotuner": False}
RUN_ONCE_OPTIONS: dict[str, Any] = {"xla_backend_optimization_level": 0}
_BACKEND_OPTIONS = {"cpu": CPU_COMPILER_OPTIONS, "gpu": GPU_COMPILER_OPTIONS}


def concrete(x) -> np.ndarray | None:
    """``x`` as a numpy array when its value is known at trace time, else None (a tracer):
    the checks that run on concrete input and step aside under ``jit``/``vmap``/``grad``."""
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def concrete_float(x) -> float | None:
    """``float(x)`` where ``x`` is known at trace time, else None (a tracer)."""
    try:
        return float(x)
    except (TypeError, jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


@functools.cache
def compiler_options() -> dict[str, Any]:
    """The entries of the default backend's options (``CPU_COMPILER_OPTIONS`` or
    ``GPU_COMPILER_OPTIONS``; ``{}`` for another backend) that this jaxlib accepts. An entry it
    does not know (older or newer than 0.10: jaxlib 0.11 removed the classic emitters' switch)
    is left out silently: the options only tune speed.
    """
    accepted = {}
    probe = jax.ShapeDtypeStruct((), jnp.float32)  # no array: safe inside a trace
    for key, value in _BACKEND_OPTIONS.get(jax.default_backend(), {}).items():
        try:
            jax.jit(lambda x: x + 1, compiler_options={key: value}).lower(probe).compile()
        except Exception:  # noqa: BLE001 - any refusal means: compile with XLA's default
            continue
        accepted[key] = value
    return accepted


def eager(fun: Callable, *, static_argnums: tuple[int, ...] | None = None) -> Callable:
    """``fun`` as one compiled program when called on concrete arguments, as it is under a trace
    (``jit``, ``vmap``, ``grad``). Called op by op, a function of a few dozen operations
    dispatches (and, for each new shape, compiles) every one of them: a group map takes
    0.2-12 ms, a constraint Jacobian seconds; compiled, tens of microseconds. For the functions
    users call between compiled runs (group maps, Jacobians, diagnostics).

    ``static_argnums`` given: ``jax.jit`` with those static (its C++ dispatch, ~10 us a call),
    every other argument a pytree of arrays, and plain ``fun`` under a trace (the group maps:
    small and called often); else ``filter_jit`` (any argument, the non-arrays static;
    ~50-100 us a call; ``compiler_options`` outside a trace), under a trace too, where it
    traces ``fun`` once per signature."""
    fast = static_argnums is not None
    compiled = jax.jit(fun, static_argnums=static_argnums) if fast else filter_jit(fun)

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        traced = any(isinstance(x, jax.core.Tracer) for x in leaves)
        if (traced and fast) or not (fast or _hashable(treedef, leaves)):
            return fun(*args, **kwargs)  # a group map under a trace, or a static argument jit cannot key on
        # Under a trace too: the function's jaxpr is traced once per signature and reused by
        # every call (a constraint residual is called a dozen times in one implicit step's trace).
        try:
            return compiled(*args, **kwargs)
        except TypeError:
            _check_arguments(fun, args, kwargs)
            raise

    return call


def at_load_time(load: Callable) -> Callable:
    """``load`` with JAX operations on concrete values computed at once, under a caller's ``jit``
    too (``jax.ensure_compile_time_eval``): a model loader reads its structure (which joints a
    tendon or an actuator moves, an assembly's residual) off arrays it builds from the file, which
    a ``jit`` trace would otherwise make abstract. Values traced by the caller (joint torques,
    controls) stay traced."""

    @functools.wraps(load)
    def call(*args: Any, **kwargs: Any) -> Any:
        with jax.ensure_compile_time_eval():
            return load(*args, **kwargs)

    return call


def _check_arguments(fun: Callable, args: tuple, kwargs: dict) -> None:
    """A ``TypeError`` naming ``fun`` and its signature when the arguments do not fit it (the
    compiled wrapper's own message names neither)."""
    signature = inspect.signature(fun)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as err:
        raise TypeError(f"{fun.__module__}.{fun.__name__}{signature}: {err}") from None


def _hashable(treedef, leaves) -> bool:
    """Whether ``jit`` can key a cache on the static part (tree structure, non-array leaves)."""
    try:
        hash(treedef)
        for x in leaves:
            if not isinstance(x, (jax.Array, np.ndarray, np.generic)):
                hash(x)
    except TypeError:
        return False
    return True


def jit(fun: Callable, **kwargs: Any) -> Callable:
    """``jax.jit(fun, **kwargs)`` compiled with ``compiler_options`` (merged under any given)."""
    options = {**compiler_options(), **(kwargs.pop("compiler_options", None) or {})}
    return jax.jit(fun, compiler_options=options or None, **kwargs)


try:  # JAX has no public test for "no trace under way"
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:  # pragma: no cover - a JAX without it: every jit compiles with XLA's defaults
    _trace_state_clean = None


def outside_traces() -> bool:
    """Whether no trace (``jit``, ``vmap``, ``grad``) is under way: a ``jit`` called now is a
    top-level one and may take compiler options (``False`` where JAX's private test is missing:
    compile with XLA's defaults)."""
    return _trace_state_clean is not None and bool(_trace_state_clean())


class filter_jit:  # noqa: N801 - used as a decorator, like eqx.filter_jit
    """``eqx.filter_jit(fun)``, compiled with ``compiler_options`` (chosen at the first call, not
    at import, so the backend is not initialised by importing difflie) when it is called outside
    any trace (a notebook's ``simulate(...)``, an identification step), with XLA's defaults
    inside one (the caller's ``jit``, ``vmap`` or ``grad``: JAX takes options on the outermost
    ``jit`` only). One cache per kind."""

    def __init__(self, fun: Callable):
        self.fun = fun
        self.traced = eqx.filter_jit(fun)
        self._top = None
        functools.update_wrapper(self, fun)

    def jitted_now(self):
        """The ``filter_jit`` for a call now."""
        if not outside_traces():
            return self.traced
        if self._top is None:
            self._top = eqx.filter_jit(self.fun, compiler_options=compiler_options() or None)
        return self._top

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.jitted_now()(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        return self.jitted_now().lower(*args, **kwargs)
