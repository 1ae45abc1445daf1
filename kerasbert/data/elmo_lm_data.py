"""ELMo's pretraining data from raw text: a word vocabulary (the published
biLM's layout: <S>, </S>, <UNK>, then words by count) and a `tf.data`
pipeline of {input_char_ids, input_mask, word_ids} batches, one sentence
(line) per row, words split as `kerasbert.text.elmo_words` splits them."""

import collections

import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.text.elmo_characters import MAX_CHARACTERS
from kerasbert.text.elmo_words import split_words
from kerasbert.text.elmo_words import words_to_char_ids

SPECIAL_WORDS = ("<S>", "</S>", "<UNK>")
BOS_ID, EOS_ID, UNK_ID = 0, 1, 2


def build_word_vocabulary(texts, max_size=None, min_count=1):
    """<S>, </S>, <UNK>, then the words of `texts` by falling count (ties
    in first-seen order), at most `max_size` entries in all."""
    counts = collections.Counter()
    for start in range(0, len(texts), 1024):
        words = split_words(list(texts[start:start + 1024])).flat_values.numpy()
        counts.update(w.decode("utf-8") for w in words)
    words = [w for w, n in counts.most_common() if n >= min_count and w not in SPECIAL_WORDS]
    vocabulary = list(SPECIAL_WORDS) + words
    return vocabulary[:max_size] if max_size else vocabulary


def elmo_lm_dataset(texts, vocabulary, batch_size=32, max_words=64,
                    max_characters=MAX_CHARACTERS, shuffle=False, seed=None, repeat=False):
    """Batches for `ElmoPretrainer.fit`.

    Args:
        texts: a list of sentences (str).
        vocabulary: word list whose first three entries are <S>, </S>,
            <UNK> (`build_word_vocabulary`).
        max_words: longer sentences keep their first max_words words.

    Returns:
        a `tf.data.Dataset` of dicts: input_char_ids int32 [B, max_words,
        max_characters], input_mask and word_ids int32 [B, max_words].
    """
    if tuple(vocabulary[:3]) != SPECIAL_WORDS:
        raise UsageError(f"The word vocabulary must start with {', '.join(SPECIAL_WORDS)}; "
                         f"it starts with {', '.join(map(str, vocabulary[:3]))}.")
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(tf.constant(list(vocabulary)),
                                            tf.range(len(vocabulary), dtype=tf.int32)),
        default_value=UNK_ID)

    def features(batch):
        words = split_words(batch)[:, :max_words]
        ids, mask = words_to_char_ids(words, max_characters, max_words, pad=True)
        word_ids = words.with_flat_values(table.lookup(words.flat_values))
        word_ids = word_ids.to_tensor(0, shape=[None, max_words])
        return {"input_char_ids": ids, "input_mask": mask, "word_ids": word_ids}

    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(list(texts), tf.string))
    if shuffle:
        dataset = dataset.shuffle(len(texts), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    return dataset.batch(batch_size).map(features).prefetch(tf.data.AUTOTUNE)
