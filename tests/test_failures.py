"""No failure passes silently: with ``throw=True`` an unsuccessful run raises eagerly (naming the
step, time and reason), under ``jit`` and under ``vmap``; non-finite inputs are refused before
running where they are concrete and fail at step 0 where they are traced."""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difflie as dl

TOP = dl.models.heavy_top()
PID = dl.PIDController(rtol=1e-6, atol=1e-6)


def _short_top(r0):
    """Five RKMK4 steps of the heavy top from COM position ``r0`` (traced or not)."""
    return dl.simulate(eqx.tree_at(lambda m: m.r0, TOP, r0), dl.RKMK4(), 0.0, 5e-3, 1e-3).position


def test_newton_failure_raises_eagerly_with_step_and_time():
    with pytest.raises(dl.SimulationError, match=r"Newton iteration did not converge at step 0 \(t = 0 s\): residual"):
        dl.simulate(dl.models.four_link(), dl.BackwardEuler(), 0.0, 1.0, 0.5)


def test_newton_failure_raises_under_jit():
    run = jax.jit(lambda m: dl.simulate(m, dl.BackwardEuler(), 0.0, 1.0, 0.5).position)
    with pytest.raises(Exception, match="Newton iteration did not converge"):
        jax.block_until_ready(run(dl.models.four_link()))
    quiet = jax.jit(lambda m: dl.simulate(m, dl.BackwardEuler(), 0.0, 1.0, 0.5, throw=False))(dl.models.four_link())
    assert quiet.failure_message().startswith("Newton iteration did not converge at step 0 (t = 0 s)")


def test_nan_row_of_a_vmap_batch_raises():
    omegas = jnp.ones((3, 3)).at[1, 0].set(jnp.nan)
    run = jax.jit(jax.vmap(lambda w: dl.simulate(dl.models.heavy_top(omega0=w), dl.RKMK4(), 0.0, 5e-3, 1e-3).position[-1]))
    with pytest.raises(Exception, match="NaN or Inf"):
        jax.block_until_ready(run(omegas))
    ok = run(jnp.ones((3, 3)))  # the same compiled function, finite inputs: no error
    assert bool(jnp.all(jnp.isfinite(ok)))


def test_a_batch_says_which_runs_failed():
    """``throw=False`` and ``failure_message`` on a batched solution: how many failed, their
    indices, and the first one's reason."""
    run = jax.vmap(lambda w: dl.simulate(dl.models.heavy_top(omega0=w), dl.RKMK4(), 0.0, 5e-3, 1e-3, throw=False))
    sol = run(jnp.ones((4, 3)).at[1, 0].set(jnp.nan).at[3, 2].set(jnp.inf))
    message = sol.failure_message()
    assert message.startswith("2 of 4 runs failed (batch indices 1, 3); run 1: NaN or Inf"), message
    assert run(jnp.ones((2, 3))).failure_message() == ""


def test_simulate_batch_raises_naming_the_failed_runs():
    """``simulate_batch`` with ``throw=True``: eagerly a ``SimulationError`` naming the failed
    runs; traced, the first failed run's reason on the outputs."""
    def batch(w):
        return dl.batch.simulate_batch(w, dl.RKMK4(), 0.0, 5e-3, 1e-3, make_model=_spinning_top)

    bad = jnp.ones((4, 3)).at[1, 0].set(jnp.nan).at[3, 2].set(jnp.inf)
    with pytest.raises(dl.SimulationError, match=r"^2 of 4 runs failed \(batch indices 1, 3\); run 1: NaN or Inf"):
        batch(bad)
    assert batch(jnp.ones((4, 3))).failure_message() == ""
    with pytest.raises(Exception, match="NaN or Inf"):
        jax.block_until_ready(jax.jit(lambda w: batch(w).position)(bad))


def _spinning_top(w):
    return dl.models.heavy_top(omega0=w)


def test_nan_initial_state_refused_eagerly_and_fails_under_jit():
    bad = TOP.r0.at[0, 0].set(jnp.nan)
    with pytest.raises(ValueError, match="r0 of body 'top' is not finite"):
        _short_top(bad)
    with pytest.raises(Exception, match="NaN or Inf"):
        jax.block_until_ready(jax.jit(_short_top)(bad))
    sol = jax.jit(lambda r0: dl.simulate(eqx.tree_at(lambda m: m.r0, TOP, r0), dl.RKMK4(), 0.0, 5e-3, 1e-3, throw=False))(bad)
    assert sol.result == dl.RESULTS.nonfinite and int(sol.stats.failure_step) == 0


def test_nan_save_time_refused_eagerly_and_fails_under_jit():
    ts = jnp.array([0.01, jnp.nan, 0.05])
    with pytest.raises(ValueError, match="SaveAt\\(ts\\): times must be finite"):
        dl.simulate(TOP, dl.Dopri5(), 0.0, 0.05, 1e-3, saveat=dl.SaveAt(ts=ts), stepsize_controller=PID)

    def run(ts, throw=True):
        return dl.simulate(TOP, dl.Dopri5(), 0.0, 0.05, 1e-3, saveat=dl.SaveAt(ts=ts), stepsize_controller=PID, throw=throw)

    with pytest.raises(Exception, match="NaN or Inf"):
        jax.block_until_ready(jax.jit(run)(ts).ts)
    assert jax.jit(lambda ts: run(ts, throw=False))(ts).result == dl.RESULTS.nonfinite
    with pytest.raises(ValueError, match="dt must be finite"):
        dl.simulate(TOP, dl.RKMK4(), 0.0, 0.05, jnp.inf)


def test_solver_refuses_a_model_before_compiling():
    with pytest.raises(ValueError, match="constraints"):
        dl.simulate(dl.models.slider_crank(), dl.RKMK4(), 0.0, 0.1, 1e-3)
    with pytest.raises(ValueError, match="one body, got 3 bodies"):
        dl.simulate(dl.models.slider_crank(), dl.DQVI(), 0.0, 0.1, 1e-3)


def test_saves_after_a_failed_step_are_unused_slots():
    """With ``throw=False`` the saves after the first failed step hold time ``inf`` and NaN
    states (as an adaptive run's unused slots), those before it stay, and ``stats.steps``
    counts the steps that succeeded: the driven four link at h = 0.1 s, too large a step for
    its motion, fails at its fourth step."""
    model = dl.models.four_link()
    sol = dl.simulate(model, dl.BackwardEuler(), 0.0, 1.0, 0.1, saveat=dl.SaveAt(steps=True), throw=False)
    k = int(sol.stats.failure_step)
    assert sol.result == dl.RESULTS.newton_failed and int(sol.stats.steps) == k == 3
    assert np.all(np.isfinite(np.asarray(sol.ts[: k + 1]))) and np.all(np.isinf(np.asarray(sol.ts[k + 1 :])))
    assert np.all(np.isnan(np.asarray(sol.position[k + 1 :]))) and np.all(np.isfinite(np.asarray(sol.position[: k + 1])))
    ends = dl.simulate(model, dl.BackwardEuler(), 0.0, 1.0, 0.1, saveat=dl.SaveAt(t0=True, t1=True), throw=False)
    assert np.isfinite(float(ends.ts[0])) and np.isinf(float(ends.ts[1])) and np.all(np.isnan(np.asarray(ends.position[1])))


def test_a_non_finite_parameter_is_named_before_compiling():
    """A NaN put into a mass, the gravity or a force element after construction (``eqx.tree_at``,
    as identification does) is refused by ``simulate`` naming its path, before compiling."""
    model = dl.models.four_link()
    for where, value, path in [(lambda m: m.bodies.mass, model.bodies.mass.at[1].set(jnp.nan), r"model\.bodies\.mass\[1\]"),
                               (lambda m: m.gravity, model.gravity.at[2].set(jnp.inf), r"model\.gravity\[2\]")]:  # fmt: skip
        with pytest.raises(ValueError, match=path + " is not finite"):
            dl.simulate(eqx.tree_at(where, model, value), dl.GeneralizedAlpha(), 0.0, 0.01, 1e-3)


def _four_bar(kinds):
    """A planar four-bar (cranks 0.3, 0.8, 0.6 m over a 0.7 m ground link, in the x-z plane)
    whose joints A, B, C, D are revolute about y or, where ``kinds`` says, universal or
    spherical."""
    from difflie.constraints import GROUND, revolute_at, spherical_at, universal_at

    A, B, C, D = (np.array(p) for p in ([0, 0, 0], [0.15, 0, 0.2598076211353316], [0.8874252916, 0, 0.5699752347], [0.7, 0, 0]))
    ends = [(A, B), (B, C), (D, C)]
    R0 = [np.asarray(dl.SO3.exp(jnp.array([0.0, np.arctan2(*(q - p)[[0, 2]]), 0.0])).as_matrix()) for p, q in ends]
    bodies = dl.RigidBody(jnp.array([1.0, 2.0, 1.5]), jnp.array([np.diag([0.01, 0.01, 1e-4])] * 3), names=("crank", "coupler", "rocker"))
    free = dl.Model(bodies, r0=jnp.array([(p + q) / 2 for p, q in ends]), R0=jnp.array(R0))
    y = (0.0, 1.0, 0.0)
    make = {"revolute": lambda i, j, P, n: revolute_at(free, i, j, P, y, name=n),
            "universal": lambda i, j, P, n: universal_at(free, i, j, P, y, np.cross(C - B, y) / np.linalg.norm(np.cross(C - B, y)), name=n),
            "spherical": lambda i, j, P, n: spherical_at(free, i, j, P, name=n)}  # fmt: skip
    pairs = [(GROUND, 0, A, "A"), (0, 1, B, "B"), (1, 2, C, "C"), (GROUND, 2, D, "D")]
    return free, [make[k](*pair) for k, pair in zip(kinds, pairs)]


def test_redundant_constraints_are_named():
    """A planar four-bar on four revolute joints is overconstrained in space (20 rows, 17
    independent): ``connect`` refuses it naming the joints, and so does ``simulate`` of a model
    built without ``connect`` (it failed with 'NaN in the state at step 0'); with a universal
    and a spherical joint (17 rows) it runs."""
    from difflie.constraints import ConstraintSet, connect

    free, joints = _four_bar(["revolute"] * 4)
    with pytest.raises(ValueError, match=r"connect: the constraints are redundant: 20 rows, 17 independent .*\['A', 'B', 'C', 'D'\]"):
        connect(free, joints)
    built = eqx.tree_at(lambda m: m.constraints, free, ConstraintSet([r for j in joints for r in j], 3), is_leaf=lambda x: x is None)
    with pytest.raises(dl.SimulationError, match="at step 0 .*the constraints are redundant: 20 rows, 17 independent"):
        dl.simulate(built, dl.GeneralizedAlpha(), 0.0, 0.01, 1e-3)
    free, joints = _four_bar(["revolute", "universal", "spherical", "revolute"])
    model = connect(free, joints)
    assert model.num_constraints == 17
    assert dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.01, 1e-3).result == dl.RESULTS.successful


@pytest.mark.slow  # the default run removes the same rows from a model file and an MJCF loop (test_equality)
def test_redundant_rows_removed_on_request():
    """``connect(..., redundant="remove")`` keeps the four-bar's common points and drops the
    direction rows of its last joints (C becomes universal, D spherical), naming them; the
    motion is that of the same four-bar built by hand as revolute, universal, spherical,
    revolute (README's advice) to Newton's tolerance, and all 20 rows of the four revolute
    joints hold along it. Refused: rows dependent only at a singular position (a rod on a
    spherical joint at its dead point for a distance row, where removing the row would free the
    rod), and a driver that drives a motion its joint locks."""
    from difflie.constraints import GROUND, ConstraintSet, connect, d, revolute_at, rotation_driver_at, spherical_at

    free, joints = _four_bar(["revolute"] * 4)
    with pytest.warns(UserWarning, match=r"connect: removed 3 of 20 constraint rows .*\['C_DP1_b', 'D_DP1_a', 'D_DP1_b'\] "
                                         r"\(joints \['C', 'D'\]\); they still hold after moving the mechanism"):  # fmt: skip
        model = connect(free, joints, redundant="remove")
    assert model.num_constraints == 17
    hand = connect(*_four_bar(["revolute", "universal", "spherical", "revolute"]))
    saves = dl.SaveAt(ts=np.linspace(0.0, 0.3, 7))
    ours, ref = (dl.simulate(m, dl.GeneralizedAlpha(), 0.0, 0.3, 1e-3, saveat=saves) for m in (model, hand))
    assert np.abs(np.asarray(ref.position[-1] - ref.position[0])).max() > 0.1  # it swings
    np.testing.assert_allclose(ours.position, ref.position, rtol=0, atol=1e-9)
    rows = ConstraintSet([r for j in joints for r in j], 3)
    origins = ours.position - jnp.einsum("sbij,bj->sbi", ours.rotation, free.bodies.com)
    assert float(jnp.abs(jax.vmap(lambda o, R: rows.residual(0.0, o, R))(origins, ours.rotation)).max()) < 1e-10

    rod = dl.Model(dl.RigidBody(jnp.ones(1), jnp.diag(jnp.array([1e-3, 0.1, 0.1]))[None]), r0=jnp.array([[0.5, 0.0, 0.0]]))
    dead = [spherical_at(rod, GROUND, 0, [0.0, 0.0, 0.0], name="pivot"),
            d(GROUND, jnp.array([2.0, 0.0, 0.0]), 0, jnp.array([0.5, 0.0, 0.0]), 1.0, name="tie")]  # fmt: skip
    with pytest.raises(ValueError, match=r"rows \['tie'\] depend on the others at t = 0.0 only: .* singular position"):
        connect(rod, dead, redundant="remove")
    bar = dl.Model(dl.RigidBody(jnp.ones(1), jnp.diag(jnp.array([1e-3, 0.1, 0.1]))[None]), r0=jnp.array([[0.5, 0.0, 0.0]]))
    turned = [revolute_at(bar, GROUND, 0, [0.0, 0.0, 0.0], [0.0, 0.0, 1.0], name="hinge"),
              rotation_driver_at(bar, GROUND, 0, [1.0, 0.0, 0.0], lambda t: t, name="roll")]  # fmt: skip
    with pytest.raises(ValueError, match=r"rows \['roll'\] depend on the other constraints .* cannot be removed"):
        connect(bar, turned, redundant="remove")


def test_rotor_inertias_need_an_implicit_solver():
    """A joint's rotor inertia acts through the accelerations (``JointInertia``): an explicit
    solver, which needs ``M`` block-diagonal, refuses it naming why."""
    two = dl.Model(dl.RigidBody(jnp.ones(2), jnp.stack([jnp.eye(3)] * 2)), r0=jnp.array([[0.0, 0, 0], [1.0, 0, 0]]))
    rotor = dl.forces.JointInertia(dl.forces.JointForce(0, 1, jnp.array([0.0, 0.0, 1.0])), jnp.array([0.1]))
    with pytest.raises(ValueError, match="rotor inertias, MJCF armature.*only the implicit solvers"):
        dl.simulate(eqx.tree_at(lambda m: m.forces, two, (rotor,)), dl.RKMK4(), 0.0, 0.01, 1e-3)


def test_redundant_rows_of_a_model_file(tmp_path, capsys):
    """The four-bar on four revolute joints as a model file: ``load_model`` refuses it, naming
    the way out, and with ``redundant="remove"`` removes the same three rows as ``connect``, also
    when its positions, rounded, leave it to be assembled;
    the command line's ``--remove-redundant`` is for model files only (not the built-in ones)."""
    import json

    from difflie.__main__ import main

    A, B, C, D = (np.array(p) for p in ([0, 0, 0], [0.15, 0, 0.2598076211353316], [0.8874252916, 0, 0.5699752347], [0.7, 0, 0]))
    bodies, joints = [{"name": "ground", "id": 0}], []
    for k, (p, q) in enumerate([(A, B), (B, C), (D, C)], start=1):
        phi, half = np.arctan2(*(q - p)[[0, 2]]), np.linalg.norm(q - p) / 2
        A_k = [[np.cos(phi), 0, np.sin(phi)], [0, 1, 0], [-np.sin(phi), 0, np.cos(phi)]]
        bodies.append({"name": f"link{k}", "id": k, "mass": 1.0, "inertia": [0.01, 0.01, 1e-4], "r": list((p + q) / 2), "A": A_k})
        joints.append(half)
    y, (h1, h2, h3) = [0.0, 1.0, 0.0], joints
    joint = lambda name, i, si, j, sj: {"name": name, "type": "revolute", "body_i": i, "s_bar_i": si, "axis_i": y,
                                        "body_j": j, "s_bar_j": sj, "axis_j": y}  # fmt: skip
    path = tmp_path / "four_bar.json"
    path.write_text(json.dumps({"bodies": bodies, "joints": [
        joint("A", 0, [0, 0, 0], 1, [0, 0, -h1]), joint("B", 1, [0, 0, h1], 2, [0, 0, -h2]),
        joint("C", 2, [0, 0, h2], 3, [0, 0, h3]), joint("D", 0, list(D), 3, [0, 0, -h3])]}))  # fmt: skip
    # The same file with its positions to six digits: off its joints by 1e-6, to be assembled,
    # which needs independent rows; the rows are named (or removed) before, not NaN after.
    rounded = tmp_path / "rounded.json"
    text = json.loads(path.read_text())
    for b in text["bodies"][1:]:
        b["r"] = [round(x, 6) for x in b["r"]]
    rounded.write_text(json.dumps(text))
    for file in (path, rounded):
        with pytest.raises(ValueError, match=r"the constraints are redundant: 20 rows, 17 independent .*redundant='remove'"):
            dl.load_model(file)
        with pytest.warns(UserWarning, match=r"removed 3 of 20 constraint rows .*\['C_DP1_b', 'D_DP1_a', 'D_DP1_b'\]"):
            model = dl.load_model(file, redundant="remove")
        assert model.num_constraints == 17
        origins = model.r0 - jnp.einsum("bij,bj->bi", model.R0, model.bodies.com)
        assert float(jnp.abs(model.constraint_residual(0.0, origins, model.R0)).max()) < 1e-12
    assert main(["simulate", "heavy-top", "--remove-redundant"]) == 2
    assert "--remove-redundant applies to model files (.json, .mdl, .urdf, MJCF .xml) only" in capsys.readouterr().err


def test_reducing_step_size_retries_failed_newton_steps():
    """``ReducingStepSize``: the heavy top at h = 1e-2 (1.5 rad of spin per step), where a fixed
    step's Newton iteration fails at t = 0.06 s, runs to t1 on halved steps that grow back to
    1e-2, every accepted step a converged one (the pivot held); where no step fails it is the
    fixed-step run; a step that fails at ``dtmin`` stops, naming the last Newton residual."""
    solver, reducing = dl.GeneralizedAlpha(), dl.ReducingStepSize()
    assert dl.simulate(TOP, solver, 0.0, 0.5, 1e-2, throw=False).result == dl.RESULTS.newton_failed
    sol = dl.simulate(TOP, solver, 0.0, 0.5, 1e-2, stepsize_controller=reducing, saveat=dl.SaveAt(steps=True), max_steps=4096)
    n = int(sol.stats.steps)
    assert int(sol.stats.rejected_steps) > 0 and float(sol.ts[n]) == 0.5
    dts = np.diff(np.asarray(sol.ts[: n + 1]))
    halvings = np.log2(1e-2 / dts[:-1])  # the last step ends at t1
    np.testing.assert_allclose(halvings, np.round(halvings), atol=1e-6)
    assert dts.max() <= 1e-2 * (1 + 1e-12) and np.any(np.diff(halvings) < 0)  # it grows back
    np.testing.assert_allclose(np.linalg.norm(np.asarray(sol.position[: n + 1, 0]), axis=-1), 1.0, atol=1e-9)
    fixed, same = (dl.simulate(TOP, solver, 0.0, 0.05, 1e-3, stepsize_controller=c) for c in (dl.ConstantStepSize(), reducing))
    assert int(same.stats.rejected_steps) == 0 and int(same.stats.steps) == 50
    np.testing.assert_allclose(same.position, fixed.position, atol=1e-13)
    with pytest.raises(dl.SimulationError, match=r"step size underflow .* rejected steps; the last try's Newton residual .* after \d+ iterations"):
        dl.simulate(TOP, solver, 0.0, 0.5, 1e-2, stepsize_controller=dl.ReducingStepSize(dtmin=5e-3))
    with pytest.raises(ValueError, match=r"decrease must lie in \(0, 1\), got 1.5"):
        dl.ReducingStepSize(decrease=1.5)


@pytest.mark.slow
def test_reducing_step_size_gradient_matches_finite_differences():
    """Reverse mode through retried steps (the heavy top at h = 1e-2 over 0.1 s, several steps
    rejected): the gradient of the COM's final x with respect to gravity is the central
    difference's, the accept pattern being the same for both."""

    def final_x(g):
        m = eqx.tree_at(lambda m: m.gravity, TOP, g)
        sol = dl.simulate(m, dl.GeneralizedAlpha(), 0.0, 0.1, 1e-2, stepsize_controller=dl.ReducingStepSize(), max_steps=256)
        return sol.position[-1, 0, 0], sol.stats.rejected_steps

    g0 = jnp.asarray(TOP.gravity)
    assert int(final_x(g0)[1]) > 0
    grad = jax.grad(lambda g: final_x(g)[0])(g0)
    fd = [(final_x(g0.at[i].add(1e-6))[0] - final_x(g0.at[i].add(-1e-6))[0]) / 2e-6 for i in range(3)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)


def test_a_failed_run_raises_under_jit_of_grad():
    """``jax.jit(jax.grad(loss))`` reads no primal output of ``simulate``: the error must ride on
    the derivatives, or a failed run gives a zero or NaN gradient without a word."""

    def loss(g, throw=True):
        model = eqx.tree_at(lambda m: m.gravity, dl.models.four_link(), g)
        return dl.simulate(model, dl.BackwardEuler(), 0.0, 1.0, 0.5, throw=throw).position[-1].sum()

    g = dl.models.four_link().gravity
    quiet = jax.jit(jax.grad(lambda g: loss(g, throw=False)))(g)  # what the error used to hide
    assert not bool(jnp.all(jnp.isfinite(quiet)) & jnp.any(quiet != 0))
    for grad in (jax.jit(jax.grad(loss)), jax.jit(jax.jacfwd(loss))):
        with pytest.raises(Exception, match="Newton iteration did not converge"):
            jax.block_until_ready(grad(g))
    good = jax.jit(jax.grad(lambda r0: _short_top(r0)[-1].sum()))(TOP.r0)  # a successful run: its gradient, unchanged
    eager = jax.grad(lambda r0: _short_top(r0)[-1].sum())(TOP.r0)
    np.testing.assert_array_equal(good, eager)


def test_bodies_and_rotations_are_checked_however_they_were_set():
    """``eqx.tree_at`` passes by the constructors' checks: ``simulate`` makes them again, by
    name where the values are concrete, at step 0 where they are traced (``vmap``, ``jit``)."""
    run = lambda m: dl.simulate(m, dl.RKMK4(), 0.0, 5e-3, 1e-3).position  # noqa: E731
    bad = {
        "mass must be positive": eqx.tree_at(lambda m: m.bodies.mass, TOP, jnp.array([-1.0])),
        "inertia is not symmetric": eqx.tree_at(lambda m: m.bodies.inertia, TOP, TOP.bodies.inertia.at[0, 0, 1].add(0.1)),
        "triangle inequality": eqx.tree_at(lambda m: m.bodies.inertia, TOP, jnp.diag(jnp.array([0.1, 0.1, 0.5]))[None]),
        "R0 of body 'top' is not a rotation matrix": eqx.tree_at(lambda m: m.R0, TOP, 1.1 * TOP.R0),
    }
    for message, model in bad.items():
        with pytest.raises(ValueError, match=message):
            run(model)
        with pytest.raises(Exception, match="not physical"):
            jax.block_until_ready(jax.jit(run)(model))
    masses = jnp.array([15.0, -15.0])
    with pytest.raises(Exception, match="not physical"):
        jax.block_until_ready(jax.jit(jax.vmap(lambda m: run(dl.models.heavy_top(mass=m))))(masses))
    ok = jax.jit(jax.vmap(lambda m: run(dl.models.heavy_top(mass=m))))(jnp.abs(masses))
    assert bool(jnp.all(jnp.isfinite(ok)))
    four_link = dl.models.four_link()  # the public codes' inertias are not physical, and say so
    assert not four_link.bodies.validate and bool(four_link.is_physical())


def test_traced_times_out_of_order_fail_at_step_0():
    run = jax.jit(lambda t1: dl.simulate(TOP, dl.RKMK4(), 0.0, t1, 1e-3, n_steps=5, throw=False))
    assert run(-5e-3).result == dl.RESULTS.empty_interval and run(5e-3).result == dl.RESULTS.successful
    adaptive = jax.jit(lambda dt: dl.simulate(TOP, dl.Dopri5(), 0.0, 5e-3, dt, stepsize_controller=PID, throw=False))
    assert adaptive(-1e-3).result == dl.RESULTS.empty_interval


def test_a_step_below_the_resolution_of_float32_times_is_refused():
    box = dl.models.torque_free(mass=jnp.float32(1.0), inertia=jnp.diag(jnp.array([5.3, 1.2, 4.4], jnp.float32)))
    assert box.bodies.mass.dtype == jnp.float32
    with pytest.raises(ValueError, match=r"dt = 1e-06 is below the resolution of float32 times near t = 1000"):
        dl.simulate(box, dl.RKMK4(), 1000.0, 1000.001, 1e-6)


def test_bad_bodies_and_model_arrays_are_named():
    b2 = dl.RigidBody(jnp.ones(2), jnp.stack([jnp.eye(3)] * 2))
    cases = [
        (lambda: dl.RigidBody("1.0", jnp.eye(3)), "mass must be numbers"),
        (lambda: dl.RigidBody(1.0, jnp.array([1.0, 2.0, 2.5])), r"3x3, got shape \(3,\) \(principal moments: jnp.diag"),
        (lambda: dl.RigidBody(jnp.array([1 + 1j]), jnp.eye(3)[None].astype(complex)), "must be real"),
        (lambda: dl.Model(b2, r0=jnp.zeros((3, 3))), r"r0 must have shape \(2, 3\) \(one per body\) or \(3,\), got \(3, 3\)"),
        (lambda: dl.Model(b2, gravity=[0.0, -9.81]), r"gravity must have shape \(3,\), got \(2,\)"),
        (lambda: dl.Model(b2, R0=jnp.eye(2)), r"R0 must have shape \(2, 3, 3\)"),
        (lambda: dl.simulate("heavy_top", dl.RKMK4(), 0.0, 0.01, 1e-3), "model must be a difflie model"),
        (lambda: dl.models.heavy_top(omega0=jnp.ones(4)), r"heavy_top: omega0 must have shape \(3,\), got \(4,\)"),
        (lambda: dl.models.heavy_top(mass=jnp.array([15.0])), r"mass must have shape \(\), got \(1,\)"),
        (lambda: jax.vmap(lambda w: dl.models.heavy_top(omega0=w))(jnp.ones((3, 5))), r"omega0 must have shape \(3,\), got \(5,\)"),
        (lambda: dl.models.heavy_top_spherical(inertia=jnp.ones(3)), r"inertia must have shape \(3, 3\)"),
        (lambda: dl.models.torque_free(v0=jnp.zeros(2)), r"torque_free: v0 must have shape \(3,\)"),
    ]
    for make, message in cases:
        with pytest.raises(ValueError, match=message):
            make()


def test_a_driver_outside_its_domain_is_named():
    from difflie.constraints import GROUND, connect, revolute_at, rotation_driver_at

    free = dl.Model(dl.RigidBody(jnp.ones(1), jnp.eye(3)[None]), r0=jnp.array([[0.5, 0.0, 0.0]]))
    theta = lambda t: jnp.sqrt(0.005 - t) - jnp.sqrt(0.005)  # noqa: E731 - undefined after t = 0.005 s
    joints = [revolute_at(free, GROUND, 0, (0, 0, 0), (0, 0, 1), name="hinge"), rotation_driver_at(free, GROUND, 0, (0, 0, 1), theta, name="drive")]
    with pytest.warns(UserWarning, match="initial velocities inconsistent"):
        model = connect(free, joints)
    with pytest.raises(dl.SimulationError, match=r"at step 5 .* the driver of 'drive' is NaN or Inf at t = 0.006 s \(outside its domain\)"):
        dl.simulate(model, dl.GeneralizedAlpha(), 0.0, 0.01, 1e-3)


def test_a_start_that_moves_the_bodies_is_said():
    pendulum = dl.models.double_pendulum()
    for edit, message in ((lambda m: m.r0 + 0.3, "moved the COM of body 'rod1' by 4.495e-01 m"),
                          (lambda m: m.v0 + 3.0, "changed its velocities by up to 3.000e\\+00")):  # fmt: skip
        field = (lambda m: m.r0) if "COM" in message else (lambda m: m.v0)
        with pytest.warns(UserWarning, match=f"simulate: the initial state does not satisfy the constraints; .*{message}"):
            dl.simulate(eqx.tree_at(field, pendulum, edit(pendulum)), dl.GeneralizedAlpha(), 0.0, 5e-3, 1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a consistent model starts where it is, without a word
        dl.simulate(pendulum, dl.GeneralizedAlpha(), 0.0, 5e-3, 1e-3)


def test_a_run_that_blows_up_names_the_fastest_bodies():
    bodies = dl.RigidBody(jnp.ones(2), jnp.stack([jnp.diag(jnp.array([1.0, 2.0, 3.0]))] * 2), names=("calm", "wild"))
    model = dl.Model(bodies, r0=jnp.array([[0.0, 0, 0], [1.0, 0, 0]]), omega0=jnp.array([[0.0, 0, 1], [1e200, 2e200, 1e200]]), gravity=(0, 0, 0))
    with pytest.raises(dl.SimulationError, match=r"at step 0 .*at the last save before it \(t = 0 s\) body 'wild' turned fastest \(a component of 2e\+200"):
        dl.simulate(model, dl.RKMK4(), 0.0, 0.05, 1e-2, saveat=dl.SaveAt(steps=True))


def _pushed_pair(torque) -> dl.Model:
    """Two free bodies, the second driven about z by ``torque(t)`` on a joint to the ground."""
    bodies = dl.RigidBody(jnp.ones(2), jnp.stack([jnp.eye(3)] * 2), names=("still", "pushed"))
    joint = dl.forces.JointForce(-1, 1, jnp.array([0.0, 0.0, 1.0]), torque=lambda t: jnp.array([torque(t)]))
    return dl.Model(bodies, r0=jnp.array([[0.0, 0, 0], [1.0, 0, 0]]), forces=[dl.forces.DeadLoad(jnp.zeros((2, 3)), jnp.zeros((2, 3))), joint])


def test_a_non_finite_force_is_named_with_its_body():
    """At step 0 (the model's state), or at a saved step: the element and body whose wrench is
    NaN there, at the step's start or end time. Before, only "a force, driver or law of the
    model that gives NaN or Inf there"."""
    at_start = _pushed_pair(lambda t: jnp.log(t - 0.01))
    with pytest.raises(dl.SimulationError, match=r"at step 0 \(t = 0 s\); forces\[1\] \(JointForce\) gives a NaN or Inf wrench on body 'pushed' at t = 0 s$"):
        dl.simulate(at_start, dl.GeneralizedAlpha(), 0.0, 0.02, 1e-3)
    later = _pushed_pair(lambda t: jnp.sqrt(0.0105 - t))
    with pytest.raises(dl.SimulationError, match=r"at step 10 \(t = 0.01 s\); forces\[1\] \(JointForce\) gives a NaN or Inf wrench on body 'pushed' at t = 0.011 s"):
        dl.simulate(later, dl.RKMK4(), 0.0, 0.02, 1e-3, saveat=dl.SaveAt(steps=True))
    with pytest.raises(dl.SimulationError, match=r"at step 10 .*; with saveat=SaveAt\(steps=True\) this message names the force element"):
        dl.simulate(later, dl.RKMK4(), 0.0, 0.02, 1e-3)
