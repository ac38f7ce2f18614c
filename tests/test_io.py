"""Model files (the C1 ``.mdl`` / C2 ``.json`` model files of the public codes of Kissel, Taves &
Negrut's rA/rp/re paper, and the native JSON format) and their errors.

The command-line side of the errors is in ``test_cli.py``; here the loader's messages are checked
directly. Every C1/C2 file is loaded from ``tests/data`` (verbatim copies of the public codes' files).
"""

import functools
import json
import math
import re
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import as_model, run_float32

from difflie import constraints as C
from difflie.constraints import jacobians as jac
from difflie.constraints.formulations import get_formulation
from difflie.expr import Expression, ExpressionError, time_derivatives
from difflie.io.model_file import ModelFileError, load_model
from difflie.kinematics import kinematics
from difflie.lie import SO3
from difflie.results import RESULTS
from difflie.models import planar

DATA = Path(__file__).parent / "data"
ROOT_EXAMPLE = Path(__file__).parent.parent / "examples" / "double_pendulum_3d.json"
RA = get_formulation("rA")
ANY_INERTIA = [[1.0, 1.2, 1.5]] * 3  # the residual and kinematics do not depend on inertia

PENDULUM_DRIVER = "cos(pi/4*cos(2*t) + pi/2)"
FOUR_LINK_ANGLE = {"driving-kk": {"theta": "pi*t + pi/2", "a_bar_j": [0, 0, 1]}}
SLIDER_ANGLE = {"driver": {"theta": "-2*pi*t + pi/2", "a_bar_i": [0, 0, 1]}}


def _mass_inertia(model):
    return {"mass": np.asarray(model.bodies.mass), "inertia": np.asarray(model.bodies.inertia)}


def _load(name, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_model(DATA / name, **kw)


@functools.cache
def _builtin(name):
    return getattr(planar, name)()


def _pair_makers():
    """How each (built-in, loaded) pair is made. Built on first use, not at import: every xdist
    worker imports this module while collecting, and building all of them there compiled for a
    minute and kept ~1 GB in each worker."""
    sp, dp = (lambda: _builtin("single_pendulum")), (lambda: _builtin("double_pendulum"))
    fl, sc = (lambda: _builtin("four_link")), (lambda: _builtin("slider_crank"))
    fl_mass = {"mass": [2.0, 1.0, 1.0], "inertia": ANY_INERTIA}
    return {
        "revJoint.mdl": lambda: (sp(), _load("revJoint.mdl", **_mass_inertia(sp()))),
        "single_pendulum.json": lambda: (
            sp(),
            _load("single_pendulum.json", drivers={"DP1-drive": PENDULUM_DRIVER}, **_mass_inertia(sp())),
        ),
        "double_pendulum.mdl": lambda: (dp(), _load("double_pendulum.mdl", **_mass_inertia(dp()))),
        "double_pendulum.json": lambda: (dp(), _load("double_pendulum.json", **_mass_inertia(dp()))),
        "four_link_rotated.mdl": lambda: (fl(), _load("four_link_rotated.mdl", angle_drivers=FOUR_LINK_ANGLE, **fl_mass)),
        "four_link.json": lambda: (fl(), _load("four_link.json", angle_drivers=FOUR_LINK_ANGLE, **fl_mass)),
        "slider_crank_rotated.mdl": lambda: (sc(), _load("slider_crank_rotated.mdl", angle_drivers=SLIDER_ANGLE, **_mass_inertia(sc()))),
        "slider_crank.json": lambda: (sc(), _load("slider_crank.json", angle_drivers=SLIDER_ANGLE, **_mass_inertia(sc()))),
    }


class _LazyPairs:
    """``name -> (built-in model, loaded model)``, each pair made on first access."""

    def __init__(self, makers):
        self._makers, self._made = makers, {}

    def __iter__(self):
        return iter(self._makers)

    def __getitem__(self, name):
        if name not in self._made:
            self._made[name] = self._makers[name]()
        return self._made[name]


PAIRS = _LazyPairs(_pair_makers())


def _residual_and_jacobian(model, t, r, R):
    cons, com = model.constraints, jnp.zeros_like(r)
    return np.asarray(cons.residual(t, r, R)), np.asarray(jac.jacobian(as_model(cons, com), RA, t, r, R))


# Every mechanism once in the default run, in one of its two formats; the other files in the slow run.
SLOW_FILES = {"single_pendulum.json", "double_pendulum.json", "four_link_rotated.mdl", "slider_crank_rotated.mdl"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW_FILES else []) for n in sorted(PAIRS)])
def test_file_matches_builtin_residual_and_jacobian(name):
    """Same constraint rows as the built-in model, up to their order and sign."""
    builtin, loaded = PAIRS[name]
    nb = builtin.num_bodies
    assert loaded.num_bodies == nb
    k1, k2 = jax.random.split(jax.random.PRNGKey(hash(name) % 2**31))
    r = jax.random.normal(k1, (nb, 3))
    R = SO3.sample_uniform(k2, (nb,)).matrix
    t = 0.37
    res_b, jac_b = _residual_and_jacobian(builtin, t, r, R)
    res_f, jac_f = _residual_and_jacobian(loaded, t, r, R)
    assert res_b.shape == res_f.shape
    # match each built-in row to the file row with the same |value| at this random state
    perm = np.argmin(np.abs(np.abs(res_b)[:, None] - np.abs(res_f)[None, :]), axis=1)
    assert sorted(perm) == list(range(len(res_b))), "rows do not match one to one"
    sign = np.where(res_b * res_f[perm] < 0, -1.0, 1.0)
    np.testing.assert_allclose(sign * res_f[perm], res_b, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sign[:, None] * jac_f[perm], jac_b, rtol=0, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_file_matches_builtin_kinematics(name):
    builtin, loaded = PAIRS[name]
    ts = jnp.linspace(0.0, 1.0, 101)  # h = 0.1 is too coarse for the four link's chord Newton
    if builtin.num_bodies * 6 != builtin.constraints.num_constraints:  # double pendulum: 2 DOF
        a, b = builtin.constraints.residual(0.0, builtin.r0, builtin.R0), loaded.constraints.residual(0.0, loaded.r0, loaded.R0)
        assert np.abs(a).max() < 1e-12 and np.abs(b).max() < 1e-12
        np.testing.assert_allclose(loaded.r0, builtin.r0, atol=1e-12)
        return
    kb = kinematics(builtin, ts)
    kf = kinematics(loaded, ts)
    assert bool(kb.result == RESULTS.successful) and bool(kf.result == RESULTS.successful)
    for field in ("position", "rotation", "velocity", "angular_velocity", "acceleration"):
        np.testing.assert_allclose(getattr(kf, field)[-1], getattr(kb, field)[-1], rtol=0, atol=1e-9, err_msg=field)


@pytest.mark.parametrize(
    "name, kw",
    [
        ("four_link.mdl", {"angle_drivers": FOUR_LINK_ANGLE}),
        ("four_link_rotated_1dof.mdl", {}),
        ("four_link_haug.json", {}),
        ("slider_crank.mdl", {"angle_drivers": SLIDER_ANGLE}),
        ("slider_crank_rotated_no_driver.mdl", {}),
        ("slider_crank_haug.json", {}),
    ],
)
def test_unused_model_files_load_and_assemble(name, kw):
    model = _load(name, mass=[1.0, 1.0, 1.0], inertia=ANY_INERTIA, **kw)
    assert model.num_bodies == 3 and model.constraints.num_constraints in (17, 18)
    assert np.abs(model.constraints.residual(0.0, model.r0, model.R0)).max() < 1e-12


def test_missing_mass_is_asked_for():
    with pytest.raises(ValueError, match=r"body 'body_1' has no mass .*pass mass=\{'body_1': \.\.\.\}"):
        load_model(DATA / "revJoint.mdl")
    with pytest.raises(ValueError, match="body 'body_1' has no inertia"):
        load_model(DATA / "revJoint.mdl", mass={"body_1": 78.0})


def test_four_link_assembly_warning_states_residual():
    with pytest.warns(UserWarning, match="violates the constraints by") as record:
        model = load_model(DATA / "four_link.json", angle_drivers=FOUR_LINK_ANGLE, mass=[2.0, 1.0, 1.0], inertia=ANY_INERTIA)
    message = next(str(w.message) for w in record if "violates" in str(w.message))
    value = float(re.search(r"violates the constraints by ([0-9.e+-]+)", message).group(1))
    assert 8.6e-3 < value < 8.8e-3, message
    assert np.abs(model.constraints.residual(0.0, model.r0, model.R0)).max() < 1e-12
    # the file's rotor omega = 0 is inconsistent with the driver: projected onto (0, 0, pi)
    assert any("initial velocities inconsistent" in str(w.message) for w in record)
    np.testing.assert_allclose(model.omega0[0], [0.0, 0.0, math.pi], atol=1e-12)


def test_velocity_projection_is_closest_consistent():
    """The file's inconsistent velocities become the Euclidean-closest consistent ones."""
    name = "slider_crank.mdl"  # the rod's r_dot = 0 is inconsistent
    data = json.loads((DATA / name).read_text())
    bodies = [b for b in data["bodies"] if b["name"] != "ground"]
    q_file = np.concatenate([np.ravel([b["r_dot"] for b in bodies]), np.ravel([b["omega"] for b in bodies])])
    with pytest.warns(UserWarning, match="initial velocities inconsistent by"):
        model = load_model(DATA / name, angle_drivers=SLIDER_ANGLE, mass=[1.0, 1.0, 1.0], inertia=ANY_INERTIA)
    r, R = jnp.asarray(model.r0), jnp.asarray(model.R0)
    G = np.asarray(jac.jacobian(model, RA, 0.0, r, R))
    nu = np.asarray(jac.nu(model, RA, 0.0, r, R))
    q = np.concatenate([np.ravel(model.v0), np.ravel(model.omega0)])
    assert np.abs(G @ q - nu).max() < 1e-12
    # closest: the change lies in the row space of G (orthogonal to every consistent direction)
    null = np.linalg.svd(G)[2][G.shape[0]:]
    assert null.shape[0] == 0 or np.abs(null @ (q - q_file)).max() < 1e-12
    assert np.abs(q - q_file).max() > 1e-2  # it did change
    # Euclidean optimality against random consistent competitors
    q_other = q_file - np.linalg.lstsq(G, G @ q_file - nu, rcond=None)[0]
    assert np.linalg.norm(q_other - q_file) >= np.linalg.norm(q - q_file) - 1e-12


def test_wrong_f_ddot_string_is_not_used():
    """revJoint.mdl's f_ddot is wrong; the acceleration still matches the closed form."""
    data = json.loads((DATA / "revJoint.mdl").read_text())
    row = next(c for c in data["constraints"] if c["f"] != "0")
    f, wrong = Expression(row["f"]), Expression(row["f_ddot"])
    t, h = 0.7, 1e-4
    _, _, fdd = time_derivatives(f, jnp.asarray(t))
    fd = (f(t + h) - 2 * f(t) + f(t - h)) / h**2
    assert abs(fdd - fd) < 1e-6 * max(1.0, abs(fd))
    assert abs(wrong(t) - fdd) > 0.05  # the file's string really is wrong here
    _, loaded = PAIRS["revJoint.mdl"]
    sol = kinematics(loaded, jnp.linspace(0.0, 3.0, 31), tol=1e-12)
    np.testing.assert_allclose(sol.position[-1, 0], [0.0, 1.369289188, -1.457754135], atol=2e-9)
    np.testing.assert_allclose(sol.acceleration[-1, 0], [0.0, -4.661039139, -3.849593381], atol=2e-9)
    np.testing.assert_allclose(sol.angular_acceleration[-1, 0, 2], -3.016463919, atol=2e-9)


NATIVE = {
    "name": "pendulum pair",
    "gravity": [0.0, -1.0, -9.0],
    "bodies": [
        {"name": "ground", "id": 0},
        {"name": "upper", "id": 1, "r": [0, 0, -1.0], "A": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
         "mass": 2.0, "inertia": [[0.3, 0.01, 0], [0.01, 0.2, 0], [0, 0, 0.4]]},
        {"name": "lower", "id": 2, "r": [0, 0, -3.0], "A": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
         "omega": [0.5, 0, 0], "mass": 1.5, "inertia": [0.2, 0.25, 0.3]},
    ],
    "constraints": [{"name": "height", "type": "D", "body_i": 1, "body_j": 0, "s_bar_p_i": [0, 0, 0],
                     "s_bar_q_j": [0, 0, 0], "f": "1 + 0.1*sin(t)"}],
    "joints": [
        {"type": "spherical", "body_i": 1, "body_j": 0, "s_bar_i": [0, 0, 1.0], "s_bar_j": [0, 0, 0]},
        {"type": "revolute", "body_i": 1, "body_j": 2, "s_bar_i": [0, 0, -1.0], "axis_i": [1, 0, 0],
         "s_bar_j": [0, 0, 1.0], "axis_j": [1, 0, 0]},
    ],
}


def test_native_json_round_trip(tmp_path):
    p1, p2 = tmp_path / "a.json", tmp_path / "b.json"
    p1.write_text(json.dumps(NATIVE, indent=2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m1 = load_model(p1, assemble=False)
        p2.write_text(json.dumps(json.loads(p1.read_text())))  # written back by a second serialisation
        m2 = load_model(p2, assemble=False)
    assert m1.body_names == m2.body_names == ("upper", "lower")
    np.testing.assert_array_equal(m1.bodies.mass, [2.0, 1.5])
    np.testing.assert_array_equal(m1.bodies.inertia[0], NATIVE["bodies"][1]["inertia"])
    np.testing.assert_array_equal(m1.bodies.inertia[1], np.diag([0.2, 0.25, 0.3]))
    np.testing.assert_array_equal(m1.gravity, NATIVE["gravity"])
    np.testing.assert_array_equal(m1.omega0, [[0, 0, 0], [0.5, 0, 0]])
    for a, b in zip(jax.tree_util.tree_leaves((m1.bodies, m1.r0, m1.R0, m1.v0)), jax.tree_util.tree_leaves((m2.bodies, m2.r0, m2.R0, m2.v0))):
        np.testing.assert_array_equal(a, b)
    # the same rows as the model written by hand
    rows = [C.d(0, (0.0, 0.0, 0.0), C.GROUND, (0.0, 0.0, 0.0), f=Expression("1 + 0.1*sin(t)"))]
    rows += C.spherical(0, (0.0, 0.0, 1.0), C.GROUND, (0.0, 0.0, 0.0))
    rows += C.revolute(0, (0.0, 0.0, -1.0), (1.0, 0.0, 0.0), 1, (0.0, 0.0, 1.0), (1.0, 0.0, 0.0))
    ref = C.ConstraintSet(rows, 2)
    key = jax.random.PRNGKey(3)
    r, R = jax.random.normal(key, (2, 3)), SO3.sample_uniform(key, (2,)).matrix
    for t in (0.0, 1.3):
        res = np.asarray(ref.residual(t, r, R))
        np.testing.assert_allclose(m1.constraints.residual(t, r, R), res, rtol=0, atol=1e-14)
        np.testing.assert_array_equal(m2.constraints.residual(t, r, R), m1.constraints.residual(t, r, R))


# ---------------------------------------------------------------- errors and their messages


def _write(tmp_path, data, name="m.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=1))
    return path


def _native(**edits):
    data = json.loads(json.dumps(NATIVE))
    for where, value in edits.items():
        target, keys = data, where.split("/")
        for k in keys[:-1]:
            target = target[int(k) if k.isdigit() else k]
        last = int(keys[-1]) if keys[-1].isdigit() else keys[-1]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value
    return data


def test_malformed_json_gives_line_and_column(tmp_path):
    path = _write(tmp_path, '{\n  "bodies": [\n    {"name": "ground", "id": 0},,\n  ]\n}')
    with pytest.raises(ModelFileError, match=r"m\.json: not valid JSON \(.*line 3, column 33\)"):
        load_model(path)


@pytest.mark.parametrize(
    "edits, message",
    [
        ({"bodies/1/A": KeyError}, r"\$\.bodies\[1\]: missing key 'A'"),
        ({"constraints/0/type": "DP9"}, r"\$\.constraints\[0\]\.type: expected one of \['CD', 'D', 'DP1', 'DP2'"),
        ({"joints/1/axis_j": [1, 0]}, r"\$\.joints\[1\]\.axis_j: expected shape \(3,\), got \(2,\)"),
        ({"joints/1/axis_i": KeyError, "joints/1/axis": [1, 0, 0]}, r"\$\.joints\[1\]\.axis: unknown key; did you mean 'axis_i'\?"),
        ({"joints/1/axis_i": [0, 0, 0]}, r"\$\.joints\[1\]\.axis_i: a direction needs a nonzero length, got \[0, 0, 0\]"),
        ({"constraints/0/s_bar_q_j": KeyError}, r"\$\.constraints\[0\]: missing key 's_bar_q_j'"),
        ({"bodies/2/mass": "heavy"}, r"\$\.bodies\[2\]\.mass: expected numbers with shape \(\)"),
        ({"gravity": [0, "down", 1]}, r"\$\.gravity: expected numbers with shape \(3,\)"),
        ({"joints/0/body_j": 7}, r"\$\.joints\[0\]\.body_j: unknown body id 7 \(known ids"),
        ({"constraints/0/body_i": 5}, r"\$\.constraints\[0\]\.body_i: unknown body id 5"),
        ({"bodies": {}}, r"\$\.bodies: expected a non-empty list"),
    ],
)
def test_bad_key_names_json_path(tmp_path, edits, message):
    with pytest.raises(ModelFileError, match=message):
        load_model(_write(tmp_path, _native(**edits)), assemble=False)


def test_joint_far_off_its_axes_is_refused_before_assembly(tmp_path):
    """A revolute joint whose two axes start across each other: its rows depend on each other
    there, so Gauss-Newton cannot start (it divided by a singular matrix: a residual of NaN);
    the message names the joint, the violation and the way out."""
    path = _write(tmp_path, _native(**{"joints/1/axis_j": [0, 1, 0]}))
    with pytest.raises(ValueError, match=r"dependent rows belong to \[.*'revolute_\$\.joints\[1\]'\].* violates the constraints by "
                       r"1\.000e\+00 .*start the bodies nearer a configuration their joints allow"):  # fmt: skip
        load_model(path)


@pytest.mark.parametrize(
    "inertia, message",
    [
        ([[0.3, 0.05, 0], [0.01, 0.2, 0], [0, 0, 0.4]], "'upper'.*inertia is not symmetric"),
        ([[0.3, 0, 0], [0, 0.2, 0], [0, 0, -0.4]], "'upper'.*inertia is not positive definite"),
        ([[0.3, 0, 0], [0, 0.2, 0], [0, 0, 0]], "'upper'.*inertia is not positive definite"),
    ],
)
def test_bad_inertia_names_body(tmp_path, inertia, message):
    """A non-physical inertia in a file is a ``ModelFileError`` at the body's JSON path, on one
    line; given by the caller (``inertia=``), a ``ValueError`` naming the body."""
    with pytest.raises(ModelFileError, match=r"^\$\.bodies\[1\]: body " + message + r"[^\n]*$"):
        load_model(_write(tmp_path, _native(**{"bodies/1/inertia": inertia})), assemble=False)
    with pytest.raises(ValueError, match=message.replace("upper", "body_1")):  # caller-supplied
        load_model(DATA / "revJoint.mdl", mass=[1.0], inertia=[inertia])


def test_traced_mass_points_to_tree_at():
    """A mass given to ``load_model`` under ``jax.grad`` is refused, saying how to do it."""
    with pytest.raises(ValueError, match=r"mass of body 'body_1': a traced value .*eqx\.tree_at\(lambda m: m\.bodies\.mass"):
        jax.grad(lambda m: load_model(DATA / "revJoint.mdl", mass=[m], inertia=[[1.0, 1.0, 1.0]]).bodies.mass[0])(1.0)


def test_non_orthonormal_rotation(tmp_path):
    bad = [[1, 0, 0], [0, 1.01, 0], [0, 0, 1]]
    with pytest.raises(ModelFileError, match=r"\$\.bodies\[2\]\.A: not a rotation matrix \(A\^T A - I up to 2\.01e-02\)"):
        load_model(_write(tmp_path, _native(**{"bodies/2/A": bad})), assemble=False)
    reflection = [[1, 0, 0], [0, 1, 0], [0, 0, -1]]
    with pytest.raises(ModelFileError, match=r"\$\.bodies\[1\]\.A: not a rotation matrix"):
        load_model(_write(tmp_path, _native(**{"bodies/1/A": reflection})), assemble=False)


@pytest.mark.parametrize(
    "source, message",
    [
        ("__import__('os')", "function '__import__' not allowed"),
        ("__import__('os').system('true')", "not allowed|unsupported syntax"),
        ("t.real", r"unsupported syntax 't\.real'"),
        ("sin.__globals__", "unsupported syntax"),
        ("np.os.system('x')", r"function 'np\.os\.system' not allowed"),
        ("(lambda: 1)()", "not allowed"),
        ("lambda t: t", "unsupported syntax"),
        ("[t for t in ()]", "unsupported syntax"),
        ("open('x')", "function 'open' not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("sin(t", "cannot parse"),
        ("", "non-empty"),
    ],
)
def test_unsafe_expressions_are_rejected(source, message):
    with pytest.raises(ExpressionError, match=message):
        Expression(source)


def test_unsafe_expression_in_file_names_path(tmp_path):
    path = _write(tmp_path, _native(**{"constraints/0/f": "__import__('os').getcwd()"}))
    with pytest.raises(ModelFileError, match=r"\$\.constraints\[0\]\.f: .*not allowed"):
        load_model(path, assemble=False)


def test_safe_expression_values_and_derivatives():
    e = Expression("cos(pi/4*cos(2*t) + pi/2) + 2^2 - np.sqrt(abs(-9)) + e**0 % 1")
    t = 0.3
    expected = math.cos(math.pi / 4 * math.cos(2 * t) + math.pi / 2) + 4 - 3 + 0.0
    assert abs(float(e(t)) - expected) < 1e-15
    value, first, _ = time_derivatives(e, jnp.asarray(t))
    h = 1e-6
    assert abs(first - (e(t + h) - e(t - h)) / (2 * h)) < 1e-8
    assert abs(jax.jit(e)(t) - e(t)) < 1e-15


def test_closed_loops_load_and_run_in_float32():
    """With x64 off, a closed loop from a model file (the four link) and from an MJCF file (a
    loop closed by ``connect``, a weld, a ball joint) assemble to float32's rounding level,
    not float64's, and generalized-alpha steps the MJCF one; it steps an arm whose joint limits
    and friction act too."""
    code = (
        "import warnings, jax.numpy as jnp\n"
        "import difflie as dl\n"
        "warnings.simplefilter('ignore')\n"
        f"four = dl.load_model({str(DATA / 'four_link.json')!r}, default_mass=1.0, default_inertia=[0.1, 0.1, 0.1])\n"
        f"loop = dl.load_model({str(DATA / 'loop.xml')!r})\n"
        "assert four.r0.dtype == loop.r0.dtype == jnp.float32\n"
        "sol = dl.simulate(loop, dl.GeneralizedAlpha(), 0.0, 0.01, 1e-3)\n"
        "o = sol.position[-1] - jnp.einsum('bij,bj->bi', sol.rotation[-1], loop.bodies.com)\n"
        "assert sol.position.dtype == jnp.float32 and float(jnp.abs(loop.constraint_residual(0.01, o, sol.rotation[-1])).max()) < 1e-5\n"
        "assert float(jnp.abs(dl.ball_joint_quaternions(loop, sol)[-1, 0, 1:]).max()) > 1e-4  # it moved\n"
        f"limits = dl.load_model({str(DATA / 'limits.xml')!r}, joint_limits=True, joint_friction=True, joint_couplings=True, joint_positions={{'shoulder': 0.35}})\n"
        "sol = dl.simulate(limits, dl.GeneralizedAlpha(), 0.0, 0.01, 1e-3)\n"
        "q = dl.joint_coordinates(limits, sol)\n"
        "assert q.dtype == jnp.float32 and 0.3 < float(q[-1, 0]) < 0.35  # pushed back towards its limit\n"
        "print('ok')\n"
    )
    assert run_float32(code).strip() == "ok"


# ------------------------------------------------------------------------------- names and bodies

EXAMPLE = Path(__file__).parents[1] / "examples" / "double_pendulum_3d.json"


def _example(tmp_path, edit):
    data = json.loads(EXAMPLE.read_text())
    edit(data)
    return _write(tmp_path, data)


def test_duplicate_joint_name_is_refused(tmp_path):
    """Two joints of one name would share their rows' names and joint_reactions' entry."""
    path = _example(tmp_path, lambda d: d["joints"][1].update(name="shoulder"))
    with pytest.raises(ModelFileError, match=r"^\$\.joints\[1\]\.name: duplicate joint name 'shoulder' \(also \$\.joints\[0\]\)$"):
        load_model(path)


def test_duplicate_constraint_name_is_refused(tmp_path):
    data = _native()
    data["constraints"] = [dict(data["constraints"][0]), dict(data["constraints"][0])]
    with pytest.raises(ModelFileError, match=r"^\$\.constraints\[1\]\.name: duplicate constraint name '.+' \(also \$\.constraints\[0\]\)$"):
        load_model(_write(tmp_path, data), assemble=False)


def test_unnamed_joints_stay_distinct(tmp_path):
    """Joints without names get names of their own (from their JSON paths)."""
    def unname(d):
        for j in d["joints"]:
            del j["name"]

    model = load_model(_example(tmp_path, unname))
    assert len({C.joint_name(n) for n in model.constraint_names}) == 2


def test_second_ground_body_is_named(tmp_path):
    path = _example(tmp_path, lambda d: d["bodies"].append({"name": "ground", "id": 9}))
    with pytest.raises(ModelFileError, match=r"^\$\.bodies\[3\]: a second ground body \(the first is \$\.bodies\[0\]\)"):
        load_model(path)


def test_joint_on_one_body_names_joint_and_body(tmp_path):
    path = _example(tmp_path, lambda d: d["joints"][1].update(body_j=1))
    with pytest.raises(ModelFileError, match=r"^\$\.joints\[1\] \('elbow'\): body_i and body_j are both body 'upper' \(id 1\)$"):
        load_model(path)
    path = _write(tmp_path, _native(**{"constraints/0/body_j": 0, "constraints/0/body_i": 0}))
    with pytest.raises(ModelFileError, match=r"^\$\.constraints\[0\] \('height'\): body_i and body_j are both the ground \(id 0\)$"):
        load_model(path)


def test_unknown_angle_driver_names_keyword_and_known_constraints():
    with pytest.raises(ValueError, match=r"angle_drivers: no constraint named 'nosuch'.*'driving-kk'"):
        load_model(DATA / "four_link.json", mass=[2.0, 1.0, 1.0], inertia=ANY_INERTIA, angle_drivers={"nosuch": {"theta": "t", "a_bar_j": [0, 0, 1]}})
    with pytest.raises(ValueError, match=r"drivers: no constraint named 'nosuch'.*has no basic constraints"):
        load_model(EXAMPLE, drivers={"nosuch": "t"})


def test_joints_not_a_list_names_the_key(tmp_path):
    path = _example(tmp_path, lambda d: d.update(joints={"a": 1}))
    with pytest.raises(ModelFileError, match=r"^\$\.joints: expected a list"):
        load_model(path)


ACTUATED_ARM = """<mujoco><default><geom contype="0" conaffinity="0"/></default><worldbody>
  <body name="upper"><joint name="shoulder" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.04"/>
  <body name="lower" pos="0 0 -0.5"><joint name="elbow" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.04"/>
  </body></body></worldbody>
  <actuator><motor name="m1" joint="shoulder" gear="2"/><position name="p2" joint="elbow" kp="20"/></actuator></mujoco>"""


def test_load_model_inside_jit(tmp_path):
    """``load_model`` called inside a ``jit`` (the traced torques or controls of a loss) builds
    the model it builds outside: a file whose fixed tendons or actuators make static structure
    from arrays, a loop it assembles, a JSON file. Before, the trace made those arrays abstract
    and loading raised a ``TracerArrayConversionError``."""
    arm = tmp_path / "arm.xml"
    arm.write_text(ACTUATED_ARM)
    cases = [(ROOT_EXAMPLE, {}), (DATA / "limits.xml", {}), (DATA / "loop.xml", {}), (arm, {"controls": {"m1": 0.5, "p2": 0.3}})]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path, kwargs in cases:
            eager = jax.tree.leaves(load_model(path, **kwargs))
            traced = jax.jit(lambda path=path, kwargs=kwargs: jax.tree.leaves(load_model(path, **kwargs)))()
            assert len(traced) == len(eager), path
            for a, b in zip(traced, eager):
                np.testing.assert_array_equal(a, b, err_msg=str(path))
        # the controls traced by the caller stay leaves of the model
        controls = jax.jit(lambda c: [x for x in jax.tree.leaves(load_model(arm, controls={"m1": c[0], "p2": c[1]})) if x.shape == (2,)])
        assert any(np.array_equal(x, [0.5, 0.3]) for x in controls(jnp.array([0.5, 0.3])))
