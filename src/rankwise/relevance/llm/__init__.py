"""LLM judge: client, prompts, cache."""
