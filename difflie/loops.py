"""The fixed-step loop: a ``lax.scan`` nested in rematerialised chunks and sub-chunks of steps,
and the progress reports it makes between chunks."""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp


# XLA:CPU runs a loop body about twice as slowly when its fused kernels read their step's slice
# of an array over about 512 bytes (the scanned inputs, or in reverse mode the stacked per-step
# states): measured on the heavy top, 2.2 against 4.6 us per RKMK4 step, and a reverse pass
# 1.6x faster once the stacked states fit (``benchmarks/throughput.py``, RESULTS). Loops over
# many steps therefore run as a loop over sub-chunks of a few steps each.
_SLICE_BYTES = 512


def sub_chunk(y) -> int:
    """Steps per innermost loop: as many as keep every stacked leaf of the state ``y`` (and the
    scanned times) within ``_SLICE_BYTES``."""
    widest = max((leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(y)), default=8)
    return max(1, min(_SLICE_BYTES // 8, _SLICE_BYTES // max(widest, 1)))


def _sub_scan(body, carry, xs, sub: int):
    """``lax.scan(body, carry, xs)`` run as a scan over ``sub``-step scans (plus the left-over
    steps); same values, same order."""
    n = jax.tree.leaves(xs)[0].shape[0]
    if sub <= 1 or n <= sub:
        return jax.lax.scan(body, carry, xs)
    # The left-over steps are a second copy of the step in the program (0.7 s of a 4.3 s compile
    # of the double pendulum under generalized-alpha): sub-chunks down to half the size that
    # divide n leave none.
    sub = next((d for d in _sub_sizes(sub) if n % d == 0), sub)
    m, r = divmod(n, sub)
    main = jax.tree.map(lambda x: x[: m * sub].reshape((m, sub) + x.shape[1:]), xs)
    carry, ys = jax.lax.scan(lambda c, x: jax.lax.scan(body, c, x), carry, main)
    ys = jax.tree.map(lambda y: y.reshape((m * sub,) + y.shape[2:]), ys)
    if r:
        carry, ys_tail = jax.lax.scan(body, carry, jax.tree.map(lambda x: x[m * sub :], xs))
        ys = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys, ys_tail)
    return carry, ys


def _sub_sizes(sub: int) -> range:
    """The sub-chunk sizes taken instead of ``sub`` where one divides the steps: down to half
    of it (at least 2), largest first."""
    return range(sub, max(2, sub // 2) - 1, -1)


def _loop_sizes(n: int, chunk: int, sub: int) -> tuple[int, int]:
    """``(chunk, sub)`` for ``n`` steps near the given ones: a chunk that is a multiple of
    ``sub`` (down to half of it) and divides ``n`` (within a factor of two of the given chunk),
    where there is one, since left-over steps are another copy of the step in the program (a
    generalized-alpha double pendulum over 1000 steps: 1.1 s of a 3.8 s compile). Else the
    chunk rounded to a multiple of ``sub``."""
    small = chunk <= sub  # the chunks are plain loops
    best = None
    for s in (1,) if small or sub <= 1 else _sub_sizes(sub):
        for c in range(s * max(1, -(-chunk // (2 * s))), 2 * chunk + 1, s):
            if n % c == 0 and (best is None or abs(math.log(c / chunk)) < abs(math.log(best / chunk))):
                best = c
        if best is not None:
            return best, (sub if small else s)
    return (chunk if small else sub * max(1, round(chunk / sub))), sub


def chunked_scan(body, carry, xs, chunk: int | None, remat: bool | str = True, report=None, sub: int = 1):
    """``lax.scan``, nested in chunks of about ``chunk`` steps when given.

    With ``remat=True`` the outer body and each step are rematerialised (``jax.checkpoint``):
    reverse mode stores the carry once per chunk and per step only, and recomputes a step before
    transposing it, which on CPU is cheaper than writing and reading back the many small
    residuals of a step. ``remat="steps"`` rematerialises the steps only: one carry per step is
    stored, and the chunk's recomputation is saved. Each chunk runs as loops of ``sub`` steps
    (``sub_chunk``). ``report(carry, xs_chunk)`` runs after each chunk (progress).
    """
    n = jax.tree.leaves(xs)[0].shape[0]
    if chunk:
        chunk, sub = _loop_sizes(n, chunk, sub)
    if remat:
        body = jax.checkpoint(body, prevent_cse=False)
    if not chunk or chunk >= n:
        carry, ys = _sub_scan(body, carry, xs, sub)
        if report is not None:
            report(carry, xs)
        return carry, ys
    q, r = divmod(n, chunk)
    # The r left-over steps run first, unreported, so that every report comes from inside the
    # outer loop, in order, the last one at the final step.
    ys_head = None
    if r:
        carry, ys_head = _sub_scan(body, carry, jax.tree.map(lambda x: x[:r], xs), sub)
    rest = jax.tree.map(lambda x: x[r:].reshape((q, chunk) + x.shape[1:]), xs)

    def outer(c, x):
        c, y = _sub_scan(body, c, x, sub)
        if report is not None:
            report(c, x)
        return c, y

    carry, ys = jax.lax.scan(jax.checkpoint(outer) if remat is True else outer, carry, rest)
    ys = jax.tree.map(lambda y: y.reshape((q * chunk,) + y.shape[2:]), ys)
    if ys_head is not None:
        ys = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys_head, ys)
    return carry, ys


def print_progress(t, t1) -> None:
    """The default progress report: a bar on stderr, ended by a newline at ``t1``."""
    t, t1 = float(t), float(t1)
    frac = min(max(t / t1 if t1 else 1.0, 0.0), 1.0)
    bar = "#" * int(30 * frac)
    sys.stderr.write(f"\r[{bar:<30s}] {100 * frac:5.1f} %  t = {t:.4g} / {t1:.4g} s")
    if frac >= 1.0:
        sys.stderr.write("\n")
    sys.stderr.flush()


def reporter(progress, t1, n: int):
    """``report(carry, xs)``: ``progress(t, t1)`` after the steps ``xs`` (indices, starts, ends)
    when they complete another 2 % of the ``n`` steps, or the last one."""
    if progress is None:
        return None
    every = max(1, n // 50)

    def report(carry, xs):
        k, _, ends = xs
        # The barrier ties the time to the carry, so the call waits for the chunk's steps.
        t, _ = jax.lax.optimization_barrier((ends[-1], carry))
        due = ((k[-1] + 1) // every > k[0] // every) | (k[-1] == n - 1)
        # Unordered: the outer loop runs the chunks, hence the calls, in order.
        jax.lax.cond(due, lambda: jax.debug.callback(progress, t, t1), lambda: None)

    return report


def progress_function(progress):
    if progress is None or progress is False:
        return None
    if progress is True:
        return print_progress
    if not callable(progress):
        raise ValueError(f"simulate: progress must be None, True or a callable (t, t1), got {progress!r}")
    return progress
