"""The command line's parts, by what they do; ``difflie.__main__`` is its entry point.

- ``arguments``: the parser and the parsers of its option values.
- ``loading``: the model and the solver that the arguments name.
- ``checks``: what is refused before any long work: options, output paths, memory.
- ``running``: worker threads, interrupts, compiled runs, adaptive runs in chunks.
- ``commands``: ``simulate``, ``equilibrium`` and ``list``.
- ``output``: what the commands report and write.
"""


class CliError(Exception):
    """An error reported as one line, exit status 2."""
