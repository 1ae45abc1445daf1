"""ELMo's layers per word as JSON lines (the feature-based use): the
`extract-features` format of `kerasbert.data.feature_extraction`, with words
instead of sub-word tokens and ELMo's layers (index 0 = the character
token layer, 1.. = the biLSTM layers; negative from the top):

    {"linex_index": 0,
     "features": [{"token": "Deep",
                   "layers": [{"index": -1, "values": [0.123456, ...]}, ...]},
                  ...]}

Words are split as BERT's basic tokenizer splits them, cased
(`kerasbert.text.elmo_words`); a line is one text (ELMo has no pairs); an
empty line gives a record without features.
"""

import itertools

import numpy as np

from kerasbert.data.feature_extraction import check_layers
from kerasbert.errors import UsageError
from kerasbert.text.elmo_words import texts_to_char_ids


def extract_elmo_features(backbone, texts, layers=(-1, -2, -3), max_words=128, batch_size=32,
                          stats=None, start_index=0):
    """Yields one feature dict per text (lazily, batch by batch).

    Args:
        backbone: an `ElmoBackbone` (inputs `input_char_ids`, `input_mask`).
        texts: iterable of str.
        layers: indices into its `encoder_outputs` (num_layers + 1 of them).
        max_words: longer texts keep their first max_words words.
        batch_size: texts per forward pass.
        stats: optional dict, updated with "num_texts" and "truncated".
        start_index: `linex_index` of the first text.
    """
    import keras  # lazy: keras (the model), after the arguments are checked

    outputs = backbone.output["encoder_outputs"]
    layers = check_layers(layers, len(outputs))
    if int(max_words) < 1 or int(batch_size) < 1:
        raise UsageError(f"max_words and batch_size must be at least 1, got {max_words} and "
                         f"{batch_size}.")
    model = keras.Model(backbone.input, [outputs[i] for i in layers], name="elmo_features")
    width = backbone.max_characters_per_token
    stats = stats if stats is not None else {}
    stats.setdefault("num_texts", 0)
    stats.setdefault("truncated", 0)
    index = int(start_index)
    batch = []
    for text in itertools.chain(texts, [None]):  # None: the end, flush
        if isinstance(text, (tuple, list)):
            raise UsageError(f"line {index + len(batch) + 1}: a pair ('a ||| b'); ELMo encodes "
                             "single texts.")
        if text is not None:
            batch.append(text)
        if batch and (len(batch) == int(batch_size) or text is None):
            ids, mask, words = texts_to_char_ids(batch, width)
            counts = words.row_lengths().numpy()
            stats["truncated"] += int(np.sum(counts > int(max_words)))
            ids, mask = ids.numpy()[:, :int(max_words)], mask.numpy()[:, :int(max_words)]
            if ids.shape[1] == 0:  # only empty lines: nothing to run
                values = [np.zeros((len(batch), 0, backbone.hidden_dim))] * len(layers)
            else:
                values = model.predict_on_batch({"input_char_ids": ids, "input_mask": mask})
                values = values if isinstance(values, (list, tuple)) else [values]
            values = [np.round(np.asarray(v, np.float32).astype(np.float64), 6) for v in values]
            for row, row_words in enumerate(words.to_list()):
                features = [
                    {"token": word.decode("utf-8", "replace"),
                     "layers": [{"index": layer, "values": v[row, k].tolist()}
                                for layer, v in zip(layers, values)]}
                    for k, word in enumerate(row_words[:int(max_words)])]
                yield {"linex_index": index, "features": features}
                index += 1
            stats["num_texts"] += len(batch)
            batch = []
