"""kerasbert: BERT and its family for Keras 3."""

from kerasbert import layers
from kerasbert import models
from kerasbert.version import __version__
