"""Draftlight's speculative-decoding engine: llama.cpp underneath, no Qt.

from engine import Engine, GenerationConfig
engine = Engine.load("default", "default")
for event in engine.session().send("Write a bubble sort in C++", GenerationConfig(depth=2)):
    ...

This module is the engine's public face: the app and scripts import from here alone.
The layers beneath, each a sub-package or module with one purpose:

  errors, events, depth, sampling, chat, progress   the vocabulary: no model, no llama.cpp
  runtime/    the llama.cpp binding: load, decode a batch, logits, rewind; GGUF reading
  models/     the catalog (download, assemble, check) and drafter compatibility
  drafting/   the Drafter protocol and one module per kind: model, n-gram
  speculative the round (decides provenance) and the generation loop
  measure/    the cost model, box profiles, Auto depth, thermal state, the batch probe
  session     the engine a program holds: a pair, its depth policy, conversations
  replay, stepping, ruler/, cli   teaching replays, round-by-round stepping, the ruler, the CLI
  pairprobe, pairdoctor   the pairing doctor: every rule, memory, an acceptance probe, a prediction
  serve/, remote/   the engine over HTTP, and remote engines (ours, llama-server, vLLM) as event streams
"""

# llama.cpp's library before numpy's: with numpy loaded first, loading a model on CUDA crashed
# (benchmarks/gpu/run.sh's load phase shows which import orders do).
import llama_cpp.llama_cpp  # noqa: F401, I001


from engine.chat import ChatTemplate, Message, template_for, tokenize_prompt
from engine.depth import AUTO, MAX_DEPTH, Depth, DepthPolicy, FixedDepth, describe_depth, parse_depth
from engine.drafting import Draft, Drafter, ModelDrafter, MtpDrafter, NgramDrafter, VerifyBatch
from engine.errors import (
    Cancelled,
    ChatTemplateError,
    ContextFullError,
    DraftlightError,
    IncompatibleDrafter,
    ModelFileError,
    ModelNotAvailable,
    RuntimeFailure,
)
from engine.events import (
    ContentStats,
    Event,
    FinishReason,
    PositionTally,
    RoundEvent,
    RunStats,
    TokenEvent,
    TokenKind,
    event_from_json,
)
from engine.measure.auto import AutoDepth
from engine.measure.costmodel import (
    PRESET_COSTS,
    TYPICAL_ACCEPTANCE,
    TYPICAL_COSTS,
    BoxProfile,
    Costs,
    DepthPrediction,
    best_depth,
    conditional_acceptance,
    expected_tokens,
    explain,
    measured_acceptance,
    measured_plain_pass_s,
    measured_round_cost,
    predict,
)
from engine.measure.probe import ProbeResult, batch_invariance
from engine.measure.profile import load_profile, profile_for_target_only, saved_pair_profile, saved_target_profile
from engine.measure.thermal import ThermalReading, ThermalSampler, ThermalState, read_thermal
from engine.models import Verdict, catalog, check
from engine.models.catalog import CatalogModel, Progress
from engine.replay import Replay, mentioned_tokens
from engine.replay import load as load_replay
from engine.replay import record as record_replay
from engine.ruler.prompts import BenchPrompt
from engine.ruler.prompts import load_file as load_prompts_file
from engine.runtime import Context, Model, RuntimeOptions, runtime_version, set_verbose
from engine.sampling import SamplingConfig
from engine.measure.anatomy import RANK_BUCKETS, RejectionAnatomy, WhatIf, ordinal, rank_bucket, rejection_anatomy
from engine.measure.gauge import Gauge, gauge
from engine.models.local import LocalModel, local_models
from engine.models.compat import Rule
from engine.pairdoctor import PairReport, Prediction, pair_report, probe_pair
from engine.pairprobe import Probe, PromptProbe
from engine.session import ChatSession, Engine, PairSpec, load_drafter, plain_reason_for
from engine.speculative import GenerationConfig, Prefill, generate, speculative_round
from engine.stepping import RoundStep, Stepper
from engine.remote import ConnectionLost, Endpoint, Remote, RemoteError, RemoteInfo, Unreachable
from engine.remote import attach as attach_remote

__all__ = [
    "AUTO",
    "MAX_DEPTH",
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
    "ChatTemplate",
    "ChatTemplateError",
    "ConnectionLost",
    "ContentStats",
    "Context",
    "ContextFullError",
    "Costs",
    "Depth",
    "DepthPolicy",
    "DepthPrediction",
    "Draft",
    "Drafter",
    "DraftlightError",
    "Endpoint",
    "Engine",
    "Event",
    "FinishReason",
    "FixedDepth",
    "Gauge",
    "GenerationConfig",
    "IncompatibleDrafter",
    "LocalModel",
    "Message",
    "Model",
    "ModelDrafter",
    "ModelFileError",
    "ModelNotAvailable",
    "MtpDrafter",
    "NgramDrafter",
    "PairReport",
    "PairSpec",
    "PositionTally",
    "Prediction",
    "Prefill",
    "Probe",
    "ProbeResult",
    "Progress",
    "PromptProbe",
    "RejectionAnatomy",
    "Remote",
    "RemoteError",
    "RemoteInfo",
    "Replay",
    "RoundEvent",
    "RoundStep",
    "Rule",
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
    "Verdict",
    "VerifyBatch",
    "WhatIf",
    "attach_remote",
    "batch_invariance",
    "best_depth",
    "catalog",
    "check",
    "command_line",
    "conditional_acceptance",
    "describe_depth",
    "event_from_json",
    "expected_tokens",
    "explain",
    "gauge",
    "generate",
    "load_drafter",
    "load_profile",
    "load_prompts_file",
    "load_replay",
    "local_models",
    "measured_acceptance",
    "measured_plain_pass_s",
    "measured_round_cost",
    "mentioned_tokens",
    "ordinal",
    "pair_report",
    "parse_depth",
    "plain_reason_for",
    "predict",
    "probe_pair",
    "profile_for_target_only",
    "rank_bucket",
    "read_thermal",
    "record_replay",
    "rejection_anatomy",
    "run_command",
    "runtime_version",
    "saved_pair_profile",
    "saved_target_profile",
    "set_verbose",
    "speculative_round",
    "template_for",
    "tokenize_prompt",
]


def command_line():
    """The `draftlight` argument parser with every sub-command (engine.cli, loaded on first use)."""
    from engine.cli import build_parser

    return build_parser()


def run_command(args) -> int:
    """Run one parsed sub-command; a failure is one sentence on standard error and exit status 2."""
    from engine.cli import run

    return run(args)
