"""Pretraining and task data: the TFRecord schema, creation, readers.

Names load on first use, so importing `kerasbert.data` does not pull in
TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "reader": ("pretraining_dataset", "verify_shards"),
    "writer": ("create_pretraining_data",),
    "dynamic_masking": ("DynamicMasker",),
    "integrity": ("CorruptRecordError",),
    "metadata": ("read_metadata",),
    "schema": ("FILE_TO_MODEL",),
})
