"""The command line: list, simulate with --out/--plot, and one clear line for bad input."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import difflie as dl
from difflie.__main__ import main

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
    crank = lines[[i for i, line in enumerate(lines) if line.split()[:1] == ["slider-crank"]][0] + 1]
    top = lines[[i for i, line in enumerate(lines) if line.split()[:1] == ["heavy-top"]][0] + 1]
    assert crank.split("solvers:")[1].split(", ") == [" gen-alpha", "backward-euler"]
    assert top.split("solvers:")[1].split(", ") == [" rkmk4", "dopri5", "gen-alpha", "backward-euler", "dqvi"]


def test_simulate_writes_npz_and_png(tmp_path, capsys):
    out, png = tmp_path / "top.npz", tmp_path / "top.png"
    assert main(["simulate", "heavy-top", "--t1", "0.05", "--dt", "1e-3", "--out", str(out), "--plot", str(png)]) == 0
    summary = capsys.readouterr().out
    assert "steps 50" in summary and "energy drift" in summary
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
        (["heavy-top", "--dt", "-1"], "--dt must be positive"),
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
        (["heavy-top", "--dt", "0.5", "--t1", "200"], "NaN or Inf in the state or the times at step 3 (t = 1.5 s)"),
        (["slider-crank", "--solver", "backward-euler", "--dt", "0.5", "--t1", "2"],
         "Newton iteration did not converge at step 0 (t = 0 s): residual "),
        (["heavy-top", "--solver", "dopri5", "--rtol", "1e-300", "--t1", "1"], "step size underflow"),
    ],
)
def test_failed_runs_say_what_and_where(argv_tail, message, tmp_path, capsys):
    out = tmp_path / "x.npz"
    assert main(["simulate", *argv_tail, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("difflie: simulation failed: " + message), err
    assert not out.exists() and os.listdir(tmp_path) == []


def test_progress_bar_only_when_asked(capsys):
    assert main(["simulate", "heavy-top", "--t1", "0.05"]) == 0  # stderr is not a terminal here
    assert "%" not in capsys.readouterr().err
    assert main(["simulate", "heavy-top", "--t1", "0.05", "--progress"]) == 0
    err = capsys.readouterr().err
    assert "100.0 %" in err and "t = 0.05 / 0.05 s" in err
