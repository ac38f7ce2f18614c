"""Built-in example models (functions whose physical parameters are keyword arguments)."""

from .rigid import heavy_top as heavy_top, rotor as rotor, torque_free as torque_free
