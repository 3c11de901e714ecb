"""Each drafter kind's name, written once: the kinds table (engine.drafting.kinds) names its kinds by these,
and each drafter, on either runtime, says its kind with them. A leaf module, so that a drafter reads its
kind's name without importing the table (which imports the drafters) or another runtime's drafter."""

from __future__ import annotations

MODEL = "model"
NGRAM = "ngram"
MTP = "mtp"
ASSISTANT = "assistant"
DFLASH = "dflash"
DSPARK = "dspark"
EAGLE3 = "eagle3"
NONE = "none"
