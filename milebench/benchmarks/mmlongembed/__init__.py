"""MMLongEmbed: long-context multimodal embedding retrieval (Visual Grounding so far)."""
