"""Plots and diagnostics: figures are produced, invariants match direct formulas."""

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402

import difflie as dl  # noqa: E402
from difflie import diagnostics, plot  # noqa: E402


def _solution():
    model = dl.models.heavy_top()
    return model, dl.simulate(model, dl.RKMK4(), 0.0, 0.02, 1e-3, saveat=dl.SaveAt(steps=True))


MODEL, SOL = _solution()


def test_energy_matches_formula():
    m = MODEL.bodies.mass[0]
    J = MODEL.bodies.inertia[0]
    v, w, r = SOL.velocity[:, 0], SOL.angular_velocity[:, 0], SOL.position[:, 0]
    expected = 0.5 * m * jnp.sum(v * v, -1) + 0.5 * jnp.einsum("ni,ij,nj->n", w, J, w) - m * (r @ MODEL.gravity)
    np.testing.assert_allclose(np.asarray(diagnostics.energy(MODEL, SOL.states)), np.asarray(expected), rtol=1e-14)
    # RK4 at h = 1e-3 over 20 steps keeps the energy to a few 1e-9 relative
    e = np.asarray(diagnostics.energy(MODEL, SOL.states))
    assert abs(e[-1] - e[0]) / abs(e[0]) < 1e-6


def test_angular_momentum_about_pivot_vertical_component_conserved():
    """Gravity's torque about the fixed point is horizontal: L_z about the pivot is conserved."""
    fine = dl.simulate(MODEL, dl.RKMK4(), 0.0, 0.02, 1e-4, saveat=dl.SaveAt(steps=True))
    L = np.asarray(diagnostics.angular_momentum(MODEL, fine.states))
    assert abs(L[-1, 2] - L[0, 2]) < 1e-9 * np.linalg.norm(L[0])
    assert np.linalg.norm(L[-1, :2] - L[0, :2]) > 1e-3 * np.linalg.norm(L[0])


def test_figures(tmp_path):
    plot.summary_figure(SOL, MODEL, path=tmp_path / "summary.png")
    assert (tmp_path / "summary.png").stat().st_size > 10_000
    ax = plot.convergence([1e-3, 5e-4, 2.5e-4], {"RKMK4": [1.344e-4, 9.33e-6, 6.23e-7]})
    assert "order 3.8" in ax.get_legend().get_texts()[0].get_text()
    plot.work_precision({"a": ([1.0, 2.0], [1e-3, 1e-5])})
    plot.invariants(SOL, MODEL)


def test_animation_html_and_gif(tmp_path):
    anim = plot.animate(SOL, MODEL, stride=5)
    html = anim.to_jshtml()
    assert "<img" in html or "animation" in html.lower()
    anim.save(tmp_path / "top.gif", writer="pillow")
    assert (tmp_path / "top.gif").stat().st_size > 1000
