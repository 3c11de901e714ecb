"""A GGUF's tokenizer as Hugging Face tokenizer files: what mlx-lm's load() (through transformers) reads.

The vocabulary, merges, token types and special ids are the GGUF's metadata (llama.cpp's key names);
transformers' GGUF tokenizer builders (transformers.integrations.gguf) turn them into a tokenizer of
the class the file describes, which needs no torch. What they leave to the caller is written here:
the chat template, the special tokens by name, and the end-of-generation ids, chosen by the rules
llama.cpp's vocabulary follows (llama-vocab.cpp) so that both runtimes stop on the same tokens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.errors import ModelFileError

# GGUF token types (gguf.TokenType): llama.cpp parses CONTROL and USER_DEFINED tokens whole in text.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

# llama-vocab.cpp finds these by their texts, marks them control tokens (parsed whole in text) and
# ends generation on the last group, besides the file's own eos/eot/eom ids.
EOT_TEXTS = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<end_of_utterance>",
)  # fmt: skip
FIM_TEXTS = {
    "pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|code_prefix|>", "<|prefix|>"),
    "suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "<|code_suffix|>", "<|suffix|>"),
    "mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "<|code_middle|>", "<|middle|>"),
    "pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "sep": ("<|file_sep|>",),
}
EOG_TEXTS = (
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
)  # fmt: skip
ALWAYS_SHOWN = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")  # llama.cpp: user-defined

# The metadata keys a tokenizer needs, under transformers' names for them.
_KEYS = {
    "tokenizer.ggml.model": "tokenizer_type",
    "tokenizer.ggml.pre": "pre_tokenizer_type",
    "tokenizer.ggml.tokens": "tokens",
    "tokenizer.ggml.scores": "scores",
    "tokenizer.ggml.token_type": "token_type",
    "tokenizer.ggml.merges": "merges",
    "tokenizer.ggml.bos_token_id": "bos_token_id",
    "tokenizer.ggml.eos_token_id": "eos_token_id",
    "tokenizer.ggml.unknown_token_id": "unk_token_id",
    "tokenizer.ggml.padding_token_id": "pad_token_id",
    "tokenizer.ggml.add_space_prefix": "add_prefix_space",
}


def _token_id(metadata: dict[str, Any], key: str, n_tokens: int) -> int | None:
    value = metadata.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n_tokens:
        return value
    return None


def _first(ids: dict[str, int], texts: tuple[str, ...]) -> int | None:
    """The token with the first of these texts that the vocabulary has (llama.cpp: the first found)."""
    return next((ids[t] for t in texts if t in ids), None)


def llama_special_tokens(metadata: dict[str, Any]) -> tuple[list[int], list[int]]:
    """Each token's type as llama.cpp uses it, and the ids it ends generation on (llama-vocab.cpp's rules).

    llama.cpp marks tokens found by their texts (end of turn, fill-in-the-middle, end of generation) as
    control tokens, which its tokenizer then parses whole: a tokenizer that should give the same ids
    must treat them so too.
    """
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    n = len(tokens)
    types = list(metadata.get("tokenizer.ggml.token_type") or [NORMAL] * n)
    ids: dict[str, int] = {}
    for i, text in enumerate(tokens):
        ids[text] = i  # llama.cpp's text-to-id map: the last of duplicates wins

    def own(key: str) -> int | None:
        return _token_id(metadata, f"tokenizer.ggml.{key}_token_id", n)

    eot = own("eot")
    eot = eot if eot is not None else _first(ids, EOT_TEXTS)
    eom = own("eom")
    eom = eom if eom is not None else ids.get("<|eom_id|>")
    fim = {}
    for part, fim_texts in FIM_TEXTS.items():
        found = own(f"fim_{part}")
        fim[part] = found if found is not None else _first(ids, fim_texts)
    by_text = [t for t in (eot, eom, *fim.values()) if t is not None]
    eog = {t for t in (fim["pad"], fim["rep"], fim["sep"]) if t is not None}
    named = [ids[t] for t in EOG_TEXTS if t in ids]
    eog.update(named)
    for t in (*by_text, *named):
        types[t] = CONTROL
    for text in ALWAYS_SHOWN:
        if text in ids:
            types[ids[text]] = USER_DEFINED
    eog.update(t for t in (own("eos"), eot, eom) if t is not None)
    texts = {tokens[t]: t for t in eog}
    if "<|end|>" in texts and (
        ("<|return|>" in texts and "<|call|>" in texts) or ("<|calls|>" in texts and "<|flush|>" in texts)
    ):
        eog.discard(texts["<|end|>"])
        types[texts["<|end|>"]] = USER_DEFINED
    if "<|tool_response>" in texts and "</s>" in texts:
        eog.discard(texts["</s>"])
        types[texts["</s>"]] = NORMAL
    return types, sorted(eog)


def eog_token_ids(metadata: dict[str, Any]) -> list[int]:
    """The token ids llama.cpp ends generation on."""
    return llama_special_tokens(metadata)[1]


def _tokenizer_dict(metadata: dict[str, Any]) -> dict[str, Any]:
    found = {name: metadata[key] for key, name in _KEYS.items() if key in metadata}
    tokens = found.get("tokens")
    if not isinstance(tokens, list) or not tokens:
        raise ModelFileError("the model file holds no vocabulary (tokenizer.ggml.tokens): it cannot be converted.")
    for key in ("token_type", "scores"):
        if key in found and (not isinstance(found[key], list) or len(found[key]) != len(tokens)):
            raise ModelFileError(
                f"the model file's tokenizer.ggml.{key} does not list one entry per token ({len(tokens):,}): "
                "the file is damaged; fetch it again."
            )
    merges = found.get("merges")
    if merges is not None and not (isinstance(merges, list) and all(m.count(" ") == 1 for m in merges)):
        raise ModelFileError("the model file's merges are not pairs of tokens: the file is damaged; fetch it again.")
    return found


def build_tokenizer(metadata: dict[str, Any]) -> Any:
    """A transformers tokenizer for the GGUF's vocabulary, with its chat template and special tokens."""
    from transformers.integrations.gguf import gguf_tokenizer_mapping as gguf_tok

    found = _tokenizer_dict(metadata)
    found["token_type"], _ = llama_special_tokens(metadata)
    architecture = str(metadata.get("general.architecture", ""))
    try:
        builder = gguf_tok.select_tokenizer_builder(architecture, found.get("tokenizer_type"))
        tokenizer = builder(found)
        tokenizer = gguf_tok.add_gguf_special_tokens(tokenizer, found)
        tokenizer = gguf_tok.set_split_regex(tokenizer, found)
    except Exception as exc:  # the builders raise whatever the tokenizers crate and the file's contents make
        raise ModelFileError(f"transformers cannot build this model's tokenizer: {exc}") from exc
    tokens = found["tokens"]
    for role, key in (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("pad", "padding")):
        token = _token_id(metadata, f"tokenizer.ggml.{key}_token_id", len(tokens))
        if token is not None:
            setattr(tokenizer, f"{role}_token", tokens[token])
    template = metadata.get("tokenizer.chat_template")
    if isinstance(template, str):
        tokenizer.chat_template = template
    return tokenizer


def write_tokenizer_files(metadata: dict[str, Any], folder: Path) -> list[int]:
    """tokenizer.json, tokenizer_config.json and the chat template into `folder`; the end-of-generation ids.

    The config names the generic fast tokenizer class, so that transformers loads tokenizer.json as it
    is written rather than rebuilding a model family's pipeline around it.
    """
    tokenizer = build_tokenizer(metadata)
    tokenizer.save_pretrained(str(folder))
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["add_bos_token"] = bool(metadata.get("tokenizer.ggml.add_bos_token", False))
    config["add_eos_token"] = bool(metadata.get("tokenizer.ggml.add_eos_token", False))
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    return eog_token_ids(metadata)
