"""Verity Gateway: an OpenAI-compatible proxy that verifies LLM answers."""

__version__ = "0.1.0"
