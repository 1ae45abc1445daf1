"""The text2text task type: its registry entry, BLEU through sacreBLEU,
the metrics of generated texts, and the backbones it takes."""

import numpy as np
import pytest
import sacrebleu

from kerasbert import metrics
from kerasbert.data.finetuning import TaskData
from kerasbert.data.finetuning.task_formats import TASK_TYPES
from kerasbert.errors import UsageError
from kerasbert.serving import task_servings
from kerasbert.serving.text2text_serving import Text2TextServing
from kerasbert.tasks import task_evaluation
from kerasbert.tasks import task_types

HYPOTHESES = ["the cat sat on the mat", "a dog is in the garden today", "hello there world", ""]
REFERENCES = ["the cat sat on the mat", "the dog is in the garden", "hello world", "nothing"]


def test_registered_with_bleu_and_its_serving_class():
    entry = task_types.get("text2text")
    assert "text2text" in TASK_TYPES
    assert entry.main_metric == "bleu" and entry.selection_metric("csv:x.tsv") == "bleu"
    assert entry.format.generates_text and not entry.format.named_labels
    assert (entry.format.example, entry.format.label) == ("text2text", "target")
    assert entry.predict is task_evaluation.generate_texts and entry.needs_examples
    assert task_servings.serving_class("text2text") is Text2TextServing
    assert not task_types.get("classification").format.generates_text
    assert entry.written_predictions({"predictions": ["a\nb", "c"]}) == ["a b", "c"]
    assert task_types.get("qa").written_predictions({}) is None


def test_bleu_is_sacrebleus_corpus_bleu():
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score
    assert 0.0 < expected < 100.0
    assert metrics.bleu(HYPOTHESES, REFERENCES) == pytest.approx(expected, abs=1e-12)
    upper = [h.upper() for h in HYPOTHESES]
    assert metrics.bleu(upper, REFERENCES) < expected
    assert metrics.bleu(upper, REFERENCES, lowercase=True) == pytest.approx(expected, abs=1e-12)
    # Several references per example: sacreBLEU's reference streams.
    second = ["a cat sat on a mat", "a dog is in the garden today", "hello there world", "none"]
    both = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES, second]).score
    assert metrics.bleu(HYPOTHESES, list(zip(REFERENCES, second))) == pytest.approx(both)
    assert both > expected
    assert metrics.bleu(REFERENCES, REFERENCES) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="4 predictions but 3 references"):
        metrics.bleu(HYPOTHESES, REFERENCES[:3])
    with pytest.raises(ValueError, match="predictions is empty"):
        metrics.bleu([], [])


def test_evaluate_texts_scores_against_the_raw_targets():
    data = TaskData([{"source": "x", "target": t} for t in REFERENCES], "text2text")
    # As a WordPiece tokenizer writes them back: lower case, punctuation spaced.
    outputs = {"predictions": HYPOTHESES, "targets": ["the cat sat on the mat", "x", "y", ""],
               "lowercase": True}
    result = task_evaluation.evaluate_texts("tsv:t.tsv", data, None, outputs, {})
    assert set(result) == {"bleu", "exact_match"}
    assert result["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES], lowercase=True).score)
    assert result["exact_match"] == pytest.approx(0.5)  # rows 0 and 3
    no_labels = task_evaluation.evaluate_texts("t", data, None, dict(outputs, targets=None), {})
    assert set(no_labels) == {"bleu"} and 0.0 <= no_labels["bleu"] <= 100.0


def test_backbones_and_task_types_must_match():
    import keras

    from kerasbert.models import BertBackbone
    from kerasbert.models import TransformerBackbone
    from kerasbert.tasks import Seq2SeqLM

    keras.utils.set_random_seed(0)
    transformer = TransformerBackbone(vocabulary_size=40, num_layers=1, num_heads=2,
                                      hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    bert = BertBackbone(vocabulary_size=40, num_layers=1, num_heads=2, hidden_dim=8,
                        intermediate_dim=16, max_sequence_length=16)
    entry = task_types.get("text2text")
    model = entry.build_model(transformer, None)
    assert isinstance(model, Seq2SeqLM) and model.backbone is transformer
    with pytest.raises(UsageError, match="A text2text task needs an encoder-decoder backbone "
                       r"\(e.g. --preset transformer_base\), not a BertBackbone"):
        entry.build_model(bert, None)
    with pytest.raises(UsageError, match="An encoder-decoder TransformerBackbone fine-tunes "
                       "text2text tasks, not classification"):
        task_types.get("classification").build_model(transformer, None)
    assert np.isfinite(metrics.bleu(["a"], ["a"]))
