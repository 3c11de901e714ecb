"""Draftlight's speculative-decoding engine: llama.cpp underneath, no Qt.

from engine import Engine, GenerationConfig
engine = Engine.load("default", "default")
for event in engine.session().send("Write a bubble sort in C++", GenerationConfig(depth=2)):
    ...
"""

from engine.chat import ChatTemplate, Message
from engine.compat import Verdict, check
from engine.drafters import Draft, Drafter, ModelDrafter, NgramDrafter
from engine.errors import (
    ChatTemplateError,
    ContextFullError,
    DraftlightError,
    IncompatibleDrafter,
    ModelFileError,
    ModelNotAvailable,
    RuntimeFailure,
)
from engine.events import Event, FinishReason, RoundEvent, RunStats, TokenEvent, TokenKind
from engine.runtime import Context, Model, RuntimeOptions, set_verbose
from engine.sampling import SamplingConfig
from engine.session import MAX_DEPTH, ChatSession, Engine, load_drafter
from engine.speculative import GenerationConfig, generate, speculative_round

__all__ = [
    "MAX_DEPTH",
    "ChatSession",
    "ChatTemplate",
    "ChatTemplateError",
    "Context",
    "ContextFullError",
    "Draft",
    "Drafter",
    "DraftlightError",
    "Engine",
    "Event",
    "FinishReason",
    "GenerationConfig",
    "IncompatibleDrafter",
    "Message",
    "Model",
    "ModelDrafter",
    "ModelFileError",
    "ModelNotAvailable",
    "NgramDrafter",
    "RoundEvent",
    "RunStats",
    "RuntimeFailure",
    "RuntimeOptions",
    "SamplingConfig",
    "TokenEvent",
    "TokenKind",
    "Verdict",
    "check",
    "generate",
    "load_drafter",
    "set_verbose",
    "speculative_round",
]
