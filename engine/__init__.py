"""Draftlight's speculative-decoding engine: llama.cpp underneath, no Qt.

from engine import Engine, GenerationConfig
engine = Engine.load("default", "default")
for event in engine.session().send("Write a bubble sort in C++", GenerationConfig(depth=2)):
    ...

This module is the engine's public face: what the app, the server and the command line use.
The app imports from here alone (a test holds it to that); a script that needs the round
itself imports engine.speculative, engine.runtime and engine.drafting by name.
The layers beneath, each a sub-package or module with one purpose:

  errors, events, depth, sampling, chat, progress   the vocabulary: no model, no llama.cpp
  runtime/    what the round needs from a backend (protocol), llama.cpp as one (llama/), GGUF reading
  drafting/   the Drafter protocol, one module per kind, and the one table of kinds (kinds)
  models/     the catalog (download, assemble, check) and drafter compatibility
  rounds      a round's data: the config, the prompt's pass, the verdict, each token's provenance
  reporting   rounds into the events a reply streams
  speculative the round (decides provenance) and the generation loop
  measure/    the cost model, box profiles, Auto depth, thermal state, the batch probe
  session     the engine a program holds: a pair, its depth policy, conversations
  replay, stepping, ruler/, cli   teaching replays, round-by-round stepping, the ruler, the CLI
  pairprobe, pairdoctor   the pairing doctor: every rule, memory, an acceptance probe, a prediction
  ledger/     the acceptance ledger: every reply's acceptance kept, baselines, drift warnings
  serve/, remote/   the engine over HTTP, and remote engines (ours, llama-server, vLLM) as event streams
"""

# llama.cpp's library before numpy's: with numpy loaded first, loading a model on CUDA crashed
# (benchmarks/gpu/run.sh's load phase shows which import orders do).
import llama_cpp.llama_cpp  # noqa: F401, I001


from engine.chat import Message
from engine.depth import AUTO, MAX_DEPTH, Depth, DepthPolicy, parse_depth
from engine.drafting.kinds import AUTO_SPEC, DrafterKind
from engine.drafting.kinds import KINDS as DRAFTER_KINDS
from engine.drafting.kinds import NONE as NO_DRAFTER
from engine.errors import (
    Cancelled,
    ChatTemplateError,
    ContextFullError,
    DraftlightError,
    IncompatibleDrafter,
    MessageTooLong,
    ModelFileError,
    ModelNotAvailable,
    RuntimeFailure,
)
from engine.fitting import FittedConversation, fit_conversation, reply_room
from engine.events import Event, FinishReason, PositionTally, RoundEvent, RunStats, TokenEvent, TokenKind
from engine.measure.auto import AutoDepth, MeasurePlan
from engine.measure.timing import MeasureStep
from engine.measure.soundness import ProfileRefused
from engine.measure.costmodel import (
    PRESET_COSTS,
    TYPICAL_ACCEPTANCE,
    TYPICAL_COSTS,
    BoxProfile,
    Costs,
    DepthPrediction,
    best_depth,
    conditional_acceptance,
    measured_acceptance,
    measured_plain_pass_s,
    measured_round_cost,
    predict,
)
from engine.drafting.ngram import NgramDrafter, NgramMatch
from engine.drafting.ngram import match as ngram_match
from engine.measure.thermal import ThermalReading, ThermalSampler, ThermalState
from engine.models import catalog
from engine.models.fetch import CatalogModel, Progress
from engine.replay import Replay, mentioned_tokens
from engine.replay import from_json as replay_from_json
from engine.replay import load as load_replay
from engine.replay import record as record_replay
from engine.replay import recorded as with_replay
from engine.ruler.prompts import BenchPrompt
from engine.ruler.prompts import load_file as load_prompts_file
from engine.rounds import GenerationConfig
from engine.runtime import Model, RuntimeOptions, runtime_version, set_verbose
from engine.runtime.formats import LLAMA, MLX, runtime_name
from engine.runtime.loading import AUTO as AUTO_RUNTIME
from engine.runtime.loading import chosen_runtime
from engine.sampling import SamplingConfig
from engine.measure.anatomy import RANK_BUCKETS, RejectionAnatomy, ordinal, rank_bucket, rejection_anatomy
from engine.measure.gauge import gauge
from engine.models.local import local_models
from engine.models.naming import model_title
from engine.pairdoctor import PairReport, pair_report, probe_pair
from engine.pairloading import load_drafter, load_target, plain_reason_for
from engine.session import ChatSession, Engine
from engine.stepping import RoundStep, Stepper
from engine.remote import ConnectionLost, Endpoint, Remote, RemoteError, RemoteInfo, Unreachable
from engine.remote import attach as attach_remote
from engine.events import CONTENT_KINDS
from engine.ledger.recording import ledger
from engine.ledger.report import PairLedger, export_csv, export_json, for_pair

__all__ = [
    "AUTO",
    "AUTO_RUNTIME",
    "AUTO_SPEC",
    "CONTENT_KINDS",
    "DRAFTER_KINDS",
    "LLAMA",
    "MAX_DEPTH",
    "MLX",
    "NO_DRAFTER",
    "PRESET_COSTS",
    "RANK_BUCKETS",
    "TYPICAL_ACCEPTANCE",
    "TYPICAL_COSTS",
    "AutoDepth",
    "BenchPrompt",
    "BoxProfile",
    "Cancelled",
    "CatalogModel",
    "ChatSession",
    "ChatTemplateError",
    "ConnectionLost",
    "ContextFullError",
    "Costs",
    "Depth",
    "DepthPolicy",
    "DepthPrediction",
    "DrafterKind",
    "DraftlightError",
    "Endpoint",
    "Engine",
    "Event",
    "FinishReason",
    "FittedConversation",
    "GenerationConfig",
    "IncompatibleDrafter",
    "MeasurePlan",
    "MeasureStep",
    "Message",
    "MessageTooLong",
    "Model",
    "ModelFileError",
    "ModelNotAvailable",
    "NgramDrafter",
    "NgramMatch",
    "PairLedger",
    "PairReport",
    "PositionTally",
    "ProfileRefused",
    "Progress",
    "RejectionAnatomy",
    "Remote",
    "RemoteError",
    "RemoteInfo",
    "Replay",
    "RoundEvent",
    "RoundStep",
    "RunStats",
    "RuntimeFailure",
    "RuntimeOptions",
    "SamplingConfig",
    "Stepper",
    "ThermalReading",
    "ThermalSampler",
    "ThermalState",
    "TokenEvent",
    "TokenKind",
    "Unreachable",
    "attach_remote",
    "best_depth",
    "catalog",
    "chosen_runtime",
    "command_line",
    "conditional_acceptance",
    "export_csv",
    "export_json",
    "fit_conversation",
    "for_pair",
    "gauge",
    "ledger",
    "load_drafter",
    "load_prompts_file",
    "load_replay",
    "load_target",
    "local_models",
    "measured_acceptance",
    "measured_plain_pass_s",
    "measured_round_cost",
    "mentioned_tokens",
    "model_title",
    "ngram_match",
    "ordinal",
    "pair_report",
    "parse_depth",
    "plain_reason_for",
    "predict",
    "probe_pair",
    "rank_bucket",
    "record_replay",
    "rejection_anatomy",
    "replay_from_json",
    "reply_room",
    "run_command",
    "runtime_name",
    "runtime_version",
    "set_verbose",
    "with_replay",
]


def command_line():
    """The `draftlight` argument parser with every sub-command (engine.cli, loaded on first use)."""
    from engine.cli import build_parser

    return build_parser()


def run_command(args) -> int:
    """Run one parsed sub-command; a failure is one sentence on standard error and exit status 2."""
    from engine.cli import run

    return run(args)
