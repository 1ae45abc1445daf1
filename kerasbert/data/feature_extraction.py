"""Contextual token embeddings from chosen encoder layers (the feature-based approach).

As google-research/bert `extract_features.py`: each input is one text or a
pair ("text_a ||| text_b" on a line), packed `[CLS] a [SEP] (b [SEP])` and
cut to sequence_length (single: the tail of a is dropped; pair: pieces are
dropped from the longer segment, b on a tie, as the original
`_truncate_seq_pair`). For every real token (padding excluded) the output
holds its vectors from the chosen layers of `encoder_outputs` (Python
indices: -1 = top layer, 0 = first layer):

    {"linex_index": 0,
     "features": [{"token": "[CLS]",
                   "layers": [{"index": -1, "values": [0.123456, ...]}, ...]},
                  ...]}

Values are float32 rounded to 6 decimals, as the original. Tokens are the
vocabulary's strings: WordPiece (`[CLS]`, `##s`, `[UNK]`, ...; uncased
Hangul as decomposed jamo, as the original's tokenizer gives them),
SentencePiece (`▁the`) or byte-level BPE (`<s>`, `Ġthe`). Each family packs
its own way (RoBERTa: `<s> a </s></s> b </s>`, see kerasbert.text.tokenizer_loading).

Differences from the original script (the format itself is the same):
- Non-ASCII tokens are written as UTF-8 (`json.dumps(ensure_ascii=False)`)
  instead of `\\uXXXX` escapes: the same data for any JSON reader.
- The input is read as UTF-8 with a BOM ignored; like the original, every
  line (blank ones too: `[CLS] [SEP]`) gives one record, so `linex_index`
  is the 0-based line number.
- How many inputs were truncated is counted (`stats["truncated"]`; the
  command prints it); the original truncates silently.
- Layer indices are checked up front (a clear error instead of an
  IndexError inside the graph).
"""

import itertools
import re

import numpy as np

from kerasbert.data.finetuning.features import check_max_seq_length
from kerasbert.data.finetuning.padding import padded_width
from kerasbert.errors import UsageError
from kerasbert.models.config_checks import check_tokenizer_fits
from kerasbert.text.tokenizer_loading import make_packer, segment_layout

# The original's separator: the LAST " ||| " splits text_a from text_b
# (greedy `^(.*) \|\|\| (.*)$`).
_PAIR_RE = re.compile(r"^(.*) \|\|\| (.*)$")


def parse_line(line):
    """An input line -> text or (text_a, text_b), as the original reads it
    (the line is stripped; an empty line is an empty text)."""
    line = line.strip()
    match = _PAIR_RE.match(line)
    return line if match is None else (match.group(1), match.group(2))


def parse_layers(text):
    """"-1,-2,-3,-4" -> [-1, -2, -3, -4] (UsageError on anything else)."""
    items = [item.strip() for item in str(text).split(",")]
    try:
        layers = [int(item) for item in items]
    except ValueError:
        raise UsageError(f"--layers {text!r}: expected comma-separated integers, e.g. -1,-2,-3,-4.") from None
    if not layers:
        raise UsageError("--layers is empty.")
    return layers


def check_layers(layers, num_layers):
    """Raises a UsageError naming any index outside [-num_layers, num_layers)."""
    bad = [i for i in layers if not -num_layers <= int(i) < num_layers]
    if bad:
        raise UsageError(
            f"Layer index(es) {', '.join(map(str, bad))} out of range: the backbone has "
            f"{num_layers} layers (valid: {-num_layers}..{num_layers - 1}, -1 = top)."
        )
    return [int(i) for i in layers]


def _num_layers(backbone):
    count = getattr(backbone, "num_layers", None)
    if count is None:
        count = len(backbone.output["encoder_outputs"])
    return int(count)


def layer_model(backbone, layers):
    """A Keras model: the backbone's inputs -> [encoder_outputs[i] for i in layers]."""
    import keras

    outputs = backbone.output["encoder_outputs"]
    return keras.Model(backbone.input, [outputs[i] for i in layers], name="feature_extractor")


def _batches(texts, batch_size):
    """Lists of up to `batch_size` texts, read lazily from `texts`."""
    texts = iter(texts)
    while batch := list(itertools.islice(texts, batch_size)):
        yield batch


def extract_features(backbone, tokenizer, texts, layers=(-1, -2, -3, -4), sequence_length=128,
                     batch_size=32, stats=None, start_index=0):
    """Yields one feature dict per input text (lazily, batch by batch).

    Args:
        backbone: a functional backbone whose outputs hold `encoder_outputs`
            (e.g. `BertBackbone`).
        tokenizer: the backbone's tokenizer (`kerasbert.text.load_tokenizer`).
        texts: iterable of str (one text) or (text_a, text_b) pairs.
        layers: indices into `encoder_outputs` (negative from the top).
        sequence_length: T; longer inputs are truncated.
        batch_size: texts per forward pass.
        stats: optional dict, updated with "num_texts" and "truncated" (how
            many inputs were cut to sequence_length).
        start_index: `linex_index` of the first text.

    Yields:
        {"linex_index": int, "features": [{"token": str, "layers":
        [{"index": int, "values": [float, ...]}, ...]}, ...]}
    """
    layers = check_layers(layers, _num_layers(backbone))
    sequence_length = int(sequence_length)
    _check_sizes(backbone, tokenizer, sequence_length, batch_size)
    model = layer_model(backbone, layers)
    packer = make_packer(tokenizer, sequence_length)
    layout = segment_layout(tokenizer)
    if sequence_length < layout.special_tokens(pair=True):
        raise UsageError(f"max_seq_length {sequence_length} leaves no room for text after "
                         f"{layout.special_tokens(pair=True)} special tokens.")
    vocabulary = tokenizer.vocabulary
    stats = stats if stats is not None else {}
    stats.setdefault("num_texts", 0)
    stats.setdefault("truncated", 0)
    index = int(start_index)
    for number, batch in enumerate(_batches(texts, int(batch_size))):
        # After the first batch a short (last) batch is padded with empty
        # rows to batch_size, so the compiled forward pass is not retraced.
        num_rows = len(batch) if number == 0 else max(len(batch), int(batch_size))
        inputs, truncated = _pack_batch(batch, tokenizer, packer, layout, num_rows,
                                        sequence_length)
        stats["truncated"] += truncated
        outputs = _forward(model, inputs, sequence_length)
        yield from _records(inputs, outputs, len(batch), layers, vocabulary, tokenizer,
                            index)
        index += len(batch)
        stats["num_texts"] += len(batch)


def _check_sizes(backbone, tokenizer, sequence_length, batch_size):
    """UsageError for a length, batch size or vocabulary the backbone
    cannot take."""
    check_max_seq_length(sequence_length, backbone)
    if sequence_length < 3:
        raise UsageError(f"max_seq_length must be at least 3, got {sequence_length}.")
    if int(batch_size) < 1:
        raise UsageError(f"batch_size must be at least 1, got {batch_size}.")
    check_tokenizer_fits(tokenizer, backbone, "The vocabulary")


def _pack_batch(batch, tokenizer, packer, layout, num_rows, sequence_length):
    """Packs a batch of texts / (a, b) pairs into the model inputs, int32
    [num_rows, T] each (rows past len(batch) empty); returns (inputs, how
    many texts were truncated)."""
    pairs = [text if isinstance(text, (tuple, list)) else (text, None) for text in batch]
    text_a = [a for a, _ in pairs]
    has_b = [b is not None for _, b in pairs]
    a_ids = tokenizer.tokenize_ids(text_a)
    len_a = a_ids.row_lengths().numpy()
    len_b = np.zeros_like(len_a)
    if any(has_b):
        b_ids = tokenizer.tokenize_ids([b if b is not None else "" for _, b in pairs])
        len_b = b_ids.row_lengths().numpy()
    # Singles and pairs pack separately (a pair has one more [SEP]).
    inputs = {}
    for want_pair in (False, True):
        rows = [i for i, is_pair in enumerate(has_b) if is_pair == want_pair]
        if not rows:
            continue
        packed = packer(
            _gather(a_ids, rows), _gather(b_ids, rows) if want_pair else None
        )
        for name, value in packed.items():
            part = value.numpy().astype(np.int32)
            if name not in inputs:
                inputs[name] = np.zeros((num_rows, sequence_length), np.int32)
            inputs[name][rows] = part
    budget = np.where(has_b, sequence_length - layout.special_tokens(pair=True),
                      sequence_length - layout.special_tokens(pair=False))
    return inputs, int(np.sum(len_a + len_b > budget))


def _forward(model, inputs, sequence_length):
    """The chosen layers' outputs for packed inputs: float64 [rows, width,
    H] each, float32 values rounded to 6 decimals (as the original's
    round(float(x), 6))."""
    # On the batch's longest row, not T: the real positions written are the same.
    width = padded_width(inputs["input_mask"].sum(axis=1).max(), sequence_length)
    outputs = model.predict_on_batch({k: v[:, :width] for k, v in inputs.items()})
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    return [np.round(np.asarray(o, np.float32).astype(np.float64), 6) for o in outputs]


def _records(inputs, outputs, count, layers, vocabulary, tokenizer, index):
    """Yields the output records of the first `count` rows, the first one
    numbered `index` (module docstring); ids past `vocabulary` show as the
    tokenizer's unknown token."""
    lengths = inputs["input_mask"].sum(axis=1)
    for row in range(count):
        length = int(lengths[row])
        tokens = [vocabulary[i] if i < len(vocabulary) else vocabulary[tokenizer.unk_id]
                  for i in inputs["input_word_ids"][row, :length].tolist()]
        values = [out[row, :length].tolist() for out in outputs]
        features = [
            {"token": token,
             "layers": [{"index": layer, "values": vals[position]}
                        for layer, vals in zip(layers, values)]}
            for position, token in enumerate(tokens)
        ]
        yield {"linex_index": index + row, "features": features}


def _gather(ragged, rows):
    import tensorflow as tf

    return tf.gather(ragged, rows)
