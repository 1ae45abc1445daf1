"""Long-document fine-tuning and export with block-sparse attention: a tiny
BigBird (blocks of 4 tokens, 1 random block, so any input over 28 tokens
is block-sparse) fine-tuned by `run_finetuning` for classification and QA
at sequence length 64, exported with `export_finetuned`, and served in a
fresh process (tensorflow + tensorflow_text only) with the Keras model's
outputs. BigBird-RoBERTa's vocabulary is a SentencePiece model packed
`[CLS] a [SEP] b [SEP]`, so the tokenizer here is a tiny SentencePiece
model."""

import json
import pathlib
import random
import shutil
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "serving"))
from kerasbert.testing import assert_same_choice  # noqa: E402
from kerasbert.testing import assert_same_decisions  # noqa: E402
from kerasbert.testing.files import write_csv  # noqa: E402
from serving_fixtures import WORDS, run_fresh, write_tokenizer  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

SEQ_LENGTH = 64
QA = dict(doc_stride=16, max_query_length=12, max_answer_length=6)
FILLER = [w for w in WORDS if w not in ("cat", "dog")]

SERVE_SCRIPT = """
spec = json.load(open(sys.argv[1]))
result = {}
for name, (path, inputs) in spec.items():
    loaded = tf.saved_model.load(path)
    out = loaded.signatures["serving_default"](
        **{k: tf.constant(v, tf.string) for k, v in inputs.items()})
    row = {k: v.numpy().tolist() for k, v in out.items()}
    result[name] = json.loads(json.dumps(row, default=lambda b: b.decode("utf-8")))
_check_imports()
print(json.dumps(result))
"""


def _document(rng, animal, words=45):
    """~45 words of filler with `animal` somewhere: longer than 28 pieces."""
    text = [rng.choice(FILLER) for _ in range(words)]
    text.insert(rng.randrange(words), animal)
    return " ".join(text)


def _classification_csv(path, n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        animal = rng.choice(["cat", "dog"])
        rows.append([_document(rng, animal), animal])
    return write_csv(path, ["sentence", "label"], rows)


def _squad_json(path, n, seed):
    rng = random.Random(seed)
    paragraphs = []
    for i in range(n):
        context = _document(rng, rng.choice(["cat", "dog"]), words=60)
        answer = "cat" if " cat " in f" {context} " else "dog"
        paragraphs.append({"context": context, "qas": [{
            "id": f"q{i}", "question": "which animal is it ?",
            "answers": [{"text": answer, "answer_start": f" {context} ".index(f" {answer} ")}]}]})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}, f)
    return str(path)


def _finetune(root, name, task, spm, backbone):
    from kerasbert.training.configs import FinetuneConfig
    from kerasbert.training.finetune import run_finetuning

    config = FinetuneConfig(task=task, output_dir=str(root / name), vocab=spm,
                            backbone=backbone, epochs=1, batch_size=8, learning_rate=1e-3,
                            sequence_length=SEQ_LENGTH, dropout=0.0, progress=False, **QA)
    result = run_finetuning(config)
    assert np.isfinite(result["history"]["loss"]).all()
    return str(root / name)


def _load(ft):
    import keras

    import kerasbert.tasks  # noqa: F401  (registers the task classes)
    from kerasbert.text import load_saved_tokenizer

    config = json.load(open(f"{ft}/config.json"))
    return keras.saving.load_model(f"{ft}/model.keras"), load_saved_tokenizer(ft, config)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import keras

    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning.examples import TaskData
    from kerasbert.models import BigBirdBackbone
    from kerasbert.serving.exporter import export_finetuned
    from kerasbert.preprocessing.qa_decoding import decode_answers
    from kerasbert.text import load_tokenizer

    root = tmp_path_factory.mktemp("big_bird")
    spm = write_tokenizer(str(root / "spm"), "sentencepiece")
    size = load_tokenizer(spm).vocabulary_size
    keras.utils.set_random_seed(0)
    backbone = BigBirdBackbone(vocabulary_size=size, num_layers=1, num_heads=2, hidden_dim=16,
                               intermediate_dim=32, max_sequence_length=SEQ_LENGTH,
                               block_size=4, num_random_blocks=1)
    backbone.save(str(root / "backbone.keras"))
    keras.backend.clear_session()

    classify = _finetune(root, "ft_cls", f"csv:{_classification_csv(root / 'c.csv', 24, 0)}",
                         spm, str(root / "backbone.keras"))
    qa = _finetune(root, "ft_qa", f"squad_json:{_squad_json(root / 'q.json', 16, 1)}",
                   spm, str(root / "backbone.keras"))

    rng = random.Random(5)
    texts = [_document(rng, "cat"), _document(rng, "dog", words=20), "the cat"]
    pairs = [("which animal is it ?", _document(rng, a, words=80)) for a in ("cat", "dog")]
    expected = {}
    model, tokenizer = _load(classify)
    examples = TaskData([{"text_a": t} for t in texts], "classification",
                        json.load(open(f"{classify}/config.json"))["label_names"],
                        has_labels=False)
    features = convert_examples(examples, tokenizer, SEQ_LENGTH)
    logits = np.asarray(model.predict(features.x, verbose=0), "float64")
    expected["classify"] = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    # The sparse path is really used: the packed length is over 28 tokens.
    attention = model.backbone.transformer_layers[0].attention
    assert features.x["input_word_ids"].shape[1] == SEQ_LENGTH
    assert attention.uses_block_sparse(SEQ_LENGTH)

    model, tokenizer = _load(qa)
    qa_data = TaskData([{"id": str(i), "question": q, "context": c}
                        for i, (q, c) in enumerate(pairs)], "qa")
    qa_features = convert_examples(qa_data, tokenizer, SEQ_LENGTH,
                                   doc_stride=QA["doc_stride"],
                                   max_query_length=QA["max_query_length"])
    out = model.predict(qa_features.x, verbose=0)
    extras = qa_features.extras
    expected["qa"] = decode_answers(
        [c for _, c in pairs], out["start_logits"], out["end_logits"],
        np.stack([extras["token_start_char"], extras["token_end_char"]], -1),
        extras["example_index"], token_is_max_context=extras["token_is_max_context"],
        max_answer_length=QA["max_answer_length"], version_2_with_negative=False)
    windows = len(extras["example_index"])

    spec = {
        "classify": (export_finetuned(classify, str(root / "export" / "classify"))["path"],
                     {"text": texts}),
        "qa": (export_finetuned(qa, str(root / "export" / "qa"))["path"],
               {"question": [q for q, _ in pairs], "context": [c for _, c in pairs]}),
    }
    for path in root.iterdir():  # the SavedModels must be self-contained
        if path.name != "export":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    (root / "spec.json").write_text(json.dumps(spec))
    served = json.loads(run_fresh(SERVE_SCRIPT, root / "spec.json").strip().splitlines()[-1])
    return expected, served, windows


# The module fixture (38 s): two fine-tuning runs at a block-sparse length, two exports and
# a fresh process; the default suite has the pieces: the sparse path in a SavedModel and in
# training, SentencePiece fine-tuning, export and serving, and long-document QA serving.
@slow_covered_by(
    "tests/models/big_bird/test_big_bird_backbone.py::TestBigBirdBackbone::test_backbone_basics",
    "tests/models/big_bird/test_big_bird_backbone.py::TestBigBirdBackbone::test_masked_lm_pretrainer_runs_on_the_sparse_path",
    "tests/training/test_finetune_cli.py::test_albert_sentencepiece_finetune_export_predict",
    "tests/serving/test_export_families.py::test_pair_export_in_process",
    "tests/serving/test_qa_serving.py::test_parity_version_1")
def test_classification_export_serves_like_keras(exported):
    expected, served, _ = exported
    assert_same_decisions(expected["classify"], served["classify"]["probabilities"],
                          served["classify"]["label_id"], atol=1e-5)


# The module fixture's cost (see above): QA windows over 80-word contexts, served.
@slow_covered_by(
    "tests/models/big_bird/test_big_bird_backbone.py::TestBigBirdBackbone::test_backbone_basics",
    "tests/models/big_bird/test_big_bird_backbone.py::TestBigBirdBackbone::test_masked_lm_pretrainer_runs_on_the_sparse_path",
    "tests/training/test_finetune_cli.py::test_albert_sentencepiece_finetune_export_predict",
    "tests/serving/test_export_families.py::test_pair_export_in_process",
    "tests/serving/test_qa_serving.py::test_parity_version_1",
    "tests/serving/test_qa_serving.py::test_features_match_convert_qa")
def test_qa_export_answers_like_keras_on_long_documents(exported):
    expected, served, windows = exported
    assert windows > len(expected["qa"])  # 80-word contexts take several windows
    out = served["qa"]
    assert all(out["answer"])  # SQuAD v1.1 data: always an answer
    np.testing.assert_allclose(out["score"], [p.score for p in expected["qa"]],
                               rtol=1e-5, atol=1e-5)
    # The served span is the Keras model's where the best span beats the
    # runner-up by 10x the score tolerance, and a near-best one elsewhere.
    clear = 0
    for i, p in enumerate(expected["qa"]):
        span = (out["start_char"][i], out["end_char"][i])
        candidates = {(c["start_char"], c["end_char"]): c["score"] for c in p.nbest}
        clear += assert_same_choice(candidates, span, (p.start_char, p.end_char),
                                    tolerance=1e-5 + 1e-5 * abs(p.score), err_msg=f"example {i}")
        texts = {(c["start_char"], c["end_char"]): c["text"] for c in p.nbest}
        assert out["answer"][i] == texts[span], i
    assert clear >= 1
