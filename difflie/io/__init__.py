"""Model files (load) and their errors."""

from .model_file import (
    ModelFileError as ModelFileError,
    consistent_initial_state as consistent_initial_state,
    load_model as load_model,
    remove_dependent_rows as remove_dependent_rows,
)
from .robot import RobotModelWarning as RobotModelWarning, load_robot as load_robot

__all__ = ["ModelFileError", "RobotModelWarning", "consistent_initial_state", "load_model", "load_robot", "remove_dependent_rows"]
