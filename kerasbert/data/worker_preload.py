"""Imported first by the pretraining-data writer's forkserver, before
TensorFlow, to make that import cheaper: it skips the optional imports
that TensorFlow and Keras try for unused features (kerasbert.fast_start)
in the forkserver, whose children are the workers. Never import this module anywhere else.
"""

from kerasbert.fast_start import skip_unused_optional_imports

skip_unused_optional_imports()

import tensorflow  # noqa: E402,F401
import tensorflow_text  # noqa: E402,F401
