"""Tiny MLX model folders written at test time: random qwen2 weights, a real byte-level BPE tokenizer
trained here on a few lines, ChatML's template. What an mlx-community folder holds, small enough
to load in a second: config.json, model.safetensors, tokenizer.json, tokenizer_config.json."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

CORPUS = (
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "system user assistant: write a function that adds two numbers.",
)
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
VOCAB = 300


def write_tokenizer(folder: Path, vocab: int = VOCAB, corpus: tuple[str, ...] = CORPUS) -> None:
    """A byte-level BPE of `vocab` tokens (the special ones first), trained on CORPUS: the same files
    for the same arguments, so two folders written alike share a vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=list(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": CHATML,
        "model_max_length": 512,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def write_qwen2_folder(
    folder: Path, seed: int, layers: int = 2, hidden: int = 64, vocab: int = VOCAB, corpus: tuple[str, ...] = CORPUS
) -> Path:
    """An MLX folder of a tiny qwen2 with random weights (the same for the same seed) and the tokenizer."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import qwen2

    args = qwen2.ModelArgs(
        model_type="qwen2",
        hidden_size=hidden,
        num_hidden_layers=layers,
        intermediate_size=2 * hidden,
        num_attention_heads=4,
        rms_norm_eps=1e-6,
        vocab_size=vocab,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,  # tied, a random model's argmax is mostly its input token again
    )
    mx.random.seed(seed)
    module = qwen2.Model(args)
    mx.eval(module.parameters())
    folder.mkdir(parents=True, exist_ok=True)
    weights = dict(tree_flatten(module.parameters()))
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})  # as mlx_lm saves
    (folder / "config.json").write_text(json.dumps(asdict(args)))
    write_tokenizer(folder, vocab, corpus)
    return folder
