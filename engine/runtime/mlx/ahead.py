"""Plain decoding on MLX pipelined as mlx-lm's generate_step: step n+1 launched before token n is read.

A greedy plain step's token is its row's argmax, so the device can take that argmax itself and
decode it at once (mx.async_eval) while the host waits for the row and decides the token: the
next plain decode then finds its logits launched already, and launches the step after it before
its own wait. Nothing is assumed: the host's token is compared with the device's guess, and where
they differ (the round chose otherwise, or the reply ended) the guessed step is trimmed off the
cache before anything else touches it (a recurrent state put back from the snapshot taken before
the guessed step, engine.runtime.mlx.snapshots). The round asks for it a decode at a time
(RuntimeContext.pipeline_greedy); a context with drafters reading its batches never pipelines
(the guessed step would reach them).

What the next decode waits for (the step's row as float32, its argmax and softmax normaliser where
the device takes them) is made with the step and launched with it. MLX runs a stream's work in the
order it was launched: a row sliced only at the wait would queue behind the step launched after
it, and the host would wait for that step too, every token. And MLX signals a launch's arrays once,
when all of it is done: the guess is the row's device argmax launched with the step before (as
mlx-lm's loop launches its token), or, where the host takes the argmax (the first step of a reply on
MLX's CPU backend), goes out with the rows in a launch of its own before the guessed step; launched
with that step, the wait would last it too. A launched step's rows always bring their argmax and
softmax parts (Rows), on the CPU backend too, so a pipelined round reads none of its row.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import trim_prompt_cache

from engine.errors import RuntimeFailure
from engine.runtime.mlx.chain import ban_row

MlxContext = Any  # engine.runtime.mlx.context.MlxContext, which imports this module: no import back


class Ahead:
    """A plain step launched on the device's greedy guess and not waited for: the guess (read with
    the row it was taken from), the step's logits and what its decode will wait for (`waited`,
    Rows, with the ban `banned` added), launched with it. The cache holds the guess."""

    def __init__(self, guess: mx.array, logits: mx.array, waited: Rows, banned: tuple[int, ...]) -> None:
        self.guess, self.logits, self.waited, self.banned = guess, logits, waited, banned


class Rows:
    """What a decode waits for: its rows as float32 ([n, vocab], or the last row's [1, vocab]), the
    ban added on the device (chain.ban_row: the host never writes into MLX's memory, whose first
    touch costs it more than the step's own host work) and, where the device takes them
    (argmax_on_device), each row's argmax, its logit there and its softmax's normaliser, sum(exp(row -
    row[argmax])): a greedy round then reads nothing of the row itself (engine.runtime.mlx.hostrows),
    which on a GPU is a row's copy and a pass over it saved."""

    def __init__(self, logits: mx.array, all_logits: bool, argmax_on_device: bool, ban: mx.array | None = None) -> None:
        out = logits[0] if all_logits else logits[0, -1:]
        out = out if out.dtype == mx.float32 else out.astype(mx.float32)
        self.out = out if ban is None else out + ban
        self.top = self.normaliser = self.largest = None
        self.launched = False  # launched with their step (ahead.launch), not on their own
        if argmax_on_device:
            self.top = mx.argmax(self.out, axis=-1)
            self.largest = mx.max(self.out, axis=-1, keepdims=True)  # the argmax's own logit
            self.normaliser = mx.sum(mx.exp(self.out - self.largest), axis=-1)

    def arrays(self) -> list[mx.array]:
        if self.top is None or self.normaliser is None or self.largest is None:
            return [self.out]
        return [self.out, self.top, self.normaliser, self.largest]


def can_pipeline(ctx: MlxContext) -> bool:
    """Whether a plain step may be launched on a guess here: the cache can drop a step (trimmed, or
    a recurrent state put back from its snapshot), nothing reads the batches, and the guessed step
    fits in the context."""
    return not ctx._unsupported and not ctx.observers.listening and ctx.n_past + 2 <= ctx.n_ctx


def launch(ctx: MlxContext, logits: mx.array, banned: tuple[int, ...], waited: Rows, same_ban: bool) -> mx.array:
    """The device's greedy guess after `logits` ([1, n, vocab], this decode's) and the next step on it,
    launched and not waited for (ctx.ahead), after this decode's `waited` (banned as `banned` where
    `same_ban`); the guess, unevaluated, for the decode's wait to take in."""
    ban = ban_row(ctx.model.n_vocab, banned)
    if waited.top is not None and same_ban:  # the device's argmax of this very row, launched with it
        guess = waited.top
    else:
        row = logits[0, -1].astype(mx.float32)
        guess = mx.argmax(row if ban is None else row + ban, axis=-1)
    # Launched before the guessed step, apart from it: MLX signals a launch's arrays once, when all of
    # it is done, so a guess launched with the step it feeds would keep this decode's wait until that
    # step had run too. Where both were launched with this decode's step (mlx-lm's way), nothing is.
    if not (waited.launched and guess is waited.top):
        mx.async_eval(*waited.arrays(), guess)
    cache = ctx._open_cache()
    if ctx.has_state:  # the state before the guessed step: this decode's token is its position's
        ctx.snapshots.keep(cache, ctx.n_past + 1, 1)
    step = ctx.observers.forward(guess.astype(mx.uint32).reshape(1, 1), cache)
    # A one-row decode's rows, either way, banned as this one's guess (a decode that asks otherwise makes its
    # own), with their argmax and softmax parts on every device: the step after it is guessed from that very
    # argmax, and the round then reads nothing of the row (on MLX's CPU backend the normaliser's pass costs
    # the device what mlx-lm's logsumexp a token does; numpy's pass on the host held up the round's loop).
    following = Rows(step, True, True, ban)
    mx.async_eval(step, *following.arrays())
    following.launched = True
    ctx.ahead = Ahead(guess, step, following, banned)
    return guess


def take(ctx: MlxContext, tokens: list[int]) -> Ahead | None:
    """The launched step (its logits, [1, 1, vocab], and what its decode waits for) where `tokens` is
    the guess (its cache entry then stands); else the guessed step is trimmed off the cache, and None."""
    ahead, ctx.ahead = ctx.ahead, None
    if ahead is None:
        return None
    if len(tokens) == 1 and tokens[0] == int(ahead.guess.item()):  # evaluated in the last decode's wait
        return ahead
    cache = ctx._open_cache()
    if not ctx.has_state:
        trim_prompt_cache(cache, 1)
    elif ctx.snapshots.restore(cache, ctx.n_past + 1, ctx.n_past) != ctx.n_past:
        raise RuntimeFailure(f"{ctx.model.name}'s state before a guessed step was lost; start a new conversation.")
    return None
