"""Your first mechanism: joints from world points and axes, connect(), the shipped model file,
submodules as attributes, trajectory files."""

import json
import pathlib
import subprocess
import sys
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.constraints import (
    GROUND,
    connect,
    cylindrical_at,
    fixed_at,
    prismatic_at,
    revolute_at,
    rotation_driver_at,
    spherical_at,
    translation_driver_at,
    universal_at,
)

ROOT = pathlib.Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "double_pendulum_3d.json"
P = np.array([0.3, -0.2, 0.5])  # the joint's world point
N = np.array([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])  # its world axis


def _rot(w):
    return np.asarray(dl.SO3.exp(jnp.asarray(w, float)).as_matrix())


def _two_bodies():
    """Two bodies in general poses, with COM offsets (body-frame origin != COM)."""
    J = np.diag([0.3, 0.4, 0.5])
    bodies = dl.RigidBody(np.ones(2), np.stack([J, J]), com=np.array([[0.1, -0.2, 0.05], [-0.3, 0.1, 0.2]]))
    R0 = np.stack([_rot([0.3, -0.7, 1.1]), _rot([-1.2, 0.4, 0.2])])
    return dl.Model(bodies, r0=np.array([[1.0, 0.2, -0.4], [0.5, -0.6, 0.9]]), R0=R0)


MODEL = _two_bodies()


def _residual(rows, motion=None, t=0.0):
    """Largest |Phi| after moving body 1 by the rigid motion ``x -> Q (x - P) + P + d``."""
    R = np.asarray(MODEL.R0)
    o = np.asarray(MODEL.r0) - np.einsum("bij,bj->bi", R, np.asarray(MODEL.bodies.com))
    if motion is not None:
        Q, d = motion
        o, R = o.copy(), R.copy()
        o[1] = Q @ (o[1] - P) + P + d
        R[1] = Q @ R[1]
    return float(jnp.max(jnp.abs(dl.ConstraintSet(rows, 2).residual(t, o, R))))


OTHER = np.cross(N, [0.0, 0.0, 1.0])  # a direction perpendicular to the axis
SPIN = (_rot(0.4 * N), np.zeros(3))  # turn about the joint axis through P
TILT = (_rot(0.4 * OTHER), np.zeros(3))  # turn about a perpendicular axis through P
SLIDE = (np.eye(3), 0.3 * N)  # move along the axis
SHIFT = (np.eye(3), 0.3 * OTHER)  # move across it


@pytest.mark.parametrize(
    "name, rows, free, locked",
    [
        ("spherical", spherical_at(MODEL, 0, 1, P), [SPIN, TILT], [SLIDE, SHIFT]),
        ("revolute", revolute_at(MODEL, 0, 1, P, N), [SPIN], [TILT, SLIDE, SHIFT]),
        ("cylindrical", cylindrical_at(MODEL, 0, 1, P, N), [SPIN, SLIDE], [TILT, SHIFT]),
        ("prismatic", prismatic_at(MODEL, 0, 1, P, N), [SLIDE], [SPIN, TILT, SHIFT]),
        ("fixed", fixed_at(MODEL, 0, 1, P), [], [SPIN, TILT, SLIDE, SHIFT]),
        ("universal", universal_at(MODEL, 0, 1, P, N, OTHER), [SPIN], [SLIDE, SHIFT]),
    ],
)
def test_world_joint_allows_exactly_its_motions(name, rows, free, locked):
    assert _residual(rows) < 1e-14, name
    for motion in free:
        assert _residual(rows, motion) < 1e-14, name
    for motion in locked:
        assert _residual(rows, motion) > 1e-2, name


def test_universal_turns_about_the_cross_arms():
    """Body 1 turning about its own arm ``OTHER`` after body 0's arm ``N`` keeps the cross."""
    rows = universal_at(MODEL, 0, 1, P, N, OTHER)
    both = _rot(0.4 * N) @ _rot(0.3 * OTHER)
    assert _residual(rows, (both, np.zeros(3))) < 1e-14
    assert _residual(rows, (_rot(0.4 * np.cross(N, OTHER)), np.zeros(3))) > 1e-2
    with pytest.raises(ValueError, match="perpendicular"):
        universal_at(MODEL, 0, 1, P, N, N + OTHER)


def test_ground_joint_and_bad_body_index():
    rows = revolute_at(MODEL, GROUND, 1, P, N)
    assert rows[0].body_i == GROUND
    assert _residual(rows, SPIN) < 1e-14 and _residual(rows, TILT) > 1e-2
    with pytest.raises(ValueError, match="bodies 0..1 and the ground -1"):
        revolute_at(MODEL, 0, 2, P, N)


def test_drivers_turn_and_slide_by_their_function():
    """A right-handed turn by theta about N (and a slide by x along it) zeroes the driver rows
    at the time where the driver asks for that amount; the opposite sign does not."""
    theta, x = 0.7, 0.25
    turn = [rotation_driver_at(MODEL, 0, 1, N, lambda t: theta * t)]
    slide = [translation_driver_at(MODEL, 0, 1, P, N, lambda t: x * t)]
    for rows, motion, opposite in (
        (turn, (_rot(theta * N), np.zeros(3)), (_rot(-theta * N), np.zeros(3))),
        (slide, (np.eye(3), x * N), (np.eye(3), -x * N)),
    ):
        assert _residual(rows, t=0.0) < 1e-14
        assert _residual(rows, motion, t=1.0) < 1e-14
        assert _residual(rows, opposite, t=1.0) > 1e-2


# -- connect: a consistent initial state, as the loader makes it ------------------------------


def _box(m, a, b, c):
    return m / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])


def _hinged_box(theta0, axis):
    """A 0.1 x 0.1 x 1 m box whose body frame sits at the hinge (COM offset 0.5 m along -z),
    turned by ``theta0`` about the horizontal world ``axis`` through ``HINGE``."""
    m, J = 2.0, _box(2.0, 0.1, 0.1, 1.0)
    n = np.asarray(axis) / np.linalg.norm(axis)
    base = np.stack([n, np.cross([0.0, 0.0, 1.0], n), [0.0, 0.0, 1.0]], axis=1)  # body x = n
    R = _rot(theta0 * n) @ base
    com = np.array([0.0, 0.0, -0.5])
    bodies = dl.RigidBody(np.array([m]), J[None], com=com[None])
    free = dl.Model(bodies, r0=(HINGE + R @ com)[None], R0=R[None])
    return free, m, J[0, 0] + m * 0.25, base


HINGE = np.array([0.2, -0.1, 1.0])


def test_connect_warns_like_the_loader_and_refuses_a_second_call():
    free, *_ = _hinged_box(0.3, [1.0, 1.0, 0.0])
    joints = revolute_at(free, GROUND, 0, HINGE, [1.0, 1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # consistent by construction: no warning
        model = connect(free, joints)
    off = dl.Model(free.bodies, r0=free.r0 + 0.01, R0=free.R0, omega0=[[0.0, 0.0, 1.0]])
    with pytest.warns(UserWarning) as record:
        connect(off, joints)
    messages = [str(w.message) for w in record]
    assert any(m.startswith("connect: initial configuration violates the constraints by 1.000e-02") for m in messages)
    assert any("initial velocities inconsistent" in m for m in messages)
    assert record[0].filename == __file__  # points at the caller, not at difflie
    with pytest.raises(ValueError, match="constraints already"):
        connect(model, joints)


def test_connect_under_vmap_leaves_the_assembly_to_simulate():
    """``connect`` inside ``jax.vmap`` over initial rates (traced: it cannot check or move them)
    gives the runs of ``connect`` called on each: the implicit solver projects the rates at the
    start as the eager ``connect`` did (the spin about a tilted axis keeps only its hinge part)."""
    axis = np.array([1.0, 1.0, 0.0])
    free, *_ = _hinged_box(0.3, axis)
    joints = revolute_at(free, GROUND, 0, HINGE, axis)
    spins = jnp.array([[0.0, 0.0, 1.0], [0.5, -0.5, 2.0]])

    def end(w, model_of):
        model = model_of(eqx.tree_at(lambda m: m.omega0, free, w[None]))
        return dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.02, 1e-3).position[-1, 0]

    batch = jax.vmap(lambda w: end(w, lambda m: connect(m, joints)))(spins)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the eager connect warns that it projects the rates
        one = [end(w, lambda m: connect(m, joints)) for w in spins]
    np.testing.assert_allclose(batch, np.stack(one), atol=1e-12)
    assert float(jnp.abs(batch[0] - batch[1]).max()) > 1e-4  # the spins differ along the hinge


def test_hinged_box_swings_like_a_compound_pendulum():
    """A box on a revolute joint from ``revolute_at`` about a tilted horizontal axis (not a
    coordinate axis; body frame away from the COM) follows ``I theta'' = -m g d sin theta``."""
    axis, theta0 = [1.0, 2.0, 0.0], 0.5
    free, m, I_hinge, base = _hinged_box(theta0, axis)
    model = connect(free, revolute_at(free, GROUND, 0, HINGE, axis, name="hinge"))
    t1, h = 0.4, 2e-3
    sol = dl.simulate(model, dl.GeneralizedAlpha(), 0.0, t1, h, saveat=dl.SaveAt(ts=jnp.array([t1])))
    R = np.asarray(sol.rotation[-1, 0]) @ base.T  # the turn about the axis
    n = np.asarray(axis) / np.linalg.norm(axis)
    theta = np.arctan2(n @ _vee(R), 0.5 * (np.trace(R) - 1))

    def f(y):
        return np.array([y[1], -m * 9.81 * 0.5 * np.sin(y[0]) / I_hinge])

    y, k = np.array([theta0, 0.0]), 1e-4
    for _ in range(round(t1 / k)):  # RK4, fine steps
        a = f(y)
        b = f(y + k / 2 * a)
        c = f(y + k / 2 * b)
        d = f(y + k * c)
        y = y + k / 6 * (a + 2 * b + 2 * c + d)
    assert abs(theta - y[0]) < 2e-4, (theta, y[0])
    assert abs(theta - theta0) > 0.1  # it did swing


def _vee(R):
    """``sin(theta) n`` of a rotation ``R`` by ``theta`` about ``n``."""
    return 0.5 * np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])


# -- the shipped model file --------------------------------------------------------------------


def _box_pendulum_in_python():
    """The model of ``examples/double_pendulum_3d.json``, built from world points and axes."""
    J = _box(1.2, 0.1, 0.1, 1.0)
    bodies = dl.RigidBody(np.full(2, 1.2), np.stack([J, J]), names=("upper", "lower"))
    R0 = np.stack([_rot([-np.pi / 2, 0.0, 0.0]), _rot([0.0, -np.arctan2(0.6, 0.8), 0.0])])
    free = dl.Model(bodies, r0=[[0.0, 0.5, 0.0], [0.3, 1.0, -0.4]], R0=R0)
    return free, [
        revolute_at(free, GROUND, 0, point=[0.0, 0.0, 0.0], axis=[1.0, 0.0, 0.0], name="shoulder"),
        revolute_at(free, 0, 1, point=[0.0, 1.0, 0.0], axis=[0.0, 1.0, 0.0], name="elbow"),
    ]


def test_example_file_is_the_world_frame_model_and_runs_from_the_command_line(tmp_path):
    data = json.loads(EXAMPLE.read_text())
    assert all("mass" in b and "inertia" in b for b in data["bodies"] if b["name"] != "ground")
    loaded = dl.load_model(EXAMPLE, assemble=False)  # the command line below assembles it
    free, joints = _box_pendulum_in_python()
    np.testing.assert_allclose(np.asarray(loaded.R0), np.asarray(free.R0), atol=1e-15)
    np.testing.assert_allclose(np.asarray(loaded.bodies.inertia), np.asarray(free.bodies.inertia), rtol=1e-15)
    ours = dl.ConstraintSet(joints, 2)
    assert ours.names == loaded.constraints.names
    rng = np.random.default_rng(0)
    r, R = rng.normal(size=(2, 3)), np.stack([_rot(w) for w in rng.normal(size=(2, 3))])
    np.testing.assert_allclose(ours.residual(0.0, r, R), loaded.constraints.residual(0.0, r, R), atol=1e-14)

    out = tmp_path / "pendulum.npz"
    cmd = [sys.executable, "-m", "difflie", "simulate", str(EXAMPLE), "--t1", "0.05", "--out", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "Warning" not in run.stderr, run.stderr  # complete and consistent as shipped
    sol = dl.load_solution(out)
    assert sol.body_names == ("upper", "lower") and sol.ts.shape == (51,)
    assert int(sol.stats.steps) == -1 and sol.result == dl.RESULTS.successful  # the CLI writes no counters
    residual = dl.diagnostics.constraint_residual(loaded, sol.ts, sol.states)
    assert float(jnp.max(residual)) < 1e-10
    assert float(sol.position[-1, 1, 2]) < -0.41  # the lower box fell


def test_consistent_file_loads_without_an_assembly(monkeypatch):
    """A consistent initial state is kept as it is: no Gauss-Newton program is compiled."""
    from difflie import kinematics

    def refuse(*args, **kwargs):
        raise AssertionError("assembled a consistent initial state")

    monkeypatch.setattr(kinematics, "assemble", refuse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = dl.load_model(EXAMPLE)
    np.testing.assert_array_equal(np.asarray(model.r0), np.asarray(dl.load_model(EXAMPLE, assemble=False).r0))


# -- submodules and trajectory files -------------------------------------------------------------


def test_submodules_are_attributes_after_import():
    code = (
        "import sys, difflie as dl\n"
        "assert 'difflie.plot' not in sys.modules and 'difflie.identify' not in sys.modules\n"
        "assert {'identify', 'plot', 'batch', 'export', 'save_solution'} <= set(dir(dl))\n"
        "dl.identify.fit, dl.plot.animate, dl.batch.simulate_batch, dl.kinematics.assemble, dl.forces\n"
        "assert dl.save_solution is dl.export.save_solution and callable(dl.load_solution)\n"
        "try:\n    dl.no_such_thing\nexcept AttributeError as e:\n    print(e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "has no attribute 'no_such_thing'" in run.stdout


def test_solution_round_trip(tmp_path):
    model = dl.models.heavy_top()
    sol = dl.simulate(model, dl.Dopri5(), 0.0, 0.01, 1e-3, saveat=dl.SaveAt(steps=True),
                      stepsize_controller=dl.PIDController(rtol=1e-6, atol=1e-6), max_steps=64)  # fmt: skip
    assert not np.all(np.isfinite(np.asarray(sol.ts)))  # unused slots, dropped on saving
    dl.save_solution(tmp_path / "top.npz", sol)
    back = dl.load_solution(tmp_path / "top.npz")
    keep = np.isfinite(np.asarray(sol.ts))
    np.testing.assert_array_equal(back.ts, sol.ts[keep])
    for k in ("position", "rotation", "velocity", "angular_velocity"):
        np.testing.assert_array_equal(getattr(back, k), np.asarray(getattr(sol, k))[keep])
    assert back.body_names == sol.body_names and back.result == dl.RESULTS.successful
    assert int(back.stats.steps) == int(sol.stats.steps) > 0
    failed = type(sol)(sol.ts, sol.states, sol.stats, dl.RESULTS.newton_failed, sol.body_names)
    dl.save_solution(tmp_path / "failed.npz", failed)
    assert dl.load_solution(tmp_path / "failed.npz").result == dl.RESULTS.newton_failed
    with pytest.raises(ValueError, match="one run"):
        batched = type(sol)(jnp.stack([sol.ts] * 2), sol.states, sol.stats, sol.result, sol.body_names)
        dl.save_solution(tmp_path / "batch.npz", batched)
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="lacks"):
        dl.load_solution(tmp_path / "other.npz")


# -- groups beside jaxlie habits -----------------------------------------------------------------

GROUPS = [dl.SO3, dl.UnitQuaternion, dl.SE3, dl.SO3xR3, dl.UnitDualQuaternion]


@pytest.mark.parametrize("G", GROUPS, ids=lambda G: G.__name__)
def test_matmul_acts_on_points_and_interpolates(G):
    d = G.tangent_dim
    xi = jnp.linspace(0.2, 0.9, d) * jnp.array([1.0, -1.0] * (d // 2) + [1.0] * (d % 2))
    g, h = G.exp(xi), G.exp(-0.5 * xi[::-1])
    points = jnp.array([[1.0, 2.0, 3.0], [-0.5, 0.1, 0.0]])
    np.testing.assert_allclose(g @ points, g.act(points), rtol=1e-15)
    np.testing.assert_allclose(g @ np.asarray(points), g.act(points), rtol=1e-15)
    np.testing.assert_allclose((g @ h).as_matrix(), g.compose(h).as_matrix(), rtol=1e-15)
    with pytest.raises(TypeError):
        g @ 2.0
    # the geodesic from the identity is exp(alpha xi); endpoints; batched alpha
    one = G.identity(dtype=xi.dtype)
    np.testing.assert_allclose(one.interpolate(g, 0.3).as_matrix(), G.exp(0.3 * xi).as_matrix(), atol=1e-14)
    np.testing.assert_allclose(h.interpolate(g, 0.0).as_matrix(), h.as_matrix(), atol=1e-14)
    np.testing.assert_allclose(h.interpolate(g, 1.0).as_matrix(), g.as_matrix(), atol=1e-14)
    assert h.interpolate(g, jnp.linspace(0.0, 1.0, 5)).batch_shape == (5,)


def test_interpolation_of_so3xr3_is_linear_in_translation_and_se3_is_a_screw():
    a = dl.SO3xR3.from_rotation_translation(jnp.eye(3), jnp.array([0.0, 0.0, 0.0]))
    b = dl.SO3xR3.from_rotation_translation(dl.SO3.exp(jnp.array([0.0, 0.0, jnp.pi / 2])).as_matrix(), jnp.array([2.0, 0.0, 0.0]))
    mid = a.interpolate(b, 0.5)
    np.testing.assert_allclose(mid.translation, [1.0, 0.0, 0.0], atol=1e-15)
    screw = dl.SE3.from_matrix(a.as_matrix()).interpolate(dl.SE3.from_matrix(b.as_matrix()), 0.5)
    np.testing.assert_allclose(screw.rotation, mid.rotation, atol=1e-15)  # same rotation, curved path
    assert abs(float(screw.translation[1])) > 0.1


def test_repr_prints_values():
    g = dl.SE3.exp(jnp.array([0.1, 0.2, 0.3, 0.0, 0.0, 0.0]))
    assert repr(g).startswith("SE3(rotation=[[1., 0., 0.],") and "translation=[0.1, 0.2, 0.3]" in repr(g)
    assert "wxyz=[1., 0., 0., 0.]" in repr(dl.UnitQuaternion.identity())
    assert "f64[50,3,3]" in repr(dl.SO3.identity((50,), dtype=jnp.float64))  # large batches: shapes
    seen = []
    jax.jit(lambda g: seen.append(repr(g)) or g)(dl.SO3.identity())
    assert "[3,3]" in seen[0]  # traced: shapes


def test_joint_builders_name_a_bad_point_or_axis():
    from difflie.constraints import GROUND, prismatic_at, revolute_at, universal_at

    free = dl.Model(dl.RigidBody(jnp.ones(1), jnp.eye(3)[None]), r0=jnp.array([[0.0, 0.5, 0.0]]))
    cases = [
        (lambda: revolute_at(free, GROUND, 0, (0, 0, 0), (0, 0, 0), name="j"), r"revolute_at 'j': axis needs a nonzero length"),
        (lambda: revolute_at(free, GROUND, 0, (0, jnp.nan, 0), (1, 0, 0)), r"revolute_at: point must be three finite numbers"),
        (lambda: prismatic_at(free, GROUND, 0, (0, 0), (1, 0, 0), name="s"), r"prismatic_at 's': point must be three finite numbers"),
        (lambda: universal_at(free, GROUND, 0, (0, 0, 0), (1, 0, 0), (0, 0, 0), name="u"), r"universal_at 'u': axis_j needs a nonzero"),
    ]
    for make, message in cases:
        with pytest.raises(ValueError, match=message):
            make()
