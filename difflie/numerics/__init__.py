"""Numerical kernels shared by the physics and the solvers: dense linear solves
(``linear``) and the Newton iteration with implicit-function-theorem
derivatives (``newton``). They import nothing of difflie but the result
codes, so kinematics, the implicit solvers and the LGT solvers all use the same ones.

Why not optimistix / lineax (measured 2026-11-25 on a 2-core x86-64 VM, float64, inside one
compiled loop of 1000 solves, ``difflie.xla.jit``; ``python benchmarks/numerics.py``): a full Newton solve of a 12-unknown nonlinear system to 1e-12 costs
6.8 us here and 13.1 us with ``optimistix.Newton``; a dense LU factor-and-solve costs the same
with ``lineax.LU`` (3.4 / 6.5 / 30 us at n = 18 / 30 / 66), and a solve with kept factors
0.83 / 1.45 / 4.6 us here against 0.78 / 1.19 / 3.0 us (lineax applies the pivots as a gather; a
candidate for ``solve_factored``). Neither is a dependency: the
Newton variants the steps need (a matrix kept across steps and dropped when it fails, the
contraction-rate refresh, a retraction on the manifold, a residual or correction test) are one
loop, ``newton_iterate``, over ``linear`` and
``sparsity``.
"""
