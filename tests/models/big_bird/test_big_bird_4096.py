"""Long documents at BigBird's real length: classification and QA fine-tuned
at sequence_length 4096 with the presets' attention pattern (blocks of 64, 3
random blocks: block-sparse above 704 tokens), and the classifier exported
and served like the Keras model. The model is tiny (1 layer, width 16), the
length is not (~20 s on 2 cores)."""

import json
import pathlib
import random
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "serving"))
from serving_fixtures import write_tokenizer  # noqa: E402
from test_big_bird_finetune_export import _classification_csv, _load  # noqa: E402
from test_big_bird_finetune_export import _squad_json  # noqa: E402

from slow_marks import slow_covered_by  # noqa: E402

LENGTH = 4096


# 21 s: fine-tuning, export and serving at the presets' real length (4096 tokens, blocks
# of 64); the default suite has the pieces at short lengths (the sparse path in a SavedModel
# and in training, SentencePiece fine-tuning and export, ragged block padding).
@slow_covered_by(
    "tests/models/big_bird/test_big_bird_backbone.py::TestBigBirdBackbone::test_backbone_basics",
    "tests/models/big_bird/test_big_bird_backbone.py::TestBigBirdBackbone::test_masked_lm_pretrainer_runs_on_the_sparse_path",
    "tests/training/test_finetune_cli.py::test_albert_sentencepiece_finetune_export_predict",
    "tests/serving/test_export_families.py::test_pair_export_in_process",
    "tests/layers/test_block_sparse_attention.py::TestBlockSparseSelfAttention::test_length_not_a_multiple_of_the_block_is_padded_internally")
def test_classification_and_qa_at_4096_tokens(tmp_path, monkeypatch):
    import keras
    import tensorflow as tf

    import test_big_bird_finetune_export as short
    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning.examples import TaskData
    from kerasbert.models import BigBirdBackbone
    from kerasbert.serving.exporter import export_finetuned
    from kerasbert.text import load_tokenizer
    from kerasbert.training.configs import FinetuneConfig
    from kerasbert.training.finetune import run_finetuning

    spm = write_tokenizer(str(tmp_path / "spm"), "sentencepiece")
    keras.utils.set_random_seed(0)
    backbone = BigBirdBackbone(vocabulary_size=load_tokenizer(spm).vocabulary_size,
                               num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                               max_sequence_length=LENGTH)  # block_size 64, 3 random blocks
    backbone.save(str(tmp_path / "backbone.keras"))
    # Documents of ~2,500 words: packed lengths in the thousands of tokens.
    original = short._document
    monkeypatch.setattr(short, "_document",
                        lambda rng, animal, words=45: original(rng, animal, words=2500))
    runs = {}
    for name, task in (("cls", f"csv:{_classification_csv(tmp_path / 'c.csv', 6, 0)}"),
                       ("qa", f"squad_json:{_squad_json(tmp_path / 'q.json', 4, 1)}")):
        config = FinetuneConfig(task=task, output_dir=str(tmp_path / name), vocab=spm,
                                backbone=str(tmp_path / "backbone.keras"), epochs=1,
                                batch_size=2, learning_rate=1e-3, sequence_length=LENGTH,
                                doc_stride=1024, max_query_length=16, max_answer_length=8,
                                dropout=0.0, progress=False)
        runs[name] = run_finetuning(config)
        assert np.isfinite(runs[name]["history"]["loss"]).all()

    model, tokenizer = _load(str(tmp_path / "cls"))
    assert json.load(open(tmp_path / "cls" / "config.json"))["max_seq_length"] == LENGTH
    attention = model.backbone.transformer_layers[0].attention
    assert attention.uses_block_sparse(LENGTH) and not attention.uses_block_sparse(704)
    texts = [short._document(random.Random(3), "cat"), "the dog"]
    data = TaskData([{"text_a": t} for t in texts], "classification",
                    json.load(open(tmp_path / "cls" / "config.json"))["label_names"],
                    has_labels=False)
    features = convert_examples(data, tokenizer, LENGTH)
    assert features.x["input_mask"][0].sum() > 2048  # a real long document
    logits = np.asarray(model.predict(features.x, verbose=0), "float64")
    expected = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)

    path = export_finetuned(str(tmp_path / "cls"), str(tmp_path / "export"))["path"]
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=1e-5)
