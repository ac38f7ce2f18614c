"""Plots and diagnostics: figures are produced, invariants match direct formulas."""

from typing import NamedTuple

import equinox as eqx
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import difflie as dl  # noqa: E402
from difflie import diagnostics, plot  # noqa: E402


class Top(NamedTuple):
    model: dl.Model
    sol: dl.Solution


@pytest.fixture(scope="module")
def top():
    """The heavy top over 20 RK4 steps, saved at every step (made when first used, not at import:
    every xdist worker imports this module while collecting)."""
    model = dl.models.heavy_top()
    return Top(model, dl.simulate(model, dl.RKMK4(), 0.0, 0.02, 1e-3, saveat=dl.SaveAt(steps=True)))


def test_energy_matches_formula(top):
    m = top.model.bodies.mass[0]
    J = top.model.bodies.inertia[0]
    v, w, r = top.sol.velocity[:, 0], top.sol.angular_velocity[:, 0], top.sol.position[:, 0]
    expected = 0.5 * m * jnp.sum(v * v, -1) + 0.5 * jnp.einsum("ni,ij,nj->n", w, J, w) - m * (r @ top.model.gravity)
    np.testing.assert_allclose(np.asarray(diagnostics.energy(top.model, top.sol.states)), np.asarray(expected), rtol=1e-14)
    # RK4 at h = 1e-3 over 20 steps keeps the energy to a few 1e-9 relative
    e = np.asarray(diagnostics.energy(top.model, top.sol.states))
    assert abs(e[-1] - e[0]) / abs(e[0]) < 1e-6


def test_angular_momentum_about_pivot_vertical_component_conserved(top):
    """Gravity's torque about the fixed point is horizontal: L_z about the pivot is conserved."""
    fine = dl.simulate(top.model, dl.RKMK4(), 0.0, 0.02, 1e-4, saveat=dl.SaveAt(steps=True))
    L = np.asarray(diagnostics.angular_momentum(top.model, fine.states))
    assert abs(L[-1, 2] - L[0, 2]) < 1e-9 * np.linalg.norm(L[0])
    assert np.linalg.norm(L[-1, :2] - L[0, :2]) > 1e-3 * np.linalg.norm(L[0])


def _labels(ax):
    return [ax.get_xlabel(), ax.get_ylabel()] + ([ax.get_zlabel()] if hasattr(ax, "get_zlabel") else [])


def _legend_outside(ax):
    ax.figure.canvas.draw()
    return ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1


def test_figures_have_units_and_legends_outside(top, tmp_path):
    fig = plot.summary_figure(top.sol, top.model)
    fig.savefig(tmp_path / "summary.png")
    assert (tmp_path / "summary.png").stat().st_size > 10_000
    ax = plot.convergence([1e-3, 5e-4, 2.5e-4], {"RKMK4": [1.344e-4, 9.33e-6, 6.23e-7]}, error_label="COM error [m]")
    assert "order 3.8" in ax.get_legend().get_texts()[0].get_text()
    axes = [*fig.axes, ax, plot.work_precision({"a": ([1.0, 2.0], [1e-3, 1e-5])}, error_label="error [m]"),
            *plot.invariants(top.sol, top.model), plot.trajectory(top.sol, quantity="angular_velocity")]  # fmt: skip
    for a in axes:
        assert all("[" in label and "]" in label for label in _labels(a)), _labels(a)
        if a.get_legend() is not None:
            assert _legend_outside(a), a.get_ylabel()


def test_residual_axis_stops_at_rounding_level(top):
    ax = plot.constraint_residuals(top.sol, top.model)  # the pinned tip: held exactly, said rather than drawn at eps
    assert not ax.lines and ax.texts[0].get_text().startswith("|Phi| < eps")
    model = dl.models.double_pendulum()
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.05, 1e-2, saveat=dl.SaveAt(steps=True))
    ax = plot.constraint_residuals(sol, model)  # the start's residual below eps, the steps' above
    assert ax.lines and np.finfo(np.float64).eps / 4 < ax.get_ylim()[0] < np.finfo(np.float64).eps


def test_driver_work_is_drawn_apart_from_the_drift(top):
    """The driven pendulum (zero degrees of freedom, angle ``phi = pi/4 cos 2t`` from the
    vertical) gains ``W(t) = E(t) - E(0)`` from its driver, with ``E = I phi'^2 / 2 - m g L cos
    phi`` exactly; the driver work from the multipliers at backward Euler's states meets it to
    the method's first-order error, and the figure draws it apart from the drift."""
    model = dl.models.single_pendulum()
    sol = dl.simulate(model, dl.BackwardEuler(), 0.0, 0.3, 2e-3, saveat=dl.SaveAt(steps=True))
    t = np.asarray(sol.ts)
    m, half = float(model.bodies.mass[0]), 2.0
    I_hinge = float(model.bodies.inertia[0, 1, 1]) + m * half**2
    phi, dphi = np.pi / 4 * np.cos(2 * t), -np.pi / 2 * np.sin(2 * t)
    exact = 0.5 * I_hinge * dphi**2 - m * 9.81 * half * np.cos(phi)
    W = np.asarray(diagnostics.driver_work(model, sol.ts, sol.states))
    assert W[-1] > 20.0
    assert np.max(np.abs(W - (exact - exact[0]))) < 0.01 * W[-1]
    ax = plot.energy(sol, model)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["drift E - E0 - W", "work W (drivers, forces)"]
    free = np.asarray(diagnostics.driver_work(top.model, top.sol.ts, top.sol.states))  # pinned top: no driver
    np.testing.assert_array_equal(free, 0.0)
    assert plot.energy(top.sol, top.model).get_legend() is None


def test_work_of_joint_torques_and_damping_balances_the_energy():
    """Two rods on revolute joints about world y with joint damping ``c`` and constant torques
    ``u``: the force elements' power is ``sum (u_k - c_k q_dot_k) q_dot_k`` with the joint rates
    from the bodies' world angular velocities, and ``E - E0 - W`` is the integrator's error
    only, far below ``W`` and the energy change; the command line's summary reports that
    balance, not a relative drift, and the figure draws ``W`` apart."""
    from difflie.cli.output import energy_summary
    from difflie.forces import JointForce

    half = np.array([-0.5, 0.0, 0.0])
    damping, torque = np.array([0.3, 0.2]), np.array([1.5, -0.5])
    force = JointForce(parent=(-1, 0), child=(0, 1), axis=[0.0, 1.0, 0.0], point=half, damping=damping, torque=torque)
    model = dl.models.chain(2, joint="revolute")
    model = eqx.tree_at(lambda m: m.forces, model, (force,))
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.5, 1e-3, saveat=dl.SaveAt(steps=True))
    ts, states = sol.ts, sol.states
    w_world = np.einsum("nbij,nbj->nbi", np.asarray(states.rotation), np.asarray(states.angular_velocity))
    qd = np.stack([w_world[:, 0, 1], w_world[:, 1, 1] - w_world[:, 0, 1]], axis=1)
    P = np.asarray(diagnostics.force_power(model, ts, states))
    np.testing.assert_allclose(P, np.sum((torque - damping * qd) * qd, axis=1), rtol=1e-10, atol=1e-12)
    e = np.asarray(diagnostics.energy(model, states))
    W = np.asarray(diagnostics.work(model, ts, states))
    np.testing.assert_array_equal(W, np.asarray(diagnostics.force_work(model, ts, states)))  # no driver
    assert np.max(np.abs(W)) > 0.5 and abs(e[-1] - e[0]) > 0.5
    balance = np.max(np.abs(e - e[0] - W))
    assert balance < 1e-3 * np.max(np.abs(W))
    summary = energy_summary(model, ts, states)
    assert summary.startswith("energy change") and "forces' work" in summary and "drift" not in summary
    assert float(summary.split("balance max |E - E0 - W| ")[1].split()[0]) == pytest.approx(balance, rel=0.05)
    labels = [t.get_text() for t in plot.energy(sol, model).get_legend().get_texts()]
    assert labels == ["drift E - E0 - W", "work W (drivers, forces)"]
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))  # your own figure, no layout engine: the legend goes inside
    plot.energy(sol, model, ax=ax)
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    assert fig.bbox.x0 <= legend.x0 and legend.x1 <= fig.bbox.x1 and fig.bbox.y0 <= legend.y0 and legend.y1 <= fig.bbox.y1
    plt.close(fig)


def test_inertia_box_has_the_inertia():
    R = np.asarray(dl.SO3.exp(jnp.array([0.3, -0.5, 0.9])).as_matrix())
    m, sides = 3.0, np.array([0.2, 0.5, 1.1])
    J = m / 12 * np.diag([sides[1] ** 2 + sides[2] ** 2, sides[0] ** 2 + sides[2] ** 2, sides[0] ** 2 + sides[1] ** 2])
    corners = plot.inertia_box(m, R @ J @ R.T)
    np.testing.assert_allclose(np.ptp(corners @ R, axis=0), sides, rtol=1e-12)
    np.testing.assert_allclose(corners.mean(0), 0.0, atol=1e-15)


def test_frame_draws_boxes_labels_and_the_pivot(top):
    ax = plot.frame(top.sol, top.model, t=0.01)
    assert ax.get_title() == "t = 0.010 s"
    assert [t.get_text() for t in ax.texts] == ["top"] and len(ax.collections) == 1
    assert all("[m]" in label for label in _labels(ax))
    pivot = np.asarray(top.model.r0[0] - top.model.R0[0] @ top.model.bodies.com[0])
    dots = np.asarray([line for line in ax.lines if line.get_label() == "joints"][0].get_data_3d())
    np.testing.assert_allclose(dots[:, 0], pivot, atol=1e-12)


def test_animation_html_gif_and_missing_writer(top, tmp_path, monkeypatch):
    from matplotlib import animation

    anim = plot.animate(top.sol, top.model, stride=5)
    html = anim.to_jshtml()
    assert "<img" in html or "animation" in html.lower()
    plot.save_animation(anim, tmp_path / "top.gif", fps=10)
    assert (tmp_path / "top.gif").stat().st_size > 1000
    with pytest.raises(ValueError, match="write a .gif or an .mp4"):
        plot.save_animation(anim, tmp_path / "top.avi")
    monkeypatch.setattr(animation.writers, "is_available", lambda name: False)
    with pytest.raises(RuntimeError, match="install ffmpeg"):
        plot.save_animation(anim, tmp_path / "top.mp4")
    assert not (tmp_path / "top.mp4").exists()


def assert_text_inside(fig):
    """Every visible text (axis labels, titles, legend entries, notes), the tick labels drawn
    and every legend lie inside the figure: none is cut off."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    axes = [axis for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)]
    tick_labels = [(tick.label1, tick.label2) for axis in axes for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]]
    ticks = {id(t) for pair in tick_labels for t in pair}
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text() and id(t) not in ticks]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert texts
    # an axis' tight box holds its drawn tick labels (not those outside the view), label and offset
    for artist in [*texts, *legends, *axes]:
        e = artist.get_tightbbox(renderer) if artist in axes else artist.get_window_extent(renderer)
        inside = box.x0 - 1 <= e.x0 and e.x1 <= box.x1 + 1 and box.y0 - 1 <= e.y0 and e.y1 <= box.y1 + 1
        assert inside, (artist.get_text() if isinstance(artist, Text) else artist, e, box)


def _bodies(nb: int, n: int = 5):
    """A stand-in for a solution of ``nb`` bodies (what ``trajectory`` reads)."""
    from types import SimpleNamespace

    position = np.linspace(0.0, 1.0, n)[:, None, None] * np.arange(3 * nb).reshape(1, nb, 3)
    return SimpleNamespace(ts=np.linspace(0.0, 0.01, n), position=position, body_names=[f"link{i}" for i in range(nb)])


@pytest.mark.parametrize("nb, columns", [(4, 1), (8, 2), (12, 3), (13, 0)])
def test_long_legends_take_columns_then_a_note(nb, columns):
    """Up to 12 entries a column, up to 3 columns; more lines get a note in the title instead of
    a legend; nothing runs off the figure either way."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(17, 4), layout="constrained")
    ax = plot.trajectory(_bodies(nb), ax=axes[0])
    assert_text_inside(fig)
    assert len(ax.lines) == 3 * nb
    if columns:
        texts = ax.get_legend().get_texts()
        assert len(texts) == 3 * nb and len({round(t.get_window_extent().x0) for t in texts}) == columns
    else:
        assert ax.get_legend() is None and ax.get_title() == "39 lines, too many for a legend"
    plt.close(fig)


def test_joint_reactions_hold_the_bodies():
    """``joint_reactions``: a rod on a revolute joint released from the horizontal at rest takes
    ``m g - m alpha L / 2`` upward at the pivot (``alpha = m g (L/2) / I_pivot``), a couple
    ``(pivot - COM) x F`` about its COM, and the rows' multipliers are named; on a falling
    3-rod chain the reactions of its joints with gravity make ``m a`` of every rod, ``a`` from
    central differences of the saved velocities (to 1e-4 N of 7 N: the differences' own error)."""
    rod = dl.models.chain(1, joint="revolute")
    sol = dl.simulate(rod, dl.GeneralizedAlpha(), 0.0, 0.002, 1e-3, saveat=dl.SaveAt(steps=True))
    reactions = diagnostics.joint_reactions(rod, sol.ts, sol.states)
    assert list(reactions) == ["joint0"] and rod.constraint_names[0] == "joint0_CD_x"
    f, tau = (np.asarray(x) for x in reactions["joint0"])
    m, L, w = 1.0, 1.0, 0.05
    alpha = m * 9.81 * L / 2 / (m * (L**2 + w**2) / 12 + m * (L / 2) ** 2)
    np.testing.assert_allclose(f[0, 1], [0.0, 0.0, m * 9.81 - m * alpha * L / 2], atol=1e-12)
    np.testing.assert_allclose(tau[0, 1], np.cross([-L / 2, 0, 0], f[0, 1]), atol=1e-12)
    np.testing.assert_array_equal(f[:, 0], 0.0)  # the ground's share is not reported
    assert diagnostics.multipliers(rod, sol.ts, sol.states).shape == (3, 5)

    chain = dl.models.chain(3)
    h = 1e-3
    sol = dl.simulate(chain, dl.GeneralizedAlpha(), 0.0, 0.2, h, saveat=dl.SaveAt(steps=True))
    reactions = diagnostics.joint_reactions(chain, sol.ts, sol.states)
    total = np.zeros(np.asarray(sol.position).shape)
    for name, (f, _) in reactions.items():
        i, j = (int(b) for b in chain.row_bodies[chain.constraint_names.index(name + "_CD_x")])
        for side, b in ((0, i), (1, j)):
            if b >= 0:
                total[:, b] += np.asarray(f[:, side])
    v = np.asarray(sol.velocity)
    a = (v[2:] - v[:-2]) / (2 * h)
    mg = np.asarray(chain.bodies.mass)[:, None] * np.asarray(chain.gravity)
    residual = np.abs(total[1:-1] + mg - np.asarray(chain.bodies.mass)[:, None] * a)
    assert np.max(np.abs(total)) > 5.0 and residual.max() < 1e-3, residual.max()  # measured 9.5e-5 N
