"""The documentation builds (mkdocs --strict: every ``:::`` target resolves, every link works) and
the Python code of docs/getting_started.md runs as written, and says what it claims."""

import os
import pathlib
import posixpath
import re
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GETTING_STARTED = DOCS / "getting_started.md"

_NOT_FOUND = re.compile(r"Doc file '([^']+)' contains a link '([^']+)', but the target")


def python_blocks(path: pathlib.Path) -> list[str]:
    """The fenced ```python blocks of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```$", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocstrings_handlers.python", reason="pip install -e '.[test]' installs the docs tools")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    simulate_page = (tmp_path / "site" / "api" / "simulate" / "index.html").read_text(encoding="utf-8")
    # Long signatures are formatted (by ruff), one parameter per line.
    assert re.search(r'<span class="nf">simulate</span><span class="p">\(</span>\n    <span class="n">model', simulate_page)
    # mkdocs.yml reports links it cannot resolve at INFO level, because pages link to files of the
    # repository outside docs/ (examples/, notebooks/). Those must exist there; any other
    # unresolved link is an error.
    for page, link in _NOT_FOUND.findall(log):
        target = posixpath.normpath(posixpath.join(posixpath.dirname(page), link.split("#")[0]))
        assert target.startswith("../"), f"{page}: broken link {link!r}"
        assert (DOCS / target).resolve().exists(), f"{page}: link {link!r} to a missing file"
    # Every page is in the nav, and every API page has rendered objects.
    for page in sorted((DOCS / "api").glob("*.md")):
        html = (tmp_path / "site" / "api" / page.stem / "index.html").read_text(encoding="utf-8")
        assert 'class="doc doc-object' in html or "doc-heading" in html, page.name


def test_getting_started_runs(tmp_path, monkeypatch):
    """Every block but the torque optimisation's (``test_getting_started_torque_optimisation``)."""
    blocks = [code for code in python_blocks(GETTING_STARTED) if "optax" not in code]
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)  # anything a block writes lands here
    ns: dict = {"__name__": "getting_started"}
    after: list[dict] = []  # the namespace after each block
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{GETTING_STARTED.name}[python block {i}]", "exec"), ns)
        except Exception as e:  # name the block that failed
            raise AssertionError(f"python block {i} of {GETTING_STARTED.name} failed:\n{code}") from e
        after.append(dict(ns))

    # What the comments on the page say. The first simulation: the final state only.
    dl = ns["dl"]
    first = next(a["sol"] for a, code in zip(after, blocks) if "dl.simulate(m, dl.RKMK4(), 0.0, 1.0, 1e-3)" in code)
    assert first.ts.shape == (1,) and float(first.ts[0]) == 1.0
    assert first.position.shape == (1, 1, 3) and first.velocity.shape == (1, 1, 3)
    assert first.rotation.shape == (1, 1, 3, 3) and first.angular_velocity.shape == (1, 1, 3)
    assert int(first.stats.steps) == 1000 and first.body_names == ("top",)
    assert first.result == dl.RESULTS.successful
    assert jnp.asarray(first.position).dtype == jnp.float64
    # The constrained mechanism, the gradient, the batch.
    sol = ns["sol"]
    assert sol.result == dl.RESULTS.successful
    assert sol.ts.shape == (501,) and ns["residual"].shape == (501,)
    assert float(ns["worst"]) < 1e-10
    assert ns["dh"].shape == (3,) and np.all(np.isfinite(ns["dh"]))
    assert ns["final"].shape == (64, 1, 3) and np.all(np.isfinite(ns["final"]))


@pytest.mark.slow
def test_getting_started_torque_optimisation(tmp_path, monkeypatch):
    """The page's torque optimisation runs as written (about 40 s, most of it compiling) and says
    what it claims: the loss falls from 0.41 to below 0.02, the hand ends within 6 cm of the
    target, and the gradient agrees with central differences of the loss."""
    pytest.importorskip("optax")
    pytest.importorskip("mujoco")
    blocks = python_blocks(GETTING_STARTED)
    monkeypatch.chdir(tmp_path)  # the block writes its arm.xml here
    ns: dict = {"__name__": "getting_started"}
    for code in (blocks[0], next(b for b in blocks if "optax" in b)):
        exec(compile(code, f"{GETTING_STARTED.name}[torque optimisation]", "exec"), ns)
    jax, dl, loss, u = ns["jax"], ns["dl"], ns["loss"], ns["u"]
    losses = ns["losses"]
    assert abs(losses[0] - 0.41) < 0.01 and losses[-1] < 0.02 and losses[-1] < losses[len(losses) // 2] < losses[0]
    model = dl.load_model(ns["arm"], joint_torques=u)
    hand, _ = dl.link_pose(model, dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 1.0, 1e-2), "hand")
    assert float(jnp.linalg.norm(hand[-1] - ns["target"])) < 0.06
    grad, value = dl.xla.jit(jax.grad(loss))(u), dl.xla.jit(loss)
    for i, j in [(0, 0), (2, 1)]:
        e = jnp.zeros_like(u.a).at[i, j].set(1e-6)
        fd = (value(ns["eqx"].tree_at(lambda v: v.a, u, u.a + e)) - value(ns["eqx"].tree_at(lambda v: v.a, u, u.a - e))) / 2e-6
        np.testing.assert_allclose(grad.a[i, j], fd, rtol=1e-5)
