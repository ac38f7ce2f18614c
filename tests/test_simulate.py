"""simulate(): save modes, adaptive control, result codes, jit/vmap/grad, input errors."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from difflie.models import heavy_top, torque_free
from difflie.simulate import ConstantStepSize, PIDController, SaveAt, Solution, simulate
from difflie.solvers import RESULTS, Dopri5, RKMK4


REF = {  # COM of the heavy top, Holzinger, Arnold & Gerstmayr 2024, §4.1.
    0.2: np.array([0.605550561377, 0.598957681795, -0.523983027430]),
    1.0: np.array([0.173343964098, 0.640088592070, -0.748490791134]),
}
TOP = heavy_top()


@pytest.fixture(scope="module")
def steps_solution():
    return simulate(TOP, RKMK4(), 0.0, 0.2, 1e-3, saveat=SaveAt(steps=True))


def test_save_steps(steps_solution):
    sol = steps_solution
    assert isinstance(sol, Solution) and sol.ts.shape == (201,) and sol.position.shape == (201, 1, 3)
    np.testing.assert_allclose(sol.ts, np.linspace(0, 0.2, 201), atol=1e-15)
    np.testing.assert_allclose(sol.position[0, 0], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(sol.velocity[0, 0], [4.61538, 0.0, 0.0], atol=1e-12)  # omega0 x X
    assert 1e-5 < np.linalg.norm(sol.position[-1, 0] - REF[0.2]) < 1e-4  # RK4 at h = 1e-3
    assert int(sol.stats.steps) == 200 and int(sol.stats.evaluations) == 800
    assert int(sol.stats.rejected_steps) == 0 and int(sol.stats.newton_iterations) == 0
    assert sol.result == RESULTS.successful
    assert sol.body_names == ("top",)


def test_save_t0_t1_and_no_checkpoint(steps_solution):
    a = simulate(TOP, RKMK4(), 0.0, 0.2, 1e-3, saveat=SaveAt(t0=True, t1=True))
    b = simulate(TOP, RKMK4(), 0.0, 0.2, 1e-3, checkpoint=False)
    np.testing.assert_allclose(a.ts, [0.0, 0.2])
    # The same steps whatever is saved: equal up to the rounding of differently fused programs
    # (bitwise on a CPU, one ulp on an H100); one step of RK4 at h = 1e-3 moves the top by ~5e-3.
    np.testing.assert_allclose(a.position[1], steps_solution.position[-1], rtol=0, atol=1e-14)
    np.testing.assert_allclose(b.position[0], steps_solution.position[-1], rtol=0, atol=1e-14)
    np.testing.assert_array_equal(a.rotation[0], steps_solution.rotation[0])


def test_save_ts_on_and_off_grid(steps_solution):
    ts = np.array([0.0, 0.05, 0.1234, 0.2])
    sol = simulate(TOP, RKMK4(), 0.0, 0.2, 1e-3, saveat=SaveAt(ts=ts))
    np.testing.assert_allclose(sol.ts, ts)
    # On-grid save times give the uniform trajectory exactly (before the extra step end).
    np.testing.assert_array_equal(sol.position[:2], steps_solution.position[np.array([0, 50])])
    # The off-grid one is a short step from the grid: RK4-accurate against a Dopri5 reference.
    ref = simulate(TOP, Dopri5(), 0.0, 0.2, 1e-3, saveat=SaveAt(ts=ts),
                   stepsize_controller=PIDController(rtol=1e-12, atol=1e-12))  # fmt: skip
    np.testing.assert_allclose(ref.position[-1, 0], REF[0.2], atol=1e-10)
    assert np.max(np.abs(sol.position - ref.position)) < 1e-4  # the RK4 error at h = 1e-3
    np.testing.assert_allclose(sol.position[-1], steps_solution.position[-1], atol=1e-6)


def test_adaptive_dopri5_reaches_1e8():
    sol = simulate(TOP, Dopri5(), 0.0, 1.0, 1e-1, stepsize_controller=PIDController(rtol=1e-10, atol=1e-10))
    err = np.linalg.norm(sol.position[0, 0] - REF[1.0])
    steps, rejected = int(sol.stats.steps), int(sol.stats.rejected_steps)
    print(f"adaptive Dopri5 rtol=atol=1e-10: COM error {err:.2e}, {steps} steps, {rejected} rejected")
    assert err < 1e-8
    assert rejected >= 1  # dt0 = 0.1 is far too large: the first attempts are rejected
    assert int(sol.stats.evaluations) == 6 * (steps + rejected)  # FSAL: 6 new stages per attempt
    assert float(sol.ts[0]) == 1.0


def test_adaptive_error_follows_tolerance():
    errs = []
    for tol in (1e-6, 1e-8, 1e-10):
        sol = simulate(TOP, Dopri5(), 0.0, 1.0, 1e-1, stepsize_controller=PIDController(rtol=tol, atol=tol))
        errs.append(np.linalg.norm(sol.position[0, 0] - REF[1.0]))
    assert errs[0] > errs[1] > errs[2]
    assert errs[0] / errs[2] > 100


def test_adaptive_save_steps_and_ts():
    ctrl = PIDController(rtol=1e-6, atol=1e-6, pcoeff=0.1, icoeff=0.3)
    sol = simulate(TOP, Dopri5(), 0.0, 0.2, 1e-3, saveat=SaveAt(steps=True), stepsize_controller=ctrl, max_steps=400)
    n = int(sol.stats.steps)
    ts = np.asarray(sol.ts)
    assert ts.shape == (401,) and ts[0] == 0 and ts[n] == pytest.approx(0.2) and np.all(np.isinf(ts[n + 1 :]))
    assert np.all(np.diff(ts[: n + 1]) > 0)
    assert np.linalg.norm(sol.position[n, 0] - REF[0.2]) < 1e-4
    sol2 = simulate(TOP, Dopri5(), 0.0, 0.2, 1e-3, saveat=SaveAt(ts=jnp.array([0.0, 0.07, 0.2])), stepsize_controller=ctrl)
    np.testing.assert_allclose(sol2.ts, [0.0, 0.07, 0.2])
    np.testing.assert_allclose(sol2.position[-1, 0], REF[0.2], atol=1e-4)


def test_max_steps_and_throw():
    ctrl = PIDController(rtol=1e-8, atol=1e-8)
    sol = simulate(TOP, Dopri5(), 0.0, 1.0, 1e-3, stepsize_controller=ctrl, max_steps=20, throw=False)
    assert sol.result == RESULTS.max_steps_reached
    with pytest.raises(Exception, match="max_steps"):
        simulate(TOP, Dopri5(), 0.0, 1.0, 1e-3, stepsize_controller=ctrl, max_steps=20)


def test_dt_underflow():
    ctrl = PIDController(rtol=1e-14, atol=1e-14, dtmin=1e-2)
    sol = simulate(TOP, Dopri5(), 0.0, 1.0, 1e-2, stepsize_controller=ctrl, throw=False)
    assert sol.result == RESULTS.dt_underflow


def test_nonfinite_reported():
    # RK4 on the unstable-rotation example diverges at h = 1/10 (Holzinger, Gerstmayr & Schöberl, Sect. 6).
    sol = simulate(torque_free(), RKMK4(), 0.0, 3.0, 0.1, throw=False)
    assert sol.result == RESULTS.nonfinite
    with pytest.raises(Exception, match="NaN or Inf"):
        simulate(torque_free(), RKMK4(), 0.0, 3.0, 0.1)


def test_bad_input():
    with pytest.raises(ValueError, match="t1 > t0"):
        simulate(TOP, RKMK4(), 1.0, 0.0, 1e-3)
    with pytest.raises(ValueError, match="dt must be positive"):
        simulate(TOP, RKMK4(), 0.0, 1.0, -1e-3)
    with pytest.raises(ValueError, match="at least one"):
        SaveAt()
    with pytest.raises(ValueError, match="increasing"):
        simulate(TOP, RKMK4(), 0.0, 1.0, 1e-3, saveat=SaveAt(ts=[0.5, 0.2]))
    with pytest.raises(ValueError, match=r"lie in \[t0, t1\]"):
        simulate(TOP, RKMK4(), 0.0, 1.0, 1e-3, saveat=SaveAt(ts=[0.5, 2.0]))
    with pytest.raises(ValueError, match="no error estimate"):
        simulate(TOP, RKMK4(), 0.0, 1.0, 1e-3, stepsize_controller=PIDController(rtol=1e-6, atol=1e-6))
    with pytest.raises(ValueError, match="both be zero"):
        PIDController(rtol=0.0, atol=0.0)
    with pytest.raises(ValueError, match="n_steps"):
        jax.jit(lambda t1: simulate(TOP, RKMK4(), 0.0, t1, 1e-3).ts)(1.0)
    with pytest.raises(ValueError, match="PIDController needs dt"):
        simulate(TOP, Dopri5(), 0.0, 1.0, None, stepsize_controller=PIDController(rtol=1e-6, atol=1e-6))


def test_n_steps_without_dt():
    """With ``n_steps`` the fixed steps need no ``dt`` (``dt=None``), traced end time included;
    before, ``None`` reached ``jnp.asarray`` ("None is not a valid value for jnp.array")."""
    sol = simulate(TOP, RKMK4(), 0.0, 0.01, None, n_steps=10)
    ref = simulate(TOP, RKMK4(), 0.0, 0.01, 1e-3)
    np.testing.assert_array_equal(sol.position, ref.position)
    ts = jax.jit(lambda t1: simulate(TOP, RKMK4(), 0.0, t1, None, n_steps=10).ts)(0.01)
    np.testing.assert_allclose(ts, [0.01])
    with pytest.raises(ValueError, match="checkpoint must be"):
        simulate(TOP, RKMK4(), 0.0, 1.0, 1e-3, checkpoint="sqrt")
    with pytest.raises(ValueError, match="AbstractSolver"):
        simulate(TOP, "rk4", 0.0, 1.0, 1e-3)


# -- transformations ---------------------------------------------------------------------------


def _final_com(omega_y, mass=15.0, checkpoint=True):
    model = heavy_top(omega0=jnp.stack([0.0, omega_y, -4.61538]), mass=mass)
    return simulate(model, RKMK4(), 0.0, 0.1, 1e-3, checkpoint=checkpoint).position[0, 0]


def test_jit_and_vmap():
    ws = jnp.array([150.0, 140.0, 130.0])
    batched = jax.jit(jax.vmap(_final_com))(ws)
    single = jnp.stack([_final_com(w) for w in ws])
    np.testing.assert_allclose(batched, single, atol=1e-12)
    model_in = jax.jit(lambda m: simulate(m, RKMK4(), 0.0, 0.1, 1e-3).position)(TOP)
    np.testing.assert_allclose(model_in[0, 0], single[0], atol=1e-13)


def test_grad_matches_finite_differences():
    loss = lambda w, m, ck=True: jnp.dot(_final_com(w, m, ck), jnp.array([1.0, 2.0, 3.0]))  # noqa: E731
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))  # one program for both
    g = value_and_grad(150.0, 15.0)[1]
    for ck in (False, "steps"):
        g_other = jax.jit(jax.grad(lambda w, m: loss(w, m, ck), argnums=(0, 1)))(150.0, 15.0)
        np.testing.assert_allclose(g, g_other, rtol=1e-12)
    eps = 1e-5
    fd_w = (value_and_grad(150.0 + eps, 15.0)[0] - value_and_grad(150.0 - eps, 15.0)[0]) / (2 * eps)
    fd_m = (value_and_grad(150.0, 15.0 + eps)[0] - value_and_grad(150.0, 15.0 - eps)[0]) / (2 * eps)
    np.testing.assert_allclose(g, [fd_w, fd_m], rtol=1e-6)
    assert abs(float(g[1])) > 1e-3  # the mass matters (gravity torque)


@pytest.mark.slow
def test_adaptive_grad_matches_finite_differences():
    ctrl = PIDController(rtol=1e-11, atol=1e-11)

    def loss(w):
        model = heavy_top(omega0=jnp.stack([0.0, w, -4.61538]))
        return jnp.dot(simulate(model, Dopri5(), 0.0, 0.1, 1e-3, stepsize_controller=ctrl).position[0, 0], jnp.array([1.0, 2.0, 3.0]))

    g = jax.jit(jax.grad(loss))(150.0)
    eps = 1e-4
    fd = (loss(150.0 + eps) - loss(150.0 - eps)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def test_constant_step_controller_is_default():
    assert isinstance(ConstantStepSize(), eqx.Module)


def test_progress_reports_increasing_times_up_to_t1_and_changes_nothing():
    seen = []
    report = lambda t, t1: seen.append((float(t), float(t1)))  # noqa: E731
    with_bar = simulate(TOP, RKMK4(), 0.0, 0.2, 1e-3, progress=report)
    plain = simulate(TOP, RKMK4(), 0.0, 0.2, 1e-3)
    times = [t for t, _ in seen]
    assert len(times) == 20 and np.all(np.diff(times) > 0), times  # 200 steps: 20 chunks of 10, none left over
    assert times[-1] == pytest.approx(0.2, abs=1e-15) and all(t1 == 0.2 for _, t1 in seen)
    np.testing.assert_array_equal(with_bar.rotation, plain.rotation)
    seen.clear()
    pid = PIDController(rtol=1e-8, atol=1e-8)
    adaptive = simulate(TOP, Dopri5(), 0.0, 0.2, 0.01, stepsize_controller=pid, max_steps=1000, progress=report)
    times = [t for t, _ in seen]
    assert len(times) >= 2 and np.all(np.diff(times) > 0) and times[-1] == pytest.approx(0.2)
    assert int(adaptive.stats.steps) // 10 <= len(times) <= int(adaptive.stats.steps) // 10 + 1
    with pytest.raises(ValueError, match="progress"):
        simulate(TOP, RKMK4(), 0.0, 0.2, 1e-3, progress="yes")


def test_failures_say_which_step_and_time():
    blown = simulate(TOP, RKMK4(), 0.0, 200.0, 0.5, throw=False)  # far too large a step: NaN
    assert blown.result == RESULTS.nonfinite
    k, t = int(blown.stats.failure_step), float(blown.stats.failure_time)
    assert k >= 1 and t == pytest.approx(0.5 * k)
    assert blown.failure_message() == f"NaN or Inf in the state or the times at step {k} (t = {t:.6g} s)"
    ok = simulate(TOP, RKMK4(), 0.0, 0.1, 1e-2)
    assert int(ok.stats.failure_step) == -1 and ok.failure_message() == ""
    tiny = PIDController(rtol=1e-300, atol=1e-300)
    stuck = simulate(TOP, Dopri5(), 0.0, 1.0, 0.1, stepsize_controller=tiny, throw=False)
    assert stuck.result == RESULTS.dt_underflow and int(stuck.stats.steps) == 0
    assert stuck.failure_message().startswith("step size underflow") and "t = 0 s" in stuck.failure_message()


def test_newton_failure_reports_time_iterations_and_residual():
    from difflie.models import heavy_top_spherical
    from difflie.solvers.generalized_alpha import GeneralizedAlpha

    sol = simulate(heavy_top_spherical(), GeneralizedAlpha(max_iterations=1), 0.0, 0.05, 1e-2, throw=False)
    assert sol.result == RESULTS.newton_failed
    s = sol.stats
    assert int(s.failure_step) == 0 and float(s.failure_time) == 0.0 and int(s.failure_iterations) == 1
    assert 0 < float(s.failure_residual) < 1e3
    message = sol.failure_message()
    assert message.startswith("Newton iteration did not converge at step 0 (t = 0 s): residual ")
    assert message.endswith("after 1 iterations")
    with pytest.raises(Exception, match="Newton iteration did not converge"):
        simulate(heavy_top_spherical(), GeneralizedAlpha(max_iterations=1), 0.0, 0.05, 1e-2)


@pytest.mark.parametrize(
    "n,chunk,sub,remat",
    [(1, None, 7, True), (13, None, 7, True), (14, None, 7, False), (200, 14, 7, True), (1000, 31, 7, True),
     (97, 9, 1, True), (50, 60, 7, True), (200, 14, 7, "steps"), (200, 14, 7, False)],
)  # fmt: skip
def test_nested_scan_matches_plain_scan(n, chunk, sub, remat):
    """The chunked, sub-chunked scan runs the same steps in the same order as ``lax.scan``:
    same carry, same per-step outputs, progress reports in order, the last at the final step."""
    from difflie.loops import chunked_scan

    def body(c, x):
        c = 0.5 * c + jnp.sin(x)  # not associative: any reordering changes the bits
        return c, (c, x)

    xs = jnp.linspace(0.0, 3.0, n)
    ref_c, ref_ys = jax.lax.scan(body, jnp.asarray(0.1), xs)
    reports = []
    report = lambda c, x: jax.debug.callback(lambda *a: reports.append(a), c, x[-1])  # noqa: E731
    c, ys = jax.jit(lambda c0: chunked_scan(body, c0, xs, chunk, remat, report, sub))(jnp.asarray(0.1))
    np.testing.assert_array_equal(c, ref_c)
    np.testing.assert_array_equal(ys[0], ref_ys[0])
    np.testing.assert_array_equal(ys[1], xs)
    assert len(reports) >= 1 and reports[-1][1] == xs[-1] and reports[-1][0] == ref_c
    assert [float(r[1]) for r in reports] == sorted(float(r[1]) for r in reports)
    g = jax.grad(lambda c0: chunked_scan(body, c0, xs, chunk, remat, None, sub)[0])(jnp.asarray(0.1))
    np.testing.assert_allclose(g, 0.5**n, rtol=1e-12)


@pytest.mark.parametrize("n, sub, loops", [(1000, 7, 2), (1000, 3, 2), (997, 7, 3), (9, 3, 2)])
def test_sub_scan_has_no_left_over_loop_when_a_divisor_is_near(n, sub, loops):
    """Left-over steps are a second copy of the step in the program; sub-chunks of 5 (for 7) or
    2 (for 3) divide 1000 steps and leave none. 997 is prime: its 3 left-over steps keep a loop."""
    from difflie.loops import _sub_scan

    body = lambda c, x: (0.5 * c + jnp.sin(x), c)  # noqa: E731
    xs = jnp.linspace(0.0, 3.0, n)
    jaxpr = jax.make_jaxpr(lambda c0: _sub_scan(body, c0, xs, sub))(0.1)
    assert str(jaxpr).count("scan[") == loops
    ref_c, ref_ys = jax.lax.scan(body, jnp.asarray(0.1), xs)
    c, ys = _sub_scan(body, jnp.asarray(0.1), xs, sub)
    np.testing.assert_array_equal(c, ref_c)
    np.testing.assert_array_equal(ys, ref_ys)


@pytest.mark.parametrize("n, chunk, sub", [(1000, 31, 7), (1000, 31, 3), (1000, 31, 1), (200, 14, 7), (2000, 44, 64),
                                           (100_000, 316, 5), (997, 31, 7), (13, 3, 7)])  # fmt: skip
def test_loop_sizes_divide_the_steps_where_they_can(n, chunk, sub):
    """Checkpoint chunks within a factor of two of the asked size, multiples of a sub-chunk of at
    least half the asked one, and dividing the steps wherever such sizes exist (no left-over
    loop: a second compiled copy of the step); 997 is prime and keeps its left-over steps."""
    from difflie.loops import _loop_sizes

    c, s = _loop_sizes(n, chunk, sub)
    subs = range(max(2, sub // 2), sub + 1) if sub > 1 else (1,)
    exists = any(n % (k * d) == 0 for d in subs for k in range(1, 2 * chunk + 1) if chunk / 2 <= k * d <= 2 * chunk)
    assert chunk / 2 <= c <= 2 * chunk
    if chunk > sub:  # else the chunks are plain loops
        assert s in subs and c % s == 0 and (n % c == 0) == exists


def test_sub_chunk_keeps_stacked_states_small():
    """Innermost loops hold at most 512 bytes of any state leaf per scanned step block."""
    from difflie.loops import sub_chunk

    assert sub_chunk((jnp.zeros((1, 3, 3)), jnp.zeros((1, 6)))) == 7  # one body, float64
    assert sub_chunk((jnp.zeros((1, 3, 3), jnp.float32),)) == 14
    assert sub_chunk((jnp.zeros((4, 3, 3)),)) == 1  # four bodies: plain steps
    assert sub_chunk((jnp.zeros(1),)) == 64  # capped by the scanned times


def test_a_start_computed_beforehand_gives_the_same_run():
    """``simulate(start=solver.init(...))``, as the command line runs it (the start compiled on
    its own, without LLVM optimisation), equals the run that computes its own start."""
    from difflie import GeneralizedAlpha, xla
    from difflie.models import double_pendulum

    model, solver = double_pendulum(), GeneralizedAlpha()
    start = xla.jit(lambda m: solver.init(m, 0.0, 1e-3), compiler_options=xla.RUN_ONCE_OPTIONS)(model)
    plain, given = (simulate(model, solver, 0.0, 0.01, 1e-3, saveat=SaveAt(steps=True), start=s) for s in (None, start))
    np.testing.assert_allclose(given.position, plain.position, rtol=0, atol=1e-14)
    np.testing.assert_allclose(given.angular_velocity, plain.angular_velocity, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="start must be the pair"):
        simulate(model, solver, 0.0, 0.01, 1e-3, start=start[0])
