"""Pretrainers and fine-tuning task models."""
