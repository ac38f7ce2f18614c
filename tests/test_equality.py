"""MJCF equality constraints that close loops: ``connect`` and ``weld`` (between bodies or
sites), held exactly by difflie's index-3 solvers, checked against MuJoCo (Todorov, Erez & Tassa,
2012), which keeps them softly: the stiffer its ``solref``, the closer its trajectory to ours."""

from __future__ import annotations

import pathlib
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.io import ModelFileError, RobotModelWarning

mujoco = pytest.importorskip("mujoco")

PATH = pathlib.Path(__file__).resolve().parent / "data" / "loop.xml"
LINKS = ("crank", "coupler", "rocker", "weight")
SAVES = np.linspace(0.02, 0.2, 10)


def _load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RobotModelWarning)  # the geoms' contacts
        return dl.load_model(str(path), **kw)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _origins(model, sol):
    """World positions of the link frames at the saves, ``(saves, links, 3)``."""
    return np.stack([np.asarray(dl.link_pose(model, sol, link)[0]) for link in LINKS], 1)


@pytest.fixture(scope="module")
def loop():
    """The loop model and its generalized-alpha solution at the saves (h = 1e-3)."""
    model = _load(PATH)
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, SAVES[-1], 1e-3, saveat=dl.SaveAt(ts=jnp.asarray(SAVES)))
    return model, _origins(model, sol)


def test_connect_and_weld_follow_mujoco(loop):
    """A crank on a hinge, a coupler on a ball joint and a rocker on a hinge about another axis,
    the coupler's tip connected to the rocker's (a spatial loop of two degrees of freedom), and
    a free body welded to the rocker; falling under gravity for 0.2 s (it moves 0.19 m).
    MuJoCo's trajectory approaches generalized-alpha's as its equality constraints stiffen
    (``solref`` time constant 2e-2, 2e-3, 5e-4 s: 3e-4, 9e-6, 1.1e-6 m)."""
    model, ours = loop
    assert model.constraint_names[:9] == ("tip_CD_x", "tip_CD_y", "tip_CD_z", "held_CD_x", "held_CD_y", "held_CD_z",
                                          "held_DP1_xy", "held_DP1_yz", "held_DP1_zx")  # fmt: skip
    assert np.abs(ours[-1] - ours[0]).max() > 0.1
    m = mujoco.MjModel.from_xml_path(str(PATH))
    errors = []
    for time_constant in (2e-2, 5e-4):
        m.eq_solref[:] = [time_constant, 1.0]
        d = mujoco.MjData(m)
        ref = []
        for ts in SAVES:
            while d.time < ts - 1e-9:
                mujoco.mj_step(m, d)
            ref.append(d.xpos[[m.body(n).id for n in LINKS]].copy())
        errors.append(float(np.abs(ours - np.array(ref)).max()))
    assert errors[1] < 3e-6 and errors[0] > 50 * errors[1], errors


@pytest.mark.slow
def test_weld_holds_exactly(loop, tmp_path):
    """The same mechanism with the welded body fixed to the rocker in the file (merged into
    it) moves the same to Newton's tolerance (5e-9 m)."""
    model, ours = loop
    text = PATH.read_text()
    merged = text.replace('    </body>\n    <body name="weight" pos="0.9 0.3 1.05" quat="0.8 0 0.6 0">\n      <freejoint/>',
                          '      <body name="weight" pos="0 -0.2 -0.05" quat="0.8 0 0.6 0">')  # fmt: skip
    merged = merged.replace('mass="0.3"/>\n    </body>', 'mass="0.3"/>\n      </body>\n    </body>').replace('<weld name="held" body1="rocker" body2="weight"/>', "")
    fixed = _load(_write(tmp_path, "merged.xml", merged))
    assert fixed.num_bodies == model.num_bodies - 1
    again = dl.simulate(fixed, dl.GeneralizedAlpha(), 0.0, SAVES[-1], 1e-3, saveat=dl.SaveAt(ts=jnp.asarray(SAVES)))
    np.testing.assert_allclose(_origins(fixed, again), ours, atol=1e-7)


PLANAR = """<mujoco>
  <worldbody>
    <body name="crank" pos="0 0 1"><joint name="A" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.2 0 0.3" size="0.02" mass="1"/>
      <body name="coupler" pos="0.2 0 0.3"><joint name="B" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.6 0 0.1" size="0.02" mass="1"/>
        <site name="tip" pos="0.6 0 0.1"/></body></body>
    <body name="rocker" pos="0.7 0 1"><joint name="D" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.1 0 0.4" size="0.02" mass="1"/>
      <site name="end" pos="0.1 0 0.4"/></body>
  </worldbody>
  <equality><connect name="C" site1="tip" site2="end"/>EXTRA</equality>
</mujoco>"""


def test_site_equalities_and_redundant_loops(tmp_path):
    """Site constraints make the sites coincide (a ``connect`` their points, a ``weld`` their
    frames too); a planar four-bar closed by a ``connect`` is overconstrained in space: refused,
    naming the way out, or its dependent rows removed on request; inactive equalities are named
    as not modelled, joint equalities as not asked for; a constraint inside one rigid body is refused."""
    with pytest.raises(ValueError, match=r"the constraints are redundant: 18 rows, 17 independent .*redundant='remove'"):
        _load(_write(tmp_path, "planar.xml", PLANAR.replace("EXTRA", "")))
    with pytest.warns(UserWarning, match=r"removed 1 of 18 constraint rows"):
        planar = _load(_write(tmp_path, "planar.xml", PLANAR.replace("EXTRA", "")), redundant="remove")
    assert planar.num_constraints == 17 and {"C_CD_x", "C_CD_z"} <= set(planar.constraint_names)
    # A weld of two sites whose frames coincide at the reference pose holds there (its rows vanish).
    sites = PLANAR.replace('<site name="tip" pos="0.6 0 0.1"/>', '<site name="tip" pos="0.6 0 0.1" quat="0.8 0 0.6 0"/>')
    sites = sites.replace("</worldbody>", '<body name="lid" pos="0.8 0 1.4" quat="0.8 0 0.6 0"><freejoint/><geom size="0.05" mass="0.2"/>'
                          '<site name="lid"/></body></worldbody>')  # fmt: skip
    sites = sites.replace('<connect name="C" site1="tip" site2="end"/>EXTRA', '<weld name="W" site1="tip" site2="lid"/>'
                          '<connect name="X" site1="tip" site2="lid" active="false"/><joint joint1="A" joint2="D"/>')  # fmt: skip
    with pytest.warns(RobotModelWarning, match=r"joint equality constraints \(1; joint_couplings=True holds them\); "
                      r"equality constraints other than active connect, weld and joint \(1\)"):
        welded = dl.load_model(str(_write(tmp_path, "sites.xml", sites)))
    assert welded.constraint_names[:6] == ("W_CD_x", "W_CD_y", "W_CD_z", "W_DP1_xy", "W_DP1_yz", "W_DP1_zx")
    origins = welded.r0 - jnp.einsum("bij,bj->bi", welded.R0, welded.bodies.com)
    np.testing.assert_allclose(welded.constraint_residual(0.0, origins, welded.R0), 0.0, atol=1e-15)
    one = PLANAR.replace('<connect name="C" site1="tip" site2="end"/>', '<connect name="C" body1="crank" body2="hold" anchor="0 0 0"/>')
    one = one.replace('<site name="tip" pos="0.6 0 0.1"/>', '<site name="tip" pos="0.6 0 0.1"/></body><body name="hold" pos="0 0 0.1"><geom size="0.01" mass="0.1"/>')
    with pytest.raises(ModelFileError, match=r"equality 'C' joins 'crank' and 'hold', which move as one body"):
        _load(_write(tmp_path, "one.xml", one.replace("EXTRA", "")))
