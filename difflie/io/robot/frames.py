"""Rotations and poses of a robot file's frames, in numpy (load time only)."""

from __future__ import annotations

import numpy as np


def _quat_matrix(q) -> np.ndarray:
    """Rotation matrix of the scalar-first quaternion ``q`` (normalised)."""
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _matrix_quat(R) -> tuple[float, ...]:
    import mujoco

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, float).reshape(-1))
    return tuple(float(x) for x in q)


def _rot(axis, angle) -> np.ndarray:
    """``Rot(axis, angle)`` (Rodrigues)."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _normal(a) -> np.ndarray:
    """A unit vector perpendicular to ``a``."""
    e = np.zeros(3)
    e[np.argmin(np.abs(a))] = 1.0
    u = np.cross(a, e)
    return u / np.linalg.norm(u)


def _pose_tuple(R, p) -> tuple[float, ...]:
    return tuple(float(x) for x in p) + _matrix_quat(R)


def _unit(q, what: str = "base_pose quaternion") -> np.ndarray:
    """A quaternion ``(qw, qx, qy, qz)``, normalised if its norm is 1 to within typed digits
    (1e-3)."""
    q = np.asarray(q, float)
    norm = np.linalg.norm(q)
    if not abs(norm - 1.0) < 1e-3:
        raise ValueError(f"load_model: {what} (qw, qx, qy, qz) = {q.tolist()} has norm {norm:.6g}, not 1")
    return q / norm


def _base_pose(value) -> tuple[np.ndarray, np.ndarray]:
    """``(R, p)`` from a 4x4 matrix, a 7-vector ``(x, y, z, qw, qx, qy, qz)`` or a pair
    ``(position, quaternion or rotation matrix)``."""
    try:
        if isinstance(value, (tuple, list)) and len(value) == 2:
            p = np.asarray(value[0], float).reshape(3)
            rot = np.asarray(value[1], float)
            rot = rot if rot.shape == (4,) else rot.reshape(3, 3)
        else:
            arr = np.asarray(value, float)
            if arr.shape == (4, 4):
                rot, p = arr[:3, :3], arr[:3, 3]
            elif arr.shape == (7,):
                rot, p = arr[3:], arr[:3]
            else:
                raise ValueError
    except (TypeError, ValueError):
        raise ValueError(
            "load_model: base_pose must be a 4x4 matrix, a 7-vector (x, y, z, qw, qx, qy, qz) or a "
            f"pair (position, quaternion or 3x3 rotation), got {value!r}"
        ) from None
    R = _quat_matrix(_unit(rot)) if rot.shape == (4,) else rot
    if not (np.all(np.isfinite(R)) and np.all(np.isfinite(p))) or np.abs(R.T @ R - np.eye(3)).max() > 1e-6 or np.linalg.det(R) < 0:
        raise ValueError(f"load_model: base_pose rotation is not a rotation matrix: {R.tolist()}")
    return R, p
