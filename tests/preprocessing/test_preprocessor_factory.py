"""The one preprocessor factory (`kerasbert.tasks.preprocessor_factory`):
one length check against the default table, ELMo's characters as a
tokenizer the same paths take, and serving built on the preprocessor's own
packer."""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.models import BertBackbone
from kerasbert.models import ElmoBackbone
from kerasbert.preprocessing.lengths import default_sequence_length
from kerasbert.preprocessing.lengths import packed_length
from kerasbert.preprocessing.elmo_text_classifier_preprocessor import (
    ElmoTextClassifierPreprocessor)
from kerasbert.preprocessing.question_answerer_preprocessor import QuestionAnswererPreprocessor
from kerasbert.preprocessing.readers import preprocessor_for
from kerasbert.preprocessing.text_classifier_preprocessor import TextClassifierPreprocessor
from kerasbert.serving.exporter import serving_module
from kerasbert.tasks import TextClassifier
from kerasbert.tasks import TokenClassifier
from kerasbert.tasks.preprocessor_factory import backbone_tokenizer
from kerasbert.tasks.preprocessor_factory import build_preprocessor
from kerasbert.tasks.preprocessor_factory import preprocessor_from_config
from kerasbert.tasks.preprocessor_factory import with_sequence_length
from kerasbert.text import CharacterTokenizer
from kerasbert.text import WordPieceTokenizer
from kerasbert.text import describe_tokenizer
from kerasbert.text import make_packer
from kerasbert.text.elmo_characters import batch_char_ids

WORDS = ["good", "bad", "film", "plot", "very", "."]
ELMO = dict(lstm_dim=8, projection_dim=4, num_layers=1, num_highway=1,
            filters=[[1, 4], [2, 4]], max_characters_per_token=12)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
    return WordPieceTokenizer(str(path))


def _bert(positions=16):
    return BertBackbone(vocabulary_size=11, num_layers=1, num_heads=2, hidden_dim=8,
                        intermediate_dim=16, max_sequence_length=positions)


def test_the_default_table_and_the_one_length_check():
    assert (default_sequence_length(), default_sequence_length("qa"),
            default_sequence_length("text2text")) == (128, 384, 64)
    backbone = _bert(positions=200)
    assert packed_length(backbone, "classification") == 128
    assert packed_length(backbone, "qa") == 200  # the default, cut to the positions
    assert packed_length(backbone, "qa", 64) == 64
    with pytest.raises(UsageError, match="max_seq_length 300 is above the backbone's 200"):
        packed_length(backbone, "classification", 300)


def test_character_tokenizer_numbers_words_as_the_published_bilm():
    tokenizer = CharacterTokenizer(max_characters=12)
    texts = ["Alice met Bob.", "", "naïve 東京"]
    ids = tokenizer.tokenize_ids(tf.constant(texts)).to_list()
    words = [[w.decode() for w in row] for row in tokenizer.split_words(tf.constant(texts)).to_list()]
    expected, mask = batch_char_ids(words, 12)
    for row, (got, want, keep) in enumerate(zip(ids, expected, mask)):
        np.testing.assert_array_equal(np.asarray(got).reshape(-1, 12), want[keep == 1], str(row))
    packed = make_packer(tokenizer, 2)(tokenizer.tokenize_ids(tf.constant(texts)))
    assert packed["input_char_ids"].shape == (3, 2, 12)
    np.testing.assert_array_equal(packed["input_mask"], [[1, 1], [0, 0], [1, 1]])
    described = describe_tokenizer(tokenizer)
    assert described == {"type": "elmo_characters", "files": [], "lower_case": False,
                         "max_characters": 12}
    assert CharacterTokenizer.from_description(tokenizer.describe()).max_characters == 12
    with pytest.raises(ValueError, match="at least 3"):
        CharacterTokenizer(max_characters=2)


def test_one_factory_for_subwords_and_characters(tokenizer):
    bert = TextClassifier(_bert(), num_classes=2)
    assert backbone_tokenizer(bert.backbone) is None
    made = build_preprocessor(bert, tokenizer, "pair", None, ["neg", "pos"])
    assert type(made) is TextClassifierPreprocessor
    assert (made.sequence_length, made.task_type, made.label_names) == (16, "pair",
                                                                        ["neg", "pos"])
    elmo = TextClassifier(ElmoBackbone(**ELMO), num_classes=2)
    characters = backbone_tokenizer(elmo.backbone)
    assert characters.max_characters == 12
    made = build_preprocessor(elmo, characters, "classification", 5, ["neg", "pos"])
    assert type(made) is ElmoTextClassifierPreprocessor and made.tokenizer is characters
    features, labels = made.preprocess(tf.constant(["very good film", "bad"]),
                                       tf.constant(["pos", "neg"]))
    assert features["input_char_ids"].shape == (2, 5, 12)
    np.testing.assert_array_equal(labels, [1, 0])
    # ELMo reads single texts: the factory names what it cannot take.
    with pytest.raises(UsageError, match="not pair"):
        build_preprocessor(elmo, characters, "pair")
    with pytest.raises(UsageError, match="not qa"):
        preprocessor_for(QuestionAnswererPreprocessor, characters, "qa")


def test_serving_takes_the_preprocessors_own_packer(tokenizer):
    model = TokenClassifier(_bert(), num_labels=2)
    config = {"task_type": "tagging", "label_names": ["O", "B-X"], "max_seq_length": 12}
    preprocessor = preprocessor_from_config(model, tokenizer, config)
    module = serving_module(model, preprocessor)
    assert module.packer is preprocessor.packer and module.tokenizer is tokenizer
    assert module.sequence_length == 12 and module.label_names == ["O", "B-X"]
    # Another T is another preprocessor, checked once, with its own packer.
    longer = with_sequence_length(model, preprocessor, 16)
    assert longer.sequence_length == 16 and longer.label_names == ["O", "B-X"]
    assert with_sequence_length(model, preprocessor, None) is preprocessor
    with pytest.raises(UsageError, match="above the backbone's 16"):
        with_sequence_length(model, preprocessor, 17)
