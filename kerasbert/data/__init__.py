"""Pretraining and task data: the TFRecord schema, creation, readers.

Names load on first use, so importing `kerasbert.data` does not pull in
TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

_EXPORTS = {
    "pretraining_dataset": "kerasbert.data.reader",
    "verify_shards": "kerasbert.data.reader",
    "create_pretraining_data": "kerasbert.data.writer",
    "DynamicMasker": "kerasbert.data.dynamic_masking",
    "CorruptRecordError": "kerasbert.data.integrity",
    "read_metadata": "kerasbert.data.metadata",
    "FILE_TO_MODEL": "kerasbert.data.schema",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kerasbert.data", _EXPORTS)
