"""The ruler: Draftlight's benchmark, measured against stock llama.cpp (the oracle)."""
