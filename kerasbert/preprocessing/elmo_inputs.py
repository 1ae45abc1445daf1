"""What ELMo's task preprocessors share: a `CharacterTokenizer` (no files),
words in, character ids out (`kerasbert.text.elmo_words`), and the table
that finds the ELMo preprocessor standing in for a task's own
(`kerasbert.preprocessing.readers`)."""

import numpy as np
import tensorflow as tf

from kerasbert.data.finetuning.features import TaskFeatures
from kerasbert.text.character_tokenizer import CharacterTokenizer
from kerasbert.text.elmo_characters import MAX_CHARACTERS

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




def character_tokenizer(tokenizer=None, max_characters=None):
    """The `CharacterTokenizer` an ELMo preprocessor reads with: the one
    given, or one from a saved config (its description, or None and
    `max_characters` in configs saved before it existed)."""
    if isinstance(tokenizer, CharacterTokenizer):
        if max_characters is not None and int(max_characters) != tokenizer.max_characters:
            raise ValueError(f"max_characters {max_characters} differs from the tokenizer's "
                             f"{tokenizer.max_characters}.")
        return tokenizer
    if isinstance(tokenizer, dict):
        return CharacterTokenizer(tokenizer.get("max_characters", max_characters
                                                or MAX_CHARACTERS))
    if tokenizer is None:
        return CharacterTokenizer(max_characters or MAX_CHARACTERS)
    raise ValueError(f"An ELMo preprocessor reads characters: give it a CharacterTokenizer, "
                     f"not a {type(tokenizer).__name__}.")


class ElmoInputs:
    """Mixin before a `TaskPreprocessor`: `sequence_length` counts words
    (longer examples keep their first sequence_length), every batch is
    padded to it, and the features are ELMo's:

        input_char_ids  int32 [B, T, max_characters]
        input_mask      int32 [B, T]

    Args (beyond the task preprocessor's):
        tokenizer: a `CharacterTokenizer` (default: one of
            `max_characters`); its packer (`CharacterPacker`) cuts and pads
            the words.
        max_characters: int, the backbone's `max_characters_per_token`
            (configs saved without a tokenizer description).
    """

    def __init__(self, tokenizer=None, sequence_length=None, label_names=None, task_type=None,
                 max_characters=None, **kwargs):
        super().__init__(character_tokenizer(tokenizer, max_characters), sequence_length,
                         label_names, task_type, **kwargs)

    @property
    def max_characters(self):
        return self.tokenizer.max_characters

    def describe_input(self):
        """What a run's config.json and an export's export.json record in
        place of a tokenizer (`CharacterTokenizer.describe`)."""
        return self.tokenizer.describe()

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
        """Ragged words [B, (W)] -> the features dict: the tokenizer's ids,
        packed to T words by the preprocessor's packer."""
        return self.packer(self.tokenizer.tokenize_words(words))

    @staticmethod
    def ragged(words):
        return words if isinstance(words, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(
            words, padding=b"")

    # No tokenizer files travel with the model: the config describes it all.
    def save_assets(self, dir_path):
        pass

    def load_assets(self, dir_path):
        pass

    def get_config(self):
        config = super().get_config()
        config["max_characters"] = self.max_characters
        return config
