"""Drafters: whatever proposes the tokens the target then verifies.

One small protocol (`Drafter`) and one module per kind: a draft model and an n-gram table here (any
runtime); llama.cpp's MTP heads, DFlash and EAGLE-3 drafters in `llama/`; MLX's in `mlx/`.
"""

from engine.drafting.base import Draft, Drafter, VerifyBatch
from engine.drafting.llama.dflash import DflashDrafter
from engine.drafting.llama.eagle3 import Eagle3Drafter
from engine.drafting.llama.mtp import MtpDrafter
from engine.drafting.model import ModelDrafter
from engine.drafting.ngram import NgramDrafter, lookup

__all__ = [
    "DflashDrafter",
    "Draft",
    "Drafter",
    "Eagle3Drafter",
    "ModelDrafter",
    "MtpDrafter",
    "NgramDrafter",
    "VerifyBatch",
    "lookup",
]
