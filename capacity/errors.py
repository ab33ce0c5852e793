"""Input errors of the capacity engine: one line, what is wrong and what is accepted."""

from __future__ import annotations

__all__ = ["CapacityError", "ConfigError"]


class CapacityError(ValueError):
    """Base of every input error; ``str()`` is one line saying what is wrong and what is accepted."""

    def __init__(self, message: str) -> None:
        # Errors are shown to people as one line: fold any newline a caller let through.
        super().__init__(" ".join(message.split()))


class ConfigError(CapacityError):
    """A problem in a Hugging Face ``config.json``; ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"config.json field {field!r}: {message}")
