"""ELMo's character ids, numbered as the published biLM numbers them
(allenai/bilm-tf `UnicodeCharsVocabulary`, then its `Batcher`'s +1):

    0            padding (no word at this position)
    1 + b        UTF-8 byte b (0..255)
    257, 258     begin / end of sentence (the <S> and </S> words' middle mark)
    259, 260     begin / end of word
    261          padding after a word's end mark

A word is [259, bytes..., 260, 261, ...]: at most max_characters - 2 of its
bytes (cut at a byte, as the published code does), then the end mark, then
261 to the full width. The sentence marks are the words [259, 257, 260,
261, ...] and [259, 258, 260, 261, ...]. Plain Python (no TensorFlow).
"""

import numpy as np

MAX_CHARACTERS = 50
#: Ids 0..261, the `n_characters` of a published options.json.
NUM_CHARACTERS = 262
BEGIN_SENTENCE, END_SENTENCE = 257, 258
BEGIN_WORD, END_WORD, PAD_CHARACTER = 259, 260, 261


def word_char_ids(word, max_characters=MAX_CHARACTERS):
    """One word's ids: int32 [max_characters]."""
    data = word.encode("utf-8", "ignore")[:max_characters - 2]
    ids = np.full(max_characters, PAD_CHARACTER, np.int32)
    ids[0] = BEGIN_WORD
    ids[1:1 + len(data)] = np.frombuffer(data, np.uint8).astype(np.int32) + 1
    ids[1 + len(data)] = END_WORD
    return ids


def boundary_char_ids(mark, max_characters=MAX_CHARACTERS):
    """The <S> (mark=BEGIN_SENTENCE) or </S> (END_SENTENCE) word's ids."""
    ids = np.full(max_characters, PAD_CHARACTER, np.int32)
    ids[:3] = (BEGIN_WORD, mark, END_WORD)
    return ids


def batch_char_ids(sentences, max_characters=MAX_CHARACTERS, num_words=None):
    """Words of each sentence -> (char ids int32 [B, W, max_characters],
    mask int32 [B, W]), right-padded with id 0 to the longest sentence (or
    `num_words`, cutting longer ones). No sentence marks: the backbone adds
    them (`ElmoBackbone(add_sentence_boundaries=True)`)."""
    width = num_words or max((len(s) for s in sentences), default=0)
    ids = np.zeros((len(sentences), width, max_characters), np.int32)
    mask = np.zeros((len(sentences), width), np.int32)
    for i, words in enumerate(sentences):
        for j, word in enumerate(list(words)[:width]):
            ids[i, j] = word_char_ids(word, max_characters)
            mask[i, j] = 1
    return ids, mask
