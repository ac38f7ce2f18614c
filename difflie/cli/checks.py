"""What is refused before any long work: option values, output paths that cannot be written, and
runs whose saved states exceed the memory."""

from __future__ import annotations

import math
import os
import tempfile

from . import CliError

PLOT_FORMATS = ("png", "pdf", "svg")


def check_options(args) -> None:
    if args.adaptive_chunk < 1:
        raise CliError(f"--adaptive-chunk must be a positive number of steps, got {args.adaptive_chunk}")
    if args.dt is not None and not (args.dt > 0 and math.isfinite(args.dt)):
        raise CliError(f"--dt must be a positive finite number, got {args.dt}")
    if not (args.t1 > 0 and math.isfinite(args.t1)):
        raise CliError(f"--t1 must be a positive finite number, got {args.t1}")
    for flag in ("rtol", "atol", "mass"):
        value = getattr(args, flag)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise CliError(f"--{flag} must be a positive finite number, got {value}")
    check_output(args.out, "--out", ("npz",))
    check_output(args.plot, "--plot", PLOT_FORMATS)


def check_output(path: str | None, flag: str, formats: tuple[str, ...]) -> None:
    """Refuse an output path that cannot be written, before any work: a directory, a missing or
    unwritable directory, an unsupported extension."""
    if path is None:
        return
    if os.path.isdir(path):
        raise CliError(f"{flag} {path}: is a directory")
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in formats:
        raise CliError(f"{flag} {path}: unsupported file type {ext or '(none)'!r}; use {', '.join('.' + f for f in formats)}")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CliError(f"cannot write {path}: no such directory")
    try:  # the one reliable test of a writable place (root ignores the mode bits)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".difflie-", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise CliError(f"cannot write {path}: {err.strerror}") from None


def available_memory() -> float | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_memory(needed: float, limit: float | None) -> None:
    """Refuse a run whose arrays exceed ``limit`` (``--max-memory``, else the available memory)."""
    limit = available_memory() if limit is None else limit
    if limit is not None and needed > limit:
        raise CliError(
            f"the run needs at least {needed / 2**30:.3g} GiB for its saved states and time grid, more than "
            f"the {limit / 2**30:.3g} GiB available; use a larger --dt or a shorter --t1, or raise the limit with --max-memory"
        )
