"""Serving for extractive question answering (SQuAD v1.1 / v2.0).

`serving_default` takes `question` and `context` strings and returns the
decoded answer, computed in the graph exactly as the Python evaluation
pipeline does it: windows as `kerasbert.data.finetuning.qa.convert_qa`
(`is_training=False`) builds them, spans as
`kerasbert.preprocessing.qa_decoding.decode_answers` picks them.

Shapes below: B examples, P context pieces of the whole batch, W windows of
the whole batch (every example has at least one), T = sequence_length,
L = min(max_answer_length, T), K = most windows one piece can be in.

How it is vectorised:
- the windows are `kerasbert.preprocessing.qa_windows.QAWindows`' (the
  same graph ops cut them for training in `tf.data`): closed forms of the
  piece counts, one [W, T] batch for all the examples' windows;
- all windows of the batch go through the model as one [W, T] batch;
  `example_index` [W] maps them back;
- span search scores every (start, start + k), k < L, as a [W, T, L] tensor;
  the best span of an example is the best of its windows' best spans.
"""

import numpy as np
import tensorflow as tf

from kerasbert.preprocessing.qa_windows import QAWindows
from kerasbert.preprocessing.qa_windows import first_argmax as _first_argmax
from kerasbert.serving.graph_options import restore_length
from kerasbert.serving.task_serving import EDGE_TEXTS
from kerasbert.serving.task_serving import LONG_TEXT
from kerasbert.serving.task_serving import TaskServing
from kerasbert.serving.task_serving import clean_text
from kerasbert.serving.task_serving import substrings
from kerasbert.text import segment_layout

#: `score` of an example without any valid span (an empty context): Python
#: says -inf; outputs must be finite, so the lowest float32 (below every real
#: span score) stands in for it, and `score_diff` is the highest float32.
NO_SPAN_SCORE = float(np.finfo(np.float32).min)
NO_SPAN_SCORE_DIFF = float(np.finfo(np.float32).max)


#: The longest context one QA request may send: 1 MiB of UTF-8, about 400
#: windows of 384 pieces (SQuAD's contexts are about 1 KB); longer documents
#: are split by the client.
MAX_CONTEXT_BYTES = 2**20


class QuestionAnsweringServing(TaskServing):
    """`QuestionAnswerer` on raw `question` + `context` strings.

    Inputs of `serving_default`: `question`, `context`, string [B].

    Outputs (batch dimension first):
        answer: string [B], the context substring of the best span (case
            and accents kept); "" for no answer.
        start_char, end_char: int32 [B], its code point span in the
            context (end exclusive); -1 for no answer. Offsets index the
            context after `clean_text` (the input itself when it is valid
            UTF-8).
        score: float32 [B], start + end logit of the best span;
            NO_SPAN_SCORE (lowest float32) when the context has no piece.
        no_answer: bool [B]; version_2 only (always False otherwise): the
            null score beats the best span by more than
            `null_score_diff_threshold`, or there is no span at all.
        null_score: float32 [B], start + end logit at [CLS], the minimum
            over the example's windows.
        score_diff: float32 [B], null_score - score; NO_SPAN_SCORE_DIFF
            (highest float32) when there is no span.
        num_windows: int32 [B], windows the context was split into.

    Args:
        model: a fine-tuned `kerasbert.tasks.QuestionAnswerer`.
        tokenizer: its tokenizer (WordPiece, SentencePiece or BPE).
        sequence_length: T, window length in pieces (>= max_query_length + 4;
            + 5 with RoBERTa's two separators).
        doc_stride: pieces between window starts (128).
        max_query_length: question pieces kept (64).
        max_answer_length: longest answer in pieces (30).
        null_score_diff_threshold: SQuAD v2.0 no-answer threshold (0.0).
        version_2: answer "" when the null score wins (SQuAD v2.0).
        windows_per_call: windows per model call (64): bounds the memory a
            batch of long contexts takes.
    """

    raw_inputs = ("question", "context")

    @classmethod
    def for_preprocessor(cls, model, preprocessor, label_names=None, options=None):
        """The QA options and the windows (`QAWindows`) of the preprocessor."""
        qa = preprocessor.qa_options()
        return cls(model, preprocessor.tokenizer, preprocessor.sequence_length,
                   doc_stride=qa["doc_stride"], max_query_length=qa["max_query_length"],
                   max_answer_length=qa["max_answer_length"],
                   null_score_diff_threshold=qa["null_score_diff_threshold"],
                   version_2=qa["version_2_with_negative"], options=options,
                   packer=preprocessor.packer, windower=preprocessor.windower)

    def export_info(self):
        return {"qa": {"doc_stride": self.doc_stride, "max_query_length": self.max_query_length,
                       "max_answer_length": self.max_answer_length,
                       "null_score_diff_threshold": self.null_score_diff_threshold,
                       "version_2_with_negative": self.version_2}}

    def __init__(self, model, tokenizer, sequence_length, doc_stride=128, max_query_length=64,
                 max_answer_length=30, null_score_diff_threshold=0.0, version_2=False,
                 windows_per_call=64, options=None, name=None, packer=None, windower=None):
        super().__init__(model, tokenizer, sequence_length, options=options, name=name,
                         packer=packer)
        self.layout = segment_layout(tokenizer)
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)
        self.max_answer_length = int(max_answer_length)
        self.null_score_diff_threshold = float(null_score_diff_threshold)
        self.version_2 = bool(version_2)
        self.windows_per_call = int(windows_per_call)
        if self.max_answer_length < 1:
            raise ValueError(f"max_answer_length must be positive, got {max_answer_length}.")
        # The windows, as training cuts them (raises on a bad stride or
        # length): the preprocessor's own when it is given.
        self.windower = windower if windower is not None else QAWindows(self.layout, self.sequence_length,
                                              self.doc_stride, self.max_query_length)
        self.max_windows_per_piece = self.windower.max_windows_per_piece

    # --- windows ------------------------------------------------------------

    def _features(self, question_ids, context_ids, context_starts, context_ends):
        """Windows of every example -> model inputs and decoding extras
        (`QAWindows.windows`)."""
        return self.windower.windows(question_ids, context_ids, context_starts, context_ends)

    def _run_model(self, features):
        """The model over [W, T] windows, `windows_per_call` at a time.

        Long contexts multiply the batch (a 100,000-character context is
        ~170 windows at T=384), and attention memory grows with it; chunks
        keep a server's peak memory bounded whatever the clients send.

        Returns:
            {"start_logits", "end_logits"}: float32 [W, T].
        """
        chunk = self.windows_per_call
        trimmed = self.trim(features)  # [W, L], L <= T
        num = tf.shape(trimmed["input_word_ids"])[0]
        length = tf.shape(trimmed["input_word_ids"])[1]
        num_chunks = (num + chunk - 1) // chunk

        def split(x):  # [W, L] -> [chunks, chunk, L], zero rows appended
            x = tf.pad(x, [[0, num_chunks * chunk - num], [0, 0]])
            return tf.reshape(x, [num_chunks, chunk, length])

        def call(batch):  # logits padded back to T: a fully defined shape even for 0 chunks
            outputs = self._forward(batch)
            return {k: restore_length(tf.cast(outputs[k], tf.float32), self.sequence_length)
                    for k in ("start_logits", "end_logits")}

        spec = tf.TensorSpec([chunk, self.sequence_length], tf.float32)
        outputs = tf.map_fn(
            call, {k: split(v) for k, v in trimmed.items()},
            fn_output_signature={"start_logits": spec, "end_logits": spec},
            parallel_iterations=1,
        )
        return {k: tf.reshape(v, [-1, self.sequence_length])[:num] for k, v in outputs.items()}

    # --- decoding -----------------------------------------------------------

    def _window_best_spans(self, start_logits, end_logits, features):
        """The best span of every window (`qa_decoding.window_spans`, top 1).

        Scores are float64 sums of the float32 logits, as in the Python
        decoder, so the same span wins.

        Args:
            start_logits, end_logits: float32 [W, T].
            features: `_features` output.

        Returns:
            (score float64 [W] (-inf: no valid span), start token int64 [W],
            end token int64 [W]).
        """
        t = self.sequence_length
        span = min(self.max_answer_length, t)
        starts = tf.cast(start_logits, tf.float64)
        start_char = features["start_char"]
        can_start = features["in_context"] & features["is_max_context"]
        # end[w, i, k] is token i + k; past T is padding that never counts.
        end_index = np.arange(t)[:, None] + np.arange(span)[None, :]  # [T, L]

        def at_end(values, fill):
            padded = tf.pad(values, [[0, 0], [0, span - 1]], constant_values=fill)
            return tf.gather(padded, end_index, axis=1)  # [W, T, L]

        ends = at_end(tf.cast(end_logits, tf.float64), 0.0)
        valid = (
            can_start[:, :, tf.newaxis]
            & at_end(features["in_context"], False)
            & (at_end(features["end_char"], -1) >= start_char[:, :, tf.newaxis])
        )
        scores = tf.where(valid, starts[:, :, tf.newaxis] + ends, -np.inf)
        # Flat index i * L + k, the Python decoder's layout: ties keep the
        # earliest start, then the shortest span.
        best, index = _first_argmax(tf.reshape(scores, [-1, t * span]), axis=1)
        first = index // span
        return best, first, first + index % span

    def _decode(self, start_logits, end_logits, features, batch_size):
        """Best span of each example over its windows (`decode_answers`).

        Args:
            start_logits, end_logits: float32 [W, T].
            features: `_features` output.
            batch_size: B, scalar.

        Returns:
            dict of [B] tensors: has_span bool, score / null_score float64,
            start_char / end_char int64 (not yet masked for no answer).
        """
        example = features["example_index"]
        window_score, first, last = self._window_best_spans(start_logits, end_logits, features)
        # Segment max starts from the lowest float64, not -inf: count the
        # windows with a span instead of testing the max.
        has_span = tf.math.unsorted_segment_max(
            tf.cast(window_score > -np.inf, tf.int32), example, batch_size
        ) > 0
        score = tf.math.unsorted_segment_max(window_score, example, batch_size)
        # The earliest window holding the example's best score.
        num = tf.shape(example, out_type=tf.int64)[0]
        window_id = tf.range(num)
        is_best = tf.equal(window_score, tf.gather(score, example))
        chosen = tf.math.unsorted_segment_min(
            tf.where(is_best, window_id, num), example, batch_size
        )
        chosen = tf.clip_by_value(chosen, 0, tf.maximum(num - 1, 0))
        where = tf.stack([chosen, tf.gather(first, chosen)], axis=1)
        start_char = tf.gather_nd(features["start_char"], where)
        where = tf.stack([chosen, tf.gather(last, chosen)], axis=1)
        end_char = tf.gather_nd(features["end_char"], where)
        null = tf.cast(start_logits[:, 0], tf.float64) + tf.cast(end_logits[:, 0], tf.float64)
        return {
            "has_span": has_span,
            "score": score,
            "null_score": tf.math.unsorted_segment_min(null, example, batch_size),
            "start_char": start_char,
            "end_char": end_char,
        }

    # --- serving ------------------------------------------------------------

    def serve(self, inputs):
        """{"question": string [B], "context": string [B]} -> the outputs
        listed in the class docstring."""
        # A request's cost grows with its context (every window runs the
        # encoder): one past the cap is refused, naming it, before any work.
        check = tf.debugging.assert_less_equal(
            tf.strings.length(inputs["context"]), tf.constant(MAX_CONTEXT_BYTES),
            message=f"a QA context longer than {MAX_CONTEXT_BYTES:,} bytes: split the document "
            "and ask each part")
        with tf.control_dependencies([check]):
            contexts = clean_text(tf.identity(inputs["context"]))
        pieces = self.windower.tokenize(self.tokenizer, inputs["question"], contexts)
        features = self._features(*pieces)
        outputs = self._run_model(
            {name: features[name] for name in ("input_word_ids", "input_mask", "input_type_ids")}
        )
        batch_size = tf.shape(contexts, out_type=tf.int64)[0]
        decoded = self._decode(
            tf.cast(outputs["start_logits"], tf.float32),
            tf.cast(outputs["end_logits"], tf.float32),
            features,
            batch_size,
        )
        return self._outputs(contexts, decoded, features["num_windows"])

    def _outputs(self, contexts, decoded, num_windows):
        has_span = decoded["has_span"]
        score_diff = decoded["null_score"] - decoded["score"]
        if self.version_2:
            no_answer = ~has_span | (score_diff > self.null_score_diff_threshold)
        else:
            no_answer = tf.zeros_like(has_span)
        answered = has_span & ~no_answer
        start_char = tf.where(answered, decoded["start_char"], -1)
        end_char = tf.where(answered, decoded["end_char"], -1)
        answer = substrings(contexts, start_char[:, tf.newaxis], end_char[:, tf.newaxis])[:, 0]
        return {
            "answer": answer,
            "start_char": tf.cast(start_char, tf.int32),
            "end_char": tf.cast(end_char, tf.int32),
            "score": tf.cast(tf.where(has_span, decoded["score"], NO_SPAN_SCORE), tf.float32),
            "no_answer": no_answer,
            "null_score": tf.cast(decoded["null_score"], tf.float32),
            "score_diff": tf.cast(tf.where(has_span, score_diff, NO_SPAN_SCORE_DIFF), tf.float32),
            "num_windows": tf.cast(num_windows, tf.int32),
        }

    def warmup_requests(self):
        question = "Where does the fox jump?"
        context = "The quick brown fox jumps over the lazy dog near the river."
        requests = [{"question": [question], "context": [context]}]
        for text in EDGE_TEXTS:
            requests.append({"question": [question], "context": [text]})
            requests.append({"question": [text], "context": [context]})
        requests.append({"question": [""], "context": [""]})
        requests.append({
            "question": [question, "", LONG_TEXT[:500], "東京タワー 😀?"],
            "context": [context, LONG_TEXT, "", EDGE_TEXTS[-1]],
        })
        return requests
