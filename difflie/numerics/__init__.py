"""Numerical kernels shared by the physics and the solvers: dense linear solves
(:mod:`~difflie.numerics.linear`) and the Newton iteration with implicit-function-theorem
derivatives (:mod:`~difflie.numerics.newton`). They import nothing of difflie but the result
codes, so kinematics, the implicit solvers and the LGT solvers all use the same ones."""
