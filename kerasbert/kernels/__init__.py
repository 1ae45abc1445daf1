"""The hot operations of a training step, each behind one function.

Model code (kerasbert.layers, kerasbert.models) is keras.ops only, so every
backbone runs under any Keras backend. Some operations of a pretraining step
have a faster form under TensorFlow that keras.ops cannot express; the
function takes that form under TensorFlow and is the plain Keras computation
everywhere else (tests/test_kernels.py checks that they agree). The
language-model loss (`decoder_cross_entropy`) picks the layout of its
decoder product itself; heads and tasks never see it. The Reformer's
reversible layers (`reversible_layers`) take a memory-saving form: a
backward pass that recomputes activations instead of keeping them.

Where each lives: `encoder.py` (an encoder block's GELU, with its
training form as compiled loops, dense product,
attention probabilities and LayerNorm, with their inference forms under
oneDNN, and dropout drawing 16 random bits per element),
`language_model.py` (the decoder product and the vocabulary cross-entropy,
with its written-out gradient), `reversible.py` (the Reformer's recomputing
backward pass), `tape_gradient.py` (`custom_gradient`, which every
written-out gradient here uses: under TensorFlow it lives on the tape, where
`tf.custom_gradient` keeps each traced graph alive for good). Import them
from here.
"""

from kerasbert.kernels.encoder import attention_probabilities
from kerasbert.kernels.encoder import attention_softmax
from kerasbert.kernels.encoder import compiled_gelu
from kerasbert.kernels.encoder import compiled_gelu_applies
from kerasbert.kernels.encoder import dense
from kerasbert.kernels.encoder import dropout
from kerasbert.kernels.encoder import gelu
from kerasbert.kernels.encoder import layer_norm
from kerasbert.kernels.language_model import decoder_cross_entropy
from kerasbert.kernels.language_model import decoder_logits
from kerasbert.kernels.language_model import matmul_transposed
from kerasbert.kernels.language_model import tied_decoder_table
from kerasbert.kernels.language_model import token_cross_entropy
from kerasbert.kernels.reversible import reversible_layers
from kerasbert.kernels.tape_gradient import custom_gradient
