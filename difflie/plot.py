"""Plots of solutions with matplotlib: trajectories, energy, invariants, constraint residuals,
convergence and work-precision diagrams, one 3D frame of the bodies and their animation (HTML in
a notebook, GIF/MP4 on disk).

Every axis carries its unit (SI); legends sit outside the data, to the right of the axes, in
columns of at most 12 entries (inside, on axes you give from a figure without a layout
engine); an axes with more than 36 lines has a note instead of a legend.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence

import numpy as np

from . import diagnostics

_UNITS = {
    "position": "COM position [m]",
    "velocity": "COM velocity [m/s]",
    "angular_velocity": "angular velocity, body axes [rad/s]",
}
_WRITERS = {".gif": "pillow", ".mp4": "ffmpeg"}


def _plt():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        try:
            import IPython  # noqa: F401

            if IPython.get_ipython() is None:
                matplotlib.use("Agg")
        except ImportError:
            matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _axes(ax, figsize):
    if ax is None:
        _, ax = _plt().subplots(figsize=figsize, layout="constrained")
    return ax


_LEGEND_ROWS, _LEGEND_COLUMNS = 12, 3  # a taller legend would not fit a 4-inch figure


def _legend_outside(ax, **kwargs):
    """The legend right of the axes, in columns of at most ``_LEGEND_ROWS`` entries; beyond
    ``_LEGEND_COLUMNS`` columns, a note in the title instead; inside the axes where their figure
    has no layout engine (``layout="constrained"``) to make room for it."""
    n = len(ax.get_legend_handles_labels()[1])
    if n > _LEGEND_ROWS * _LEGEND_COLUMNS:
        ax.set_title(f"{n} lines, too many for a legend", fontsize="small")
        return
    columns = max(1, math.ceil(n / _LEGEND_ROWS))
    if ax.figure.get_layout_engine() is None:  # your own figure, which would not make room outside
        ax.legend(loc="best", fontsize="small", ncols=columns, **kwargs)
        return
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small", ncols=columns, **kwargs)


def _valid(sol):
    """Drop unused save slots (``inf`` times of adaptive runs saving every step)."""
    return np.isfinite(np.asarray(sol.ts))


def _names(sol, nb):
    names = getattr(sol, "body_names", None)
    return list(names) if names else [f"body{i}" for i in range(nb)]


def _take(states, keep):
    import jax

    return jax.tree.map(lambda x: x[keep], states)


def trajectory(sol, ax=None, bodies: Sequence[int] | None = None, quantity: str = "position"):
    """Components of ``position`` / ``velocity`` / ``angular_velocity`` against time."""
    if quantity not in _UNITS:
        raise ValueError(f"trajectory: quantity must be one of {tuple(_UNITS)}, got {quantity!r}")
    ax = _axes(ax, (8, 4))
    keep = _valid(sol)
    ts = np.asarray(sol.ts)[keep]
    data = np.asarray(getattr(sol, quantity))[keep]
    names = _names(sol, data.shape[1])
    for i in bodies if bodies is not None else range(data.shape[1]):
        for k, axis in enumerate("xyz"):  # a colour per body, a line style per axis
            ax.plot(ts, data[:, i, k], color=f"C{i % 10}", ls=("-", "--", ":")[k], label=f"{names[i]} {axis}")
    ax.set_xlabel("t [s]")
    ax.set_ylabel(_UNITS[quantity])
    _legend_outside(ax)
    ax.grid(alpha=0.3)
    return ax


def joint_trajectory(sol, model, ax=None):
    """Joint coordinates ``q`` of a robot (``difflie.joint_coordinates``) against time, one line
    per joint, labelled by its name (with its unit where revolute and prismatic joints mix)."""
    from .joint_space import joint_coordinates

    ax = _axes(ax, (8, 4))
    keep = _valid(sol)
    ts = np.asarray(sol.ts)[keep]
    q = np.asarray(joint_coordinates(model, _take(sol.states, keep)))
    prismatic = model.joints.prismatic
    units = {True: "m", False: "rad"}
    mixed = len(set(prismatic)) > 1
    for k, name in enumerate(model.joint_names):  # ten colours, then the next line style
        ax.plot(ts, q[:, k], color=f"C{k % 10}", ls=("-", "--", ":", "-.")[k // 10 % 4],
                label=f"{name} [{units[prismatic[k]]}]" if mixed else name)  # fmt: skip
    ax.set_xlabel("t [s]")
    ax.set_ylabel(f"joint coordinates q [{'rad or m' if mixed else units[prismatic[0]]}]")
    _legend_outside(ax)
    ax.grid(alpha=0.3)
    return ax


def _is_driven(work: np.ndarray, energy: np.ndarray) -> bool:
    scale = max(float(np.max(np.abs(energy))), 1e-300)
    return bool(np.max(np.abs(work)) > 1e-9 * scale)


def energy(sol, model, ax=None):
    """Energy change ``E - E0`` [J] (kinetic + gravitational) against time.

    The work ``W`` of drivers and force elements (springs, dampers, joint torques and
    damping; ``difflie.diagnostics.work``) is drawn apart from the integrator's drift
    ``E - E0 - W``; the change of ``E`` alone would mostly show that work.
    """
    ax = _axes(ax, (7, 4))
    keep = _valid(sol)
    ts = np.asarray(sol.ts)[keep]
    states = _take(sol.states, keep)
    e = np.asarray(diagnostics.energy(model, states))
    work = np.asarray(diagnostics.work(model, ts, states))
    if _is_driven(work, e):
        ax.plot(ts, e - e[0] - work, label="drift E - E0 - W")
        ax.plot(ts, work, "--", label="work W (drivers, forces)")
        _legend_outside(ax)
        ax.set_ylabel("energy [J]")
    else:
        ax.plot(ts, e - e[0])
        ax.set_ylabel("energy drift E - E0 [J]")
    ax.set_xlabel("t [s]")
    ax.grid(alpha=0.3)
    return ax


def invariants(sol, model, axes=None):
    """Energy (drift, and the work of drivers and forces apart: ``energy``) and the world angular momentum
    about the origin against time."""
    if axes is None:
        _, axes = _plt().subplots(1, 2, figsize=(13, 4), layout="constrained")
    energy(sol, model, ax=axes[0])
    keep = _valid(sol)
    ts = np.asarray(sol.ts)[keep]
    L = np.asarray(diagnostics.angular_momentum(model, _take(sol.states, keep)))
    for k, axis in enumerate("xyz"):
        axes[1].plot(ts, L[:, k], label=f"L{axis}")
    axes[1].set_xlabel("t [s]")
    axes[1].set_ylabel("world angular momentum [kg m^2/s]")
    axes[1].grid(alpha=0.3)
    _legend_outside(axes[1])
    return axes


def constraint_residuals(sol, model, ax=None):
    """Largest position-level constraint residual against time (log scale).

    Rows of points are in metres, rows of directions dimensionless. Values below the rounding
    level ``eps`` of the dtype are drawn at ``eps``, which is the bottom of the axis; where all
    of them are (rows held exactly: a pinned point of an explicit solver) the axes say so
    instead of drawing a line there.
    """
    ax = _axes(ax, (7, 4))
    keep = _valid(sol)
    ts = np.asarray(sol.ts)[keep]
    res = np.asarray(diagnostics.constraint_residual(model, sol.ts[keep], _take(sol.states, keep)))
    floor = float(np.finfo(res.dtype).eps)
    if np.all(res < floor):
        ax.text(0.5, 0.5, f"|Phi| < eps = {floor:.1e} throughout", transform=ax.transAxes, ha="center", va="center")
    else:
        ax.semilogy(ts, np.maximum(res, floor))
        ax.set_ylim(bottom=0.5 * floor, top=max(10 * float(np.max(res, initial=0.0)), 10 * floor))
    ax.set_xlabel("t [s]")
    ax.set_ylabel("max |Phi| [m or 1]")
    ax.grid(alpha=0.3, which="both")
    return ax


def convergence(
    hs: Sequence[float],
    errors: Mapping[str, Sequence[float]],
    ax=None,
    reference_orders=(1, 2, 4),
    error_label: str = "error",
):
    """Error against step size on log-log axes, with the fitted order in the legend.

    ``error_label`` names the error with its unit, e.g. ``"COM error at t1 [m]"``.
    """
    ax = _axes(ax, (7, 4.5))
    hs = np.asarray(hs, float)
    for name, err in errors.items():
        err = np.asarray(err, float)
        order = np.polyfit(np.log(hs), np.log(err), 1)[0]
        ax.loglog(hs, err, "o-", label=f"{name} (order {order:.2f})")
    anchor = min(np.asarray(e, float)[0] for e in errors.values())
    for p in reference_orders:
        ax.loglog(hs, anchor * (hs / hs[0]) ** p, ":", color="gray", lw=0.8)
    ax.set_xlabel("step size h [s]")
    ax.set_ylabel(error_label)
    _legend_outside(ax)
    ax.grid(alpha=0.3, which="both")
    return ax


def work_precision(results: Mapping[str, tuple[Sequence[float], Sequence[float]]], ax=None, error_label: str = "error"):
    """``results[name] = (wall_times, errors)``: error against wall time, log-log."""
    ax = _axes(ax, (7, 4.5))
    for name, (times, errs) in results.items():
        ax.loglog(times, errs, "o-", label=name)
    ax.set_xlabel("wall time [s]")
    ax.set_ylabel(error_label)
    _legend_outside(ax)
    ax.grid(alpha=0.3, which="both")
    return ax


# -- 3D scenes ----------------------------------------------------------------------------------

_CORNERS = np.array(list(itertools.product((-0.5, 0.5), repeat=3)))  # index 4 ix + 2 iy + iz
_FACES = ((0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5))


def inertia_box(mass: float, inertia) -> np.ndarray:
    """Corners (8, 3), in body axes from the COM, of the uniform box with the body's mass and
    inertia (about the COM).

    Along the principal axis ``k`` (moment ``J_k``) its side is ``l_k = sqrt(6 (tr J - 2 J_k) / m)``,
    from ``J_1 = m (l_2^2 + l_3^2) / 12`` and cyclic; a flat body gives a flat box.
    """
    J = np.asarray(inertia, float)
    moments, axes = np.linalg.eigh(0.5 * (J + J.T))
    sides = np.sqrt(np.maximum(6.0 * (moments.sum() - 2.0 * moments) / float(mass), 0.0))
    return (_CORNERS * sides) @ axes.T


def _joint_points(model) -> list[tuple[int, np.ndarray]]:
    """``(body, point in body axes from its frame origin)`` of each joint's common point: the
    points of the CD rows (spherical, revolute, universal, fixed joints) and pinned origins;
    the ground is body -1."""
    points = {}
    constraints = getattr(model, "constraints", None)
    if constraints is not None:
        rows = zip(constraints.row_kinds, constraints.body_i, constraints.body_j, np.asarray(constraints.vectors))
        for kind, bi, bj, v in rows:
            if kind == "CD":  # slots 1 and 2 (basic.SLOTS) hold s_bar_p (body i) and s_bar_q (body j)
                body, s = (bi, v[1]) if bi >= 0 else (bj, v[2])
                points.setdefault((body, *np.round(s, 12)), (body, s))
    for i in np.flatnonzero(np.asarray(getattr(model, "fixed_origin", ()), dtype=bool)):
        points.setdefault((int(i), 0.0, 0.0, 0.0), (int(i), np.zeros(3)))
    return list(points.values())


class _Scene:
    """The artists of one 3D view: per body a box (with a model), a triad, its path and name;
    joints as black dots."""

    def __init__(self, ax, sol, model, axis_length, shapes: bool):
        keep = _valid(sol)
        self.pos = np.asarray(sol.position)[keep]
        self.rot = np.asarray(sol.rotation)[keep]
        self.ts = np.asarray(sol.ts)[keep]
        nb = self.pos.shape[1]
        self.names = _names(sol, nb)
        self.com = np.zeros((nb, 3)) if model is None else np.asarray(model.bodies.com)
        self.boxes = None
        if shapes and model is not None:
            m, J = np.asarray(model.bodies.mass), np.asarray(model.bodies.inertia)
            self.boxes = [inertia_box(m[i], J[i]) for i in range(nb)]  # about the COM
        self.joints = [] if model is None else _joint_points(model)
        extent = [self.pos.reshape(-1, 3)]
        if self.boxes is not None:
            extent.append(self._box_extent())
        lo, hi = np.min([e.min(0) for e in extent], 0), np.max([e.max(0) for e in extent], 0)
        span = max(float(np.max(hi - lo)), 1e-3)
        self.length = axis_length or 0.2 * span
        center = 0.5 * (lo + hi)
        half = 0.5 * span + self.length
        for k, axis in enumerate("xyz"):
            getattr(ax, f"set_{axis}lim")(center[k] - half, center[k] + half)
            getattr(ax, f"set_{axis}label")(f"{axis} [m]")
        ax.set_box_aspect((1, 1, 1))
        from mpl_toolkits.mplot3d.art3d import Poly3DCollection

        colors = _plt().rcParams["axes.prop_cycle"].by_key()["color"]
        self.faces = []
        if self.boxes is not None:
            for i in range(nb):
                poly = Poly3DCollection([], alpha=0.35, facecolor=colors[i % len(colors)], edgecolor="k", lw=0.4)
                ax.add_collection3d(poly)
                self.faces.append(poly)
        triad_colors = ("tab:red", "tab:green", "tab:blue")
        self.triads = [[ax.plot([], [], [], color=triad_colors[k], lw=1.5)[0] for k in range(3)] for _ in range(nb)]
        self.paths = [ax.plot([], [], [], color="gray", lw=0.8)[0] for _ in range(nb)]
        self.labels = [ax.text(0.0, 0.0, 0.0, name, fontsize="small") for name in self.names]
        self.joint_dots = ax.plot([], [], [], "ko", ms=4, label="joints")[0]
        self.title = ax.set_title("")

    def _box_extent(self):
        corners = [self.pos[:, i, None, :] + np.einsum("tij,kj->tki", self.rot[:, i], b) for i, b in enumerate(self.boxes)]
        return np.concatenate(corners, axis=1).reshape(-1, 3)

    def draw(self, j: int):
        pos, rot = self.pos[j], self.rot[j]
        for i in range(pos.shape[0]):
            for k in range(3):
                self.triads[i][k].set_data_3d(*np.stack([pos[i], pos[i] + self.length * rot[i][:, k]], axis=1))
            self.paths[i].set_data_3d(*self.pos[: j + 1, i].T)
            self.labels[i].set_position_3d(pos[i] + 0.3 * self.length * rot[i][:, 0])
            if self.faces:
                corners = pos[i] + self.boxes[i] @ rot[i].T
                self.faces[i].set_verts([corners[list(f)] for f in _FACES])
        if self.joints:
            origin = pos - np.einsum("bij,bj->bi", rot, self.com)
            world = [origin[b] + rot[b] @ s for b, s in self.joints]
            self.joint_dots.set_data_3d(*np.asarray(world).T)
        self.title.set_text(f"t = {self.ts[j]:.3f} s")
        return [*self.faces, *sum(self.triads, []), *self.paths, *self.labels, self.joint_dots, self.title]


def frame(sol, model=None, t: float | None = None, ax=None, *, shapes: bool = True, axis_length: float | None = None):
    """One 3D view of the bodies at the saved time nearest ``t`` (default: the last), with
    their paths so far; with ``model``, each body as the box of its mass and inertia
    (``inertia_box``) and the joints as dots."""
    if ax is None:
        ax = _plt().figure(figsize=(6, 6), layout="constrained").add_subplot(projection="3d")
    scene = _Scene(ax, sol, model, axis_length, shapes)
    scene.draw(len(scene.ts) - 1 if t is None else int(np.argmin(np.abs(scene.ts - t))))
    return ax


def animate(sol, model=None, *, stride: int = 1, axis_length: float | None = None, interval: int = 30, shapes: bool = True):
    """A 3D animation of ``frame`` over the saved times (every ``stride``-th).

    Returns a ``matplotlib.animation.FuncAnimation``: ``anim.to_jshtml()`` plays it in a
    notebook, ``save_animation`` writes a GIF or an MP4.
    """
    plt = _plt()
    from matplotlib import animation

    fig = plt.figure(figsize=(6, 6), layout="constrained")
    scene = _Scene(fig.add_subplot(projection="3d"), sol, model, axis_length, shapes)
    frames = range(0, len(scene.ts), stride)
    anim = animation.FuncAnimation(fig, scene.draw, frames=frames, interval=interval, blit=False)
    plt.close(fig)
    return anim


def save_animation(anim, path: str | os.PathLike, fps: int = 30, dpi: int = 100) -> None:
    """Write an animation to ``.gif`` (Pillow, installed with matplotlib) or ``.mp4`` (needs the
    ``ffmpeg`` program on the PATH); a missing writer raises ``RuntimeError`` saying what to
    install, before anything is drawn."""
    from matplotlib import animation

    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in _WRITERS:
        raise ValueError(f"save_animation: {os.fspath(path)!r}: write a .gif or an .mp4 (got {suffix or 'no suffix'!r})")
    writer = _WRITERS[suffix]
    if not animation.writers.is_available(writer):
        raise RuntimeError(
            f"save_animation: writing {suffix} needs the {writer!r} movie writer, which matplotlib cannot find: "
            "install ffmpeg (e.g. `apt install ffmpeg` or `conda install -c conda-forge ffmpeg`), or write a .gif "
            "(Pillow), or play anim.to_jshtml() in a notebook"
        )
    anim.save(path, writer=writer, fps=fps, dpi=dpi)


def summary_figure(sol, model, path=None):
    """Trajectory (a robot's joint coordinates, else the bodies' COM positions), energy (drift
    and work apart) and, for constrained models, the constraint residual on one figure."""
    plt = _plt()
    constrained = getattr(model, "num_constraints", 0) > 0
    fig, axes = plt.subplots(1, 3 if constrained else 2, figsize=(17 if constrained else 12, 4), layout="constrained")
    if getattr(model, "joint_names", ()):
        joint_trajectory(sol, model, ax=axes[0])
    else:
        trajectory(sol, ax=axes[0])
    energy(sol, model, ax=axes[1])
    if constrained:
        constraint_residuals(sol, model, ax=axes[2])
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
