"""Built-in example models (functions whose physical parameters are keyword arguments)."""

from .mechanisms import chain as chain, ladder as ladder, spider as spider
from .planar import (
    double_pendulum as double_pendulum,
    four_link as four_link,
    single_pendulum as single_pendulum,
    slider_crank as slider_crank,
)
from .rigid import heavy_top as heavy_top, rotor as rotor, torque_free as torque_free
from .spatial import (
    heavy_top_spherical as heavy_top_spherical,
    puma560 as puma560,
    spatial_slider_crank as spatial_slider_crank,
)
