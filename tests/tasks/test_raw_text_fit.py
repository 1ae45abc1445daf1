"""`tasks/raw_text_fit.py`, the raw-text plumbing `Task.fit` / `evaluate` /
`predict` delegate to, on its own: what counts as text, batches per epoch,
one repeated iterator for every epoch, and the refusal of text by a task
without a preprocessor."""

import types

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.tasks import raw_text_fit


def test_text_is_told_from_token_ids():
    assert raw_text_fit.looks_like_text(["a review", "another"])
    assert raw_text_fit.looks_like_text([("question", "context")])
    assert raw_text_fit.looks_like_text(np.array(["한국어 리뷰"]))
    assert raw_text_fit.looks_like_text(tf.constant(["text"]))
    assert not raw_text_fit.looks_like_text(np.zeros((2, 3), "int32"))
    assert not raw_text_fit.looks_like_text([[1, 2, 3]])
    assert raw_text_fit.is_dataset(tf.data.Dataset.range(3))
    assert not raw_text_fit.is_dataset(np.arange(3))


def test_batches_per_epoch_of_arrays_dicts_and_datasets():
    assert raw_text_fit.batches_per_epoch(np.zeros((10, 4)), None, 4) == 3
    assert raw_text_fit.batches_per_epoch({"input_word_ids": np.zeros((8, 4))}, None, 4) == 2
    assert raw_text_fit.batches_per_epoch(tf.data.Dataset.range(10).batch(3), None, None) == 4
    # An endless dataset has no count.
    assert raw_text_fit.batches_per_epoch(tf.data.Dataset.range(3).repeat(), None, 2) is None


def test_one_iterator_repeats_a_finite_dataset_for_several_epochs():
    task = types.SimpleNamespace(_repeated_input=False)
    dataset = tf.data.Dataset.range(6).batch(2)
    kwargs = {}
    repeated = raw_text_fit.one_iterator(task, dataset, 3, kwargs, "steps_per_epoch")
    assert kwargs == {"steps_per_epoch": 3} and task._repeated_input
    assert [int(b[0]) for b in repeated.take(6)] == [0, 2, 4, 0, 2, 4]
    # One epoch, or steps the caller chose: the dataset as it is.
    for epochs, given in ((1, {}), (3, {"steps_per_epoch": 2})):
        task._repeated_input = False
        assert raw_text_fit.one_iterator(task, dataset, epochs, given,
                                         "steps_per_epoch") is dataset
        assert not task._repeated_input


def test_text_without_a_preprocessor_is_refused_naming_the_way_out():
    task = types.SimpleNamespace(preprocessor=None)
    with pytest.raises(UsageError, match="from_preset"):
        raw_text_fit.is_raw(task, ["some text"])
    assert not raw_text_fit.is_raw(task, {"input_word_ids": np.zeros((1, 3), "int32")})


@pytest.mark.parametrize("x", [[], (), np.zeros((0, 4), "int32"), ([], [])])
def test_no_examples_is_a_clear_error_not_a_keras_key_error(x):
    """Issue 51: fit([], []) and predict([]) ended in Keras's "pop from an
    empty set"."""
    from kerasbert.errors import TaskDataError

    with pytest.raises(TaskDataError, match=r"predict\(\) got no examples"):
        raw_text_fit.refuse_empty(x, "predict")
    raw_text_fit.refuse_empty(["a text"], "fit")  # one example is enough
    raw_text_fit.refuse_empty(None, "fit")  # a dataset comes as x=None's sibling


def test_a_task_refuses_empty_fit_evaluate_and_predict():
    from kerasbert.errors import TaskDataError
    from kerasbert.models import BertBackbone
    from kerasbert.tasks import TextClassifier

    model = TextClassifier(BertBackbone(vocabulary_size=20, num_layers=1, num_heads=2,
                                        hidden_dim=8, intermediate_dim=16,
                                        max_sequence_length=8), num_classes=2)
    for call in (lambda: model.fit([], []), lambda: model.evaluate([], []),
                 lambda: model.predict([])):
        with pytest.raises(TaskDataError, match="got no examples"):
            call()


def test_a_dataset_label_outside_the_label_set_is_one_task_data_error(tmp_path):
    """Issue 51: a tf.data dataset of (text, label) whose string label is not
    in `label_names` ended in a graph InvalidArgumentError after two steps;
    a list of the same examples gets a TaskDataError, and so does this."""
    from kerasbert.errors import TaskDataError
    from kerasbert.tasks import TextClassifier
    from kerasbert.testing.sentence_models import write_sentence_model

    write_sentence_model(tmp_path / "m")
    model = TextClassifier.from_preset(str(tmp_path / "m"), label_names=["neg", "pos"])
    texts = ["good film", "bad film", "fine", "awful", "great", "dull"]
    labels = ["pos", "neg", "pos", "neg", "pos", "neutral"]
    data = tf.data.Dataset.from_tensor_slices((texts, labels))
    with pytest.raises(TaskDataError, match="not in the label set .'neg', 'pos'.*neutral"):
        model.fit(data, batch_size=2, epochs=1, verbose=0)
    with pytest.raises(TaskDataError, match="neutral"):
        model.evaluate(data, batch_size=2, verbose=0)
