"""Imported first by the pretraining-data writer's forkserver, before
TensorFlow, to make that import cheaper.

`import tensorflow` imports Keras, and Keras imports scikit-learn (for its
optional sklearn wrappers) when it is installed: about 1.2 s of CPU that
the writer's workers never use. Keras treats scikit-learn as optional
(`try: import sklearn except ImportError`), so marking it absent in THIS
process only (the forkserver, whose children are the workers) skips that
import. Never import this module anywhere else.
"""

import sys

sys.modules.setdefault("sklearn", None)

import tensorflow  # noqa: E402,F401
import tensorflow_text  # noqa: E402,F401
