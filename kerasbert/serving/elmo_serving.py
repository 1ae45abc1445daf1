"""Serving for task models on an ELMo biLM: the task type's own serving
class (`ClassificationServing`, `TaggingServing`) with the text read as
characters instead of a tokenizer's ids.

In the graph, raw strings are cleaned (`clean_text`), split into words as
in fine-tuning by the model's `CharacterTokenizer` (BERT's basic split,
cased), cut to the first `sequence_length` words and numbered byte by byte
with begin / end-of-word marks into ELMo's 50 (max_characters) ids per
word: tf.strings and tensorflow-text ops only, the same numbering as
`kerasbert.text.elmo_characters` (the published biLM's). The batch is
padded to its longest row, never to T (the biLM reads any length).

`serve_token_ids` takes the model's own inputs for clients that split and
number the words themselves: `input_char_ids` int32 [B, W, max_characters]
(range-checked against the character table) and `input_mask` int32 [B, W].
"""

import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.serving.classification_serving import ClassificationServing
from kerasbert.serving.tagging_serving import TaggingServing
from kerasbert.serving.task_serving import check_ids_in_range
from kerasbert.serving.task_serving import clean_text
from kerasbert.text.character_tokenizer import CharacterTokenizer
from kerasbert.text.elmo_words import split_words_with_offsets

#: {a task type's serving class: its ELMo counterpart} (`elmo_serving`).
_COUNTERPARTS = {}

#: export.json's "batching" reason for a model that reads characters: a
#: biLSTM's cost per batch is not the measured encoders' (layers * hidden^2
#: * length).
NO_BATCHING_FOR_CHARACTERS = (
    "not written: the batching values come from throughput measured on Transformer encoders "
    "(bench/serving_bench.py); an ELMo biLSTM's cost per batch is not theirs. Measure this "
    "model before enabling TF Serving batching.")

# Words past a byte budget, and bytes ELMo's numbering must survive.
EDGE_TEXTS = (
    "x" * 60 + " " + "é" * 40 + " \u00a0 end",
    "NUL\x00inside and \x00\x00 alone",
)


def elmo_serving(serving_class):
    """The ELMo counterpart of a task type's `TaskServing` subclass;
    UsageError when ELMo has none (QA, multiple choice, text2text)."""
    if serving_class not in _COUNTERPARTS:
        raise UsageError(f"An ELMo model exports tagging and single-text classification, "
                         f"not what {serving_class.__name__} serves.")
    return _COUNTERPARTS[serving_class]


def _counterpart_of(serving_class):
    def register(cls):
        _COUNTERPARTS[serving_class] = cls
        return cls
    return register


class ElmoServing:
    """Mixin before a `TaskServing` subclass: the tokenizer is the model's
    `CharacterTokenizer` (`CharacterTokenizer.for_backbone`), the packed
    inputs are ELMo's character features."""

    no_batching_reason = NO_BATCHING_FOR_CHARACTERS

    def __init__(self, model, tokenizer, sequence_length, *args, **kwargs):
        backbone = model.backbone
        if not isinstance(tokenizer, CharacterTokenizer):
            raise ValueError(f"{type(self).__name__} reads characters: it takes a "
                             f"CharacterTokenizer, not a {type(tokenizer).__name__}.")
        super().__init__(model, tokenizer, sequence_length, *args, **kwargs)
        self.max_characters = tokenizer.max_characters
        self.num_characters = int(backbone.get_config()["num_characters"])

    def export_info(self):
        # No vocabulary: "input" says how the graph reads the text.
        info = super().export_info()
        info.update(tokenizer=None, input=self.tokenizer.describe())
        return info

    def words(self, texts):
        """Cleaned texts [B] -> ragged words [B, (W)], at most T a row."""
        return self.tokenizer.split_words(texts)[:, :self.sequence_length]

    def char_features(self, words):
        ids, mask = self.tokenizer.word_ids(words)
        return {"input_char_ids": ids, "input_mask": mask}

    def encode_batch(self, texts_a, texts_b=None):
        if texts_b is not None:
            raise UsageError("An ELMo model takes single texts, not pairs.")
        return self.char_features(self.words(clean_text(texts_a)))

    def trim(self, features):
        return features  # already the batch's longest row, in words

    def token_input_specs(self):
        return [tf.TensorSpec((None, None, self.max_characters), tf.int32, name="input_char_ids"),
                tf.TensorSpec((None, None), tf.int32, name="input_mask")]

    def check_token_inputs(self, inputs):
        return {"input_char_ids": check_ids_in_range(
                    inputs["input_char_ids"], self.num_characters, "input_char_ids",
                    "the number of character ids"),
                "input_mask": inputs["input_mask"]}

    def warmup_requests(self):
        requests = super().warmup_requests()
        requests.extend({name: [text] for name in self.raw_inputs} for text in EDGE_TEXTS)
        return requests


@_counterpart_of(ClassificationServing)
class ElmoClassificationServing(ElmoServing, ClassificationServing):
    """`ClassificationServing` (`text` -> probabilities, label id, label) on
    ELMo's character input; single texts only."""

    def __init__(self, model, tokenizer, sequence_length, label_names=None, pair=False,
                 options=None, name=None, packer=None):
        if pair:
            raise UsageError("An ELMo classifier takes single texts, not pairs.")
        super().__init__(model, tokenizer, sequence_length, label_names, pair=False,
                         options=options, name=name, packer=packer)


@_counterpart_of(TaggingServing)
class ElmoTaggingServing(ElmoServing, TaggingServing):
    """`TaggingServing`'s outputs (labels per word, entity spans with
    character offsets) on ELMo's character input: one prediction per word,
    words past T dropped and the row marked `truncated`."""

    def serve(self, inputs):
        texts = clean_text(inputs["text"])
        words, starts, ends = split_words_with_offsets(texts)
        kept = words[:, :self.sequence_length]
        logits = self.run_model(self.char_features(kept), token_outputs=True)
        probabilities = tf.nn.softmax(logits, axis=-1)  # [B, W, L]
        index = tf.ragged.range(kept.row_lengths())
        spans = index.with_flat_values(tf.stack(
            [index.flat_values, starts[:, :self.sequence_length].flat_values,
             ends[:, :self.sequence_length].flat_values], axis=-1))
        return self.decode_words(texts, probabilities, spans,
                                 tf.cast(index.flat_values, tf.int32), words.row_lengths())
