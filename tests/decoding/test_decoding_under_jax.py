"""The decoding loops under KERAS_BACKEND=jax, in a fresh process: the same
searches on the same toy model give the same tokens as under TensorFlow,
and `CausalLM.generate` (greedy and sampled) runs its loop as
`jax.lax.while_loop`."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from slow_marks import slow_covered_by


# A toy model whose logits depend on the step and the previous token.
SEARCHES = textwrap.dedent("""
    import numpy as np
    from keras import ops
    from kerasbert.decoding import beam_search, greedy_search

    TABLE = np.random.default_rng(11).normal(0.0, 2.0, (5, 6, 6)).astype("float32")

    def step(tokens, index, cache):
        table = ops.convert_to_tensor(TABLE)
        return ops.take(ops.take(table, index, axis=0), tokens, axis=0), cache + 1

    def searches():
        start, cache = np.array([0, 1, 2], "int32"), np.zeros(3, "int32")
        greedy, counts = greedy_search(step, start, cache, 5, 5)
        beam, scores = beam_search(step, start, cache, 6, 5, 5, beam_size=3)
        return {"greedy": np.asarray(greedy).tolist(), "counts": np.asarray(counts).tolist(),
                "beam": np.asarray(beam).tolist(),
                "scores": np.asarray(scores).astype(float).tolist()}
""")

UNDER_JAX = SEARCHES + textwrap.dedent("""
    import json
    from kerasbert.models.gpt import GptBackbone
    from kerasbert.tasks import CausalLM

    lm = CausalLM(GptBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=16,
                              intermediate_dim=32, max_sequence_length=10))
    greedy = lm.generate([[1, 2, 3], [1]], max_new_tokens=4)
    sampled = [lm.generate([1, 2], max_new_tokens=4, strategy="top_k", top_k=5, seed=3)
               for _ in range(2)]
    assert [len(row) for row in greedy] == [4, 4] and sampled[0] == sampled[1], sampled
    print(json.dumps(searches()))
""")


# 30 s: a fresh JAX process traces both searches and a CausalLM's loop; the
# default suite traces the same loops in TensorFlow functions without
# autograph (no Python control flow on tensors, what JAX needs).
@slow_covered_by(
    "tests/decoding/test_greedy_search.py::test_a_graph_with_a_tensor_max_length_equals_eager",
    "tests/decoding/test_beam_search.py::test_a_graph_without_autograph_equals_eager_and_bad_beams_are_refused",
    "tests/tasks/test_causal_lm.py::TestGenerate::test_batched_generation_is_each_prompts_own_greedy_continuation")
def test_the_searches_give_tensorflows_tokens_under_jax(tmp_path):
    namespace = {}
    exec(SEARCHES, namespace)  # the same toy model and searches, run here under TensorFlow
    expected = namespace["searches"]()
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", UNDER_JAX], capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    for key in ("greedy", "counts", "beam"):
        assert got[key] == expected[key], key
    np.testing.assert_allclose(got["scores"], expected["scores"], rtol=1e-5)
