"""What ELMo's task preprocessors share: no tokenizer and no files, words
in, character ids out (`kerasbert.text.elmo_words`), and the table that
finds the ELMo preprocessor standing in for a task's own."""

import tensorflow as tf

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
