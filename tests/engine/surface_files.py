"""The files of the llama.cpp surface matrix (tests/engine/test_surface_matrix_llama.py and its app twin):
tiny GGUF files written by tests/engine/synthetic*.py, known by construction. A hybrid Qwen 3.5 target
with an MTP head whose next token after x is F[x]; a second file of the same vocabulary as its draft
model; DFlash, DSpark and EAGLE-3 drafters reading its layers; a Gemma 4 target with its assistant.
One of each kind that fits its target, and one of each made for another target with the clause its
refusal holds. The llama.cpp twin of surface_folders.py (MLX)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import N_VOCAB, dflash, eagle3, hybrid_qwen35
from synthetic_gemma4 import gemma4, gemma4_assistant, known_tables
from synthetic_variants import dspark

PROMPT = "the mill on the river turned; the mill on the river"
F = [(3 * x + 1) % 11 + 40 for x in range(N_VOCAB)]  # the target's next token after x: a short cycle
# kind: (target, drafter spec, whether the drafter knows the target's choices so that drafts are accepted)
MATRIX = {
    "model": ("qwen35", "draft", True),  # a second file of the same vocabulary, choosing as the target does
    "ngram": ("qwen35", "ngram", True),  # the target's reply cycles, so its own text predicts it
    "mtp": ("qwen35", "mtp", True),
    "dflash": ("qwen35", "dflash", False),  # every draft is F[mask]: right only where the target says it
    "dspark": ("qwen35", "dspark", True),
    "eagle3": ("qwen35", "eagle3", True),  # reads the state of the token before the last: drafts F[F[x]] after it
    "assistant": ("gemma4", "assistant", True),
}
WORDS = {"dflash": "a DFlash drafter", "dspark": "a DSpark drafter", "eagle3": "an EAGLE-3 drafter",
         "assistant": "a Gemma 4 assistant model"}  # fmt: skip
# drafter file: (the target it is offered to, its kind, the clause its one-sentence refusal holds)
MISMATCHED = {
    "dflash-deep": (
        "qwen35",
        "dflash",
        "reading the target's layers 0 and 5, and draftlight test hybrid with MTP has layers 0 to 1",
    ),
    "eagle3-deep": (
        "qwen35",
        "eagle3",
        "reading the target's layers 0, 1 and 7, and draftlight test hybrid with MTP has layers 0 to 1 and its final state",
    ),
    "dspark-gemma": ("gemma4", "dspark", "for a model 256 wide, and draftlight test gemma4 is 128 wide"),
    "assistant-qwen": ("qwen35", "assistant", "for a model 128 wide, and draftlight test hybrid with MTP is 256 wide"),
}


def write_files(root: Path) -> dict[str, Path]:
    """Every file of the matrix under root, by name."""
    root.mkdir(parents=True, exist_ok=True)
    tables = known_tables()
    return {
        "qwen35": hybrid_qwen35(root / "qwen35-mtp.gguf", nextn=True, known=(F, F)),
        "draft": hybrid_qwen35(root / "qwen35-draft.gguf", known=(F, F)),
        "dflash": dflash(root / "dflash.gguf", known=F),
        "dspark": dspark(root / "dspark.gguf", known=F),
        "eagle3": eagle3(root / "eagle3.gguf", known=[F[F[x]] for x in range(N_VOCAB)]),
        "gemma4": gemma4(root / "gemma-4.gguf", known=tables),
        "assistant": gemma4_assistant(root / "mtp-gemma-4.gguf", known=tables),
        "dflash-deep": dflash(root / "dflash-deep.gguf", target_layers=(0, 5)),
        "eagle3-deep": eagle3(root / "eagle3-deep.gguf", target_layers=(0, 1, 7)),
        "dspark-gemma": dspark(root / "dspark-gemma.gguf"),
        "assistant-qwen": gemma4_assistant(root / "mtp-gemma-4-other.gguf"),
    }
