"""GPT exports: a text-generation SavedModel (prompt in, completion out,
greedy in a tf.while_loop) and an extract-token classifier with in-graph
tokenization; both run in a fresh process with only tensorflow +
tensorflow_text."""

import json
import os

import keras
import numpy as np
import pytest

from kerasbert.cli import main
from kerasbert.testing import assert_same_decisions
from serving_fixtures import run_fresh
from serving_fixtures import run_in_process
from serving_fixtures import write_vocab
from slow_marks import slow_covered_by

PROMPTS = ["the quick brown fox", "paris", "", "a city near the river in france was old"]


def tiny_gpt(vocabulary_size, seed=0):
    from kerasbert.models.gpt import GptBackbone

    keras.utils.set_random_seed(seed)
    backbone = GptBackbone(vocabulary_size=vocabulary_size, num_layers=2, num_heads=2,
                           hidden_dim=16, intermediate_dim=32, max_sequence_length=24,
                           dropout=0.0)
    # Larger weights: greedy choices then depend on the context.
    for weight in backbone.weights:
        weight.assign(weight.numpy() * 4.0)
    return backbone


@pytest.fixture(scope="module")
def generation_run(tmp_path_factory):
    """A directory laid out as a GPT `kerasbert pretrain` run."""
    from kerasbert.tasks import CausalLM
    from kerasbert.text import load_tokenizer

    run = tmp_path_factory.mktemp("gpt-run")
    vocab = write_vocab(str(run))
    tokenizer = load_tokenizer(vocab)
    lm = CausalLM(tiny_gpt(tokenizer.vocabulary_size))
    lm.save(str(run / "pretrainer.keras"))
    lm.backbone.save(str(run / "backbone.keras"))
    with open(run / "config.json", "w") as f:
        json.dump({"pretrain": {"vocab": vocab}, "backbone_class": "GptBackbone",
                   "backbone": lm.backbone.get_config()}, f)
    return str(run), lm, tokenizer


def greedy_margins(lm, tokenizer, prompt, max_new_tokens):
    """The top-2 logit margin of each greedy step of Python's `generate`."""
    from kerasbert.loading.generation import encode_prompt
    from kerasbert.testing import top2_margin

    ids = encode_prompt(tokenizer, prompt)
    new = lm.generate(ids, max_new_tokens=max_new_tokens, end_token_id=int(tokenizer.sep_id))
    margins = []
    for step in range(len(new)):
        row = keras.ops.convert_to_tensor(np.array([ids + new[:step]], "int32"))
        logits = lm.next_token_logits(row, keras.ops.ones_like(row),
                                      keras.ops.convert_to_tensor([row.shape[1]]))
        logits = keras.ops.convert_to_numpy(logits)
        assert int(np.argmax(logits[0])) == new[step]
        margins.append(float(top2_margin(np.asarray(logits[0]))))
    return margins


# The generation SavedModel's checks run as a script in this process, and (24 s,
# slow) in a fresh process with only tensorflow + tensorflow_text.
@pytest.mark.parametrize("runner", [run_in_process, pytest.param(run_fresh, marks=slow_covered_by(
    "tests/serving/test_gpt_export.py::test_generation_export_matches_python_generate[in_process]"))],
    ids=["in_process", "in_a_fresh_process"])
def test_generation_export_matches_python_generate(generation_run, tmp_path, runner):
    from kerasbert.loading.generation import generate_text

    run, lm, tokenizer = generation_run
    expected = [generate_text(lm, tokenizer, p, max_new_tokens=5) for p in PROMPTS]
    assert len(set(expected)) > 1  # the completions depend on the prompt
    # Every greedy choice wins by far more than the float noise between
    # Python and the exported graph (1e-5 on the logits), so the
    # completions can be compared exactly (a near tie could go either way).
    margins = [m for p in PROMPTS for m in greedy_margins(lm, tokenizer, p, 5)]
    assert min(margins) > 1e-3, margins
    out = tmp_path / "export" / "gpt"
    assert main(["export", "--model", run, "--output", str(out)]) == 0
    version = out / "1"
    info = json.load(open(version / "assets.extra" / "export.json"))
    assert info["task_type"] == "generation" and info["inputs"] == ["prompt", "max_new_tokens"]
    assert (version / "assets" / "vocab.txt").exists()
    assert (version / "assets.extra" / "tf_serving_warmup_requests").exists()

    result = runner("""
        loaded = tf.saved_model.load(sys.argv[1])
        fn = loaded.signatures["serving_default"]
        prompts = json.loads(sys.argv[2])
        out = fn(prompt=tf.constant(prompts), max_new_tokens=tf.constant(5))
        one = fn(prompt=tf.constant(prompts[:1]), max_new_tokens=tf.constant(2))
        zero = fn(prompt=tf.constant(prompts[:1]), max_new_tokens=tf.constant(0))
        _check_imports()
        print(json.dumps({
            "completion": [t.decode() for t in out["completion"].numpy()],
            "num_tokens": out["num_tokens"].numpy().tolist(),
            "one": one["completion"].numpy()[0].decode(),
            "zero": [zero["completion"].numpy()[0].decode(), int(zero["num_tokens"][0])],
        }))
    """, version, json.dumps(PROMPTS))
    got = json.loads(result.strip().splitlines()[-1])
    # The batched in-graph loop (right-padded prompts of different lengths)
    # gives each prompt's own Python greedy completion.
    assert got["completion"] == expected
    assert all(n <= 5 for n in got["num_tokens"])
    assert expected[0].startswith(got["one"])
    assert got["zero"] == ["", 0]


def test_generation_export_errors(tmp_path, capsys):
    assert main(["export", "--model", str(tmp_path / "missing"), "--output",
                 str(tmp_path / "x")]) == 2
    assert "no such directory" in capsys.readouterr().err


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    """A GPT fine-tuning directory as `kerasbert finetune` writes it."""
    from kerasbert.tasks import GptClassifier
    from kerasbert.text import load_tokenizer

    ft = tmp_path_factory.mktemp("gpt-ft")
    vocab = write_vocab(str(ft))
    tokenizer = load_tokenizer(vocab)
    model = GptClassifier(tiny_gpt(tokenizer.vocabulary_size, seed=1), num_classes=3,
                          extract_id=tokenizer.mask_id, dropout=0.0)
    for weight in model.output_dense.weights:
        weight.assign(weight.numpy() * 10.0)
    model.save(str(ft / "model.keras"))
    labels = ["negative", "neutral", "positive"]
    with open(ft / "config.json", "w") as f:
        json.dump({"task": "test", "task_type": "pair", "label_names": labels,
                   "max_seq_length": 20, "lower_case": True, "columns": {},
                   "vocab": "vocab.txt", "model_class": "GptClassifier",
                   "qa": {}}, f)
    return str(ft), model, tokenizer


# The classifier SavedModel's checks run as a script in this process, and (16 s,
# slow) in a fresh process with only tensorflow + tensorflow_text.
@pytest.mark.parametrize("runner", [run_in_process, pytest.param(run_fresh, marks=slow_covered_by(
    "tests/serving/test_gpt_export.py::test_classification_export_reads_the_extract_token[in_process]"))],
    ids=["in_process", "in_a_fresh_process"])
def test_classification_export_reads_the_extract_token(classifier_dir, tmp_path, runner):
    from kerasbert.text import make_packer

    ft, model, tokenizer = classifier_dir
    a = ["the quick brown fox", "paris is a city", "", "who lives in london"]
    b = ["jumps over the dog", "in france", "an answer", "mary smith"]
    packed = make_packer(tokenizer, 20)(tokenizer.tokenize_ids(a), tokenizer.tokenize_ids(b))
    expected = keras.ops.softmax(model(packed)).numpy()
    assert np.ptp(expected, axis=0).max() > 1e-2  # the inputs matter
    out = tmp_path / "export" / "gpt_pair"
    assert main(["export", "--model", ft, "--output", str(out)]) == 0
    result = runner("""
        loaded = tf.saved_model.load(sys.argv[1])
        a, b = json.loads(sys.argv[2]), json.loads(sys.argv[3])
        out = loaded.signatures["serving_default"](text_a=tf.constant(a), text_b=tf.constant(b))
        _check_imports()
        print(json.dumps({"p": out["probabilities"].numpy().tolist(),
                          "label": [x.decode() for x in out["label"].numpy()]}))
    """, out / "1", json.dumps(a), json.dumps(b))
    got = json.loads(result.strip().splitlines()[-1])
    labels = ["negative", "neutral", "positive"]
    assert_same_decisions(expected, got["p"], [labels.index(name) for name in got["label"]],
                          atol=1e-5)
