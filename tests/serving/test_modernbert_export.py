"""A ModernBERT classifier exported for TF Serving with its byte-level BPE
tokenizer in the graph, at the family's 8,192 positions: a stock TF Serving
graph (core TensorFlow ops + tensorflow-text's, nothing XLA-only), lengths
above the backbone's positions refused in one line, and a text of about
2,048 tokens served from raw strings equal to the Keras model's `predict`,
in a fresh process with only tensorflow + tensorflow_text."""

import json
import os

import numpy as np
import pytest

from kerasbert.cli import main
from serving_fixtures import make_finetuned_dir
from serving_fixtures import run_fresh

#: Two layers (global, then local with a window of 8) at 8192 positions.
BACKBONE = {"num_layers": 2, "intermediate_dim": 24, "local_attention": 8,
            "global_attn_every_n_layers": 2, "max_sequence_length": 8192}
LENGTH = 8192
WORDS = ("the quick brown fox jumps over the lazy dog near the river in paris , "
         "john lives in london and mary works at the bank .").split()


def _long_text(tokenizer, tokens=2048):
    """The longest text of WORDS with at most `tokens` - 8 pieces (bisected
    on its number of words)."""
    def text(n):
        return " ".join(WORDS[i % len(WORDS)] for i in range(n))

    low, high = 1, tokens
    while low < high:
        middle = (low + high + 1) // 2
        if _count(tokenizer, text(middle)) <= tokens - 8:
            low = middle
        else:
            high = middle - 1
    return text(low)


def _count(tokenizer, text):
    return int(tokenizer.tokenize_ids(text).shape[0])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(FT dir, SavedModel path, the Keras model's probabilities of TEXTS,
    the texts, their token counts)."""
    import keras

    import kerasbert.tasks  # noqa: F401  (registers the task classes)
    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning.examples import TaskData
    from kerasbert.text import load_saved_tokenizer

    root = tmp_path_factory.mktemp("modernbert_export")
    ft = make_finetuned_dir(str(root / "ft"), "classification", family="ModernBertBackbone",
                            tokenizer="bpe", sequence_length=LENGTH, backbone_options=BACKBONE)
    config = json.load(open(os.path.join(ft, "config.json")))
    tokenizer = load_saved_tokenizer(ft, config)
    texts = [_long_text(tokenizer), "naïve café, John lives in Paris.", ""]
    counts = [_count(tokenizer, t) for t in texts]
    model = keras.saving.load_model(os.path.join(ft, "model.keras"))
    data = TaskData([{"text_a": t} for t in texts], "classification", config["label_names"],
                    has_labels=False)
    features = convert_examples(data, tokenizer, LENGTH)
    # Padding is masked and positions count from 0: the rows cut after the
    # longest one's tokens are the same inputs, at a fraction of the cost.
    longest = int(np.asarray(features.x["input_mask"]).sum(-1).max())
    inputs = {k: np.asarray(v)[:, :longest] for k, v in features.x.items()}
    logits = np.asarray(model.predict(inputs, verbose=0), "float64")
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    keras.backend.clear_session()
    assert main(["export", "--model", ft, "--output", str(root / "export"),
                 "--max-seq-length", str(LENGTH)]) == 0
    return ft, str(root / "export" / "1"), probabilities, texts, counts


def test_export_at_8192_positions_is_a_stock_serving_graph(exported):
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    from kerasbert.serving.op_manifest import graph_op_types

    _, path, _, _, _ = exported
    info = json.load(open(os.path.join(path, "assets.extra", "export.json")))
    assert info["seq_length"] == LENGTH and info["task_type"] == "classification"
    assert sorted(os.listdir(os.path.join(path, "assets"))) == ["merges.txt", "vocab.json"]
    ops = graph_op_types(path)
    assert not [op for op in ops if "Xla" in op], ops
    custom = json.load(open(os.path.join(path, "assets.extra", "ops.json")))["custom_ops"]
    assert custom and not any(hasattr(tf.raw_ops, op) for op in custom)
    assert set(custom) == {op for op in ops if not hasattr(tf.raw_ops, op)}
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(open(os.path.join(path, "saved_model.pb"), "rb").read())
    functions = [f for graph in proto.meta_graphs for f in graph.graph_def.library.function]
    assert not [f.signature.name for f in functions if f.attr["_XlaMustCompile"].b]


def test_lengths_above_the_positions_are_refused_in_one_line(exported, tmp_path, capsys):
    ft = exported[0]
    capsys.readouterr()
    assert main(["export", "--model", ft, "--output", str(tmp_path / "too_long"),
                 "--max-seq-length", str(LENGTH + 1)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "8192" in err and "8193" in err, err
    assert not (tmp_path / "too_long").exists()


def test_a_2048_token_text_served_fresh_equals_keras(exported):
    _, path, expected, texts, counts = exported
    assert 1900 <= counts[0] <= 2048 and counts[-1] == 0
    served = json.loads(run_fresh("""
        path, texts = sys.argv[1], json.loads(sys.argv[2])
        serve = tf.saved_model.load(path).signatures["serving_default"]
        out = serve(text=tf.constant(texts))
        _check_imports()
        print(json.dumps({"probabilities": out["probabilities"].numpy().tolist(),
                          "label_id": out["label_id"].numpy().tolist()}))
        """, path, json.dumps(texts)).strip().splitlines()[-1])
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    assert served["label_id"] == expected.argmax(-1).tolist()
