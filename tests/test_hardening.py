"""Hostile inputs to the library: each is refused with a clear exception naming what and where,
before any long work (the command line's side is in ``test_cli.py``)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl
from difflie.expr import MAX_DEPTH, Expression, ExpressionError
from difflie.io.model_file import ModelFileError, load_model
from difflie.lie import SE3, SO3, UnitDualQuaternion, UnitQuaternion, hat
from difflie.simulate import MAX_STEPS, fixed_step_count, memory_estimate

PENDULUM = {
    "bodies": [
        {"name": "ground", "id": 0},
        {"name": "link", "id": 1, "r": [0, 1.0, 0], "A": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "mass": 1.0,
         "inertia": [0.1, 0.1, 0.1]},
    ],
    "constraints": [{"name": "d", "type": "D", "body_i": 1, "body_j": 0, "s_bar_p_i": [0, 0, 0],
                     "s_bar_q_j": [0, 0, 0], "f": "1"}],
    "joints": [{"type": "revolute", "body_i": 1, "body_j": 0, "s_bar_i": [0, -1.0, 0], "axis_i": [1, 0, 0],
                "s_bar_j": [0, 0, 0], "axis_j": [1, 0, 0]}],
}  # fmt: skip


def _file(tmp_path, edit=None, text=None):
    data = json.loads(json.dumps(PENDULUM))
    if edit is not None:
        edit(data)
    path = tmp_path / "m.json"
    path.write_text(text if text is not None else json.dumps(data))
    return path


# ------------------------------------------------------------------------------- expressions


@pytest.mark.parametrize(
    "source, message",
    [
        ("1/0 + t", r"cannot evaluate '1 / 0' in '1/0 \+ t': float division by zero"),
        ("t + 5 % 0", r"cannot evaluate '5 % 0'"),
        ("9**9**9 * t", r"cannot evaluate '9 \*\* 9 \*\* 9'"),
        ("1" * 400, r"cannot evaluate '1111.*\.\.\.': int too large to convert to float"),
        ("1e308 * 10 + t", r"'1e\+308 \* 10' in .* evaluates to inf"),
        ("(-1)**0.5 + t", r"'\(-1\) \*\* 0\.5' in .* is complex .*drivers must be real"),
        ("-" * 1999 + "t", f"nested deeper than {MAX_DEPTH} levels"),
        ("sin(" * 110 + "t" + ")" * 110, f"nested deeper than {MAX_DEPTH} levels"),
        ("1" * 5000, "longer than 2000 characters"),
    ],
)
def test_expression_errors_are_found_when_read(source, message):
    with pytest.raises(ExpressionError, match=message):
        Expression(source)


def test_constant_parts_are_evaluated_once_with_the_same_value():
    e = Expression("2*pi*t + 1/4 - -(3**2)")
    assert float(e(0.5)) == pytest.approx(np.pi + 0.25 + 9, rel=1e-15)
    assert Expression("-" * 90 + "t")(2.0) == 2.0  # an even chain, within the depth bound


# ------------------------------------------------------------------------------- model files


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(bodys=[]), r"\$\.bodys: unknown key; did you mean 'bodies'\?"),
        (lambda d: d["bodies"][1].update(omgea=[0, 0, 1]), r"\$\.bodies\[1\]\.omgea: unknown key; did you mean 'omega'\?"),
        (lambda d: d["constraints"][0].update(f_dott="0"), r"\$\.constraints\[0\]\.f_dott: unknown key; did you mean 'f_dot'\?"),
        (lambda d: d["joints"][0].update(axis_k=[1, 0, 0]), r"\$\.joints\[0\]\.axis_k: unknown key; did you mean 'axis_j'\?"),
        (lambda d: d["joints"][0].update(a_bar_i=[1, 0, 0]), r"\$\.joints\[0\]\.a_bar_i: unknown key; did you mean 's_bar_i'\?"),
        (lambda d: d["bodies"][1].update(mass=True), r"\$\.bodies\[1\]\.mass: expected numbers with shape \(\), got True"),
        (lambda d: d["bodies"][1].update(mass="2.0"), r"\$\.bodies\[1\]\.mass: expected numbers with shape \(\), got '2\.0'"),
        (lambda d: d["bodies"][1].update(r=[0, "1", 0]), r"\$\.bodies\[1\]\.r: expected numbers with shape \(3,\)"),
        (lambda d: d["bodies"][1].update(r=[0, 10**400, 0]), r"\$\.bodies\[1\]\.r: values must be finite"),
        (lambda d: d["bodies"][1].update(inertia="0.1"), r"\$\.bodies\[1\]\.inertia: expected numbers with shape \(3, 3\), got '0\.1'"),
        (lambda d: d["bodies"][1].update(inertia=[[1, 0, 0], [0, 1], [0, 0, 1]]),
         r"\$\.bodies\[1\]\.inertia: expected shape \(3, 3\), got rows of different lengths"),
        (lambda d: d["bodies"][1].update(id=[1]), r"\$\.bodies\[1\]\.id: a body id must be an integer or a string, got \[1\]"),
        (lambda d: d["bodies"][1].update(id=True), r"\$\.bodies\[1\]\.id: a body id must be"),
        (lambda d: d["joints"][0].update(body_j={"id": 0}), r"\$\.joints\[0\]\.body_j: a body id must be"),
        (lambda d: d["bodies"][1].update(name=7), r"\$\.bodies\[1\]\.name: expected a string, got 7"),
        (lambda d: d["constraints"][0].update(type=["D"]), r"\$\.constraints\[0\]\.type: expected one of"),
        (lambda d: d["bodies"][1].update(A=[[1, 0, 0], [0, 1, 0], [0, 0, -1]]),
         r"\$\.bodies\[1\]\.A: not a rotation matrix \(a reflection: det A = -1\)"),
        (lambda d: d["constraints"][0].update(f="1/0 + t"), r"\$\.constraints\[0\]\.f: cannot evaluate '1 / 0'"),
        (lambda d: d["constraints"][0].update(f="(-8)**(1/3)"), r"\$\.constraints\[0\]\.f: .* is complex"),
    ],
)
def test_model_file_entries_are_checked(tmp_path, edit, message):
    with pytest.raises(ModelFileError, match=message):
        load_model(_file(tmp_path, edit), assemble=False)


def test_unreadable_model_files(tmp_path):
    with pytest.raises(ModelFileError, match="is a directory, not a model file"):
        load_model(tmp_path)
    with pytest.raises(ModelFileError, match=r"not valid JSON \(nested too deeply\)"):
        load_model(_file(tmp_path, text="[" * 100_000 + "]" * 100_000))
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(ModelFileError, match=r"not valid JSON \(not UTF-8 text\)$"):
        load_model(path)
    # A robot file under a name difflie does not read: the formats it does, and what to do
    for name, hint in (("robot.urdf.xacro", r"; a xacro file .*: expand it first \(`xacro robot.urdf.xacro > robot.urdf`\)"),
                       ("robot.sdf", "; SDFormat is not read: convert the model to URDF or MJCF"), ("robot.txt", "$")):  # fmt: skip
        other = tmp_path / name
        other.write_text('<?xml version="1.0"?>\n<robot name="r"/>\n')
        with pytest.raises(ModelFileError, match=r"not valid JSON \(Expecting value at line 1, column 1\); difflie reads JSON model "
                                                 r"files \(.json, .mdl\), URDF \(.urdf\) and MJCF \(.xml\)" + hint):  # fmt: skip
            load_model(other)


def test_builtin_names_are_models_only():
    for name in ("Model", "spherical", "nearest_rotation", "_builtin"):
        with pytest.raises(ValueError, match=f"unknown model '{name}'"):
            load_model(name)
    assert load_model("heavy_top").num_bodies == 1


def test_default_mass_and_inertia_fill_only_missing_bodies(tmp_path):
    def drop_mass(d):
        del d["bodies"][1]["mass"], d["bodies"][1]["inertia"]

    with pytest.raises(ValueError, match=r"body 'link' has no mass .*\(command line: --mass\)"):
        load_model(_file(tmp_path, drop_mass), assemble=False)
    m = load_model(_file(tmp_path, drop_mass), assemble=False, default_mass=3.0, default_inertia=[1.0, 2.0, 2.5])
    assert float(m.bodies.mass[0]) == 3.0
    np.testing.assert_array_equal(m.bodies.inertia[0], np.diag([1.0, 2.0, 2.5]))
    m = load_model(_file(tmp_path), assemble=False, default_mass=3.0, default_inertia=[1.0, 2.0, 2.5])
    assert float(m.bodies.mass[0]) == 1.0  # the file's own value wins


# ------------------------------------------------------------------------------- groups, bodies


@pytest.mark.parametrize(
    "matrix, message",
    [
        (np.diag([1.0, 1.0, -1.0]), r"a reflection, det R = -1"),
        (np.zeros((3, 3)), r"R\^T R - I up to 1\.00e\+00"),
        (2 * np.eye(3), r"R\^T R - I up to 3\.00e\+00"),
        (np.full((3, 3), np.nan), "non-finite entries"),
    ],
)
def test_rotation_constructors_check_concrete_matrices(matrix, message):
    with pytest.raises(ValueError, match="SO3.from_matrix: not a rotation matrix.*" + message):
        SO3.from_matrix(matrix)
    with pytest.raises(ValueError, match="UnitQuaternion.from_matrix: not a rotation matrix"):
        UnitQuaternion.from_matrix(matrix)
    m = np.eye(4)
    m[:3, :3] = matrix
    for G in (SE3, UnitDualQuaternion):
        with pytest.raises(ValueError, match=f"{G.__name__}.from_matrix: not a rotation matrix"):
            G.from_matrix(m)


def test_checked_constructors_pass_rotations_and_leave_traced_input_alone():
    R = SO3.exp(jnp.array([0.3, -0.2, 1.1])).matrix
    np.testing.assert_array_equal(SO3.from_matrix(R).matrix, R)
    np.testing.assert_array_equal(SO3.from_matrix(R.astype(jnp.float32)).matrix, R.astype(jnp.float32))
    # inside jit the input is not inspected (the fast path): 2 I goes through unchanged
    np.testing.assert_array_equal(jax.jit(lambda m: SO3.from_matrix(m).matrix)(2 * jnp.eye(3)), 2 * jnp.eye(3))
    bad_row = np.eye(4)
    bad_row[3, 0] = 1.0
    with pytest.raises(ValueError, match=r"SE3.from_matrix: not a homogeneous transform \(last row"):
        SE3.from_matrix(bad_row)


def test_transforms_with_rounding_in_the_last_row_are_accepted():
    """``expm`` of a twist and ``inv`` of a transform leave ~1e-17 in the last row: the row is
    checked to the rotation's tolerance, not exactly."""
    from scipy.linalg import expm

    twist = np.zeros((4, 4))
    twist[:3, :3] = np.array(hat(jnp.array([1.0, 2.0, -0.5])))
    twist[:3, 3] = [1.0, 2.0, 3.0]
    for T in (expm(twist), np.linalg.inv(expm(twist))):
        assert np.any(T[3] != [0.0, 0.0, 0.0, 1.0])  # the case this test is about
        for G in (SE3, dl.SO3xR3, UnitDualQuaternion):
            np.testing.assert_allclose(G.from_matrix(T).as_matrix(), T, atol=1e-14)
    np.testing.assert_allclose(SE3.from_matrix(expm(twist)).log(), [1.0, 2.0, 3.0, 1.0, 2.0, -0.5], atol=1e-13)
    bad_row = np.eye(4)
    bad_row[3, 3] = 1.01
    with pytest.raises(ValueError, match=r"SE3.from_matrix: not a homogeneous transform \(last row .*off by 1\.00e-02"):
        SE3.from_matrix(bad_row)


def test_constructors_from_quaternions_and_rotation_translation_pairs_check_their_input():
    """The other public constructors check a concrete input as ``from_matrix`` and
    ``from_wxyz`` do: a non-unit quaternion gave ``SO3.from_quaternion`` the matrix ``4 I``, a
    scaled rotation went into ``from_rotation_translation`` unnoticed, and a (3,) quaternion or a
    (4,) translation failed inside JAX's broadcasting."""
    R = 1.1 * np.eye(3)
    with pytest.raises(ValueError, match=r"SO3.from_quaternion: not a unit quaternion \(norm 2\)"):
        SO3.from_quaternion(jnp.array([2.0, 0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match=r"SO3.from_quaternion: expected \(\.\.\., 4\) quaternions, got shape \(3,\)"):
        SO3.from_quaternion(jnp.array([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="UnitDualQuaternion.from_quaternion_translation: not a unit quaternion"):
        UnitDualQuaternion.from_quaternion_translation(jnp.array([2.0, 0.0, 0.0, 0.0]), jnp.zeros(3))
    for G in (SE3, dl.SO3xR3, UnitDualQuaternion):
        with pytest.raises(ValueError, match=rf"{G.__name__}.from_rotation_translation: not a rotation matrix"):
            G.from_rotation_translation(R, jnp.zeros(3))
    for G in (SE3, dl.SO3xR3):
        with pytest.raises(ValueError, match=rf"{G.__name__}.from_rotation_translation: expected \(\.\.\., 3\) translations, got shape \(4,\)"):
            G.from_rotation_translation(jnp.eye(3), jnp.zeros(4))
        with pytest.raises(ValueError, match=rf"{G.__name__}.from_rotation_translation: non-finite translation"):
            G.from_rotation_translation(jnp.eye(3), jnp.array([0.0, jnp.nan, 0.0]))
    # valid input passes (a batch of rotations with one translation), traced input is not inspected
    Rs = SO3.exp(jnp.array([[0.3, -0.2, 1.1], [0.0, 0.0, 3.0]])).matrix
    g = SE3.from_rotation_translation(Rs, jnp.ones(3))
    assert g.batch_shape == (2,)
    q = UnitDualQuaternion.from_rotation_translation(Rs, jnp.ones(3))
    np.testing.assert_allclose(q.as_matrix(), g.as_matrix(), atol=1e-15)
    np.testing.assert_allclose(SO3.from_quaternion(q.real).matrix, Rs, atol=1e-15)
    np.testing.assert_array_equal(jax.jit(lambda q: SO3.from_quaternion(q).matrix)(jnp.array([2.0, 0, 0, 0])), 4 * np.eye(3))


def test_unit_quaternion_checked_constructor():
    with pytest.raises(ValueError, match=r"UnitQuaternion.from_wxyz: not a unit quaternion \(norm 1\.41421\)"):
        UnitQuaternion.from_wxyz(jnp.array([1.0, 1.0, 0.0, 0.0]))
    q = jnp.array([1.0, 1.0, 0.0, 0.0]) / jnp.sqrt(2.0)
    np.testing.assert_allclose(UnitQuaternion.from_wxyz(q).log(), [np.pi / 2, 0, 0], atol=1e-15)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_bodies_are_refused(dtype):
    with pytest.raises(ValueError, match="is not supported .*use float32 or float64"):
        dl.RigidBody(jnp.ones(1, dtype), jnp.eye(3, dtype=dtype)[None])


def test_integer_masses_become_floats():
    body = dl.RigidBody(np.array([2]), np.eye(3, dtype=int)[None])
    assert jnp.issubdtype(body.mass.dtype, jnp.floating) and jnp.issubdtype(body.inertia.dtype, jnp.floating)


# ------------------------------------------------------------------------------- simulate


TOP = dl.models.heavy_top()


def test_simulate_option_errors():
    with pytest.raises(ValueError, match="SaveAt\\(ts\\): no save times given"):
        dl.SaveAt(ts=[])
    with pytest.raises(ValueError, match="PIDController: dtmin = 1.0 exceeds dtmax = 0.1"):
        dl.PIDController(rtol=1e-6, atol=1e-6, dtmin=1.0, dtmax=0.1)
    ctrl = dl.PIDController(rtol=1e-6, atol=1e-6)
    for dt0 in (0.0, -1e-3):
        with pytest.raises(ValueError, match=f"the initial step dt must be positive, got {dt0}"):
            dl.simulate(TOP, dl.Dopri5(), 0.0, 0.1, dt0, stepsize_controller=ctrl)
    with pytest.raises(ValueError, match="dt must be finite, got nan"):
        dl.simulate(TOP, dl.Dopri5(), 0.0, 0.1, float("nan"), stepsize_controller=ctrl)
    with pytest.raises(ValueError, match=f"makes inf steps; at most {MAX_STEPS}"):
        dl.simulate(TOP, dl.RKMK4(), 0.0, 1.0, 5e-324)
    with pytest.raises(ValueError, match=r"makes 1e\+15 steps"):
        dl.simulate(TOP, dl.RKMK4(), 0.0, 1000.0, 1e-12)
    with pytest.raises(ValueError, match=r"saveat must be a difflie.SaveAt, e.g. SaveAt\(ts=times\), got ndarray"):
        dl.simulate(TOP, dl.RKMK4(), 0.0, 1.0, 1e-2, saveat=np.linspace(0.1, 1.0, 10))


def test_fixed_step_count_is_the_steps_run():
    assert fixed_step_count(0.0, 0.01, 0.003) == 4
    assert fixed_step_count(0.0, 0.01, 1.0) == 1
    assert fixed_step_count(0.0, 1.0, 1e-3) == 1000  # not 1001 from the rounding of 1 / 1e-3
    sol = dl.simulate(TOP, dl.RKMK4(), 0.0, 0.01, 0.003, saveat=dl.SaveAt(steps=True))
    assert int(sol.stats.steps) == 4 and sol.ts.shape == (5,)


def test_memory_estimate_covers_the_saved_arrays():
    n = 200
    sol = dl.simulate(TOP, dl.RKMK4(), 0.0, 0.2, 1e-3, saveat=dl.SaveAt(steps=True))
    saved = sol.ts.nbytes + sum(x.nbytes for x in jax.tree.leaves(sol.states))
    estimate = memory_estimate(TOP, dl.SaveAt(steps=True), n)
    assert 2 * saved <= estimate <= 2 * saved + 40 * (n + 1)
    # the end state only: the time grid (tens of bytes a step) is what grows
    assert 30 * 1e8 < memory_estimate(TOP, dl.SaveAt(t1=True), 10**8) < 40 * 1e8
    # adaptive, every step: the max_steps + 1 slots of the buffer
    assert memory_estimate(TOP, dl.SaveAt(steps=True), 10**6, adaptive=True) == 2 * (10**6 + 1) * 8 * 19


# ------------------------------------------------------------------------------- interrupt


def test_sigint_ends_a_run_at_once_with_one_line(tmp_path):
    out = tmp_path / "x.npz"
    proc = subprocess.Popen(
        [sys.executable, "-m", "difflie", "simulate", "heavy-top", "--solver", "gen-alpha", "--t1", "1000", "--out", str(out)],
        stderr=subprocess.PIPE, text=True,
        # A child inherits an ignored SIGINT (a pytest-xdist worker may ignore it), and Python then
        # keeps ignoring it: give the child the default disposition a terminal gives.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        banner = proc.stderr.readline()
        assert banner.startswith("difflie: heavy-top with gen-alpha"), banner
        compiling = proc.stderr.readline()
        assert compiling.startswith("difflie: compiling gen-alpha"), compiling
        # compiling or running (1e6 implicit steps: 10 s or more): both are interrupted at once. Not
        # 1e7 explicit steps: their time grid and saved states took the child past 2 GB.
        time.sleep(1.0)
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        code = proc.wait(timeout=10)
        elapsed = time.monotonic() - start
    finally:
        proc.kill()
    lines = rest.splitlines()
    assert code == 130 and lines[-1:] == ["difflie: interrupted"], rest
    assert all(line.startswith("difflie: compiled in") for line in lines[:-1]), rest
    assert elapsed < 2.0
    assert os.listdir(tmp_path) == []  # no output, no temporary file


def test_sigint_while_importing_ends_with_one_line():
    """A Ctrl-C before the command has started: JAX is still being imported."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "difflie", "simulate", "heavy-top", "--t1", "1000"], stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "jaxlib" not in Path(f"/proc/{proc.pid}/maps").read_text():  # JAX's import has begun
            assert time.monotonic() < deadline
            time.sleep(0.002)
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read()
        code = proc.wait(timeout=10)
    finally:
        proc.kill()
    # no banner: interrupted before the command started; no traceback
    assert code == 130 and err.splitlines() == ["difflie: interrupted"], err[-2000:]


# ------------------------------------------------------------------------------- names, built-in models, trajectories


def test_connect_refuses_a_joint_name_given_twice():
    """Two joints of one name would merge in the row names and in joint_reactions; unnamed
    joints, rows given one by one and a driver named after its joint still connect."""
    C, G = dl.constraints, dl.constraints.GROUND
    free = dl.Model(dl.RigidBody(jnp.ones(2), jnp.stack([jnp.eye(3)] * 2)), r0=jnp.array([[0, 0.5, 0], [0, 1.5, 0.0]]))
    hinge = lambda i, j, p, name="": C.revolute_at(free, i, j, p, (1, 0, 0), name=name)
    with pytest.raises(ValueError, match=r"^connect: joints\[0\] and joints\[1\] are both named 'j'; give each joint a name of its own"):
        C.connect(free, [hinge(G, 0, (0, 0, 0), "j"), hinge(0, 1, (0, 1, 0), "j")])
    with pytest.raises(ValueError, match=r"^connect: joints\[0\] and joints\[1\] are both named 'j'"):
        C.connect(free, [hinge(G, 0, (0, 0, 0), "j"), C.spherical_at(free, 0, 1, (0, 1, 0), name="j")])
    with pytest.raises(ValueError, match=r"^connect: joints\[0\] has two rows named 'j_CD_x'"):
        C.connect(free, [hinge(G, 0, (0, 0, 0), "j") + hinge(0, 1, (0, 1, 0), "j")])
    assert len(set(C.connect(free, [hinge(G, 0, (0, 0, 0)), hinge(0, 1, (0, 1, 0))]).constraint_names)) == 10
    drive = C.rotation_driver_at(free, G, 0, (1, 0, 0), lambda t: 0.0 * t, name="hinge")
    C.connect(free, hinge(G, 0, (0, 0, 0), "hinge") + [drive] + C.spherical_at(free, 0, 1, (0, 1, 0)))


@pytest.mark.parametrize("fn", [dl.models.heavy_top, dl.models.heavy_top_spherical])
def test_heavy_top_names_a_non_finite_omega0(fn):
    with pytest.raises(ValueError, match=r"omega0 must be finite, got \[0\.0, inf, 0\.0\]"):
        fn(omega0=[0, jnp.inf, 0])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: dl.models.chain(n=0), r"^chain: n must be an integer >= 1, got 0$"),
        (lambda: dl.models.chain(n=2.5), r"^chain: n must be an integer >= 1, got 2\.5$"),
        (lambda: dl.models.chain(length=-1.0), r"^chain: length must be positive, got -1\.0$"),
        (lambda: dl.models.chain(width=-0.05), r"^chain: width must be positive, got -0\.05$"),
        (lambda: dl.models.spider(n=0), r"^spider: n must be an integer >= 1, got 0$"),
        (lambda: dl.models.spider(length=0.0), r"^spider: length must be positive, got 0\.0$"),
        (lambda: dl.models.ladder(loops=1.5), r"^ladder: loops must be an integer >= 1, got 1\.5$"),
        (lambda: dl.models.ladder(length=-2.0), r"^ladder: length must be positive, got -2\.0$"),
        (lambda: dl.models.rotor(length=-0.5), r"^rotor: length must be positive, got -0\.5$"),
        (lambda: dl.models.spatial_slider_crank(crank_length=0.0), r"^spatial_slider_crank: crank_length must be positive, got 0\.0$"),
        (lambda: dl.models.spatial_slider_crank(rod_length=0.01), r"^spatial_slider_crank: rod_length 0\.01 cannot reach the slider's line"),
    ],
)
def test_built_in_model_sizes_are_checked(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_load_solution_refuses_other_files(tmp_path):
    text = tmp_path / "junk.npz"
    text.write_text("not a trajectory\n")
    with pytest.raises(ValueError, match=r"junk\.npz: not a difflie trajectory \(\.npz\) file$"):
        dl.load_solution(text)
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.npz: not a difflie trajectory \(\.npz\) file$"):
        dl.load_solution(empty)
    other = tmp_path / "other.npz"
    np.savez(other, t=np.zeros(3))
    with pytest.raises(ValueError, match=r"other\.npz lacks \['body_names', 'position'"):
        dl.load_solution(other)


@pytest.mark.parametrize(
    "element, message",
    [
        (lambda: dl.forces.BallSpring((-1,), (3,), jnp.eye(3)[None], jnp.eye(3)[None], jnp.array([5.0])),
         r"forces\[0\] \(BallSpring\)\.child names body 3, but the model has 2 bodies \(indices 0 to 1\)"),
        (lambda: dl.forces.SpringDamper(-2, [0.0, 0.0, 0.0], 0, [0.0, 0.0, 0.0], 1.0),
         r"forces\[0\] \(SpringDamper\)\.body_a names body -2, .* -1 the ground\)"),
        (lambda: dl.forces.CartesianSpringDamper(-1, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], 1.0),
         r"forces\[0\] \(CartesianSpringDamper\)\.body names body -1"),
        (lambda: dl.forces.JointInertia(dl.forces.JointForce(-1, 2, jnp.array([0.0, 0.0, 1.0])), jnp.array([0.3])),
         r"forces\[0\] \(JointInertia\)\.joints\.child names body 2"),
    ],
    ids=["ball_spring", "spring_damper", "cartesian", "joint_inertia"],
)
def test_force_elements_with_a_body_index_outside_the_model_are_refused(element, message):
    """Before, the model was accepted and ran: a gather clamped the index to the last body, a
    scatter dropped it."""
    bodies = dl.RigidBody(jnp.ones(2), jnp.stack([jnp.eye(3)] * 2))
    with pytest.raises(ValueError, match=message):
        dl.Model(bodies, r0=jnp.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]), forces=[element()])
