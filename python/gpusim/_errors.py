"""gpusim.Error and gpusim.GpusimWarning."""
from __future__ import annotations


class Error(Exception):
    """A gpusim command failed. ``str(e)`` is the message the CLI prints
    after ``gpusim: error: ``; ``exit_code`` the CLI's exit code (1 bad input,
    3 environment: I/O, 2 an internal error)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class GpusimWarning(UserWarning):
    """A warning the CLI prints (``gpusim: warning: ...``) for a command that
    succeeded."""
