"""What ELMo's task preprocessors share: no tokenizer and no files, words
in, character ids out (`kerasbert.text.elmo_words`), and the table that
finds the ELMo preprocessor standing in for a task's own."""

import numpy as np
import tensorflow as tf

from kerasbert.data.finetuning.features import TaskFeatures
from kerasbert.errors import UsageError
from kerasbert.text.elmo_characters import MAX_CHARACTERS
from kerasbert.text.elmo_words import words_to_char_ids

#: {a task's preprocessor class: its ELMo counterpart} (`elmo_preprocessor`).
_COUNTERPARTS = {}


def register_counterpart(task_preprocessor_class):
    """Class decorator: the decorated ELMo preprocessor stands in for
    `task_preprocessor_class` when the backbone reads characters."""
    def register(cls):
        _COUNTERPARTS[task_preprocessor_class] = cls
        return cls
    return register


def elmo_preprocessor(task_preprocessor_class):
    """The ELMo preprocessor for a task's preprocessor class, or None when
    ELMo has none for that task (QA, multiple choice)."""
    return _COUNTERPARTS.get(task_preprocessor_class)


def character_preprocessor(task_preprocessor_class, task_type):
    """`elmo_preprocessor`, or a UsageError naming the task type when ELMo
    cannot take it (QA, multiple choice, text pairs, text2text)."""
    cls = elmo_preprocessor(task_preprocessor_class)
    if cls is None or task_type.format.text_pair:
        raise UsageError(f"ELMo takes tagging and single-text classification tasks, not "
                         f"{task_type.name}.")
    return cls


class ElmoInputs:
    """Mixin before a `TaskPreprocessor`: `sequence_length` counts words
    (longer examples keep their first sequence_length), every batch is
    padded to it, and the features are ELMo's:

        input_char_ids  int32 [B, T, max_characters]
        input_mask      int32 [B, T]

    Args (beyond the task preprocessor's; `tokenizer` must be None):
        max_characters: int, the backbone's `max_characters_per_token`.
    """

    def __init__(self, tokenizer=None, sequence_length=None, label_names=None, task_type=None,
                 max_characters=MAX_CHARACTERS, **kwargs):
        if tokenizer is not None:
            raise ValueError(f"{type(self).__name__} reads characters: it takes no tokenizer.")
        super().__init__(None, sequence_length, label_names, task_type, **kwargs)
        self.max_characters = int(max_characters)

    #: config.json's "input" type (`kerasbert.runs.INPUT`).
    input_type = "elmo_characters"

    @property
    def tokenizer(self):
        """None: the text is read as characters (`kerasbert.text.elmo_words`)."""
        return None

    def describe_input(self):
        """What a run's config.json and an export's export.json record in
        place of a tokenizer."""
        return {"type": self.input_type, "max_characters": self.max_characters}

    def task_features(self, data, batch_size=64):
        """A `TaskData` (the CLI's examples) -> `TaskFeatures` as the task
        type's metrics read them (`kerasbert.tasks.task_evaluation`): x the
        character features [N, T, C] and mask [N, T] (the `dataset` ops),
        y the label ids (tagging: [N, T], one per word, the words past T
        dropped as a sub-word model's cut words are), extras["word_ids"]
        each position's word (-1 at padding), sample weights 1 on words."""
        x, y = self.inputs_of(data)
        batches = list(self.dataset(x, batch_size=batch_size, fixed_shapes=True).as_numpy_iterator())
        length, width = self.sequence_length, self.max_characters
        features = {
            "input_char_ids": np.concatenate(
                [b["input_char_ids"] for b in batches]) if batches else
            np.zeros((0, length, width), np.int32),
            "input_mask": np.concatenate([b["input_mask"] for b in batches]) if batches else
            np.zeros((0, length), np.int32),
        }
        extras, weights, labels = {}, None, None
        if self.format.example == "words":
            weights = features["input_mask"].astype(np.float32)
            words = np.full((len(data), length), -1, np.int64)
            for i, row in enumerate(features["input_mask"]):
                words[i, :int(row.sum())] = np.arange(int(row.sum()))
            extras["word_ids"] = words
            if y is not None:
                labels = np.zeros((len(y), length), np.int32)
                for i, tags in enumerate(y):
                    kept = min(len(tags), length)
                    labels[i, :kept] = self.label_ids(tags[:kept], where=f"example {i} tag")
        elif y is not None:
            labels = (np.asarray(y, np.float32) if self.format.float_labels
                      else self.label_ids(y))
        return TaskFeatures(self.task_type, features, labels, weights, extras,
                            self.label_names, length, {"num_examples": len(data)})

    def char_features(self, words):
        """Ragged words [B, (W)] -> the features dict."""
        ids, mask = words_to_char_ids(words, self.max_characters, self.sequence_length, pad=True)
        return {"input_char_ids": ids, "input_mask": mask}

    @staticmethod
    def ragged(words):
        return words if isinstance(words, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(
            words, padding=b"")

    # No tokenizer files travel with the model.
    def save_assets(self, dir_path):
        pass

    def load_assets(self, dir_path):
        pass

    def get_config(self):
        config = super().get_config()
        config["max_characters"] = self.max_characters
        return config
