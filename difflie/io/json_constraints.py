"""The constraint rows of a model file: its basic constraints (``$.constraints``: DP1, DP2, D,
CD and the angle rows, with the caller's drivers and angle drivers) and its joints
(``$.joints``), each entry checked and named by its JSON path."""

from __future__ import annotations

from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from .. import constraints as C
from ..constraints.basic import VECTOR_FIELDS
from ..constraints.joints import joint_name
from .json_values import ModelFileError, _array, _driver, _expression, _get, _id, _known_keys, _show, _string

_JOINT_FIELDS = {
    "spherical": ("s_bar_i", "s_bar_j"),
    "revolute": ("s_bar_i", "axis_i", "s_bar_j", "axis_j"),
    "universal": ("s_bar_i", "a_bar_i", "s_bar_j", "a_bar_j"),
    "cylindrical": ("s_bar_i", "axis_i", "s_bar_j", "axis_j"),
    "prismatic": ("s_bar_i", "axis_i", "s_bar_j", "axis_j", "ref_i", "ref_j"),
    "fixed": ("s_bar_i", "s_bar_j"),
}
# The C2 files list every vector of every basic constraint (placeholders where unused).
_CONSTRAINT_KEYS = ("name", "type", "body_i", "body_j", "f", "f_dot", "f_ddot", "theta",
                    *sorted({key for keys in VECTOR_FIELDS.values() for key in keys}))  # fmt: skip


def _constraint_rows(cons_raw: list, joints_raw: list, ids: dict, names: list[str], drivers, angle_drivers) -> list:
    """The rows of the file's constraints and joints, in file order (constraints first), with
    ``drivers`` / ``angle_drivers`` (``load_model``'s) replacing the drivers they name."""
    drivers = dict(drivers or {})
    angle_drivers = dict(angle_drivers or {})
    rows = []
    seen: dict[str, str] = {}  # constraint name -> its JSON path
    groups: dict[str, str] = {}  # joint name (difflie.constraints.joint_name) -> the JSON path of its first entry
    for k, c in enumerate(cons_raw):
        cp = f"$.constraints[{k}]"
        if not isinstance(c, dict):
            raise ModelFileError(f"{cp}: expected an object")
        _known_keys(c, _CONSTRAINT_KEYS, cp)
        kind = _get(c, "type", cp)
        if not isinstance(kind, str) or kind not in VECTOR_FIELDS:
            raise ModelFileError(f"{cp}.type: expected one of {sorted(VECTOR_FIELDS)}, got {_show(kind)}")
        name = _string(c, "name", cp, default=f"{kind}_{k}")
        if name in seen:
            raise ModelFileError(f"{cp}.name: duplicate constraint name {name!r} (also {seen[name]})")
        seen[name] = cp
        groups.setdefault(joint_name(name), cp)
        bi, bj = _bodies(ids, names, c, cp, name)
        vecs = [_array(_get(c, key, cp), f"{cp}.{key}", (3,)) for key in VECTOR_FIELDS[kind]]
        if kind in ("angle", "dp1_swap"):
            theta = _expression(_get(c, "theta", cp), f"{cp}.theta")
            rows.append(_make_angle(kind, bi, vecs[0], bj, vecs[1], vecs[2], theta, name))
            continue
        f = _driver(drivers[name], f"drivers[{name!r}]") if name in drivers else _expression(c.get("f", 0.0), f"{cp}.f")
        if name in angle_drivers:
            if kind != "DP1":
                raise ValueError(f"load_model: angle_drivers[{name!r}]: constraint {name!r} is a {kind}, not a DP1")
            rows.append(_angle_from_dp1(name, bi, vecs[0], bj, vecs[1], angle_drivers[name]))
            continue
        builder = {"DP1": C.dp1, "DP2": C.dp2, "D": C.d, "CD": C.cd}[kind]
        if kind == "CD":
            rows.append(C.cd(vecs[0], bi, vecs[1], bj, vecs[2], f=f, name=name))
        elif kind == "DP2":
            rows.append(C.dp2(bi, vecs[0], vecs[1], bj, vecs[2], f=f, name=name))
        else:
            rows.append(builder(bi, vecs[0], bj, vecs[1], f=f, name=name))
    for k, j in enumerate(joints_raw):
        rows.extend(_joint(ids, names, j, f"$.joints[{k}]", groups))
    for keyword, given in (("drivers", drivers), ("angle_drivers", angle_drivers)):
        unknown = [n for n in given if n not in seen]
        if unknown:
            known = f"the file's constraints are {list(seen)}" if seen else "the file has no basic constraints ($.constraints)"
            raise ValueError(f"load_model: {keyword}: no constraint named {', '.join(map(repr, unknown))}; {known}")
    return rows


def _body(ids, entry, key, path) -> int:
    bid = _id(_get(entry, key, path), f"{path}.{key}")
    if bid not in ids:
        raise ModelFileError(f"{path}.{key}: unknown body id {bid!r} (known ids: {sorted(ids, key=str)})")
    return ids[bid]


def _bodies(ids, names, entry, path, name) -> tuple[int, int]:
    """The indices of ``body_i`` and ``body_j`` of a constraint or joint: two different bodies."""
    bi, bj = _body(ids, entry, "body_i", path), _body(ids, entry, "body_j", path)
    if bi == bj:
        body = "the ground" if bi == C.GROUND else f"body {names[bi]!r}"
        label = f"{path} ({name!r})" if "name" in entry else path
        raise ModelFileError(f"{label}: body_i and body_j are both {body} (id {entry['body_i']!r})")
    return bi, bj


def _make_angle(kind, bi, a, bj, b, c, theta, name):
    theta = theta if callable(theta) else C.Driver(lambda t, v: v + 0.0 * t, jnp.asarray(theta))
    return (C.angle if kind == "angle" else C.dp1_swap)(bi, a, bj, b, c, theta, name=name)


def _angle_from_dp1(name, bi, a_i, bj, a_j, spec):
    """DP1 ``a_i . a_j = cos theta`` + alternate vector -> angle (or swap) row."""
    if not isinstance(spec, Mapping) or "theta" not in spec:
        raise ValueError(f"load_model: angle_drivers[{name!r}] must be a mapping with 'theta' and 'a_bar_i' or 'a_bar_j'")
    theta = _expression(spec["theta"], f"angle_drivers[{name!r}].theta")
    kind = "dp1_swap" if spec.get("swap", False) else "angle"
    if "a_bar_j" in spec:  # alternate vector on body j: the fixed pair (a_j, alt) is on j
        alt = _array(spec["a_bar_j"], f"angle_drivers[{name!r}].a_bar_j", (3,))
        return _make_angle(kind, bi, a_i, bj, a_j, alt, theta, name)
    if "a_bar_i" in spec:  # the pair is on body i: swap the roles of the bodies
        alt = _array(spec["a_bar_i"], f"angle_drivers[{name!r}].a_bar_i", (3,))
        return _make_angle(kind, bj, a_j, bi, a_i, alt, theta, name)
    raise ValueError(f"load_model: angle_drivers[{name!r}] needs the alternate vector 'a_bar_i' or 'a_bar_j'")


def _joint(ids, names, j, jp, groups):
    if not isinstance(j, dict):
        raise ModelFileError(f"{jp}: expected an object")
    kind = _get(j, "type", jp)
    if not isinstance(kind, str) or kind not in _JOINT_FIELDS:
        raise ModelFileError(f"{jp}.type: expected one of {sorted(_JOINT_FIELDS)}, got {_show(kind)}")
    extra = ("relative_rotation",) if kind == "fixed" else ()
    _known_keys(j, ("type", "name", "body_i", "body_j", *_JOINT_FIELDS[kind], *extra), jp)
    name = _string(j, "name", jp, default=f"{kind}_{jp}")
    if name in groups:
        raise ModelFileError(f"{jp}.name: duplicate joint name {name!r} (also {groups[name]})")
    groups[name] = jp
    bi, bj = _bodies(ids, names, j, jp, name)
    v = {key: _array(_get(j, key, jp), f"{jp}.{key}", (3,)) for key in _JOINT_FIELDS[kind]}
    for key in _JOINT_FIELDS[kind]:
        if not key.startswith("s_bar") and not np.linalg.norm(np.asarray(v[key])) > 0:
            raise ModelFileError(f"{jp}.{key}: a direction needs a nonzero length, got {_show(j[key])}")
    if kind == "spherical":
        return C.spherical(bi, v["s_bar_i"], bj, v["s_bar_j"], name)
    if kind in ("revolute", "cylindrical"):
        fn = C.revolute if kind == "revolute" else C.cylindrical
        return fn(bi, v["s_bar_i"], v["axis_i"], bj, v["s_bar_j"], v["axis_j"], name)
    if kind == "universal":
        return C.universal(bi, v["s_bar_i"], v["a_bar_i"], bj, v["s_bar_j"], v["a_bar_j"], name)
    if kind == "prismatic":
        return C.prismatic(bi, v["s_bar_i"], v["axis_i"], bj, v["s_bar_j"], v["axis_j"], v["ref_i"], v["ref_j"], name)
    rel = None if "relative_rotation" not in j else _array(j["relative_rotation"], f"{jp}.relative_rotation", (3, 3))
    return C.fixed(bi, v["s_bar_i"], bj, v["s_bar_j"], rel, name)
