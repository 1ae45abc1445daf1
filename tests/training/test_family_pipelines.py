"""Each zoo family's whole life cycle through the CLI, on its own tokenizer:

    kerasbert vocab --type T  ->  create-pretraining-data (the family's
    objective)  ->  pretrain --preset <family>  ->  finetune (classifier)
    ->  export  ->  a fresh process with only tensorflow + tensorflow_text

RoBERTa: byte-level BPE, FULL-SENTENCES (`--objective none`), unmasked
files masked dynamically while training. ALBERT: SentencePiece, sentence
order prediction, whole-word masks. DistilBERT: WordPiece, masked LM only.
BigBird: SentencePiece, masked LM with block-sparse attention.
The export's probabilities must equal the fine-tuned Keras model's.
"""

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "serving"))
import pretrain_data as pd  # noqa: E402
from kerasbert.cli import main  # noqa: E402
from serving_fixtures import run_fresh  # noqa: E402
from test_finetune_cli import write_classification  # noqa: E402

from slow_marks import slow_covered_by  # noqa: E402

TINY = ["num_layers=1", "hidden_dim=32", "num_heads=2", "intermediate_dim=64",
        "max_sequence_length=64"]
FAMILIES = {
    # name: (vocab type, vocab size, preset, data flags, extra --set, expected metadata)
    "roberta": ("bpe", 300, "roberta_base", ["--objective", "none", "--no-masking"], [],
                {"objective": "none", "masking": "dynamic", "tokenizer": "bpe"}),
    "albert": ("sentencepiece", 57, "albert_base", ["--objective", "sop", "--whole-word-mask"],
               ["embedding_dim=16"],
               {"objective": "sop", "masking": "static", "tokenizer": "sentencepiece"}),
    "distil_bert": ("wordpiece", 200, "distilbert_base", ["--objective", "none"], [],
                    {"objective": "none", "masking": "static", "tokenizer": "wordpiece"}),
    # Blocks of 4 with one random block: the 32-token pretraining sequences
    # take the block-sparse path (full attention only up to 28 tokens).
    "big_bird": ("sentencepiece", 57, "bigbird_roberta_base", ["--objective", "none"],
                 ["block_size=4", "num_random_blocks=1"],
                 {"objective": "none", "masking": "static", "tokenizer": "sentencepiece"}),
}
TEXTS = ["the cat likes the river today", "My sister paints a blue car at night .",
         "", "naïve café ☕ 東京"]


def _vocab_path(root, kind):
    return {"bpe": root / "bpe", "sentencepiece": root / "sp.model",
            "wordpiece": root / "vocab.txt"}[kind]


def _run(args):
    assert main([str(a) for a in args]) in (0, None), args


def _pipeline(root, name):
    kind, size, preset, data_flags, extra_set, _ = FAMILIES[name]
    corpus = pd.write_corpus(str(root / "corpus.txt"))
    output = {"bpe": root / "bpe", "sentencepiece": root / "sp",
              "wordpiece": root / "vocab.txt"}[kind]
    _run(["vocab", "--type", kind, "--input", corpus, "--vocab-size", size,
          "--output", output, "--no-progress"])
    vocab = _vocab_path(root, kind)
    data = root / "data"
    _run(["create-pretraining-data", "--input", corpus, "--vocab", vocab, "--output-dir", data,
          "--max-seq-length", 32, "--max-predictions-per-seq", 5, "--dupe-factor", 1,
          "--no-progress", *data_flags])
    run = root / "run"
    sets = [arg for value in TINY + extra_set for arg in ("--set", value)]
    _run(["pretrain", "--preset", preset, "--vocab", vocab, "--data", data, "--output-dir", run,
          "--steps", 3, "--batch-size", 8, "--learning-rate", "1e-3", "--warmup-steps", 1,
          "--no-progress", *sets])
    ft = root / "ft"
    _run(["finetune", "--backbone", run / "backbone.keras", "--vocab", vocab,
          "--task", f"csv:{write_classification(root / 'train.csv', 48, 0)}",
          "--output-dir", ft, "--epochs", 1, "--batch-size", 16, "--learning-rate", "1e-3",
          "--max-seq-length", 24, "--no-progress"])
    _run(["export", "--model", ft, "--output", root / "export" / name])
    return {"data": data, "run": run, "ft": ft, "export": root / "export" / name / "1"}


def _keras_probabilities(ft):
    """The fine-tuned Keras model on the Python feature pipeline."""
    import keras

    import kerasbert.tasks  # noqa: F401  (registers the task classes)
    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning.examples import TaskData
    from kerasbert.text import load_saved_tokenizer

    config = json.load(open(os.path.join(ft, "config.json")))
    model = keras.saving.load_model(os.path.join(ft, "model.keras"))
    data = TaskData([{"text_a": t} for t in TEXTS], "classification", config["label_names"],
                    has_labels=False)
    features = convert_examples(data, load_saved_tokenizer(ft, config), config["max_seq_length"])
    logits = np.asarray(model.predict(features.x, verbose=0), "float64")
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    return probabilities / probabilities.sum(-1, keepdims=True), model


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory):
    """Every family's pipeline, then one fresh process serving all exports
    (after the fine-tuning directories and tokenizer files are deleted)."""
    import shutil

    import keras

    results = {}
    for name in FAMILIES:
        root = tmp_path_factory.mktemp(name)
        results[name] = _pipeline(root, name)
        results[name]["expected"], model = _keras_probabilities(results[name]["ft"])
        results[name]["backbone_class"] = type(model.backbone).__name__
        results[name]["metadata"] = json.load(open(results[name]["data"] / "metadata.json"))
        results[name]["history"] = [json.loads(line) for line in
                                    open(results[name]["run"] / "history.jsonl")]
        keras.backend.clear_session()
    for name in FAMILIES:
        root = results[name]["ft"].parent
        for path in (results[name]["ft"], _vocab_path(root, FAMILIES[name][0])):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    spec = {name: str(r["export"]) for name, r in results.items()}
    served = json.loads(run_fresh("""
        spec, texts = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
        out = {}
        for name, path in spec.items():
            serve = tf.saved_model.load(path).signatures["serving_default"]
            out[name] = serve(text=tf.constant(texts))["probabilities"].numpy().tolist()
        _check_imports()
        print(json.dumps(out))
        """, _dump(tmp_path_factory, "spec.json", spec),
        _dump(tmp_path_factory, "texts.json", TEXTS)).splitlines()[-1])
    for name in FAMILIES:
        results[name]["served"] = np.asarray(served[name])
    return results


def _dump(factory, name, value):
    path = factory.mktemp("json") / name
    path.write_text(json.dumps(value))
    return path


# 76 s (the module's four pipelines, vocab -> data -> pretrain -> finetune -> export ->
# serve); the default suite covers each step per family: their tokenizers' data and
# objectives, their pretrainers, ALBERT's finetune -> export -> predict, each one's export.
@slow_covered_by("tests/data/test_writer.py::test_subword_tokenizer_data",
                 "tests/data/test_writer.py::test_objective_sop",
                 "tests/data/test_writer.py::test_objective_none_and_no_masking",
                 "tests/tasks/test_bert_pretrainer.py::test_sparse_last_layer_equals_the_full_encoder",
                 "tests/training/test_electra_pretrain.py::test_a_short_run_writes_the_discriminator",
                 "tests/training/test_finetune_cli.py::test_albert_sentencepiece_finetune_export_predict",
                 "tests/serving/test_export_families.py::test_pair_export_in_process")
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_life_cycle(pipelines, name):
    result = pipelines[name]
    expected_meta = FAMILIES[name][5]
    assert {k: result["metadata"][k] for k in expected_meta} == expected_meta
    # The pretraining run used the family's objective on its own tokenizer.
    config = json.load(open(result["run"] / "config.json"))
    assert config["objectives"] == (["mlm", "sop"] if name == "albert" else ["mlm"])
    assert config["backbone_class"] == result["backbone_class"]
    assert config["dynamic_masking"] == (name == "roberta")
    if name == "big_bird":
        assert config["backbone"]["attention"] == "bigbird"
    last = result["history"][-1]
    assert last["step"] == 3 and np.isfinite(last["loss"])
    assert ("sentence_accuracy" in last) == (name == "albert")
    # The export, loaded without kerasbert, gives the Keras model's answers.
    np.testing.assert_allclose(result["served"], result["expected"], atol=1e-5)
    assert result["served"].shape == (len(TEXTS), 2)
