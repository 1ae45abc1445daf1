"""Pretraining and task data: the TFRecord schema, creation, readers."""
