"""The TF Hub-format text preprocessor: `__call__`, `.tokenize`,
`.tokenize.get_special_tokens_dict()`, `.bert_pack_inputs`. See
`hub_export`."""

from kerasbert.text import make_packer


def build_preprocessor(tokenizer, sequence_length):
    """The preprocessor SavedModel's root object and signatures.

    Args:
        tokenizer: a kerasbert tokenizer (its files become the assets); the
            family's packer comes with it (`make_packer`).
        sequence_length: T of `__call__` and the default of `bert_pack_inputs`
            (whose own argument keeps TF Hub's name, `seq_length`).

    Returns:
        (root, {"serving_default": concrete function}).
    """
    import tensorflow as tf

    packer = make_packer(tokenizer, sequence_length)
    sentences = tf.TensorSpec([None], tf.string, name="sentences")

    root = tf.train.Checkpoint()
    # Tracked here so the vocabulary asset and the lookup table are saved.
    root.tokenizer = tokenizer

    tokenize = tf.train.Checkpoint()
    tokenize.__call__ = tf.function(tokenizer.tokenize, input_signature=[sentences],
                                    autograph=False)
    tokenize.get_special_tokens_dict = tf.function(tokenizer.get_special_tokens_dict,
                                                   input_signature=[])
    root.tokenize = tokenize

    default_length = int(sequence_length)

    def pack(segments, seq_length=default_length):
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"bert_pack_inputs takes 1 or 2 segments, got {len(segments)}.")
        return packer(*segments, sequence_length=seq_length)

    pack_inputs = tf.train.Checkpoint()
    pack_inputs.__call__ = tf.function(pack, autograph=False)
    # Segments may be [B, (words), (pieces)] (from tokenize) or [B, (pieces)];
    # one or two of them; seq_length a tensor so any value works.
    for ragged_rank in (1, 2):
        for count in (1, 2):
            spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32,
                                       ragged_rank=ragged_rank)
            pack_inputs.__call__.get_concrete_function(
                [spec] * count, seq_length=tf.TensorSpec([], tf.int32))
    root.bert_pack_inputs = pack_inputs

    # The root calls the two functions above (their traces are reused, and
    # the SavedModel holds one copy of the tokenizer's graph).
    def preprocess(texts):
        packed = pack_inputs.__call__([tokenize.__call__(texts)],
                                      seq_length=tf.constant(default_length, tf.int32))
        return {k: tf.ensure_shape(v, [None, default_length]) for k, v in packed.items()}

    root.__call__ = tf.function(preprocess, input_signature=[sentences], autograph=False)
    return root, {"serving_default": root.__call__.get_concrete_function()}
