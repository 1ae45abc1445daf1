"""`CharacterTokenizer`: ELMo's character input with a tokenizer's interface.

An ELMo biLM reads no vocabulary ids: it reads each word's UTF-8 bytes,
numbered as the published biLM numbers them (`kerasbert.text.elmo_characters`).
This object stands where a subword tokenizer stands, so the code paths that
take a tokenizer (the preprocessor factory, a task preprocessor, a run
directory, an export) take it too, with no "no tokenizer" branch:

    tokenize_ids(texts)   tf.string [B] -> ragged int32 [B, (W), C]: the
                          character ids of each word (words split as BERT's
                          basic tokenizer splits them, cased)
    make_packer(...)      `CharacterPacker`: words cut / padded to T
    describe()            what a run's config.json ("input") and an
                          export's export.json record in place of a
                          tokenizer's description
    vocabulary_size       the character table's rows (262)

It has no files: nothing is copied into a run or an export's assets.
"""

from kerasbert.errors import UsageError
from kerasbert.text.elmo_characters import MAX_CHARACTERS
from kerasbert.text.elmo_characters import NUM_CHARACTERS
from kerasbert.text.families import ELMO_CHARACTERS


class CharacterTokenizer:
    """Raw text -> ELMo character ids, word by word.

    Args:
        max_characters: C, ids per word (the backbone's
            `max_characters_per_token`; 50 for the published biLM). A word
            keeps at most C - 2 of its bytes.
        num_characters: rows of the backbone's character table (262).

    Example:
        >>> tokenizer = CharacterTokenizer(max_characters=8)
        >>> tokenizer.describe()
        {'type': 'elmo_characters', 'max_characters': 8}
        >>> tokenizer.tokenize_ids(["Hi there"]).shape.as_list()
        [1, None, 8]
    """

    family = ELMO_CHARACTERS
    #: ELMo is cased: its words keep their case.
    lower_case = False

    def __init__(self, max_characters=MAX_CHARACTERS, num_characters=NUM_CHARACTERS):
        max_characters, num_characters = int(max_characters), int(num_characters)
        if max_characters < 3:
            raise ValueError(f"max_characters must be at least 3 (begin mark, a byte, end "
                             f"mark), got {max_characters}.")
        if num_characters < NUM_CHARACTERS:
            raise ValueError(f"num_characters must be at least {NUM_CHARACTERS} (the ids "
                             f"ELMo numbers bytes and marks with), got {num_characters}.")
        self.max_characters = max_characters
        self.num_characters = num_characters

    @classmethod
    def for_backbone(cls, backbone):
        """The tokenizer an ELMo backbone reads (its C and character table)."""
        config = backbone.get_config()
        return cls(config.get("max_characters_per_token", MAX_CHARACTERS),
                   config.get("num_characters", NUM_CHARACTERS))

    @classmethod
    def from_description(cls, description):
        """The inverse of `describe` (a run's config.json "input")."""
        if (description or {}).get("type") != ELMO_CHARACTERS:
            raise ValueError(f"Not a character input description: {description!r}.")
        return cls(description.get("max_characters", MAX_CHARACTERS))

    @property
    def vocabulary_size(self):
        return self.num_characters

    def describe(self):
        """{"type": "elmo_characters", "max_characters": C}: JSON-able."""
        return {"type": ELMO_CHARACTERS, "max_characters": self.max_characters}

    def split_words(self, texts):
        """tf.string [B] (cleaned) -> ragged words [B, (W)]."""
        # lazy: tensorflow (families and descriptions are read without it)
        from kerasbert.text.elmo_words import split_words

        return split_words(texts)

    def word_ids(self, words, max_words=None, pad=False):
        """Ragged words [B, (W)] -> (char ids int32 [B, W, C], mask int32
        [B, W]): W the longest row, or `max_words` (cut; padded to it with
        `pad`)."""
        # lazy: tensorflow
        from kerasbert.text.elmo_words import words_to_char_ids

        return words_to_char_ids(words, self.max_characters, max_words, pad=pad)

    def tokenize_words(self, words):
        """Ragged words [B, (W)] -> ragged int32 [B, (W), C]: each word's ids."""
        # lazy: tensorflow
        import tensorflow as tf

        ids, _ = self.word_ids(words)
        return tf.RaggedTensor.from_tensor(ids, lengths=words.row_lengths())

    def tokenize_ids(self, texts):
        """tf.string [B] -> ragged int32 [B, (W), C]: each word's ids."""
        return self.tokenize_words(self.split_words(texts))


def refuse_token_options(model, given):
    """Refuse tokenizer files and subword switches given for a model that
    reads characters (ELMo): they have nothing to change, and ignoring them
    would hide a mistake (a wrong --preset, or a --vocab meant for another
    model).

    Args:
        model: how the user named the model (a preset, a folder, a run).
        given: the flags given, as typed ("--vocab v.txt",
            "--truncate-at-nul"); nothing happens when empty.

    Raises:
        UsageError: naming the flags and the model.
    """
    if given:
        raise UsageError(f"{', '.join(given)}: {model} reads characters (ELMo), so there are "
                         "no tokenizer files or token switches to give.")


def given_token_options(values):
    """The flags, as typed, that `values` ({"vocab" or a switch name: value
    or None}) sets: what `refuse_token_options` names."""
    flags = []
    for name, value in values.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        flags.append(f"{flag} {value}" if name == "vocab" else flag)
    return flags
