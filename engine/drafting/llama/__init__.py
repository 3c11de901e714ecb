"""Drafters that read a llama.cpp target's hidden states or heads, on llama.cpp's low-level API.

Each is a Drafter (engine.drafting.base) for the round as it is; engine.drafting.kinds maps a kind on
llama.cpp to one of these. mtp: a model's own MTP/NextN heads or Gemma 4's assistant; dflash: a
DFlash or DSpark drafter reading the target's layers; eagle3: an EAGLE-3 drafter.
"""
