"""Model files (load) and their errors."""

from .model_file import ModelFileError as ModelFileError, consistent_initial_state as consistent_initial_state, load_model as load_model

__all__ = ["ModelFileError", "consistent_initial_state", "load_model"]
