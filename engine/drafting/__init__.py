"""Drafters: whatever proposes the tokens the target then verifies.

One small protocol (`Drafter`) and one module per kind: a draft model, an n-gram table,
the target's own MTP head, a DFlash drafter, an EAGLE-3 drafter.
"""

from engine.drafting.base import Draft, Drafter, VerifyBatch
from engine.drafting.dflash import DflashDrafter
from engine.drafting.eagle3 import Eagle3Drafter
from engine.drafting.model import ModelDrafter
from engine.drafting.mtp import MtpDrafter
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
