"""The package's import graph runs one way: groups, then numerics and result types, then
bodies, constraints and charts, the model, the analyses that read it, the solvers, the time
loop and the tools on top. A module that imports from a higher layer, or a private name
(``_x``) of another package, fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "difflie"

# Lowest first. A module not listed takes its package's layer; package __init__ files are
# facades and take the highest layer of what they import.
LAYERS = [
    ["lie", "xla"],
    ["results", "solution", "step_size", "numerics", "expr"],
    ["body", "forces", "joint_laws", "hinges", "constraints", "coords.chart", "coords.local", "coords.euler_angles", "coords.euler_parameters",
     "coords.rotation_matrix", "coords.rotation_vector", "coords.rodrigues", "coords.wiener_milenkovic"],
    ["model"],
    ["kinematics", "eom", "models", "io", "constraints.world", "joint_space", "coords.absolute_model"],
    ["dae", "diagnostics"],
    ["solvers", "coords.lgt_alpha", "coords.lie_rk", "coords.diffrax_lgt"],
    ["simulate", "loops", "run_messages"],
    ["batch", "identify", "plot", "export", "cli", "__main__"],
]  # fmt: skip

# Private names that a module may import from another package: (module, target, name).
PRIVATE_IMPORTS: set[tuple[str, str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _rank(name: str) -> int | None:
    best = None
    for i, layer in enumerate(LAYERS):
        for entry in layer:
            if name == entry or name.startswith(entry + "."):
                if best is None or len(entry) > best[1]:
                    best = (i, len(entry))
    return None if best is None else best[0]


def _imports(path: Path):
    """``(imported module, imported names)`` for every import of a difflie module in ``path``."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] if node.level > 1 else package
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("difflie"):
                target = node.module.removeprefix("difflie").lstrip(".")
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                yield (sub, alias.name) if (ROOT / (sub.replace(".", "/") + ".py")).exists() or (ROOT / sub.replace(".", "/")).is_dir() else (target, alias.name)


def _package(module: str) -> str:
    return module.rsplit(".", 1)[0] if "." in module else ""


FILES = sorted(p for p in ROOT.rglob("*.py"))


def _facade_rank(path: Path) -> int:
    ranks = [_rank(t) for t, _ in _imports(path)]
    return max([r for r in ranks if r is not None] + [_rank(_module_name(path)) or 0])


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_go_down_the_layers(path):
    name = _module_name(path)
    if path.name == "__init__.py" or not name:
        return  # facades
    own = _rank(name)
    assert own is not None, f"{name} is in no layer of tests/test_layers.py"
    for target, imported in _imports(path):
        init = ROOT / target.replace(".", "/") / "__init__.py"
        rank = _facade_rank(init) if init.exists() and not (ROOT / (target.replace(".", "/") + ".py")).exists() else _rank(target)
        assert rank is not None and rank <= own, f"{name} (layer {own}) imports {target} (layer {rank})"
        private = imported.startswith("_") or any(part.startswith("_") for part in target.split("."))
        allowed = _package(name) == _package(target) or (name, target, imported) in PRIVATE_IMPORTS
        assert not (private and not allowed), f"{name} imports the private {target}.{imported}"


def test_layers_see_a_violation():
    """The check itself: a solver module imported by the model would be an upward edge."""
    assert _rank("solvers.rkmk") > _rank("model") > _rank("lie.ops")
