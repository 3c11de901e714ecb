"""What a replay file may hold, checked before anything shows it.

Replays come from other people. Every field is checked for its type and a size limit
before an event is made from it, so a damaged or hostile file gets one sentence naming
the field, never an exception inside the window, and never minutes of work or gigabytes.
"""

from __future__ import annotations

import math

from engine.events import FinishReason, TokenKind

# A teaching replay of 160 tokens with five candidates a side is about 200 KB; 16 MiB is
# room for a reply 50 times as long, and parses in well under a second.
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_ROUNDS = 20_000  # a reply of at least 20,000 tokens: far past any teaching session
MAX_PIECES = 300_000  # more than the largest vocabulary (Gemma's 262,144)
MAX_PIECE_CHARS = 1_024  # the longest tokens in real vocabularies are a few hundred bytes
MAX_NAME_CHARS = 4_096  # a model's name or path
MAX_MESSAGE_CHARS = 65_536  # the stats' sentence and the whole reply's text are checked by the file cap
MAX_DRAFTED = 64  # drafts in one round: fixed depths go to 6, DFlash blocks to 16
MAX_TOP = 64  # candidates shown per token (the teaching view asks for 5)
MAX_TOKEN_ID = 2**31 - 1
MAX_COUNT = 10**9  # any count of tokens or rounds


class Invalid(Exception):
    """A field that breaks the schema; its message says where and why, for a sentence."""


def _field(d: dict, key: str, where: str, required: bool = True):
    if key not in d:
        if required:
            raise Invalid(f"{where} has no '{key}'")
        return None
    return d[key]


def integer(value, where: str, low: int = 0, high: int = MAX_COUNT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"{where} is {type(value).__name__}, not a whole number")
    if not low <= value <= high:
        raise Invalid(f"{where} is {value}, outside {low}..{high}")
    return value


def number(value, where: str, low: float = 0.0, high: float = 1e12) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f"{where} is {type(value).__name__}, not a number")
    value = float(value)
    if not math.isfinite(value) or not low <= value <= high:
        raise Invalid(f"{where} is {value}, outside {low:g}..{high:g}")
    return value


def text(value, where: str, limit: int) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{where} is {type(value).__name__}, not text")
    if len(value) > limit:
        raise Invalid(f"{where} is {len(value):,} characters long, over the limit of {limit:,}")
    return value


def array(value, where: str, limit: int) -> list:
    if not isinstance(value, list):
        raise Invalid(f"{where} is {type(value).__name__}, not a list")
    if len(value) > limit:
        raise Invalid(f"{where} has {len(value):,} entries, over the limit of {limit:,}")
    return value


def mapping(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise Invalid(f"{where} is {type(value).__name__}, not an object")
    return value


def top_list(value, where: str) -> list:
    for i, pair in enumerate(array(value, where, MAX_TOP)):
        if not isinstance(pair, list) or len(pair) != 2:
            raise Invalid(f"{where}[{i}] is not a [token id, probability] pair")
        integer(pair[0], f"{where}[{i}][0]", high=MAX_TOKEN_ID)
        number(pair[1], f"{where}[{i}][1]", high=1.0)
    return value


def check_token(t, where: str, round_index: int) -> None:
    t = mapping(t, where)
    integer(_field(t, "token_id", where), f"{where}.token_id", high=MAX_TOKEN_ID)
    text(_field(t, "text", where), f"{where}.text", MAX_PIECE_CHARS)
    kind = _field(t, "kind", where)
    if kind not in {k.value for k in TokenKind}:
        raise Invalid(f"{where}.kind is {str(kind)[:40]!r}, not one of {', '.join(k.value for k in TokenKind)}")
    if integer(_field(t, "round", where), f"{where}.round") != round_index:
        raise Invalid(f"{where}.round is {t['round']}, not its round's {round_index}")
    integer(_field(t, "position", where), f"{where}.position", high=MAX_DRAFTED)
    number(_field(t, "target_prob", where), f"{where}.target_prob", high=1.0)
    if t.get("draft_prob") is not None:
        number(t["draft_prob"], f"{where}.draft_prob", high=1.0)
    if t.get("rejected_id") is not None:
        integer(t["rejected_id"], f"{where}.rejected_id", high=MAX_TOKEN_ID)
    if t.get("rejected_text") is not None:
        text(t["rejected_text"], f"{where}.rejected_text", MAX_PIECE_CHARS)
    for key in ("target_top", "draft_top"):
        if key in t:
            top_list(t[key], f"{where}.{key}")


ROUND_TIMES = ("draft_ms", "verify_ms", "commit_ms", "rewind_ms", "overhead_ms")


def check_round(r, where: str, last: bool = False) -> None:
    """One round; the `last` may be cut short (the reply's max tokens, or a stop among its drafts)."""
    r = mapping(r, where)
    index = integer(_field(r, "round", where), f"{where}.round")
    drafted = integer(_field(r, "drafted", where), f"{where}.drafted", high=MAX_DRAFTED)
    accepted = integer(_field(r, "accepted", where), f"{where}.accepted", high=drafted)
    for key in ROUND_TIMES:
        number(_field(r, key, where), f"{where}.{key}")
    if "round_ms" in r:
        number(r["round_ms"], f"{where}.round_ms")
    if "depth" in r:
        integer(r["depth"], f"{where}.depth", high=MAX_DRAFTED)
    if r.get("host_syncs") is not None:
        integer(r["host_syncs"], f"{where}.host_syncs")
    for flag in ("from_prefill", "guessed"):
        if flag in r and not isinstance(r[flag], bool):
            raise Invalid(f"{where}.{flag} is {type(r[flag]).__name__}, not true or false")
    drafts = array(r.get("draft_tokens", []), f"{where}.draft_tokens", MAX_DRAFTED)
    for i, token in enumerate(drafts):
        integer(token, f"{where}.draft_tokens[{i}]", high=MAX_TOKEN_ID)
    if drafts and len(drafts) != drafted:
        raise Invalid(f"{where} drafted {drafted} tokens but lists {len(drafts)}")
    tokens = array(_field(r, "tokens", where), f"{where}.tokens", MAX_DRAFTED + 1)
    # What the teaching view walks: the kept drafts and the target's own, fewer only where the reply ended.
    if len(tokens) != accepted + 1 and not (last and 1 <= len(tokens) <= accepted):
        raise Invalid(f"{where} kept {accepted} drafts, so it needs {accepted + 1} tokens, not {len(tokens)}")
    for i, t in enumerate(tokens):
        check_token(t, f"{where}.tokens[{i}]", index)


STATS_COUNTS = ("prompt_tokens", "generated_tokens", "rounds", "drafted", "accepted")
STATS_TIMES = ("prefill_s", "decode_s", "draft_s", "verify_s", "commit_s", "rewind_s", "overhead_s")


def check_stats(s, where: str = "stats") -> None:
    s = mapping(s, where)
    for key in STATS_COUNTS:
        integer(_field(s, key, where), f"{where}.{key}")
    if "from_prefill" in s:
        integer(s["from_prefill"], f"{where}.from_prefill")
    if s.get("host_syncs") is not None:
        integer(s["host_syncs"], f"{where}.host_syncs")
    for key in STATS_TIMES:
        number(_field(s, key, where), f"{where}.{key}")
    depth = _field(s, "depth", where)
    if depth not in ("auto", -1):
        integer(depth, f"{where}.depth", high=MAX_DRAFTED)
    reason = _field(s, "finish_reason", where)
    if reason not in {r.value for r in FinishReason}:
        raise Invalid(
            f"{where}.finish_reason is {str(reason)[:40]!r}, not one of {', '.join(r.value for r in FinishReason)}"
        )
    for key in ("message", "text"):
        if key in s:
            text(s[key], f"{where}.{key}", MAX_MESSAGE_CHARS if key == "message" else MAX_FILE_BYTES)
    for key in ("acceptance_per_position",):
        for i, v in enumerate(array(s.get(key, []), f"{where}.{key}", MAX_DRAFTED)):
            number(v, f"{where}.{key}[{i}]", high=1.0)
    for key in ("drafted_per_position", "accepted_per_position"):
        for i, v in enumerate(array(s.get(key, []), f"{where}.{key}", MAX_DRAFTED)):
            integer(v, f"{where}.{key}[{i}]")
    for i, v in enumerate(array(s.get("token_ids", []), f"{where}.token_ids", MAX_COUNT)):
        integer(v, f"{where}.token_ids[{i}]", high=MAX_TOKEN_ID)


def check_replay(data: dict) -> None:
    """Raise Invalid, naming the first field that breaks the schema; return quietly otherwise."""
    for key in ("target", "drafter"):
        if key in data:
            text(data[key], key, MAX_NAME_CHARS)
    if "prompt" in data:
        text(data["prompt"], "prompt", MAX_FILE_BYTES)
    if "config" in data:
        mapping(data["config"], "config")
    if data.get("plain_pass_ms") is not None:
        number(data["plain_pass_ms"], "plain_pass_ms")
    pieces = mapping(data.get("pieces", {}), "pieces")
    if len(pieces) > MAX_PIECES:
        raise Invalid(f"pieces has {len(pieces):,} entries, over the limit of {MAX_PIECES:,}")
    for key, value in pieces.items():
        if not key.isascii() or not key.isdigit() or len(key) > 10:
            raise Invalid(f"pieces has the key {key[:40]!r}, not a token id")
        text(value, f"pieces[{key}]", MAX_PIECE_CHARS)
    rounds = array(_field(data, "rounds", "the file"), "rounds", MAX_ROUNDS)
    for i, r in enumerate(rounds):
        check_round(r, f"rounds[{i}]", last=i == len(rounds) - 1)
    check_stats(_field(data, "stats", "the file"))
