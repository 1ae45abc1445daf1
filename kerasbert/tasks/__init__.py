"""Pretrainers and fine-tuning task models.

Names load on first use, so importing the package does not pull in Keras.
"""

from kerasbert.io_utils import lazy_exports

_EXPORTS = {
    "BertPretrainer": "kerasbert.tasks.bert_pretrainer",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kerasbert.tasks", _EXPORTS)
