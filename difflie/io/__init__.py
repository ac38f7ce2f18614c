"""Model files (load) and their errors."""

from .assembly import consistent_initial_state as consistent_initial_state, remove_dependent_rows as remove_dependent_rows
from .model_file import ModelFileError as ModelFileError, load_model as load_model
from .robot import RobotModelWarning as RobotModelWarning, load_robot as load_robot

__all__ = ["ModelFileError", "RobotModelWarning", "consistent_initial_state", "load_model", "load_robot", "remove_dependent_rows"]
