"""Vocabulary building, tokenizers and input packing."""
