"""The folders of the surface matrix (tests/engine/test_surface_matrix.py and its app twin): tiny
random-weight MLX folders from the kinds' own writers (tests/engine/runtime), one of each kind that
fits its target, and one of each made for another target with the clause its refusal holds."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "runtime"))
from gemma4_targets import write_assistant, write_gemma4
from mlx_folders import CORPUS
from mlx_targets import TOKENIZER_VOCAB, write_dflash, write_dspark, write_eagle3, write_target

PROMPT = "write a function"
# kind: (target, drafter spec, whether the drafter copies the target so that drafts are accepted)
MATRIX = {
    "model": ("qwen35", "qwen35", True),  # the target drafting for itself as a draft model
    "ngram": ("qwen35", "ngram", False),
    "mtp": ("qwen35", "mtp", True),
    "dflash": ("qwen35", "dflash", False),
    "dspark": ("qwen35", "dspark", False),
    "eagle3": ("qwen35", "eagle3", False),
    "assistant": ("gemma4", "assistant", True),
}
WORDS = {"dflash": "a DFlash drafter", "dspark": "a DSpark drafter", "eagle3": "an EAGLE-3 drafter",
         "assistant": "a Gemma 4 assistant model"}  # fmt: skip
# drafter folder: (its kind, the clause its one-sentence refusal holds)
MISMATCHED = {
    "dflash-deep": ("dflash", "reading the target's layers 0 and 5, and the target has layers 0 to 3"),
    "dflash-wide": ("dflash", "for a model 96 wide, and the target is 64 wide"),
    "dspark-other": ("dspark", "for a model of 6 layers, and the target has 4"),
    "eagle3-negative": ("eagle3", "reading the target's layers -5, 1 and 2, and the target has layers 0 to 3"),
    "eagle3-vocab": ("eagle3", "mapping its tokens into a vocabulary of 97, and the target has 300"),
    "assistant-qwen": ("assistant", "made for a Gemma 4 target, and the target is qwen3_5"),
}


def write_folders(root: Path) -> dict[str, Path]:
    """Every folder of the matrix under root, by name."""
    qwen35 = write_target(root / "qwen35", 3, "copy", layers=4, interval=2, tokenizer=CORPUS)
    gemma4 = write_gemma4(root / "gemma4", 61, tokenizer=CORPUS)
    v = TOKENIZER_VOCAB
    return {
        "qwen35": qwen35,
        "gemma4": gemma4,
        "dflash": write_dflash(root / "dflash", 121, vocab=v),
        "dspark": write_dspark(root / "dspark", 141, vocab=v, target_layers=4),
        "eagle3": write_eagle3(root / "eagle3", 12, vocab=v),
        "assistant": write_assistant(root / "assistant", 161, gemma4, "copy", vocab=v),
        "dflash-deep": write_dflash(root / "dflash-deep", 122, target_layers=(0, 5), vocab=v),
        "dflash-wide": write_dflash(root / "dflash-wide", 123, width=96, vocab=v),
        "eagle3-vocab": write_eagle3(root / "eagle3-vocab", 14),
        "dspark-other": write_dspark(root / "dspark-other", 142, vocab=v, target_layers=6),
        "eagle3-negative": write_eagle3(root / "eagle3-negative", 13, target_layers=(-5, 1, 2), vocab=v),
        "assistant-qwen": write_assistant(root / "assistant-qwen", 162, qwen35, width=64, vocab=v),
    }
