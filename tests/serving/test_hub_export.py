"""`kerasbert export-hub`: TF Hub-format preprocess/ and encoder/ SavedModels.

A tiny backbone and pretrainer are exported once (through the CLI); the
source vocabulary is then deleted and two fresh Pythons use the SavedModels,
in parallel (each takes ~20 s of startup and tracing):

- one that can import only tensorflow and tensorflow_text (kerasbert is
  blocked) checks every output against values computed here with our
  tokenizer, packer, backbone and pretrainer;
- one written like the TF Hub BERT tutorials (tf-keras, `hub.KerasLayer`)
  fine-tunes the encoder for one batch.

Both are the slow tier's (started when first asked for); the default suite
runs the first one's checks in this process.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from serving_fixtures import FRESH_PREAMBLE
from serving_fixtures import run_in_process
from serving_fixtures import tiny_backbone
from serving_fixtures import write_vocab
from slow_marks import slow_covered_by

SEQ_LENGTH = 32  # The preprocessor's default T.
PAIR_LENGTH = 24  # T passed to bert_pack_inputs.
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Café naïve — Paris!",
    "",
    " ".join(["paris london berlin"] * 20),  # Longer than SEQ_LENGTH: truncated.
    "東京 tower",  # Ideographs are not in the vocabulary: [UNK].
]
SECOND = ["who lives near the tower?", "a cat", "runs", "the city", "old bank"]
POSITIONS = [[1, 2, 3], [1, 4, 0], [0, 0, 0], [5, 9, 30], [1, 2, 2]]

# Fresh process 1: FRESH_PREAMBLE's tensorflow + tensorflow_text, with
# kerasbert (and TF Hub, tf-keras) made unimportable rather than just unused.
BLOCK_OURS = """
import sys

class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("kerasbert", "keras_hub", "keras_nlp", "tf_keras",
                                  "tensorflow_hub"):
            raise ImportError(f"{name} must not be needed")
        return None

sys.meta_path.insert(0, _Blocked())
"""

STRICT_SCRIPT = """
pre_dir, enc_dir, expected_path = sys.argv[1:4]
expected = json.load(open(expected_path))
arrays = np.load(expected_path + ".npz")
texts = tf.constant(expected["texts"])
second = tf.constant(expected["second"])
assert os.path.isfile(os.path.join(pre_dir, "assets", "vocab.txt"))
assert not os.path.exists(expected["source_vocab"])

preprocessor = tf.saved_model.load(pre_dir)
encoder = tf.saved_model.load(enc_dir)

def as_lists(d):
    return {k: v.numpy().tolist() for k, v in d.items()}

# __call__: single segments packed to the default sequence_length.
inputs = preprocessor(texts)
assert as_lists(inputs) == expected["single"], as_lists(inputs)

# tokenize: [B, (words), (pieces)], and its special tokens.
tokens = preprocessor.tokenize(texts)
assert tokens.ragged_rank == 2 and tokens.to_list() == expected["tokens"]
special = preprocessor.tokenize.get_special_tokens_dict()
assert {k: int(v) for k, v in special.items()} == expected["special"]
assert all(v.dtype == tf.int32 and v.shape == () for v in special.values())

# bert_pack_inputs: pairs, a tensor or Python seq_length, words or pieces.
pair = [tokens, preprocessor.tokenize(second)]
packed = preprocessor.bert_pack_inputs(pair, seq_length=tf.constant(expected["pair_length"]))
assert as_lists(packed) == expected["pair"]
packed = preprocessor.bert_pack_inputs([t.merge_dims(-2, -1) for t in pair],
                                       seq_length=expected["pair_length"])
assert as_lists(packed) == expected["pair"]
assert as_lists(preprocessor.bert_pack_inputs([tokens])) == expected["single"]

# The encoder, inference and training mode (dropout is 0 in the test model).
outputs = encoder(inputs)
assert sorted(outputs) == ["default", "encoder_outputs", "pooled_output", "sequence_output"]
for name in ("pooled_output", "sequence_output"):
    np.testing.assert_allclose(outputs[name].numpy(), arrays[name], atol=1e-5)
np.testing.assert_array_equal(outputs["default"].numpy(), outputs["pooled_output"].numpy())
assert len(outputs["encoder_outputs"]) == expected["num_layers"]
for i, layer in enumerate(outputs["encoder_outputs"]):
    np.testing.assert_allclose(layer.numpy(), arrays[f"encoder_outputs_{i}"], atol=1e-5)
trained = encoder(inputs, training=True)
np.testing.assert_allclose(trained["pooled_output"].numpy(), arrays["pooled_output"], atol=1e-5)

# The MLM head, tied to the encoder's embedding.
mlm = encoder.mlm(dict(inputs, masked_lm_positions=tf.constant(expected["positions"])))
np.testing.assert_allclose(mlm["mlm_logits"].numpy(), arrays["mlm_logits"], atol=1e-5)
np.testing.assert_allclose(mlm["pooled_output"].numpy(), arrays["pooled_output"], atol=1e-5)

# Reusable SavedModel attributes.
assert len(encoder.trainable_variables) == expected["num_trainable"]
assert len(encoder.variables) >= len(encoder.trainable_variables)
assert list(encoder.regularization_losses) == []
assert len(encoder.mlm.trainable_variables) > len(encoder.trainable_variables)
assert bool(encoder.do_lower_case.numpy())

# Signatures, for TF Serving.
served = encoder.signatures["serving_default"](**inputs)
np.testing.assert_allclose(served["pooled_output"].numpy(), arrays["pooled_output"], atol=1e-5)
served = preprocessor.signatures["serving_default"](sentences=texts)
assert as_lists(served) == expected["single"]
_check_imports()
print("ok")
"""

# Fresh process 2: the TF Hub BERT tutorial, under tf-keras.
TUTORIAL_SCRIPT = """
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # noqa: F401
import tf_keras

pre_dir, enc_dir, expected_path = sys.argv[1:4]
expected = json.load(open(expected_path))

text_input = tf_keras.layers.Input(shape=(), dtype=tf.string)
preprocessor = hub.KerasLayer(pre_dir)
encoder = hub.KerasLayer(enc_dir, trainable=True)
outputs = encoder(preprocessor(text_input))
logits = tf_keras.layers.Dense(2)(outputs["pooled_output"])
model = tf_keras.Model(text_input, logits)
model.compile(optimizer=tf_keras.optimizers.Adam(1e-3),
              loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))

x = tf.constant(expected["texts"])
y = np.arange(len(expected["texts"])) % 2
weights = encoder.trainable_weights
assert len(weights) == expected["num_trainable"], len(weights)
with tf.GradientTape() as tape:
    loss = tf_keras.losses.sparse_categorical_crossentropy(y, model(x, training=True),
                                                           from_logits=True)
grads = tape.gradient(loss, weights)
no_grad = [w.name for w, g in zip(weights, grads)
           if g is None or not np.any(tf.convert_to_tensor(g).numpy())]
before = [w.numpy().copy() for w in weights]
history = model.fit(x, y, batch_size=len(y), epochs=1, verbose=0)
changed = sum(not np.array_equal(b, w.numpy()) for b, w in zip(before, weights))

# Tokenize and pack as separate Keras layers (the tutorial's pair recipe).
loaded = hub.load(pre_dir)
tokenize = hub.KerasLayer(loaded.tokenize)
pack = hub.KerasLayer(loaded.bert_pack_inputs,
                      arguments=dict(seq_length=expected["pair_length"]))
a = tf_keras.layers.Input(shape=(), dtype=tf.string)
b = tf_keras.layers.Input(shape=(), dtype=tf.string)
pair_model = tf_keras.Model([a, b], pack([tokenize(a), tokenize(b)]))
pair = pair_model([x, tf.constant(expected["second"])])
print(json.dumps({
    "loss": history.history["loss"][0], "no_grad": no_grad, "changed": changed,
    "pair": {k: v.numpy().tolist() for k, v in pair.items()},
}))
"""


def _start(code, *args, env=None):
    """Starts a fresh Python on `code` (nothing of ours on its path)."""
    env = dict(os.environ, PYTHONPATH="", **(env or {}))
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd="/", env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process, timeout=300):
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, f"fresh process failed:\n{err[-4000:]}"
    return out


def cli(argv):
    """`kerasbert export-hub ARGS` without cli.py: (exit code)."""
    from kerasbert.cli import run_reporting_errors
    from kerasbert import commands

    parser = argparse.ArgumentParser(prog="kerasbert")
    commands.register(parser.add_subparsers(dest="command"), "export_hub")
    args = parser.parse_args(["export-hub", *argv])
    return run_reporting_errors(args.func, args, "kerasbert export-hub")


def _as_lists(outputs):
    return {k: v.numpy().tolist() for k, v in outputs.items()}


def _expected(run, vocab, backbone, pretrainer):
    """What the SavedModels must give, from our Python pieces: JSON (ids,
    tokens) and an .npz of float outputs."""
    import tensorflow as tf

    from kerasbert.text import BertPacker
    from kerasbert.text import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(vocab)
    packer = BertPacker.from_tokenizer(tokenizer, SEQ_LENGTH)
    tokens = tokenizer.tokenize(TEXTS)
    single = packer(tokens)
    pair = packer(tokens, tokenizer.tokenize(SECOND), sequence_length=PAIR_LENGTH)
    outputs = backbone(single)
    mlm = pretrainer({**single, "masked_lm_positions": tf.constant(POSITIONS)})
    arrays = {
        "pooled_output": outputs["pooled_output"],
        "sequence_output": outputs["sequence_output"],
        "mlm_logits": mlm["mlm_logits"],
        **{f"encoder_outputs_{i}": x for i, x in enumerate(outputs["encoder_outputs"])},
    }
    expected = {
        "texts": TEXTS, "second": SECOND, "positions": POSITIONS,
        "pair_length": PAIR_LENGTH, "source_vocab": vocab,
        "single": _as_lists(single), "pair": _as_lists(pair),
        "tokens": tokens.to_list(),
        "special": {k: int(v) for k, v in tokenizer.get_special_tokens_dict().items()},
        "num_layers": backbone.num_layers,
        "num_trainable": len(backbone.trainable_variables),
    }
    path = os.path.join(run, "expected.json")
    with open(path, "w") as f:
        json.dump(expected, f)
    np.savez(path + ".npz", **{k: np.asarray(v) for k, v in arrays.items()})
    return path, expected


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """RUN/{backbone,pretrainer}.keras -> OUT/{preprocess,encoder};
    `started(name)` gives the fresh process "strict" or "tutorial", both
    started (not awaited) on the result when the first is asked for."""
    import keras

    from kerasbert.tasks import BertPretrainer

    run = str(tmp_path_factory.mktemp("run"))
    vocab = write_vocab(run)
    keras.utils.set_random_seed(1)
    with open(vocab) as f:
        size = sum(1 for line in f if line.strip())
    backbone = tiny_backbone(size)
    pretrainer = BertPretrainer(backbone)
    pretrainer.save(os.path.join(run, "pretrainer.keras"))
    # The backbone trains on after pretrainer.keras was written: the export
    # must use backbone.keras' weights under the pretrainer's MLM head.
    for weight in backbone.weights:
        weight.assign(np.asarray(weight.numpy()) * 1.3)
    backbone.save(os.path.join(run, "backbone.keras"))
    expected_path, expected = _expected(run, vocab, backbone, pretrainer)

    out = os.path.join(str(tmp_path_factory.mktemp("export")), "hub")
    code = cli(["--backbone", os.path.join(run, "backbone.keras"), "--vocab", vocab,
                "--output", out, "--seq-length", str(SEQ_LENGTH)])
    assert code == 0
    os.remove(vocab)  # The SavedModels must carry their own copy.
    pre, enc = os.path.join(out, "preprocess"), os.path.join(out, "encoder")
    processes = {}

    def started(name):
        if not processes:
            processes["strict"] = _start(
                BLOCK_OURS + FRESH_PREAMBLE + textwrap.dedent(STRICT_SCRIPT),
                pre, enc, expected_path)
            processes["tutorial"] = _start(textwrap.dedent(TUTORIAL_SCRIPT), pre, enc,
                                           expected_path)
        return processes[name]

    yield dict(run=run, out=out, expected=expected, expected_path=expected_path,
               started=started)
    for process in processes.values():
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_export_writes_both_savedmodels(exported):
    for name in ("preprocess", "encoder"):
        directory = os.path.join(exported["out"], name)
        assert os.path.isfile(os.path.join(directory, "saved_model.pb"))
        assert os.path.isfile(os.path.join(directory, "assets", "vocab.txt"))
    # Nothing but the two models (no temporary directories left behind).
    assert sorted(os.listdir(exported["out"])) == ["encoder", "preprocess"]
    assert [p for p in os.listdir(os.path.dirname(exported["out"])) if p != "hub"] == []


def test_cli_refuses_to_overwrite(exported, tmp_path, capsys):
    before = sorted(os.listdir(os.path.join(exported["out"], "encoder")))
    code = cli(["--backbone", os.path.join(exported["run"], "backbone.keras"), "--vocab",
                write_vocab(str(tmp_path)), "--output", exported["out"]])
    assert code == 2
    assert "already exists" in capsys.readouterr().err
    assert sorted(os.listdir(os.path.join(exported["out"], "encoder"))) == before


def test_cli_missing_files_exit_2(exported, tmp_path, capsys):
    run = exported["run"]
    vocab = write_vocab(str(tmp_path))
    out = str(tmp_path / "out")
    assert cli(["--backbone", str(tmp_path / "nope.keras"), "--vocab", vocab, "--output", out,
                "--no-mlm"]) == 2
    assert "nope.keras" in capsys.readouterr().err
    assert cli(["--backbone", os.path.join(run, "backbone.keras"), "--vocab",
                str(tmp_path / "missing.txt"), "--output", out]) == 2
    assert "missing.txt" in capsys.readouterr().err
    # A backbone with no pretrainer.keras beside it: name the file, offer --no-mlm.
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    shutil.copy(os.path.join(run, "backbone.keras"), lonely / "backbone.keras")
    assert cli(["--backbone", str(lonely / "backbone.keras"), "--vocab", vocab,
                "--output", out]) == 2
    err = capsys.readouterr().err
    assert "pretrainer.keras" in err and "--no-mlm" in err
    # --no-mlm gets past that (and then fails on a too-long --seq-length).
    assert cli(["--backbone", str(lonely / "backbone.keras"), "--vocab", vocab,
                "--output", out, "--no-mlm", "--seq-length", "1000"]) == 2
    assert "max_sequence_length" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_mismatched_pretrainer_is_a_usage_error(exported, tmp_path):
    from kerasbert.errors import UsageError
    from kerasbert.models import BertBackbone
    from kerasbert.serving.hub_export import export_hub
    from kerasbert.tasks import BertPretrainer

    run = exported["run"]
    other = BertBackbone(vocabulary_size=exported["expected"]["special"]["vocab_size"],
                         num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                         max_sequence_length=64, dropout=0.0)
    BertPretrainer(other).save(str(tmp_path / "other.keras"))
    with pytest.raises(UsageError, match="num_layers: 1 vs 2"):
        export_hub(os.path.join(run, "backbone.keras"), write_vocab(str(tmp_path)),
                   tmp_path / "out", sequence_length=SEQ_LENGTH,
                   pretrainer_path=tmp_path / "other.keras")
    assert not os.path.exists(tmp_path / "out")


# 13 s (and the tutorial's process beside it): STRICT_SCRIPT in a fresh process
# where kerasbert cannot be imported; the default suite runs it in-process.
@slow_covered_by("tests/serving/test_hub_export.py::test_savedmodels_match_keras_in_process")
def test_savedmodels_match_keras_with_only_tensorflow_text(exported):
    assert _finish(exported["started"]("strict")).strip().endswith("ok")


def test_savedmodels_match_keras_in_process(exported):
    """STRICT_SCRIPT's checks on the same SavedModels in this process
    (`run_in_process`; the source vocabulary is gone here too), and every
    encoder variable gets a gradient through the preprocessor's inputs, as
    a fine-tuning model needs."""
    import tensorflow as tf

    out = exported["out"]
    pre, enc = os.path.join(out, "preprocess"), os.path.join(out, "encoder")
    printed = run_in_process(STRICT_SCRIPT, pre, enc, exported["expected_path"])
    assert printed.strip().endswith("ok")
    preprocessor, encoder = tf.saved_model.load(pre), tf.saved_model.load(enc)
    with tf.GradientTape() as tape:
        outputs = encoder(preprocessor(tf.constant(TEXTS)), training=True)
        loss = tf.reduce_sum(outputs["pooled_output"] ** 2)
    grads = tape.gradient(loss, encoder.trainable_variables)
    assert len(grads) == exported["expected"]["num_trainable"]
    assert [v.name for v, g in zip(encoder.trainable_variables, grads)
            if g is None or not np.any(tf.convert_to_tensor(g).numpy())] == []


# ~20 s of tf-keras and TF Hub start-up: the TF Hub tutorial fine-tunes the
# encoder through hub.KerasLayer; the default suite loads the same SavedModels
# in-process and checks the encoder's gradients and the pair packing.
@slow_covered_by("tests/serving/test_hub_export.py::test_savedmodels_match_keras_in_process")
def test_tf_hub_tutorial_fine_tunes_the_encoder(exported):
    result = json.loads(_finish(exported["started"]("tutorial")).strip().splitlines()[-1])
    assert np.isfinite(result["loss"])
    assert result["no_grad"] == []  # Every encoder variable gets a gradient...
    assert result["changed"] == exported["expected"]["num_trainable"]  # ...and is trained.
    assert result["pair"] == exported["expected"]["pair"]
