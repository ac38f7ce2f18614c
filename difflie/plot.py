"""Plots of solutions with matplotlib: trajectories, invariants, residuals, convergence,
work-precision diagrams and a 3D animation of the bodies (HTML in a notebook, GIF/MP4 on disk).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from . import diagnostics


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


def _valid(sol):
    """Drop unused save slots (``inf`` times of adaptive runs saving every step)."""
    ts = np.asarray(sol.ts)
    keep = np.isfinite(ts)
    return keep


def _names(sol, nb):
    names = getattr(sol, "body_names", None)
    return list(names) if names else [f"body{i}" for i in range(nb)]


def trajectory(sol, ax=None, bodies: Sequence[int] | None = None, quantity: str = "position"):
    """Components of ``position`` / ``velocity`` / ``angular_velocity`` against time."""
    plt = _plt()
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    keep = _valid(sol)
    ts = np.asarray(sol.ts)[keep]
    data = np.asarray(getattr(sol, quantity))[keep]
    names = _names(sol, data.shape[1])
    for i in bodies if bodies is not None else range(data.shape[1]):
        for k, axis in enumerate("xyz"):
            ax.plot(ts, data[:, i, k], label=f"{names[i]} {axis}")
    ax.set_xlabel("t [s]")
    ax.set_ylabel(quantity.replace("_", " "))
    ax.legend(fontsize="small", ncol=3)
    ax.grid(alpha=0.3)
    return ax


def invariants(sol, model, axes=None):
    """Relative energy error and world angular momentum (about the origin) against time."""
    plt = _plt()
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 4))
    keep = _valid(sol)
    ts = np.asarray(sol.ts)[keep]
    states = _take(sol.states, keep)
    e = np.asarray(diagnostics.energy(model, states))
    scale = max(abs(e[0]), np.abs(np.asarray(diagnostics.kinetic_energy(model, states))).max(), 1e-300)
    axes[0].plot(ts, (e - e[0]) / scale)
    axes[0].set_ylabel("(E - E0) / |E0|")
    L = np.asarray(diagnostics.angular_momentum(model, states))
    for k, axis in enumerate("xyz"):
        axes[1].plot(ts, L[:, k], label=f"L{axis}")
    axes[1].set_ylabel("world angular momentum")
    axes[1].legend(fontsize="small")
    for ax in axes:
        ax.set_xlabel("t [s]")
        ax.grid(alpha=0.3)
    return axes


def constraint_residuals(sol, model, ax=None):
    """Largest position-level constraint residual against time (log scale)."""
    plt = _plt()
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    keep = _valid(sol)
    ts = np.asarray(sol.ts)[keep]
    res = np.asarray(diagnostics.constraint_residual(model, sol.ts[keep], _take(sol.states, keep)))
    ax.semilogy(ts, np.maximum(res, 1e-300))
    ax.set_xlabel("t [s]")
    ax.set_ylabel("max |Phi(q)|")
    ax.grid(alpha=0.3, which="both")
    return ax


def convergence(hs: Sequence[float], errors: Mapping[str, Sequence[float]], ax=None, reference_orders=(1, 2, 4)):
    """Error against step size on log-log axes, with the fitted order in the legend."""
    plt = _plt()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    hs = np.asarray(hs, float)
    for name, err in errors.items():
        err = np.asarray(err, float)
        order = np.polyfit(np.log(hs), np.log(err), 1)[0]
        ax.loglog(hs, err, "o-", label=f"{name} (order {order:.2f})")
    for p in reference_orders:
        anchor = min(np.asarray(e, float)[0] for e in errors.values())
        ax.loglog(hs, anchor * (hs / hs[0]) ** p, ":", color="gray", lw=0.8)
    ax.set_xlabel("step size h")
    ax.set_ylabel("error")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    return ax


def work_precision(results: Mapping[str, tuple[Sequence[float], Sequence[float]]], ax=None):
    """``results[name] = (wall_times, errors)``: error against wall time, log-log."""
    plt = _plt()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    for name, (times, errs) in results.items():
        ax.loglog(times, errs, "o-", label=name)
    ax.set_xlabel("wall time [s]")
    ax.set_ylabel("error")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, which="both")
    return ax


def _take(states, keep):
    import jax

    return jax.tree.map(lambda x: x[keep], states)


def animate(sol, model=None, *, stride: int = 1, axis_length: float | None = None, interval: int = 30):
    """A 3D animation of the bodies (a body frame triad and the COM) and their paths.

    Returns a ``matplotlib.animation.FuncAnimation``: ``anim.to_jshtml()`` plays it in a notebook,
    ``anim.save("out.gif", writer="pillow")`` (or ``"out.mp4"`` with ffmpeg) writes it.
    """
    plt = _plt()
    from matplotlib import animation

    keep = _valid(sol)
    pos = np.asarray(sol.position)[keep][::stride]
    rot = np.asarray(sol.rotation)[keep][::stride]
    ts = np.asarray(sol.ts)[keep][::stride]
    nb = pos.shape[1]
    lo, hi = pos.reshape(-1, 3).min(0), pos.reshape(-1, 3).max(0)
    span = max(float(np.max(hi - lo)), 1e-3)
    length = axis_length or 0.25 * span
    center = 0.5 * (lo + hi)
    fig = plt.figure(figsize=(6, 6))
    ax = fig.add_subplot(projection="3d")
    for k in range(3):
        getattr(ax, f"set_{'xyz'[k]}lim")(center[k] - 0.6 * span - length, center[k] + 0.6 * span + length)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_zlabel("z")
    colors = ["tab:red", "tab:green", "tab:blue"]
    triads = [[ax.plot([], [], [], color=colors[k], lw=2)[0] for k in range(3)] for _ in range(nb)]
    paths = [ax.plot([], [], [], color="gray", lw=0.8)[0] for _ in range(nb)]
    links = ax.plot([], [], [], "k-o", lw=1.5, ms=3)[0]
    title = ax.set_title("")

    def frame(j):
        for i in range(nb):
            for k in range(3):
                tip = pos[j, i] + length * rot[j, i][:, k]
                triads[i][k].set_data_3d(*np.stack([pos[j, i], tip], axis=1))
            paths[i].set_data_3d(*pos[: j + 1, i].T)
        links.set_data_3d(*pos[j].T)
        title.set_text(f"t = {ts[j]:.3f} s")
        return [*sum(triads, []), *paths, links, title]

    anim = animation.FuncAnimation(fig, frame, frames=len(ts), interval=interval, blit=False)
    plt.close(fig)
    return anim


def summary_figure(sol, model, path=None):
    """Trajectory, invariants and (for constrained models) constraint residual on one figure."""
    plt = _plt()
    constrained = getattr(model, "constraints", None) is not None
    fig, axes = plt.subplots(1, 3 if constrained else 2, figsize=(15 if constrained else 11, 4))
    trajectory(sol, ax=axes[0])
    keep = _valid(sol)
    ts = np.asarray(sol.ts)[keep]
    e = np.asarray(diagnostics.energy(model, _take(sol.states, keep)))
    axes[1].plot(ts, e - e[0])
    axes[1].set_xlabel("t [s]")
    axes[1].set_ylabel("energy drift E - E0 [J]")
    axes[1].grid(alpha=0.3)
    if constrained:
        constraint_residuals(sol, model, ax=axes[2])
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
