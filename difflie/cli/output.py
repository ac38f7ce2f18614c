"""What the commands report and write: the energy summary, a model's joint arrays, and files
written whole or not at all."""

from __future__ import annotations

import os
import tempfile


def energy_summary(model, ts, states) -> str:
    """The relative energy drift; for a mechanism with drivers or force elements (springs,
    dampers, joint torques and damping), the energy change, their work ``W`` and the balance
    ``max |E - E0 - W|`` (the integrator's energy error) instead."""
    import numpy as np

    from .. import diagnostics

    e = np.asarray(diagnostics.energy(model, states))
    driven = model.constraints is not None and model.constraints.driven
    if driven or model.forces:
        w = np.asarray(diagnostics.work(model, ts, states))
        balance = np.max(np.abs(e - e[0] - w))
        label = "work of drivers and forces" if driven and model.forces else "drivers' work" if driven else "forces' work"
        return f"energy change {e[-1] - e[0]:.3e} J, {label} {w[-1]:.3e} J, balance max |E - E0 - W| {balance:.1e} J"
    kinetic = np.asarray(diagnostics.kinetic_energy(model, states))
    drift = float(np.max(np.abs(e - e[0])) / max(abs(e[0]), float(np.max(np.abs(kinetic))), 1e-300))
    return f"relative energy drift {drift:.3e}"


def joint_arrays(model, states) -> dict[str, object]:
    """A robot's ``joint_names`` and its joint coordinates ``q`` and rates ``qd`` (n_saves,
    n_joints) at ``states``, and its ``ball_joint_names`` with ``ball_q`` (n_saves, n_balls, 4)
    and ``ball_qd`` (n_saves, n_balls, 3); ``{}`` for a model without movable joints."""
    import numpy as np

    from ..joint_space import ball_joint_quaternions, ball_joint_velocities, joint_coordinates, joint_velocities

    out = {}
    if model.joint_names:
        out.update(joint_names=np.asarray(model.joint_names), q=np.asarray(joint_coordinates(model, states)),
                   qd=np.asarray(joint_velocities(model, states)))  # fmt: skip
    if model.ball_joint_names:
        out.update(ball_joint_names=np.asarray(model.ball_joint_names), ball_q=np.asarray(ball_joint_quaternions(model, states)),
                   ball_qd=np.asarray(ball_joint_velocities(model, states)))  # fmt: skip
    return out


def _atomic_write(path: str, write) -> None:
    """Write through a temporary file in the same directory, so no partial file is left (an
    interrupt included); the file gets the mode the umask gives a new file."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".difflie-", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
