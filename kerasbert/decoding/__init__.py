"""Token-by-token decoding over any incremental model, in `keras.ops` only.

One implementation of the three searches every generating model uses:

- `greedy_search`: the most likely token at each step, or, with a `pick`
  from `sampler`, a sampled one (top-k, top-p, temperature);
- `beam_search`: tensor2tensor's beam search with the length penalty
  ((5 + length) / 6) ** alpha, as Model Garden's `ops/beam_search.py`.

Both drive a step function `(token_ids [B], index, cache) -> (logits
[B, V], cache)` with `ops.while_loop` over fixed-shape state, so they run
eagerly, inside a TensorFlow function with autograph off (the SavedModel
exports) and under `jax.jit`. `Seq2SeqLM.generate`, `CausalLM.generate`
and the generation exports (`serving/generation_serving.py`,
`serving/text2text_serving.py`) all decode here.

Example:

>>> import numpy as np
>>> from keras import ops
>>> from kerasbert.decoding import greedy_search
>>> table = ops.convert_to_tensor(np.eye(4, k=1, dtype="float32"))  # t -> t + 1
>>> def step(tokens, index, cache):
...     return ops.take(table, tokens, axis=0), cache
>>> tokens, counts = greedy_search(step, np.array([0, 1], "int32"), np.zeros(2, "int32"),
...                                max_length=4, end_id=3)
>>> ops.convert_to_numpy(tokens).tolist(), ops.convert_to_numpy(counts).tolist()
([[1, 2, 3, 0], [2, 3, 0, 0]], [2, 1])
"""

from kerasbert.decoding.beam_search import beam_search
from kerasbert.decoding.beam_search import length_penalty
from kerasbert.decoding.greedy_search import greedy_search
from kerasbert.decoding.sampling import SAMPLING_STRATEGIES
from kerasbert.decoding.sampling import SEARCH_STRATEGIES
from kerasbert.decoding.sampling import check_sampling
from kerasbert.decoding.sampling import sample_logits
from kerasbert.decoding.sampling import sampler

__all__ = ["SAMPLING_STRATEGIES", "SEARCH_STRATEGIES", "beam_search", "check_sampling",
           "greedy_search", "length_penalty", "sample_logits", "sampler"]
