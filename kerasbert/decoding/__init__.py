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
