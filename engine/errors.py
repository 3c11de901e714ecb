"""Errors a user can act on. Each message is a sentence, never a traceback."""


class DraftlightError(Exception):
    """Base of every error the engine reports to a person."""


class ModelFileError(DraftlightError):
    """A model file is missing, not GGUF, truncated or unreadable."""


class ModelNotAvailable(DraftlightError):
    """No source could provide a catalog model."""


class IncompatibleDrafter(DraftlightError):
    """The drafter cannot propose tokens the target understands."""


class ChatTemplateError(DraftlightError):
    """The model's chat template raised or tried to leave the sandbox."""


class ContextFullError(DraftlightError):
    """The conversation no longer fits the context window."""


class RuntimeFailure(DraftlightError):
    """llama.cpp refused an operation (decode, rewind)."""


class Cancelled(DraftlightError):
    """The user stopped the work before it produced anything."""


class MessageTooLong(ContextFullError):
    """The newest message cannot fit the context even with every earlier turn left out."""
