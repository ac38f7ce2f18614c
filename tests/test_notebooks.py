"""Every notebook in notebooks/ runs (small settings) and reaches the numbers it claims."""

import os
import pathlib
import sys

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


class _ThisPython(KernelSpecManager):
    """The python3 kernel of the running interpreter (nothing registered globally)."""

    def get_kernel_spec(self, kernel_name):
        spec = super().get_kernel_spec(kernel_name)
        spec.argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        return spec


def run_notebook(path, checks: str):
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(checks))
    os.environ["DIFFLIE_NOTEBOOK_SMALL"] = "1"
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.km = client.kernel_manager_class(kernel_name="python3", kernel_spec_manager=_ThisPython())
    client.execute()


CHECKS = {
    "first_mechanism": (
        "assert warned\n"
        "assert max_residual < 1e-10, max_residual\n"
        "assert ga_drift < 1e-3, ga_drift\n"
        "assert be_loss > 10 * ga_drift, (be_loss, ga_drift)\n"
        "assert solver_gap > 1e-3, solver_gap\n"
        "assert reloaded\n"
    ),
    "quickstart": (
        "assert energy_drift < 1e-6, energy_drift\n"
        "assert gradient_error < 1e-6, gradient_error\n"
        "assert batch_shape == (64, 3)\n"
    ),
    "constrained": (
        "assert max_residual < 1e-8, max_residual\n"
        "assert formulation_spread < 1e-3, formulation_spread\n"
        "be = [velocity_error[k] for k in ('rA', 'rp', 're')]\n"
        "assert max(be) < 1.5 * min(be), velocity_error  # the same first-order error\n"
        "assert velocity_error['gen-alpha'] < 0.1 * min(be), velocity_error\n"
    ),
    "intermediate_axis": (
        "assert len(crossings) >= 2, crossings\n"
        "assert flip_error < 1e-4, flip_error\n"
        "assert abs(4 * quarter - 0.598653170) < 1e-8\n"
        "assert energy_error < 1e-8 and momentum_error < 1e-8\n"
    ),
    "identification": (
        "assert rel_error_a < 1e-6, rel_error_a\n"
        "assert res_a.history[0][2] > 1e3 * res_a.loss, res_a.history\n"
        "assert noise_z_max < 4.0, noise_z\n"
        "assert max(noise_chi2) < chi2_limit, noise_chi2\n"
        "assert all(0.5 < s < 2.0 for s in noise_s2), noise_s2\n"
        "assert consistent\n"
        "assert rod_rel_error < 1e-6, rod_est\n"
    ),
    "robot_identification": (
        "assert base_count == 43, base_count\n"
        "assert ls_base_error < 0.5, ls_base_error\n"
        "assert ls_torque_error < 0.2 * prior_torque_error, (ls_torque_error, prior_torque_error)\n"
        "assert errors['true'] < 1e-3 < errors['prior'], errors\n"
    ),
    "long_run_energy": (
        "assert abs(drift['DQVI']) < 0.05 * amplitude['DQVI'], (drift, amplitude)\n"
        "assert late['DQVI'] < 1.5 * early['DQVI'], (late, early)\n"
        "assert amplitude['DQVI'] < 1e-3 and amplitude['SO3xR3Variational'] < 1e-10, amplitude\n"
        "assert abs(drift['RKMK4']) > 0.5 * amplitude['RKMK4'] and late['RKMK4'] > 5 * early['RKMK4'], (drift, late, early)\n"
        "assert abs(final['RKMK4']) > amplitude['DQVI'], (final, amplitude)\n"
        "assert momentum_error['DQVI'] < 1e-11 and momentum_error['SO3xR3Variational'] < 1e-11, momentum_error\n"
        "assert momentum_error['RKMK4'] > 1e-6, momentum_error\n"
        "assert verdict == {'DQVI': 'bounded', 'SO3xR3Variational': 'round-off', 'RKMK4': 'drift'}, verdict\n"
    ),
}


# The longest notebooks run in the slow set (`pytest -m slow`): their methods are covered by the
# default run's tests (test_identify; test_conformance and test_mechanisms; test_variational and
# test_variational_properties), and they took 20-95 s each of a suite that must stay within 15
# minutes.
SLOW = {"constrained", "identification", "long_run_energy"}


@pytest.mark.parametrize(
    "path", [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem in SLOW else []) for p in NOTEBOOKS]
)
def test_notebook_runs(path):
    run_notebook(path, CHECKS.get(path.stem, "pass"))


def test_every_notebook_has_checks():
    assert {p.stem for p in NOTEBOOKS} <= set(CHECKS)
