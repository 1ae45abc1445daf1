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

Cross-entropy over a vocabulary (`token_cross_entropy`) has its gradient
written by hand: language-model heads score positions against the whole
vocabulary, so their loss runs over [N, V] logits with V = 30522 or 50265,
the largest elementwise work of a pretraining step. The forward pass is one
max, one exp and one sum, and the backward reuses the exponentials (softmax
- one_hot) instead of differentiating through them; top-1 hits come from
the same max instead of an argmax. Forward + backward of 320 x 30522 logits
on 2 CPU cores, against `keras.losses.sparse_categorical_crossentropy` +
argmax: TensorFlow 66 -> 28 ms, TensorFlow with XLA 50 -> 22 ms, JAX 97 ->
51 ms.

At inference three operations of every encoder block also take a fused
form under TensorFlow with oneDNN (the default on x86 CPUs): a dense layer's
product, bias and activation (`dense`), the attention softmax
(`attention_softmax`) and LayerNorm (`layer_norm`). A bert_base block at
[8, 512] on 2 AVX512_BF16 cores: float32 212 -> 189 ms, bfloat16 140 -> 112
ms with the first two; the 12-layer encoder at [8, 512] with LayerNorm fused
too: float32 2005 -> 1985 ms, bfloat16 1178 -> 1101 ms.
"""

from kerasbert.kernels.encoder import attention_probabilities
from kerasbert.kernels.encoder import attention_softmax
from kerasbert.kernels.encoder import dense
from kerasbert.kernels.encoder import gelu
from kerasbert.kernels.encoder import layer_norm
from kerasbert.kernels.language_model import decoder_cross_entropy
from kerasbert.kernels.language_model import decoder_logits
from kerasbert.kernels.language_model import matmul_transposed
from kerasbert.kernels.language_model import tied_decoder_table
from kerasbert.kernels.language_model import token_cross_entropy
from kerasbert.kernels.reversible import reversible_layers
