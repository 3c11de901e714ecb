"""Drafters that read an MLX target's hidden states, on mlx-vlm's drafter modules.

Each is a Drafter (engine.drafting.base) for the round as it is; engine.drafting.kinds picks one of
these where the target's context is an MlxContext. mtp: a target's own multi-token-prediction
head (Qwen 3.5 and its kin, the `mtp.*` weights in the target's folder).
"""
