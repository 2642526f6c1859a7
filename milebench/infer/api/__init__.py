"""API model adapters: OpenAI-compatible chat, Anthropic Messages, Google Gemini, over plain HTTP."""
