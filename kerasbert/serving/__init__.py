"""SavedModel builders for TF Serving and the TF Hub format.

Names load on first use, so importing the package does not pull in
TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "exporter": ("export_model", "export_finetuned"),
    "hub_export": ("export_hub",),
})
