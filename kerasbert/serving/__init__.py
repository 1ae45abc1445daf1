"""SavedModel builders for TF Serving and the TF Hub format."""
