"""`export_finetuned` for the non-WordPiece families: ALBERT with a
SentencePiece model and RoBERTa with a byte-level BPE vocabulary (`<s> a
</s></s> b </s>`, no type ids). Each export is checked in a fresh process
(tensorflow + tensorflow_text only) against the Keras model on the Python
pipeline, after the fine-tuning directory and the tokenizer's source files
are deleted (the SavedModel must be self-contained)."""

import json
import os
import shutil

import numpy as np
import pytest

from kerasbert.testing import assert_same_decisions
from serving_fixtures import make_finetuned_dir
from serving_fixtures import run_fresh
from serving_fixtures import run_in_process
from test_qa_serving import DOC_STRIDE, MAX_ANSWER, MAX_QUERY, PAIRS, SEQ_LENGTH
from test_qa_serving import _check_parity, _compare_features, _python_pipeline

from slow_marks import slow_covered_by

TEXTS = ["John lives in Paris, naïve café.", "the quick brown fox jumps over the lazy dog",
         "Mary works at the bank near the river in London!", ""]
FAMILIES = {  # name: (backbone class, tokenizer kind, files the export must carry)
    "albert": ("AlbertBackbone", "sentencepiece", ["sentencepiece.model"]),
    "roberta": ("RobertaBackbone", "bpe", ["merges.txt", "vocab.json"]),
}
QA_PAIRS = PAIRS[:3] + [PAIRS[-1]]
CHOICES = [["the dog runs", "a cat", "mary works"], ["Paris is a city", "one two", "x"],
           ["red", "blue", "green"], ["", "b", "c"]]

SERVE_SCRIPT = """
spec = json.load(open(sys.argv[1]))
result = {}
for name, (path, inputs) in spec.items():
    serve = tf.saved_model.load(path).signatures["serving_default"]
    out = serve(**{k: tf.constant(v, tf.string) for k, v in inputs.items()})
    row = {k: v.numpy().tolist() for k, v in out.items()}
    result[name] = json.loads(json.dumps(row, default=lambda b: b.decode("utf-8")))
_check_imports()
print(json.dumps(result))
"""


def _load(ft):
    import keras

    import kerasbert.tasks  # noqa: F401  (registers the task classes)
    from kerasbert.text import load_saved_tokenizer

    config = json.load(open(os.path.join(ft, "config.json")))
    model = keras.saving.load_model(os.path.join(ft, "model.keras"))
    return model, load_saved_tokenizer(ft, config), config


def _pair_probabilities(ft):
    """The Keras model on `convert_examples` features of TEXTS paired with
    their reverse: float64 [B, classes]."""
    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning.examples import TaskData

    model, tokenizer, config = _load(ft)
    examples = [{"text_a": a, "text_b": b} for a, b in zip(TEXTS, reversed(TEXTS))]
    data = TaskData(examples, "pair", config["label_names"], has_labels=False)
    features = convert_examples(data, tokenizer, config["max_seq_length"])
    logits = np.asarray(model.predict(features.x, verbose=0), "float64")
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    return probabilities / probabilities.sum(-1, keepdims=True), features


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Exports (ALBERT pair, RoBERTa pair, RoBERTa QA), their expectations,
    and what a fresh process serves once every source file is gone."""
    from kerasbert.serving.exporter import export_finetuned

    root = tmp_path_factory.mktemp("families")
    result, spec = {}, {}
    for name, (family, kind, _) in FAMILIES.items():
        ft = make_finetuned_dir(str(root / f"ft_{name}"), "pair", family=family, tokenizer=kind)
        expected, features = _pair_probabilities(ft)
        info = export_finetuned(ft, str(root / "export" / name))
        labels = json.load(open(os.path.join(ft, "config.json")))["label_names"]
        result[name] = {"info": info, "expected": expected, "features": features,
                        "labels": labels}
        spec[name] = (info["path"], {"text_a": TEXTS, "text_b": list(reversed(TEXTS))})
    ft = make_finetuned_dir(str(root / "ft_roberta_qa"), "qa", family="RobertaBackbone",
                            tokenizer="bpe", sequence_length=SEQ_LENGTH,
                            qa_options=dict(doc_stride=DOC_STRIDE, max_query_length=MAX_QUERY,
                                            max_answer_length=MAX_ANSWER))
    model, tokenizer, _ = _load(ft)
    predictions, qa_features = _python_pipeline(model, tokenizer, QA_PAIRS,
                                                version_2_with_negative=False)
    info = export_finetuned(ft, str(root / "export" / "roberta_qa"))
    result["roberta_qa"] = {"info": info, "expected": predictions, "features": qa_features,
                            "model": model, "tokenizer": tokenizer}
    spec["roberta_qa"] = (info["path"], {"question": [q for q, _ in QA_PAIRS],
                                         "context": [c for _, c in QA_PAIRS]})
    for task_type, inputs in (("tagging", {"text": TEXTS}),
                              ("multiple_choice", {"context": TEXTS, "choices": CHOICES})):
        ft = make_finetuned_dir(str(root / f"ft_roberta_{task_type}"), task_type,
                                family="RobertaBackbone", tokenizer="bpe")
        model, tokenizer, config = _load(ft)
        info = export_finetuned(ft, str(root / "export" / f"roberta_{task_type}"))
        result[f"roberta_{task_type}"] = {"info": info, "model": model, "tokenizer": tokenizer,
                                          "config": config}
        spec[f"roberta_{task_type}"] = (info["path"], inputs)
    for path in root.iterdir():  # FT dirs and the tokenizers' source files
        if path.name != "export":
            shutil.rmtree(path)
    spec_path = tmp_path_factory.mktemp("spec") / "spec.json"
    spec_path.write_text(json.dumps(spec))
    served = json.loads(run_fresh(SERVE_SCRIPT, spec_path).strip().splitlines()[-1])
    return result, served


# The module's fixture (five exports and a fresh process) is what takes the
# time: 70 s on the first test. Each test is slow; the default suite exports
# each family's pair model and serves it in-process (test_pair_export_in_process).

# 70 s (the fixture): served in a fresh process, every source file deleted.
@slow_covered_by("tests/serving/test_export_families.py::test_pair_export_in_process")
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_pair_export_serves_like_keras(exported, name):
    result, served = exported
    labels = result[name]["labels"]
    assert_same_decisions(result[name]["expected"], served[name]["probabilities"],
                          served[name]["label_id"], atol=1e-5, labels=labels,
                          decoded=served[name]["label"])


# The fixture's cost; the default suite checks the same files on its exports.
@slow_covered_by("tests/serving/test_export_families.py::test_pair_export_in_process")
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_export_carries_its_tokenizer(exported, name):
    result, _ = exported
    path = result[name]["info"]["path"]
    assert sorted(os.listdir(os.path.join(path, "assets"))) == FAMILIES[name][2]
    info = json.load(open(os.path.join(path, "assets.extra", "export.json")))
    assert info["tokenizer"] == {"type": FAMILIES[name][1], "assets": sorted(
        FAMILIES[name][2], key=["vocab.json", "merges.txt", "sentencepiece.model"].index)}


# The fixture's cost; the default suite checks the layout on its RoBERTa export.
@slow_covered_by("tests/serving/test_export_families.py::test_pair_export_in_process")
def test_roberta_pairs_use_roberta_layout(exported):
    """`<s> a </s></s> b </s>`, type ids all 0 (checked on the features the
    served model was compared against)."""
    x = exported[0]["roberta"]["features"].x
    ids, mask = x["input_word_ids"][0], x["input_mask"][0]
    assert ids[0] == 0 and (x["input_type_ids"] == 0).all()
    real = ids[mask == 1]
    assert real[-1] == 2 and sum(real == 2) == 3  # </s></s> between, </s> at the end


# The fixture's cost: RoBERTa's QA export; the default suite serves BPE pairs
# (test_pair_export_in_process) and WordPiece QA windows and answers.
@slow_covered_by("tests/serving/test_export_families.py::test_pair_export_in_process",
                 "tests/serving/test_qa_serving.py::test_features_match_convert_qa",
                 "tests/serving/test_qa_serving.py::test_parity_version_1")
def test_roberta_qa_windows_and_answers(exported):
    """In-graph windows equal `convert_qa`'s (`<s> q </s></s> ctx </s>`),
    and the served answers equal the Python pipeline's."""
    from kerasbert.serving.qa_serving import QuestionAnsweringServing

    result, served = exported
    qa = result["roberta_qa"]
    module = QuestionAnsweringServing(qa["model"], qa["tokenizer"], SEQ_LENGTH,
                                      doc_stride=DOC_STRIDE, max_query_length=MAX_QUERY,
                                      max_answer_length=MAX_ANSWER)
    _compare_features(module, qa["tokenizer"], QA_PAIRS, qa["features"])
    ids = qa["features"].x["input_word_ids"]
    query = len(qa["tokenizer"].tokenize_ids(QA_PAIRS[0][0]).numpy()[:MAX_QUERY])
    assert ids[0, query + 1] == ids[0, query + 2] == qa["tokenizer"].sep_id
    out = {k: np.asarray(v) for k, v in served["roberta_qa"].items()}
    out["answer"] = list(served["roberta_qa"]["answer"])
    _check_parity(out, qa["expected"], version_2=False)
    assert any(p.text for p in qa["expected"])  # some answer is non-empty


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_pair_export_in_process(tmp_path, name):
    """One family's pair export, made without the module's fixture and
    served in this process (`run_in_process`) once the FT dir and the
    tokenizer's source files are deleted: the Keras model's probabilities
    and labels, the tokenizer's files, and (RoBERTa) `<s> a </s></s> b </s>`
    with type ids all 0."""
    from kerasbert.serving.exporter import export_finetuned

    family, kind, assets = FAMILIES[name]
    ft = make_finetuned_dir(str(tmp_path / "ft"), "pair", family=family, tokenizer=kind)
    expected, features = _pair_probabilities(ft)
    labels = json.load(open(os.path.join(ft, "config.json")))["label_names"]
    info = export_finetuned(ft, str(tmp_path / "export" / name))
    shutil.rmtree(ft)
    shutil.rmtree(ft + "_src")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({name: (info["path"], {"text_a": TEXTS,
                                                      "text_b": list(reversed(TEXTS))})}))
    served = json.loads(run_in_process(SERVE_SCRIPT, spec).strip().splitlines()[-1])[name]
    assert_same_decisions(expected, served["probabilities"], served["label_id"], atol=1e-5,
                          labels=labels, decoded=served["label"])
    assert sorted(os.listdir(os.path.join(info["path"], "assets"))) == assets
    recorded = json.load(open(os.path.join(info["path"], "assets.extra", "export.json")))
    assert recorded["tokenizer"]["type"] == kind
    if name == "roberta":
        x = features.x
        ids, mask = x["input_word_ids"][0], x["input_mask"][0]
        assert ids[0] == 0 and (x["input_type_ids"] == 0).all()
        real = ids[mask == 1]
        assert real[-1] == 2 and sum(real == 2) == 3


def test_load_tokenizer_picks_the_family_from_the_path(tmp_path):
    from kerasbert.errors import UsageError
    from kerasbert.text import (BertPacker, BytePairTokenizer, RobertaPacker,
                                SentencePieceTokenizer, WordPieceTokenizer, load_tokenizer,
                                make_packer, segment_layout)
    from serving_fixtures import write_tokenizer

    cases = {"wordpiece": (WordPieceTokenizer, BertPacker, 1),
             "sentencepiece": (SentencePieceTokenizer, BertPacker, 1),
             "bpe": (BytePairTokenizer, RobertaPacker, 2)}
    for kind, (cls, packer, separators) in cases.items():
        path = write_tokenizer(str(tmp_path / kind), kind)
        tokenizer = load_tokenizer(path, lower_case=False)
        assert type(tokenizer) is cls and type(make_packer(tokenizer, 8)) is packer
        assert segment_layout(tokenizer).separators == separators
    bpe = load_tokenizer(str(tmp_path / "bpe" / "vocab.json"))  # the vocab.json form
    assert isinstance(bpe, BytePairTokenizer)

    os.remove(tmp_path / "bpe" / "merges.txt")
    with pytest.raises(UsageError, match="BPE merges file not found: .*merges.txt"):
        load_tokenizer(str(tmp_path / "bpe"))
    with pytest.raises(UsageError, match="SentencePiece model not found: .*missing.model"):
        load_tokenizer(str(tmp_path / "missing.model"))
    (tmp_path / "bad.model").write_bytes(b"not a model")
    with pytest.raises(UsageError, match="bad.model"):
        load_tokenizer(str(tmp_path / "bad.model"))


def _softmax(logits):
    logits = np.asarray(logits, "float64")
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# The fixture's cost: BPE word groups in a tagging export; the default suite
# serves BPE pairs and WordPiece tagging (words, labels and entities).
@slow_covered_by("tests/serving/test_export_families.py::test_pair_export_in_process",
                 "tests/serving/test_export.py::test_tagging_words_labels_and_entities")
def test_roberta_tagging_export_serves_like_keras(exported):
    """Served words are the BPE word groups ("Paris," is one word: "," has
    no leading-space mark); each word's probabilities equal the Keras model's
    at its first piece on `convert_tagging` features of those words."""
    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning.examples import TaskData

    result, served = exported
    context, got = result["roberta_tagging"], served["roberta_tagging"]
    labels = context["config"]["label_names"]
    for row, text in enumerate(TEXTS):
        n = got["num_tokens"][row]
        words = got["tokens"][row][:n]
        starts, ends = got["token_start_char"][row][:n], got["token_end_char"][row][:n]
        assert words == [text[s:e] for s, e in zip(starts, ends)]
        assert "".join(words) == "".join(text.split())
        if not words:
            continue
        data = TaskData([{"tokens": words}], "tagging", labels, has_labels=False)
        features = convert_examples(data, context["tokenizer"], context["config"]["max_seq_length"])
        logits = context["model"].predict(features.x, verbose=0)[0]
        word_ids = features.extras["word_ids"][0]
        first = [p for p in range(len(word_ids))
                 if word_ids[p] >= 0 and (p == 0 or word_ids[p - 1] != word_ids[p])]
        np.testing.assert_allclose(got["token_probabilities"][row][:n], _softmax(logits[first]),
                                   atol=1e-5)
    assert "Paris," in got["tokens"][0]


# The fixture's cost: RoBERTa's multiple-choice export; the default suite
# serves BPE pairs and WordPiece multiple choice.
@slow_covered_by("tests/serving/test_export_families.py::test_pair_export_in_process",
                 "tests/serving/test_export.py::test_probabilities_match_keras")
def test_roberta_multiple_choice_export_serves_like_keras(exported):
    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning.examples import TaskData

    result, served = exported
    context, got = result["roberta_multiple_choice"], served["roberta_multiple_choice"]
    examples = [{"context": t, "choices": c} for t, c in zip(TEXTS, CHOICES)]
    data = TaskData(examples, "multiple_choice", context["config"]["label_names"],
                    has_labels=False)
    features = convert_examples(data, context["tokenizer"], context["config"]["max_seq_length"])
    expected = _softmax(context["model"].predict(features.x, verbose=0))
    assert_same_decisions(expected, got["probabilities"], got["choice"], atol=1e-5,
                          labels=CHOICES, decoded=got["choice_text"])
    # `<s> context </s></s> choice </s>` per choice, no second type id.
    x = features.x
    assert (x["input_type_ids"] == 0).all() and (x["input_word_ids"][..., 0] == 0).all()
