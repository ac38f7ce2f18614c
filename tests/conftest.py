import gc

import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_code():
    """Drop every compiled program after each test module. XLA:CPU maps each program's code into
    memory in a few hundred pieces; a worker that compiles the whole suite otherwise runs into
    the kernel's limit on memory mappings (vm.max_map_count, 65530 here) and crashes in the
    compiler. Programs are shared within a module, rarely across modules."""
    yield
    jax.clear_caches()
    gc.collect()
