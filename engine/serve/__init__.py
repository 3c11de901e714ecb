"""The engine over HTTP: `draftlight serve` (OpenAI-compatible, every token with its provenance)."""
