"""SavedModel builders for TF Serving and the TF Hub format.

Names load on first use, so importing the package does not pull in
TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

_EXPORTS = {
    "export_model": "kerasbert.serving.exporter",
    "export_finetuned": "kerasbert.serving.exporter",
    "export_hub": "kerasbert.serving.hub_export",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kerasbert.serving", _EXPORTS)
