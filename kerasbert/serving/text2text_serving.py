"""Serving for text2text (`Seq2SeqLM`): source strings in, generated target
strings out, beam search in the graph.

    serving_default(source: string [B])
        -> target:     string [B]          the generated text
           token_ids:  int32 [B, L]        its pieces (0 after the last)
           num_tokens: int32 [B]           pieces per target
    serve_token_ids(encoder_token_ids, encoder_padding_mask: int32 [B, S])
        -> token_ids, num_tokens           (for clients that tokenize)

The source is encoded as in training (`kerasbert.preprocessing.
text2text_preprocessor.encode_sources`: pieces + [end], cut and padded to
S), `Seq2SeqLM.generate` runs its decoding loop (`kerasbert.decoding`: an
`ops.while_loop` over at most L = the target length steps, with the
key/value cache), and the ids
go back to text through the tokenizer's detokenize op. All of it is
TensorFlow and tensorflow-text ops: the SavedModel loads with `import
tensorflow_text` alone.
"""

import tensorflow as tf

from kerasbert.decoding import SEARCH_STRATEGIES
from kerasbert.preprocessing.text2text_preprocessor import decode_generated
from kerasbert.preprocessing.text2text_preprocessor import encode_sources
from kerasbert.preprocessing.text2text_preprocessor import generated_pieces
from kerasbert.serving.graph_options import trim_padding
from kerasbert.serving.task_serving import TaskServing
from kerasbert.serving.task_serving import check_ids_in_range

ENCODER_INPUTS = ("encoder_token_ids", "encoder_padding_mask")
STRATEGIES = SEARCH_STRATEGIES


class Text2TextServing(TaskServing):
    """`Seq2SeqLM` + tokenizer -> text generation on raw strings.

    Args:
        model: a `kerasbert.tasks.Seq2SeqLM`.
        tokenizer: the tokenizer it was trained with (its [CLS] starts a
            target, its [SEP] ends one).
        sequence_length: S, the source's packed length.
        target_length: L, the longest target in pieces + [end] (default:
            the model's preprocessor's, else S).
        strategy: "beam" (default) or "greedy".
        beam_size, length_penalty: of the beam search (4 and 0.6, as the
            Transformer paper's translation runs).
        options: `GraphOptions`: XLA, and the source cut to the batch's
            longest (`trim_sources`).
    """

    raw_inputs = ("source",)
    # The export writes no batching file for it (`exporter.NO_BATCHING_FOR_GENERATION`).
    generates_text = True

    @classmethod
    def for_preprocessor(cls, model, preprocessor, label_names=None, options=None):
        return cls(model, preprocessor.tokenizer, preprocessor.sequence_length,
                   target_length=preprocessor.target_length, options=options,
                   packer=preprocessor.packer)

    def __init__(self, model, tokenizer, sequence_length, label_names=None, target_length=None,
                 strategy="beam", beam_size=4, length_penalty=0.6, options=None, name=None,
                 packer=None):
        super().__init__(model, tokenizer, sequence_length, None, options=options, name=name,
                         packer=packer)
        preprocessor = getattr(model, "preprocessor", None)
        self.target_length = int(target_length or getattr(preprocessor, "target_length", None)
                                 or self.sequence_length)
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}.")
        if self.target_length < 2:
            raise ValueError(f"target_length must be at least 2, got {self.target_length}.")
        self.strategy = strategy
        self.beam_size = int(beam_size)
        self.length_penalty = float(length_penalty)
        self.start_id, self.end_id = int(tokenizer.cls_id), int(tokenizer.sep_id)

    def export_info(self):
        return {"decoding": {"strategy": self.strategy, "beam_size": self.beam_size,
                             "length_penalty": self.length_penalty,
                             "max_length": self.target_length},
                "start_id": self.start_id, "end_id": self.end_id,
                "outputs": ["target", "token_ids", "num_tokens"]}

    def generate_ids(self, encoder_token_ids, encoder_padding_mask):
        """int32 [B, S] encoder inputs -> generated ids int32 [B, L]."""
        ids = self.model.generate(encoder_token_ids, encoder_padding_mask,
                                  max_length=self.target_length, start_id=self.start_id,
                                  end_id=self.end_id, strategy=self.strategy,
                                  beam_size=self.beam_size, length_penalty=self.length_penalty)
        return tf.cast(ids, tf.int32)

    def _decoded(self, ids):
        text, lengths = decode_generated(self.tokenizer, ids)
        # token_ids: the target's pieces only, left-aligned, 0 after them.
        pieces = generated_pieces(self.tokenizer, ids).to_tensor(
            default_value=0, shape=[None, self.target_length])
        return {"target": text, "token_ids": pieces, "num_tokens": lengths}

    def trim_sources(self, token_ids, padding_mask):
        """The encoder inputs [B, S] cut to the batch's longest source
        (`GraphOptions.pad_to_longest`, rounded up to `length_multiple`);
        the masked positions never count, so the targets do not change."""
        if not self.options.pad_to_longest:
            return token_ids, padding_mask
        cut = trim_padding({"encoder_padding_mask": padding_mask,
                            "encoder_token_ids": token_ids}, self.options.length_multiple)
        return cut["encoder_token_ids"], cut["encoder_padding_mask"]

    def serve(self, inputs):
        encoded = encode_sources(self.tokenizer, tf.reshape(inputs["source"], [-1]),
                                 self.sequence_length)
        return self._decoded(self.generate_ids(*self.trim_sources(
            encoded["encoder_token_ids"], encoded["encoder_padding_mask"])))

    def warmup_token_ids(self):
        first = self.warmup_requests()[0]["source"]
        encoded = encode_sources(self.tokenizer, tf.constant(first, tf.string),
                                 self.sequence_length)
        return {name: value.numpy() for name, value in encoded.items()}

    def token_input_specs(self):
        """`serve_token_ids` takes the encoder's two inputs."""
        return [tf.TensorSpec(self.token_ids_shape(), tf.int32, name=n) for n in ENCODER_INPUTS]

    def serve_token_inputs(self, inputs):
        ids = check_ids_in_range(inputs["encoder_token_ids"], self.model.backbone.vocabulary_size,
                                 "encoder_token_ids", "the vocabulary size")
        return self._decoded(self.generate_ids(
            ids, tf.cast(inputs["encoder_padding_mask"], tf.int32)))
