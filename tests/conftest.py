import ctypes
import gc
import os
from importlib.metadata import distributions, version
from pathlib import Path

# JAX's persistent compilation cache, in the checkout (a fresh clone starts empty), shared by
# the xdist workers and the CLI tests' subprocesses: a program compiled again after the caches
# are released below, in another module or in another process is read back instead (a
# generalized-alpha four link: 13.8 s to compile, 3.1 s to trace and load). Every program is
# kept, the smallest too: each primitive that a test runs outside `jit` is compiled on its own
# (1001 of them in test_io, 30 s of its 99), and released with the rest after each module.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# The suite compiles far more than it runs: XLA's CPU backend at LLVM -O0 compiles about 30 %
# faster (test_predictor and test_conformance on 2 workers: 220 s -> 154 s) and runs the same
# operations, slower; its classic fusion emitters (`difflie.xla.CPU_COMPILER_OPTIONS`) compile
# in less than half the time of the MLIR ones at -O0 (a generalized-alpha four link, 20 steps:
# 3.3 s -> 1.3 s). Benchmarks, not tests, measure the optimised programs. jaxlib 0.11 removed
# the emitters' switch, and XLA aborts the process on a flag it does not know. Both are for a
# suite run on the CPU: where JAX runs on a GPU, XLA's GPU backend at -O0 computes otherwise
# (on an H200, a 3-rod chain's modified Newton took a second iteration and a new matrix at
# every step), and tests of iteration counts fail there.
_GPU_PLUGIN = any((d.metadata["Name"] or "").startswith(("jax-cuda", "jax_cuda", "jax-rocm")) for d in distributions())
_ON_CPU = os.environ.get("JAX_PLATFORMS", "cpu" if not _GPU_PLUGIN else "").split(",")[0].strip() == "cpu"
_FLAGS = ["xla_backend_optimization_level=0"] if _ON_CPU else []
if _ON_CPU and tuple(int(p) for p in version("jaxlib").split(".")[:2]) < (0, 11):
    _FLAGS.append("xla_cpu_use_fusion_emitters=false")
for _flag in _FLAGS:
    if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --" + _flag).strip()

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)

try:
    _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
except (OSError, AttributeError):  # not glibc
    _malloc_trim = None

# A worker that holds more than this after a test drops its compiled programs before the next
# one (see `_bounded_memory`). MiB; override with DIFFLIE_TEST_RSS_LIMIT_MB.
RSS_LIMIT_MB = float(os.environ.get("DIFFLIE_TEST_RSS_LIMIT_MB", 1200))


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):  # not Linux
        return 0.0


def release_memory():
    """Drop every compiled program and hand the freed memory back to the system. Without the
    ``malloc_trim``, glibc keeps the pages that compiled programs and the compiler used, and a
    worker's resident memory only ever grows over the run."""
    jax.clear_caches()
    gc.collect()
    if _malloc_trim is not None:
        _malloc_trim(0)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_code():
    """Drop every compiled program after each test module. XLA:CPU maps each program's code into
    memory in a few hundred pieces; a worker that compiles the whole suite otherwise runs into
    the kernel's limit on memory mappings (vm.max_map_count, 65530 here) and crashes in the
    compiler. Programs are shared within a module, rarely across modules."""
    yield
    release_memory()


@pytest.fixture(autouse=True)
def _bounded_memory():
    """Within a module, compiled programs pile up (hundreds of MB in the modules that compile
    many solvers); once a worker holds more than ``RSS_LIMIT_MB`` after a test, drop them, so
    that two workers of the default run stay within the suite's memory budget. Later tests of
    the module recompile what they share, which only the large modules pay for."""
    yield
    if _rss_mb() > RSS_LIMIT_MB:
        release_memory()
