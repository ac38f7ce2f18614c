"""Command line: ``python -m difflie simulate MODEL ...`` and ``python -m difflie list``.

Bad input prints one line on stderr and exits with status 2 (1 for a failed simulation, 130
for an interrupt), with no traceback and no partial output file. Everything that can be checked
before the run is: the options, the output paths, the model file and the memory the run needs.
"""

from __future__ import annotations

import os
import signal
import sys
import warnings
from pathlib import Path

from . import _interrupted_while_starting
from .cli import CliError
from .cli.arguments import parser
from .cli.commands import list_all, run, statics


def compile_cache_dir() -> Path:
    """Where the CLI keeps compiled programs: ``$XDG_CACHE_HOME/difflie/jax`` (default
    ``~/.cache/difflie/jax``); a ``JAX_COMPILATION_CACHE_DIR`` set in the environment wins."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "difflie" / "jax"


def _warn(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"difflie: warning: {message}", file=sys.stderr)


def _use_compile_cache(args) -> None:
    """JAX's persistent compilation cache in ``compile_cache_dir()`` (unless ``--no-compile-cache``
    or JAX already has a cache folder), keeping every program, however quickly it compiled: a
    command's run is short, and the eager steps that build a model and the compile of a small
    model's run (under a second) are most of its wait, which JAX's default (programs of a second
    or more) would compile again at every run. ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``
    overrides."""
    import jax

    if getattr(args, "compile_cache", True) and not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(compile_cache_dir()))
        if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def main(argv: list[str] | None = None) -> int:
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:  # installed for the imports
        signal.signal(signal.SIGINT, signal.default_int_handler)
    with warnings.catch_warnings():
        warnings.showwarning = _warn  # one line each, no source line
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        args = parser().parse_args(argv)
        _use_compile_cache(args)
        if args.command == "list":
            return list_all()
        import jax

        jax.config.update("jax_enable_x64", not args.float32)  # this process is the user's program
        return statics(args) if args.command == "equilibrium" else run(args)
    except KeyboardInterrupt:
        print("difflie: interrupted", file=sys.stderr)
        return 130
    except (CliError, ValueError, OSError, KeyError, TypeError) as e:
        print(f"difflie: error: {e}".splitlines()[0] if str(e) else f"difflie: error: {type(e).__name__}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - an error of the run itself: one line, never a traceback
        message = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        print(f"difflie: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    code = main()
    if code == 130:  # interrupted: end now, without waiting for a compiled run still in its thread
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
