"""Drafters that read an MLX target's hidden states, on mlx-vlm's drafter modules.

Each is a Drafter (engine.drafting.base) for the round as it is; engine.drafting.kinds picks one of
these where the target's context is an MlxContext. heads: what the two share; mtp: a target's own
multi-token-prediction head (Qwen 3.5 and its kin, the `mtp.*` weights in the target's folder);
eagle3: an EAGLE-3 drafter in a folder of its own, reading three of the target's layers; dflash:
a DFlash drafter in a folder of its own, a block of drafts in one pass over the target's layers.
"""
