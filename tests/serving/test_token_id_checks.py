"""`serve_token_ids` refuses token ids outside the model's tables (issue 18):
a negative id would wrap around to the end of the embedding table and, on a
GPU, an id past it gathers zeros, so a client's bad request would get a
silent wrong answer. Checked in a fresh process that imports only
tensorflow and tensorflow_text, on a SavedModel whose warm-up requests
(replayed by the export) still pass."""

import json
import os

from serving_fixtures import run_fresh
from serving_fixtures import run_in_process
from serving_fixtures import shared_export
from slow_marks import slow_covered_by

CHECK_SCRIPT = """
import sys
path, vocab_size = sys.argv[1], int(sys.argv[2])
serve = tf.saved_model.load(path).signatures["serve_token_ids"]
T = int(serve.structured_input_signature[1]["input_word_ids"].shape[1])

def call(word_ids, type_ids=None):
    word_ids = np.asarray(word_ids, np.int32)
    type_ids = np.zeros_like(word_ids) if type_ids is None else np.asarray(type_ids, np.int32)
    try:
        out = serve(input_word_ids=tf.constant(word_ids), input_mask=tf.ones_like(word_ids),
                    input_type_ids=tf.constant(type_ids))
        return {"ok": bool(all(np.isfinite(v.numpy()).all() for v in out.values()
                               if v.dtype.is_floating))}
    except tf.errors.InvalidArgumentError as err:
        return {"error": err.message}

ids = np.full([2, T], 7)
low, high, segment = ids.copy(), ids.copy(), np.zeros_like(ids)
low[1, 3] = -1
high[0, 5] = vocab_size
segment[1, 0] = 2
result = {
    "valid": call(ids),
    "largest": call(np.full([1, T], vocab_size - 1)),
    "negative": call(low),
    "too_large": call(high),
    "type_id": call(ids, segment),
}
_check_imports()
print(json.dumps(result))
"""


# 12 s: the checks in a fresh process with only tensorflow + tensorflow_text;
# the default suite runs the same script on the same export in-process.
@slow_covered_by("tests/serving/test_token_id_checks.py::test_out_of_range_token_ids_are_an_error_in_process",
                 "tests/serving/test_export.py::test_custom_ops_are_registered_by_tensorflow_text")
def test_out_of_range_token_ids_are_an_error_not_a_wrap_around(shared_builds):
    _check_token_ids(shared_builds, run_fresh)


def test_out_of_range_token_ids_are_an_error_in_process(shared_builds):
    """The same checks, the script run in this process (`run_in_process`)."""
    _check_token_ids(shared_builds, run_in_process)


def _check_token_ids(shared_builds, runner):
    from kerasbert.text import load_tokenizer

    # The session's classification export (`shared_export`): the export
    # replays every warm-up request (serve_token_ids included) on the
    # written SavedModel and fails if one fails.
    ft, info = shared_export(shared_builds, "classification")
    vocab_size = load_tokenizer(os.path.join(ft, "vocab.txt")).vocabulary_size
    result = json.loads(runner(CHECK_SCRIPT, info["path"], vocab_size).strip().splitlines()[-1])
    assert result["valid"] == {"ok": True} and result["largest"] == {"ok": True}
    assert "input_word_ids: ids must be >= 0" in result["negative"]["error"]
    assert f"input_word_ids: ids must be < {vocab_size}" in result["too_large"]["error"]
    assert "input_type_ids: ids must be < 2" in result["type_id"]["error"]
    # The checks are core TensorFlow Assert ops: no new custom op for TF
    # Serving (the fresh process loaded the model with tensorflow_text only).
    from kerasbert.serving.op_manifest import custom_ops, graph_op_types

    assert "Assert" in graph_op_types(info["path"])
    manifest = json.load(open(os.path.join(info["path"], "assets.extra", "ops.json")))
    assert manifest["custom_ops"] == custom_ops(info["path"])
    assert not [op for op in manifest["custom_ops"] if "Assert" in op or "Check" in op]
