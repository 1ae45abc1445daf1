"""ELMo's biLM in plain NumPy, written from the paper and the published
biLM's graph (allenai/bilm-tf `bilm/model.py`), reading the weight file's own
dataset names: the independent side of the parity tests. Loops over rows and
steps, no vectorised tricks, so it shares nothing with the Keras layers."""

import numpy as np

from kerasbert.text.elmo_characters import BEGIN_SENTENCE
from kerasbert.text.elmo_characters import END_SENTENCE
from kerasbert.text.elmo_characters import boundary_char_ids


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def char_cnn(weights, options, word_ids):
    """word_ids [C] -> [n_filters] (conv + bias, max over time, activation)."""
    table = np.concatenate([np.zeros((1, weights["char_embed"].shape[1])),
                            weights["char_embed"]])  # the padding row 0
    x = table[word_ids]  # [C, dim]
    act = (lambda v: np.maximum(v, 0)) if options["char_cnn"]["activation"] == "relu" else np.tanh
    pooled = []
    for i, (width, count) in enumerate(options["char_cnn"]["filters"]):
        w = weights[f"CNN/W_cnn_{i}"][0]  # [width, dim, count]
        b = weights[f"CNN/b_cnn_{i}"]
        conv = np.stack([np.einsum("wd,wdn->n", x[t:t + width], w)
                         for t in range(len(word_ids) - width + 1)]) + b
        pooled.append(act(conv.max(axis=0)))
    return np.concatenate(pooled)


def token_embedding(weights, options, word_ids):
    x = char_cnn(weights, options, word_ids)
    for i in range(options["char_cnn"].get("n_highway", 0)):
        g = sigmoid(x @ weights[f"CNN_high_{i}/W_carry"] + weights[f"CNN_high_{i}/b_carry"])
        t = np.maximum(x @ weights[f"CNN_high_{i}/W_transform"]
                       + weights[f"CNN_high_{i}/b_transform"], 0)
        x = g * t + (1 - g) * x
    if "CNN_proj/W_proj" in weights:
        x = x @ weights["CNN_proj/W_proj"] + weights["CNN_proj/b_proj"]
    return x


def lstm(weights, prefix, inputs, cell_clip, proj_clip):
    """TF1 LSTMCell(num_proj, cell_clip, proj_clip), forget bias 1, from a
    zero state over inputs [n, F] -> [n, P]."""
    kernel, bias = weights[prefix + "/W_0"], weights[prefix + "/B"]
    proj = weights[prefix + "/W_P_0"]
    units = proj.shape[0]
    c, h = np.zeros(units), np.zeros(proj.shape[1])
    outputs = []
    for x in inputs:
        z = np.concatenate([x, h]) @ kernel + bias
        i, j, f, o = (z[k * units:(k + 1) * units] for k in range(4))
        c = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j)
        c = np.clip(c, -cell_clip, cell_clip)
        h = np.clip((sigmoid(o) * np.tanh(c)) @ proj, -proj_clip, proj_clip)
        outputs.append(h)
    return np.stack(outputs)


def elmo_layers(weights, options, char_ids, mask):
    """The three (num_layers + 1) layers of `bilm-tf`'s lm_embeddings.

    Args:
        weights: {dataset name: array} of a weight file.
        options: the options.json dict.
        char_ids: int [B, W, C] (words only; <S>, </S> are added here).
        mask: [B, W].

    Returns:
        float64 [B, L + 1, W, 2P], zeros at padding.
    """
    lstm_options = options["lstm"]
    n_layers, proj = lstm_options["n_layers"], lstm_options["projection_dim"]
    batch, width, chars = char_ids.shape
    out = np.zeros((batch, n_layers + 1, width, 2 * proj))
    for b in range(batch):
        n = int(mask[b].sum())
        words = ([boundary_char_ids(BEGIN_SENTENCE, chars)] + list(char_ids[b, :n])
                 + [boundary_char_ids(END_SENTENCE, chars)])
        tokens = np.stack([token_embedding(weights, options, w) for w in words])
        layers = {0: [tokens], 1: [tokens[::-1]]}
        for d in (0, 1):
            x = layers[d][0]
            for k in range(n_layers):
                y = lstm(weights, f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell", x,
                         lstm_options["cell_clip"], lstm_options["proj_clip"])
                if lstm_options["use_skip_connections"] and k > 0:
                    y = y + x
                layers[d].append(y)
                x = y
        for k in range(n_layers + 1):
            both = np.concatenate([layers[0][k], layers[1][k][::-1]], axis=-1)
            out[b, k, :n] = both[1:-1]
    return out


def random_weights(options, seed=0):
    """{dataset name: float32 array} in the published layout and shapes, for
    `options` (values drawn at random, scaled so that no gate saturates)."""
    rng = np.random.default_rng(seed)
    cnn, lstm_options = options["char_cnn"], options["lstm"]
    dim = cnn["embedding"]["dim"]
    n_filters = sum(n for _, n in cnn["filters"])
    proj, cells = lstm_options["projection_dim"], lstm_options["dim"]

    def draw(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype("float32")

    weights = {"char_embed": draw(cnn["n_characters"] - 1, dim)}
    for i, (w, n) in enumerate(cnn["filters"]):
        weights[f"CNN/W_cnn_{i}"] = draw(1, w, dim, n)
        weights[f"CNN/b_cnn_{i}"] = draw(n, scale=0.1)
    for i in range(cnn.get("n_highway", 0)):
        for name, shape in (("W_carry", (n_filters, n_filters)), ("b_carry", (n_filters,)),
                            ("W_transform", (n_filters, n_filters)),
                            ("b_transform", (n_filters,))):
            weights[f"CNN_high_{i}/{name}"] = draw(*shape, scale=0.3)
    if n_filters != proj:
        weights["CNN_proj/W_proj"] = draw(n_filters, proj, scale=0.3)
        weights["CNN_proj/b_proj"] = draw(proj, scale=0.1)
    for d in (0, 1):
        for k in range(lstm_options["n_layers"]):
            root = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            weights[root + "/W_0"] = draw(2 * proj, 4 * cells, scale=0.3)
            weights[root + "/B"] = draw(4 * cells, scale=0.1)
            weights[root + "/W_P_0"] = draw(cells, proj, scale=0.3)
    return weights
