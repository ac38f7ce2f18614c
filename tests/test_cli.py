"""The command line: list, simulate with --out/--plot, and one clear line for bad input."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import difflie as dl
from difflie.__main__ import CliError, main

PENDULUM = {
    "name": "pendulum",
    "bodies": [
        {"name": "ground", "id": 0},
        {"name": "link", "id": 1, "r": [0, 1.0, 0], "r_dot": [0, 0, 0], "A": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
         "omega": [0, 0, 0], "mass": 1.0, "inertia": [0.1, 0.1, 0.1]},
    ],
    "joints": [{"type": "spherical", "body_i": 1, "body_j": 0, "s_bar_i": [0, -1.0, 0], "s_bar_j": [0, 0, 0]}],
}


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("heavy-top", "torque-free", "rkmk4", "gen-alpha", "backward-euler", "dqvi"):
        assert name in out
    # each model lists exactly the solvers that take it (the solvers' own rule)
    lines = out.splitlines()

    def solvers_of(model):  # the first "solvers:" line after the model's description (wrapped)
        start = [i for i, line in enumerate(lines) if line.split()[:1] == [model]][0]
        return next(line for line in lines[start:] if "solvers:" in line)

    crank, top = solvers_of("slider-crank"), solvers_of("heavy-top")
    assert "Fig. 1; the file slider_crank.json)." in " ".join(out.split())  # whole sentences, not cut at a line end
    assert "``" not in out  # docstring markup stays out of the terminal
    assert crank.split("solvers:")[1].split(", ") == [" gen-alpha", "backward-euler"]
    assert top.split("solvers:")[1].split(", ") == [" rkmk4", "dopri5", "gen-alpha", "backward-euler", "dqvi"]


def test_simulate_writes_npz_and_png(tmp_path, capsys):
    out, png = tmp_path / "top.npz", tmp_path / "top.png"
    assert main(["simulate", "heavy-top", "--t1", "0.05", "--dt", "1e-3", "--out", str(out), "--plot", str(png)]) == 0
    summary = capsys.readouterr().out
    assert "steps 50" in summary and "relative energy drift" in summary and "drivers' work" not in summary
    data = np.load(out)
    assert data["t"].shape == (51,)
    assert data["position"].shape == (51, 1, 3) and data["rotation"].shape == (51, 1, 3, 3)
    assert list(data["body_names"]) == list(dl.models.heavy_top().body_names)
    ref = dl.simulate(dl.models.heavy_top(), dl.RKMK4(), 0.0, 0.05, 1e-3)
    np.testing.assert_allclose(data["position"][-1], np.asarray(ref.position[-1]), atol=1e-13)
    assert png.stat().st_size > 10_000


def test_simulate_model_file_with_implicit_solver(tmp_path, capsys):
    path = write(tmp_path, "pendulum.json", PENDULUM)
    assert main(["simulate", path, "--solver", "gen-alpha", "--t1", "0.02", "--dt", "1e-3"]) == 0
    assert "max constraint residual" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv_tail, message",
    [
        (["nothing-like-this"], "no model file or built-in model"),
        (["heavy-top", "--dt", "-1"], "--dt must be a positive finite number, got -1.0"),
        (["heavy-top", "--solver", "rkmk4", "--formulation", "rA"], "--formulation applies"),
    ],
)
def test_bad_arguments(argv_tail, message, capsys):
    assert main(["simulate", *argv_tail]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1  # one line


def test_malformed_json_names_the_key(tmp_path, capsys):
    bad = json.loads(json.dumps(PENDULUM))
    bad["bodies"][1]["r"] = [0, 1.0]
    path = write(tmp_path, "bad.json", bad)
    assert main(["simulate", path, "--solver", "gen-alpha"]) == 2
    err = capsys.readouterr().err
    assert "$.bodies[1].r" in err and err.count("\n") == 1


def test_unknown_body_in_joint(tmp_path, capsys):
    bad = json.loads(json.dumps(PENDULUM))
    bad["joints"][0]["body_j"] = 7
    path = write(tmp_path, "bad.json", bad)
    assert main(["simulate", path, "--solver", "gen-alpha"]) == 2
    assert "7" in capsys.readouterr().err


def test_non_positive_inertia_in_file(tmp_path, capsys):
    bad = json.loads(json.dumps(PENDULUM))
    bad["bodies"][1]["inertia"] = [0.1, -0.1, 0.1]
    path = write(tmp_path, "bad.json", bad)
    assert main(["simulate", path, "--solver", "gen-alpha"]) == 2
    err = capsys.readouterr().err
    assert "link" in err and "positive" in err


def test_invalid_json_syntax(tmp_path, capsys):
    path = write(tmp_path, "broken.json", '{"bodies": [')
    assert main(["simulate", path]) == 2
    assert "broken.json" in capsys.readouterr().err


def test_no_partial_output_on_failure(tmp_path, capsys):
    """A run that blows up (a step far too large for a fast top) writes nothing."""
    out = tmp_path / "out.npz"
    code = main(["simulate", "heavy-top", "--dt", "0.5", "--t1", "200", "--out", str(out)])
    assert code == 1
    assert "failed" in capsys.readouterr().err
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_missing_output_directory(tmp_path, capsys):
    assert main(["simulate", "heavy-top", "--out", str(tmp_path / "no" / "x.npz")]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_subprocess_prints_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "difflie", "simulate", "no-such-model"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("difflie: error:")


@pytest.mark.parametrize(
    "argv_tail, message",
    [
        # the step of the overflow depends on rounding (|omega| h ~ 1e6 rad after one step)
        (["heavy-top", "--dt", "0.5", "--t1", "200"], r"NaN or Inf in the state or the times at step [2-9] "),
        (["slider-crank", "--solver", "backward-euler", "--dt", "0.5", "--t1", "2"],
         r"Newton iteration did not converge at step 0 \(t = 0 s\): residual .*\(a step too large for the motion.*; try a smaller --dt, or --retry-failed-steps$"),
        (["heavy-top", "--solver", "dopri5", "--rtol", "1e-300", "--t1", "1"], "step size underflow"),
    ],
)
def test_failed_runs_say_what_and_where(argv_tail, message, tmp_path, capsys):
    out = tmp_path / "x.npz"
    assert main(["simulate", *argv_tail, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    line = err[-1].removeprefix("difflie: simulation failed: ")
    assert re.match(message, line), err
    where = re.search(r"at step (\d+) \(t = ([0-9.]+) s\)", line)
    if where and "--dt" in argv_tail:  # the time is the step's
        assert float(where.group(2)) == int(where.group(1)) * float(argv_tail[argv_tail.index("--dt") + 1]), line
    assert not out.exists() and os.listdir(tmp_path) == []


def test_progress_bar_only_when_asked(capsys):
    assert main(["simulate", "heavy-top", "--t1", "0.05"]) == 0  # stderr is not a terminal here
    assert "%" not in capsys.readouterr().err
    assert main(["simulate", "heavy-top", "--t1", "0.05", "--progress"]) == 0
    err = capsys.readouterr().err
    assert "100.0 %" in err and "t = 0.05 / 0.05 s" in err


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "difflie", "simulate", *argv], capture_output=True, text=True)


def test_driven_run_announces_the_compile_and_balances_the_drivers_work():
    """The banner names the dtype; one line before the compile and one with its time, both
    before the progress bar; a driven mechanism's summary sets the drivers' work against the
    energy change instead of a relative drift."""
    proc = _cli("single-pendulum", "--t1", "0.02", "--progress")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "difflie: single-pendulum with gen-alpha, t1 = 0.02 s, dt = 0.001 (20 steps), float64"
    assert lines[1] == "difflie: compiling gen-alpha for single-pendulum ..."
    assert re.fullmatch(r"difflie: compiled in \d+\.\d s", lines[2]), lines
    assert "100.0 %" in proc.stderr.split(lines[2])[1]  # the progress bar, after the compile
    summary = proc.stdout
    change, work, balance = (float(re.search(rf"{key} (\S+) J", summary).group(1))
                             for key in ("energy change", "drivers' work", r"balance max \|E - E0 - W\|"))  # fmt: skip
    assert "relative energy drift" not in summary
    assert change > 0.1 and work == pytest.approx(change, rel=1e-4) and balance < 1e-5 * work


def test_float32_run_names_its_dtype():
    proc = _cli("heavy-top", "--t1", "0.01", "--float32")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0].endswith("(10 steps), float32")
    assert "compiling rkmk4 for heavy-top ..." in proc.stderr
    assert "relative energy drift" in proc.stdout and "drivers' work" not in proc.stdout


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["simulate", "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    for default in ("default: gen-alpha for a model with constraints", "rkmk4 for one without",
                    "(default: 1e-3)", "(default: 1)", "(default: rA)", "(default: 1e-6)", "(default: --rtol)",
                    "--float32 compute in float32 (default: float64", "(default: the available memory)"):  # fmt: skip
        assert default in text, default


def test_compile_cache_lives_in_the_user_cache_and_can_be_turned_off(monkeypatch, tmp_path):
    from difflie.__main__ import compile_cache_dir
    from difflie.cli.arguments import parser

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache_dir() == tmp_path / "difflie" / "jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert compile_cache_dir() == Path.home() / ".cache" / "difflie" / "jax"
    assert parser().parse_args(["simulate", "heavy-top"]).compile_cache
    assert not parser().parse_args(["simulate", "heavy-top", "--no-compile-cache"]).compile_cache


def test_compile_cache_keeps_every_program(monkeypatch, tmp_path):
    """The command line's cache keeps programs however quickly they compiled (a small model's
    run, the eager steps that build a model), unless the environment says otherwise, and is
    not set where JAX already has a cache folder or with --no-compile-cache."""
    import jax

    from difflie.__main__ import _use_compile_cache
    from difflie.cli.arguments import parser

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    keys = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
    saved = {key: getattr(jax.config, key) for key in keys}
    try:
        for argv, env, folder, least in ((["simulate", "heavy-top"], None, str(tmp_path / "difflie" / "jax"), 0.0),
                                         (["list"], "2.5", str(tmp_path / "difflie" / "jax"), 1.0),
                                         (["simulate", "heavy-top", "--no-compile-cache"], None, None, 1.0)):  # fmt: skip
            jax.config.update(keys[0], None)
            jax.config.update(keys[1], 1.0)  # JAX's default
            if env is None:
                monkeypatch.delenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", raising=False)
            else:
                monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", env)
            _use_compile_cache(parser().parse_args(argv))
            assert (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs) == (folder, least)
        jax.config.update(keys[0], "/elsewhere")  # a folder of the caller's: left alone
        _use_compile_cache(parser().parse_args(["simulate", "heavy-top"]))
        assert jax.config.jax_compilation_cache_dir == "/elsewhere"
    finally:
        for key, value in saved.items():
            jax.config.update(key, value)


# ---------------------------------------------------------------- hostile input: exit 2, one line


def _err(capsys):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _with(edit):
    data = json.loads(json.dumps(PENDULUM))
    data["constraints"] = [{"name": "d", "type": "D", "body_i": 1, "body_j": 0, "s_bar_p_i": [0, 0, 0],
                            "s_bar_q_j": [0, 0, 0], "f": "1"}]  # fmt: skip
    edit(data)
    return data


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["constraints"][0].update(f="1/0 + t"), "$.constraints[0].f: cannot evaluate '1 / 0'"),
        (lambda d: d["constraints"][0].update(f="9**9**9"), "$.constraints[0].f: cannot evaluate '9 ** 9 ** 9'"),
        (lambda d: d["constraints"][0].update(f="7" * 400), "$.constraints[0].f: cannot evaluate '777"),
        (lambda d: d["constraints"][0].update(f="-" * 1999 + "t"), "$.constraints[0].f: expression '---"),
        (lambda d: d["constraints"][0].update(f="(-1)**0.5 + t"), "is complex"),
        (lambda d: d["bodies"][1].update(inertia="heavy"), "$.bodies[1].inertia: expected numbers with shape (3, 3)"),
        (lambda d: d["bodies"][1].update(inertia=[[1, 0, 0], [0, 1]]), "$.bodies[1].inertia: expected shape (3, 3)"),
        (lambda d: d["bodies"][1].update(id=[1]), "$.bodies[1].id: a body id must be an integer or a string"),
        (lambda d: d["bodies"][1].update(omgea=[0, 0, 5]), "$.bodies[1].omgea: unknown key; did you mean 'omega'?"),
        (lambda d: d["bodies"][1].update(mass=True), "$.bodies[1].mass: expected numbers with shape (), got True"),
        (lambda d: d["bodies"][1].update(mass="1.0"), "$.bodies[1].mass: expected numbers with shape (), got '1.0'"),
        (lambda d: d["bodies"][1].update(A=[[1, 0, 0], [0, 1, 0], [0, 0, -1]]), "$.bodies[1].A: not a rotation matrix (a reflection"),
    ],
)
def test_hostile_model_files(tmp_path, capsys, edit, message):
    path = write(tmp_path, "bad.json", _with(edit))
    assert main(["simulate", path, "--t1", "0.01"]) == 2
    assert message in _err(capsys)


def test_unreadable_model_files(tmp_path, capsys):
    assert main(["simulate", str(tmp_path)]) == 2
    assert "is a directory, not a model file" in _err(capsys)
    path = write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000)
    assert main(["simulate", path]) == 2
    assert "deep.json: not valid JSON (nested too deeply)" in _err(capsys)


@pytest.mark.parametrize(
    "argv_tail, message",
    [
        (["--t1", "inf"], "--t1 must be a positive finite number, got inf"),
        (["--t1", "nan"], "--t1 must be a positive finite number, got nan"),
        (["--dt", "5e-324"], "makes inf steps; at most 2147483647"),
        (["--solver", "dopri5", "--dt", "1e-12", "--t1", "1000"], "makes 1e+15 steps"),
        (["--rtol", "inf"], "--rtol must be a positive finite number"),
        (["--t1", "abc"], "argument --t1: invalid float value: 'abc'"),
        (["--max-memory", "12Q"], "expected a size such as 8G"),
        (["--inertia", "1,2"], "expected J or J1,J2,J3"),
        (["--mass", "2"], "--mass and --inertia apply to model files only"),
        (["--plot", "x.gif"], "--plot x.gif: unsupported file type 'gif'; use .png, .pdf, .svg"),
        (["--out", "x.txt"], "--out x.txt: unsupported file type 'txt'; use .npz"),
        (["--out", "/sys/x.npz"], "cannot write /sys/x.npz: "),
        (["--dt", "1e-7", "--t1", "10", "--max-memory", "1G"], "the run needs at least 63.3 GiB"),
        (["--solver", "dopri5", "--t1", "5000", "--adaptive-chunk", "100000000", "--max-memory", "8G"],
         "the run needs at least 28.3 GiB"),
        (["--solver", "dopri5", "--adaptive-chunk", "0"], "--adaptive-chunk must be a positive number of steps"),
        (["--set", "radius=3"], "--set: heavy-top has no parameter 'radius'; its parameters are mass, inertia, com"),
        (["--set", "mass=-1"], "--set: heavy-top(mass=-1): body 'top' (index 0): mass must be positive, got -1"),
        (["--set", "mass"], "expected NAME=VALUE[,NAME=VALUE...], got 'mass'"),
    ],
)
def test_hostile_options(argv_tail, message, capsys):
    try:
        code = main(["simulate", "heavy-top", *argv_tail])
    except SystemExit as stop:  # argparse's own errors
        code = stop.code
    assert code == 2
    assert message in _err(capsys)


def test_adaptive_run_in_chunks_is_the_same_run(tmp_path, capsys):
    """Chunks of 40 steps, each starting from the last state and step size of the one before,
    give the run in one buffer: same times (no repeated state) and states, to the tolerance."""
    runs = {}
    for chunk in ("40", "100000"):
        out = tmp_path / f"c{chunk}.npz"
        argv = ["simulate", "heavy-top", "--solver", "dopri5", "--t1", "0.3", "--adaptive-chunk", chunk, "--out", str(out)]
        assert main(argv) == 0, _err(capsys)
        runs[chunk] = np.load(out)
    chunked, whole = runs["40"], runs["100000"]
    assert whole["t"].shape[0] > 100  # more than two chunks of 40
    assert np.all(np.diff(chunked["t"]) > 0) and chunked["t"][0] == 0.0 and chunked["t"][-1] == pytest.approx(0.3)
    assert abs(chunked["t"].shape[0] - whole["t"].shape[0]) <= 3
    np.testing.assert_allclose(chunked["position"][-1], whole["position"][-1], atol=1e-5)
    np.testing.assert_allclose(chunked["angular_velocity"][-1], whole["angular_velocity"][-1], rtol=1e-5)


def test_failed_steps_retried_at_half_the_size(tmp_path, capsys):
    """``--retry-failed-steps``: the heavy top under gen-alpha at dt = 1e-2, whose fixed steps
    fail at t = 0.06 s (``tests/test_failures.py``), runs to t1 on steps halved where Newton
    fails, its pivot held; explicit solvers refuse the option."""
    out = tmp_path / "retry.npz"
    argv = ["simulate", "heavy-top", "--solver", "gen-alpha", "--dt", "1e-2", "--t1", "0.2", "--retry-failed-steps", "--out", str(out)]
    assert main(argv) == 0, _err(capsys)
    summary = capsys.readouterr()
    assert "dt = 0.01, halved where a step fails" in summary.err
    assert int(summary.out.split("rejected ")[1].split(",")[0]) > 0
    run = np.load(out)
    assert run["t"][-1] == pytest.approx(0.2) and np.diff(run["t"]).min() < 1e-2 * (1 - 1e-9)
    np.testing.assert_allclose(np.linalg.norm(run["position"][:, 0], axis=-1), 1.0, atol=1e-9)
    assert main(["simulate", "heavy-top", "--solver", "rkmk4", "--retry-failed-steps"]) == 2
    assert "--retry-failed-steps: for the implicit solvers (gen-alpha, backward-euler) only" in _err(capsys)


def test_equilibrium_and_modes_of_the_double_pendulum(tmp_path, capsys):
    """``equilibrium``: the built-in double pendulum (rods of 4 m and 2 m on revolute joints
    about x, released horizontal) hangs straight down, and its two eigenfrequencies are those of
    the joint-space ``(K, M)`` written by hand."""
    import difflie as dl

    out = tmp_path / "eq.npz"
    assert main(["equilibrium", "double-pendulum", "--modes", "2", "--out", str(out)]) == 0, _err(capsys)
    printed = capsys.readouterr().out
    model = dl.models.double_pendulum()
    (m1, m2), (l1, l2), g = np.asarray(model.bodies.mass), (4.0, 2.0), 9.81
    J1, J2 = (float(model.bodies.inertia[k, 2, 2]) for k in (0, 1))  # body z: the joints' axis, world x
    M = np.array([[J1 + m1 * l1**2 / 4 + m2 * l1**2, m2 * l1 * l2 / 2], [m2 * l1 * l2 / 2, J2 + m2 * l2**2 / 4]])
    K = g * np.diag([m1 * l1 / 2 + m2 * l1, m2 * l2 / 2])
    hz = np.sqrt(np.sort(np.linalg.eigvals(np.linalg.solve(M, K)).real)) / (2 * np.pi)
    shown = [float(f) for f in printed.split("Hz (negative: unstable, omega^2 < 0): ")[1].split("\n")[0].split(", ")]
    np.testing.assert_allclose(shown, hz, rtol=1e-5)
    eq = np.load(out)
    np.testing.assert_allclose(eq["position"][:, 2], [-l1 / 2, -l1 - l2 / 2], atol=1e-9)
    np.testing.assert_allclose(eq["position"][:, :2], 0.0, atol=1e-9)
    assert main(["equilibrium", "double-pendulum", "--modes", "-1"]) == 2


def test_adaptive_run_that_outgrows_the_memory_stops_with_one_line(capsys):
    """The chunk fits, the run's saved states outgrow the limit: exit 2, the figure and the time."""
    argv = ["simulate", "heavy-top", "--solver", "dopri5", "--t1", "0.3", "--adaptive-chunk", "10", "--max-memory", "20K"]
    assert main(argv) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.match(r"difflie: error: the saved states reached [0-9.e-]+ GiB at t = [0-9.]+ s, near the", last), last


def test_output_that_is_a_directory(tmp_path, capsys):
    (tmp_path / "d.npz").mkdir()
    assert main(["simulate", "heavy-top", "--out", str(tmp_path / "d.npz")]) == 2
    assert "is a directory" in _err(capsys)


def test_memory_sizes():
    from difflie.cli.arguments import memory_size

    assert memory_size("8G") == 8 * 2**30 and memory_size("512MiB") == 512 * 2**20 and memory_size("2e9") == 2e9


@pytest.mark.parametrize("dt, steps", [("0.003", 4), ("1", 1)])
def test_banner_announces_the_steps_run(dt, steps, capsys):
    assert main(["simulate", "heavy-top", "--dt", dt, "--t1", "0.01"]) == 0
    captured = capsys.readouterr()
    assert f"({steps} step" in captured.err and f"steps {steps}," in captured.out


def test_plot_format_follows_extension_and_files_respect_umask(tmp_path, capsys):
    old = os.umask(0o027)
    try:
        out, pdf = tmp_path / "a.npz", tmp_path / "a.pdf"
        assert main(["simulate", "heavy-top", "--t1", "0.005", "--out", str(out), "--plot", str(pdf)]) == 0
    finally:
        os.umask(old)
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert (out.stat().st_mode & 0o777) == (pdf.stat().st_mode & 0o777) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["a.npz", "a.pdf"]


def test_paper_model_file_without_masses(capsys):
    """The C1 files of Kissel, Taves & Negrut carry no masses: --mass and --inertia give them."""
    path = str(Path(__file__).parent / "data" / "revJoint.mdl")
    assert main(["simulate", path]) == 2
    assert "(command line: --mass)" in _err(capsys)
    assert main(["simulate", path, "--mass", "2", "--inertia", "0.5", "--t1", "0.003"]) == 0
    assert "steps 3," in capsys.readouterr().out


ARM_URDF = """<?xml version="1.0"?>
<robot name="arm">
  <link name="base"/>
  <link name="link">
    <inertial><origin xyz="0 0 -0.25"/><mass value="1"/>
      <inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.001"/></inertial>
  </link>
  <joint name="hinge" type="revolute">
    <parent link="base"/><child link="link"/><origin xyz="0 0 1" rpy="0.5 0 0"/><axis xyz="1 0 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="5"/>
  </joint>
</robot>
"""


def test_simulate_urdf(tmp_path, capsys):
    """A URDF runs from the command line: generalized-alpha by default (the robot's joints are
    constraints), the unmodelled joint limit named in one warning line, and the trajectory that
    of the library called directly."""
    pytest.importorskip("mujoco")
    path, out = write(tmp_path, "arm.urdf", ARM_URDF), tmp_path / "arm.npz"
    assert main(["simulate", path, "--t1", "0.02", "--dt", "1e-3", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "with gen-alpha" in captured.err and "steps 20," in captured.out
    warning = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warning) == 1 and "not modelled: joint limits (1 joint; joint_limits=True enforces them)" in warning[0], captured.err
    assert main(["simulate", path, "--t1", "0.002", "--dt", "1e-3", "--joint-limits", "--joint-friction", "--joint-couplings"]) == 0
    assert "warning" not in capsys.readouterr().err  # the limit is modelled
    data = np.load(out)
    assert list(data["body_names"]) == ["link"] and data["position"].shape == (21, 1, 3)
    with pytest.warns(dl.io.RobotModelWarning):
        model = dl.load_model(path)
    ref = dl.simulate(model, dl.GeneralizedAlpha(rho_inf=0.9), 0.0, 0.02, 1e-3, saveat=dl.SaveAt(steps=True))
    np.testing.assert_allclose(data["position"], np.asarray(ref.position), atol=1e-13)
    # held 0.5 rad from hanging (the joint's zero) and released: q(t) ~ -alpha t^2 / 2 with
    # alpha = m g d sin(0.5) / (J + m d^2) = 14.25 rad/s^2 (d = 0.25 m)
    q = np.asarray(dl.joint_coordinates(model, ref))[:, 0]
    alpha = 9.81 * 0.25 * np.sin(0.5) / (0.02 + 0.25**2)
    assert q[0] == pytest.approx(0.0, abs=1e-14) and q[-1] == pytest.approx(-alpha * 0.02**2 / 2, rel=1e-2)


@pytest.mark.slow
def test_simulate_panda_urdf(capsys):
    """Slow (compiles a 9-body, 45-row step): the Franka Panda of ``example-robot-data``."""
    pytest.importorskip("mujoco")
    from test_robots import PANDA

    if PANDA is None:
        pytest.skip("needs example-robot-data (pip install -e '.[test]')")
    assert main(["simulate", PANDA, "--t1", "0.01"]) == 0
    captured = capsys.readouterr()
    assert "with gen-alpha" in captured.out + captured.err and "steps 10," in captured.out
    assert "max constraint residual" in captured.out


# ---------------------------------------------------------------- robots: joint options, joint space in --out and --plot


def _toy(tmp_path, name="toy.urdf"):
    """The small robots of test_robots.py: TOY_URDF (joints shoulder, slide, spin; fixed base),
    TOY_MJCF (a free torso and the elbow)."""
    pytest.importorskip("mujoco")
    from test_robots import TOY_MJCF, TOY_URDF

    return write(tmp_path, name, TOY_URDF if name.endswith(".urdf") else TOY_MJCF)


def _robot_model(path, **kwargs):
    with pytest.warns(dl.io.RobotModelWarning):
        return dl.load_model(path, **kwargs)


def test_joint_options_reach_the_robot_and_out_holds_its_joint_space(tmp_path, capsys):
    """--joint-positions and --joint-velocities set the start (by forward kinematics), a locked
    joint leaves joint_names, torque expressions (a comma inside atan2) move the robot; --out
    carries joint_names, q and qd as difflie.joint_coordinates / joint_velocities read them off
    the saved solution, which load_solution still reads."""
    path = _toy(tmp_path)
    start = ["--joint-positions", "shoulder=0.3", "--joint-positions", "slide=0.05, spin=-0.2", "--joint-velocities", "spin=2"]
    extras = {"free": [], "driven": ["--joint-torques", "shoulder=2*sin(50*t),spin=atan2(1, t + 1)"],
              "locked": ["--lock", "slide"]}  # fmt: skip
    runs = {}
    for key, extra in extras.items():
        out = tmp_path / f"{key}.npz"
        assert main(["simulate", path, "--t1", "0.01", *start, *extra, "--out", str(out)]) == 0, capsys.readouterr().err
        runs[key] = dict(np.load(out))
    free, driven, locked = runs["free"], runs["driven"], runs["locked"]
    assert list(free["joint_names"]) == ["shoulder", "slide", "spin"] and free["q"].shape == free["qd"].shape == (11, 3)
    np.testing.assert_allclose(free["q"][0], [0.3, 0.05, -0.2], atol=1e-9)
    np.testing.assert_allclose(free["qd"][0], [0.0, 0.0, 2.0], atol=1e-9)
    model = _robot_model(path, joint_positions={"shoulder": 0.3, "slide": 0.05, "spin": -0.2}, joint_velocities={"spin": 2.0})
    sol = dl.load_solution(tmp_path / "free.npz")
    np.testing.assert_array_equal(np.asarray(sol.position), free["position"])
    np.testing.assert_allclose(free["q"], np.asarray(dl.joint_coordinates(model, sol)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(free["qd"], np.asarray(dl.joint_velocities(model, sol)), rtol=0, atol=1e-12)
    # 0.785 N m on the rotor (0.0003 kg m^2) over 0.01 s: about 0.1 rad more spin
    assert driven["q"][-1, 2] - free["q"][-1, 2] > 0.05
    assert list(locked["joint_names"]) == ["shoulder", "spin"] and locked["position"].shape[1] == 2
    np.testing.assert_allclose(locked["q"][0], [0.3, -0.2], atol=1e-9)


def test_floating_base_frees_the_root_without_a_joint(tmp_path, capsys):
    """A URDF's root is fixed; --floating-base frees it without a movable joint more: the robot,
    released at rest, falls as one by g t^2 / 2 while the first body of the fixed one swings
    less. --no-floating-base fixes an MJCF free joint."""
    path, runs = _toy(tmp_path), {}
    for flag in ("--no-floating-base", "--floating-base"):
        out = tmp_path / f"{flag}.npz"
        assert main(["simulate", path, "--t1", "0.01", flag, "--out", str(out)]) == 0, capsys.readouterr().err
        runs[flag] = dict(np.load(out))
    fixed, floating = runs["--no-floating-base"], runs["--floating-base"]
    assert list(fixed["joint_names"]) == list(floating["joint_names"]) == ["shoulder", "slide", "spin"]
    assert list(floating["body_names"]) == ["base", *fixed["body_names"]]
    fall = 9.81 * 0.01**2 / 2
    np.testing.assert_allclose(floating["position"][0, 0] - floating["position"][-1, 0], [0.0, 0.0, fall], rtol=1e-9, atol=1e-15)
    assert np.linalg.norm(fixed["position"][-1, 0] - fixed["position"][0, 0]) < 0.5 * fall
    mjcf, out = _toy(tmp_path, "toy.xml"), tmp_path / "mjcf.npz"
    assert main(["simulate", mjcf, "--t1", "0.01", "--no-floating-base", "--out", str(out)]) == 0, capsys.readouterr().err
    assert list(np.load(out)["body_names"]) == ["arm"]


@pytest.mark.parametrize(
    "argv_tail, message",
    [
        (["--joint-positions", "shoulder"], "argument --joint-positions: expected NAME=NUMBER[,NAME=NUMBER...], got 'shoulder'"),
        (["--joint-velocities", "spin=fast"], "argument --joint-velocities: expected NAME=NUMBER[,NAME=NUMBER...] with finite"),
        (["--joint-positions", "shoulder=inf"], "argument --joint-positions: expected NAME=NUMBER[,NAME=NUMBER...] with finite"),
        (["--joint-torques", "=1"], "argument --joint-torques: expected NAME=EXPR[,NAME=EXPR...], got '=1'"),
        (["--joint-torques", "shoulder=2*sin("], "argument --joint-torques: shoulder: cannot parse '2*sin('"),
        (["--joint-torques", "shoulder=2*x"], "argument --joint-torques: shoulder: unknown name 'x'"),
        (["--lock", "slide,"], "argument --lock: expected NAME[,NAME...], got 'slide,'"),
        (["--joint-positions", "elbow=1"], "error: --joint-positions names unknown joints ['elbow']; movable joints are"),
        (["--joint-positions", "shouldr=1"], "--joint-positions names unknown joints ['shouldr'] (did you mean 'shoulder' for 'shouldr'?)"),
        (["--joint-torques", "elbow=t"], "--joint-torques names unknown joints ['elbow']"),
        (["--lock", "elbow"], "--lock names unknown joints ['elbow']"),
        (["--lock", "slide", "--joint-velocities", "slide=1"], "--joint-velocities names locked joints ['slide']"),
        (["--joint-positions", "spin=1", "--joint-positions", "slide=0,spin=2"], "--joint-positions gives 'spin' twice"),
        (["--controls", "grip=0.5*t"], "controls names unknown actuators ['grip']; the modelled actuators are []"),
        (["--bound-mass=-1e-3"], "--bound-mass and bound_inertia must be >= 0, got -0.001 and 0.0"),
    ],
)
def test_bad_robot_options(argv_tail, message, tmp_path, capsys):
    out = tmp_path / "x.npz"
    try:
        code = main(["simulate", _toy(tmp_path), *argv_tail, "--out", str(out)])
    except SystemExit as stop:  # argparse's own errors
        code = stop.code
    assert code == 2
    assert message in _err(capsys)
    assert not out.exists()


@pytest.mark.parametrize(
    "model, argv_tail, message",
    [
        ("heavy-top", ["--lock", "a"], "difflie: error: --lock applies to robot files (.urdf, MJCF .xml) only"),
        ("heavy-top", ["--bound-mass", "1e-3", "--balance-inertia"],
         "difflie: error: --bound-mass, --balance-inertia apply to robot files (.urdf, MJCF .xml) only"),
        ("pendulum.json", ["--joint-torques", "a=t", "--floating-base"],
         "difflie: error: --joint-torques, --floating-base apply to robot files (.urdf, MJCF .xml) only"),
    ],
)
def test_robot_options_for_other_models(model, argv_tail, message, tmp_path, capsys):
    path = write(tmp_path, model, PENDULUM) if model.endswith(".json") else model
    assert main(["simulate", path, *argv_tail]) == 2
    assert _err(capsys).strip() == message


def test_joint_option_entries_split_at_commas_outside_parentheses():
    from difflie.cli.arguments import joint_expressions, joint_list, joint_numbers

    torques = joint_expressions("a=atan2(t, 1), b = minimum(maximum(t, 0), 1),c=2")
    assert [(name, u.source) for name, u in torques] == [("a", "atan2(t, 1)"), ("b", "minimum(maximum(t, 0), 1)"), ("c", "2")]
    assert float(torques[0][1](1.0)) == pytest.approx(np.pi / 4)
    assert joint_numbers("a=1e-3, b=-2") == [("a", 1e-3), ("b", -2.0)]
    assert joint_list("a, b") == ["a", "b"]


def _chain_mjcf(n: int) -> str:
    """``n`` links in a row on hinges about alternating axes (a 9-body arm for n = 9)."""
    body = ""
    for k in reversed(range(n)):
        axis = ("0 1 0", "1 0 0")[k % 2]
        body = (f'<body name="link{k + 1}" pos="0 0 {0.1 if k else 0.5}"><joint name="joint{k + 1}" axis="{axis}"/>'
                f'<inertial pos="0.02 0 0.05" mass="1" diaginertia="0.01 0.01 0.002"/>{body}</body>')  # fmt: skip
    return f'<mujoco model="arm{n}"><worldbody>{body}</worldbody></mujoco>'


def test_plot_of_a_robot_shows_its_joints_and_no_text_is_cut_off(tmp_path, capsys):
    """--plot of a 9-body robot: its joint coordinates by name in the first panel; of the
    built-in 8-rod chain: its 24 COM traces. In both every label, title and legend lies inside
    the figure (the legend of a 9-body robot's 27 COM traces used to run off the figure and
    squash the axes, cutting off their labels)."""
    pytest.importorskip("mujoco")
    import matplotlib.pyplot as plt
    from test_plot import assert_text_inside

    from difflie.plot import summary_figure

    robot = write(tmp_path, "arm9.xml", _chain_mjcf(9))
    for model, stem in ((robot, "arm9"), ("chain", "chain")):
        out, png = tmp_path / f"{stem}.npz", tmp_path / f"{stem}.png"
        assert main(["simulate", model, "--t1", "0.005", "--out", str(out), "--plot", str(png)]) == 0, capsys.readouterr().err
        assert png.stat().st_size > 10_000
    arm = dl.load_model(robot)
    fig = summary_figure(dl.load_solution(tmp_path / "arm9.npz"), arm)
    assert fig.axes[0].get_ylabel() == "joint coordinates q [rad]"
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == list(arm.joint_names) == [f"joint{k}" for k in range(1, 10)]
    assert_text_inside(fig)
    plt.close(fig)
    fig = summary_figure(dl.load_solution(tmp_path / "chain.npz"), dl.models.chain())
    assert fig.axes[0].get_ylabel() == "COM position [m]" and len(fig.axes[0].get_legend().get_texts()) == 24
    assert_text_inside(fig)
    plt.close(fig)


def test_help_names_the_robot_options(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for item in ("robot files (.urdf, MJCF .xml):", "--joint-positions NAME=VALUE[,...]", "--joint-velocities NAME=VALUE[,...]",
                 "--joint-torques NAME=EXPR[,...]", "--lock NAME[,...]", "--floating-base, --no-floating-base",
                 "a comma inside parentheses belongs to an expression"):  # fmt: skip
        assert item in text, item


def test_implicit_solver_options_reach_the_solver():
    """``--rho-inf``, ``--newton`` and ``--max-iterations`` build the implicit solver the run
    uses; given to a solver they do not fit, or out of range, they are one-line errors."""
    import difflie as dl
    from difflie.cli.arguments import parser
    from difflie.cli.loading import make_solver

    model = dl.models.single_pendulum()

    def solver(*argv):
        return make_solver(parser().parse_args(["simulate", "single-pendulum", *argv]), model)[1]

    ga = solver("--rho-inf", "0.5", "--newton", "full", "--max-iterations", "7")
    assert (ga.rho_inf, ga.newton, ga.max_iterations) == (0.5, "full", 7)
    be = solver("--solver", "backward-euler", "--newton", "full", "--max-iterations", "3")
    assert (be.newton, be.max_iterations, be.formulation) == ("full", 3, "rA")
    assert solver() == dl.GeneralizedAlpha(rho_inf=0.9)
    for argv, message in [(("--solver", "backward-euler", "--rho-inf", "0.5"), "--rho-inf applies to --solver gen-alpha only"),
                          (("--solver", "backward-euler", "--newton", "auto"), "--newton auto is gen-alpha's"),
                          (("--solver", "rkmk4", "--max-iterations", "3"), "--max-iterations: for the implicit solvers")]:  # fmt: skip
        with pytest.raises(CliError, match=message):
            solver(*argv)
    for argv, message in [(("--rho-inf", "1"), "expected a number in \\[0, 1\\)"), (("--max-iterations", "0"), "at least 1")]:
        proc = _cli("single-pendulum", *argv)
        assert proc.returncode == 2 and message.replace("\\", "") in proc.stderr, proc.stderr


def test_built_in_model_parameters_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "chain.npz"
    assert main(["simulate", "chain", "--set", "n=3,joint=revolute", "--t1", "0.01", "--out", str(out)]) == 0
    assert dl.load_solution(out).position.shape[1] == 3
    capsys.readouterr()
    assert main(["simulate", str(write(tmp_path, "p.json", PENDULUM)), "--set", "n=3"]) == 2
    assert "--set applies to built-in models only" in _err(capsys)
