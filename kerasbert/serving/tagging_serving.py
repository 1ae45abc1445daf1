"""Serving for token classification (NER): word labels and entity spans."""

import tensorflow as tf

from kerasbert.serving.task_serving import TaskServing
from kerasbert.serving.task_serving import clean_text
from kerasbert.serving.task_serving import substrings

# Tag prefixes, as seqeval's default (conlleval) chunking reads them.
OUTSIDE, BEGIN, INSIDE, END, SINGLE = range(5)
_PREFIXES = {"B": BEGIN, "I": INSIDE, "E": END, "S": SINGLE, "L": END, "U": SINGLE}


def parse_tag(name):
    """"B-PER" -> (BEGIN, "PER"); "O" -> (OUTSIDE, ""). BILOU's L/U read as
    E/S; a name without a prefix ("PER", IO tagging) is INSIDE its type, so
    a run of equal names is one entity."""
    if name == "O" or not name:
        return OUTSIDE, ""
    if len(name) > 2 and name[1] in "-_" and name[0] in _PREFIXES:
        return _PREFIXES[name[0]], name[2:]
    return INSIDE, name


def _chunk_boundaries(prefix, kind, prev_prefix, prev_kind):
    """Whether each word starts a new entity (seqeval's default rules: a
    chunk ends after E/S, before B/S/O, or on a type change; it starts at
    B/S, at I/E after O/E/S, or on a type change)."""
    def either(x, *values):
        return tf.reduce_any(tf.stack([tf.equal(x, v) for v in values]), axis=0)

    type_change = tf.not_equal(prev_kind, kind)
    starts = (
        either(prefix, BEGIN, SINGLE)
        | (either(prefix, INSIDE, END) & either(prev_prefix, OUTSIDE, END, SINGLE))
        | type_change
    )
    ends = (
        either(prev_prefix, END, SINGLE)
        | (either(prev_prefix, BEGIN, INSIDE) & either(prefix, BEGIN, SINGLE, OUTSIDE))
        | (tf.not_equal(prev_prefix, OUTSIDE) & type_change)
    )
    return tf.not_equal(prefix, OUTSIDE) & (starts | ends)


def _shift_right(values):
    """values[i - 1] at i (0 at 0); works for empty vectors."""
    return tf.concat([tf.zeros([1], values.dtype), values[:-1]], axis=0)[: tf.shape(values)[0]]


class TaggingServing(TaskServing):
    """`TokenClassifier` on raw text: labels per word, and entity spans.

    A word is what BERT's tokenizer splits on (whitespace, punctuation, CJK
    characters: "U.S." is four words), labelled by its first piece, as in
    fine-tuning. Words past the `sequence_length - 2` pieces the model sees are
    dropped and the row is marked `truncated`. Entities are chunked from the
    word labels as seqeval does (BIO, IOBES; BILOU; plain IO names).
    Character offsets are code points into the (UTF-8-cleaned) text, end
    exclusive.

    Outputs of `serving_default` (W = most words in the batch, E = most
    entities; padding: "" / -1 / 0):
        tokens string [B, W]: each word's text.
        token_labels string [B, W], token_label_ids int32 [B, W].
        token_scores float32 [B, W]: the label's probability.
        token_probabilities float32 [B, W, num_labels].
        token_start_char, token_end_char int32 [B, W].
        num_tokens int32 [B]; truncated bool [B].
        entity_text, entity_label string [B, E]; start_char, end_char int32
        [B, E]; entity_score float32 [B, E] (mean word score);
        num_entities int32 [B].
    """

    def __init__(self, model, tokenizer, sequence_length, label_names, options=None, name=None,
                 packer=None):
        super().__init__(model, tokenizer, sequence_length, label_names, options=options,
                         name=name, packer=packer)
        parsed = [parse_tag(label) for label in self.label_names]
        kinds = sorted({kind for _, kind in parsed})
        self.tag_prefix = tf.constant([prefix for prefix, _ in parsed], tf.int32)
        self.tag_kind = tf.constant([kinds.index(kind) for _, kind in parsed], tf.int32)
        self.kind_names = tf.constant(kinds, tf.string)

    def serve(self, inputs):
        texts = clean_text(inputs["text"])
        ids, starts, ends = self.tokenizer.tokenize_with_offsets(texts)
        budget = self.sequence_length - 2
        features = self.packer(ids)
        logits = self.run_model(features, token_outputs=True)
        probabilities = tf.nn.softmax(logits, axis=-1)  # [B, T, L]

        # Words: runs of pieces from a word-starting piece; a word counts if
        # its first piece fits in the window (later pieces may not).
        word_start = self.tokenizer.starts_word(ids)
        piece_position = tf.ragged.range(ids.row_lengths())
        first_piece = tf.ragged.boolean_mask(piece_position, word_start)  # [B, (words)]
        word_id = tf.cumsum(tf.cast(word_start.flat_values, tf.int64)) - 1
        num_words_total = tf.shape(first_piece.flat_values, out_type=tf.int64)[0]
        word_end = tf.math.unsorted_segment_max(ends.flat_values, word_id, num_words_total)
        word_start_char = tf.boolean_mask(starts.flat_values, word_start.flat_values)
        all_words = first_piece.with_flat_values(
            tf.stack([first_piece.flat_values, word_start_char, word_end], axis=-1)
        )
        kept = tf.ragged.boolean_mask(all_words, first_piece < budget)  # [B, (words), 3]
        position = tf.cast(kept.flat_values[:, 0], tf.int32) + 1  # after [CLS]
        return self.decode_words(texts, probabilities, kept, position, first_piece.row_lengths())

    def decode_words(self, texts, probabilities, kept, position, words_per_row):
        """The outputs of `serving_default` from per-position probabilities.

        Args:
            texts: the cleaned texts [B].
            probabilities: float32 [B, T, L].
            kept: int64 [B, (words), 3]: the words the model saw, each
                (any, start char, end char).
            position: int32 [total kept words]: each word's position in T.
            words_per_row: int64 [B], all words of each text (more than
                kept: the row is `truncated`).
        """
        rows = tf.cast(kept.value_rowids(), tf.int32)
        word_probs = tf.gather_nd(probabilities, tf.stack([rows, position], axis=-1))
        label_id = tf.argmax(word_probs, axis=-1, output_type=tf.int32)
        score = tf.reduce_max(word_probs, axis=-1)
        start_char = tf.cast(kept.flat_values[:, 1], tf.int32)
        end_char = tf.cast(kept.flat_values[:, 2], tf.int32)

        def padded(values, fill):
            return kept.with_flat_values(values).to_tensor(default_value=fill)

        token_start = padded(start_char, -1)
        token_end = padded(end_char, -1)
        outputs = {
            "tokens": substrings(texts, token_start, token_end),
            "token_labels": padded(self.lookup_labels(label_id), ""),
            "token_label_ids": padded(label_id, -1),
            "token_scores": padded(score, 0.0),
            "token_probabilities": self._padded_probabilities(kept, word_probs),
            "token_start_char": token_start,
            "token_end_char": token_end,
            "num_tokens": tf.cast(kept.row_lengths(), tf.int32),
            "truncated": tf.not_equal(kept.row_lengths(), words_per_row),
        }
        outputs.update(self._entities(texts, kept, label_id, score, start_char, end_char))
        return outputs

    def _padded_probabilities(self, kept, word_probs):
        num_labels = len(self.label_names)
        dense = tf.RaggedTensor.from_row_splits(word_probs, kept.row_splits, validate=False)
        return dense.to_tensor(default_value=0.0, shape=[None, None, num_labels])

    def _entities(self, texts, kept, label_id, score, start_char, end_char):
        """Chunks the kept words' labels into entity spans."""
        prefix = tf.gather(self.tag_prefix, label_id)
        kind = tf.gather(self.tag_kind, label_id)
        # The previous word's tag; a row's first word follows an "O".
        first_in_row = tf.equal(tf.range(tf.shape(label_id, out_type=tf.int64)[0]),
                                tf.gather(kept.row_starts(), kept.value_rowids()))
        prev_prefix = tf.where(first_in_row, OUTSIDE, _shift_right(prefix))
        prev_kind = tf.where(first_in_row, -1, _shift_right(kind))
        prev_kind = tf.where(tf.equal(prev_prefix, OUTSIDE), -1, prev_kind)
        new_entity = _chunk_boundaries(prefix, kind, prev_prefix, prev_kind)
        inside = tf.not_equal(prefix, OUTSIDE)
        entity = tf.cumsum(tf.cast(new_entity, tf.int32)) - 1
        count = tf.reduce_sum(tf.cast(new_entity, tf.int32))
        member = tf.boolean_mask(entity, inside)

        def per_entity(op, values):
            return op(tf.boolean_mask(values, inside), member, count)

        entity_start = per_entity(tf.math.unsorted_segment_min, start_char)
        entity_end = per_entity(tf.math.unsorted_segment_max, end_char)
        entity_score = per_entity(tf.math.unsorted_segment_mean, score)
        entity_kind = tf.boolean_mask(kind, new_entity)
        entity_row = tf.boolean_mask(kept.value_rowids(), new_entity)
        splits = tf.RaggedTensor.from_value_rowids(
            entity_kind, entity_row, nrows=kept.nrows(), validate=False
        ).row_splits

        def padded(values, fill):
            return tf.RaggedTensor.from_row_splits(values, splits, validate=False).to_tensor(fill)

        starts, ends = padded(entity_start, -1), padded(entity_end, -1)
        return {
            "entity_text": substrings(texts, starts, ends),
            "entity_label": padded(tf.gather(self.kind_names, entity_kind), ""),
            "start_char": starts,
            "end_char": ends,
            "entity_score": padded(entity_score, 0.0),
            "num_entities": tf.cast(splits[1:] - splits[:-1], tf.int32),
        }
