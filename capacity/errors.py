"""Input errors of the capacity engine: one line, what is wrong and what is accepted."""

from __future__ import annotations

__all__ = ["CapacityError", "ConfigError"]


class CapacityError(ValueError):
    """Base of every input error; ``str()`` is one line saying what is wrong and what is accepted."""

    def __init__(self, message: str) -> None:
        # Errors are shown to people as one line: fold any newline a caller let through.
        super().__init__(" ".join(message.split()))


#: Files beside config.json that a field may live in, named first in ``ConfigError.field``.
_OTHER_FILES = ("hf_quant_config.json", "quantize_config.json", "quant_config.json")


class ConfigError(CapacityError):
    """A problem in a Hugging Face ``config.json`` (or ``hf_quant_config.json`` beside it, when ``field``
    starts with that name); ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        """What is wrong with the field and what is accepted, without the field's name."""
        file, _, inner = field.partition(".json.")
        if f"{file}.json" in _OTHER_FILES and inner:
            super().__init__(f"{file}.json field {inner!r}: {message}")
        else:
            super().__init__(f"config.json field {field!r}: {message}")

    def within(self, key: str) -> ConfigError:
        """The same error, its field named by its path under the object ``key`` (``vision_config.depth``)."""
        return ConfigError(f"{key}.{self.field}", self.message)
