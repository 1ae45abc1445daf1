"""ELMo's published weights (allenai/bilm-tf's `options.json` +
`weights.hdf5`, the files AllenNLP serves) <-> `ElmoBackbone`.

The HDF5 datasets, for options {char_cnn: {filters, n_highway, embedding:
{dim}}, lstm: {dim: D, projection_dim: P, n_layers}} (tests/convert/fixtures/
elmo_*.json lists the published files' names and shapes):

    char_embed                                        [261, dim]  ids 1..261
    CNN/W_cnn_{i}, CNN/b_cnn_{i}                      [1, width, dim, count], [count]
    CNN_high_{i}/W_carry, W_transform                 [F, F]
    CNN_high_{i}/b_carry, b_transform                 [F]
    CNN_proj/W_proj, CNN_proj/b_proj                  [F, P], [P]   (when F != P)
    RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell/W_0     [2P, 4D]  [input; h] -> i, j, f, o
    RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell/B       [4D]      (forget bias +1 at run time)
    RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell/W_P_0   [D, P]

d = 0 forward, 1 backward; k = the layer. Our layers keep these layouts, so
a weight is copied as is (the CNN kernels drop their leading 1). The char
embedding has no padding row in the file (id 0 is padding; the published
code prepends a zero row, our `CharacterCNN` embeds id 0 to zeros).
"""

import json
import os

import numpy as np

from kerasbert.errors import CheckpointError
from kerasbert.io_utils import atomic_directory
from kerasbert.sources.source import elmo_files
from kerasbert.models.config_checks import ConfigError
from kerasbert.models.config_checks import validate_config
from kerasbert.models.elmo import ElmoBackbone

OPTIONS_FILE, WEIGHTS_FILE = "options.json", "weights.hdf5"
LSTM_ROOT = "RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"


def config_from_options(options, where="options.json"):
    """`ElmoBackbone` arguments of a bilm-tf options dict.

    Raises:
        CheckpointError: a missing key or a value no model can have, naming it.
    """
    try:
        cnn, lstm = options["char_cnn"], options["lstm"]
        config = {
            "lstm_dim": lstm["dim"], "projection_dim": lstm["projection_dim"],
            "num_layers": lstm.get("n_layers", 1), "num_highway": cnn.get("n_highway") or 0,
            "filters": [list(f) for f in cnn["filters"]], "activation": cnn["activation"],
            # 261 in the files written by training, 262 (counting the
            # padding id 0) in the published ones: the ids are the same.
            "num_characters": max(int(cnn["n_characters"]), 262),
            "character_embedding_dim": cnn["embedding"]["dim"],
            "max_characters_per_token": cnn["max_characters_per_token"],
            "cell_clip": lstm.get("cell_clip"), "projection_clip": lstm.get("proj_clip"),
            "use_skip_connections": bool(lstm.get("use_skip_connections", False)),
        }
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: not a bilm-tf options file (missing or bad "
                              f"{err}).") from None
    if not options.get("bidirectional", True):
        raise CheckpointError(f"{where}: bidirectional=false; ElmoBackbone is the biLM.")
    try:
        validate_config(config, ElmoBackbone)
    except ConfigError as err:
        raise CheckpointError(f"{where}: {err}") from None
    return config


def options_from_config(config):
    """The bilm-tf options dict of `ElmoBackbone` arguments (inference
    form: n_characters counts the padding id)."""
    config = {**ElmoBackbone.default_config(), **config}
    return {
        "bidirectional": True,
        "char_cnn": {"activation": config["activation"], "embedding": {"dim":
                     config["character_embedding_dim"]}, "filters": config["filters"],
                     "max_characters_per_token": config["max_characters_per_token"],
                     "n_characters": config["num_characters"],
                     "n_highway": config["num_highway"]},
        "lstm": {"cell_clip": config["cell_clip"], "dim": config["lstm_dim"],
                 "n_layers": config["num_layers"], "proj_clip": config["projection_clip"],
                 "projection_dim": config["projection_dim"],
                 "use_skip_connections": config["use_skip_connections"]},
    }


def weight_table(backbone):
    """[(dataset name, our variable, file -> ours, ours -> file)] in the
    file's layout, for every biLM weight of `backbone`."""
    same = (lambda a: a, lambda a: a)
    cnn = backbone.char_cnn
    rows = [("char_embed", cnn.embeddings, *same)]
    for i, (kernel, bias) in enumerate(zip(cnn.kernels, cnn.biases)):
        rows.append((f"CNN/W_cnn_{i}", kernel, lambda a: a[0], lambda a: a[None]))
        rows.append((f"CNN/b_cnn_{i}", bias, *same))
    high = backbone.highway
    for i in range(high.num_layers):
        rows += [(f"CNN_high_{i}/W_carry", high.carry_kernels[i], *same),
                 (f"CNN_high_{i}/b_carry", high.carry_biases[i], *same),
                 (f"CNN_high_{i}/W_transform", high.transform_kernels[i], *same),
                 (f"CNN_high_{i}/b_transform", high.transform_biases[i], *same)]
    if backbone.projection is not None:
        rows += [("CNN_proj/W_proj", backbone.projection.kernel, *same),
                 ("CNN_proj/b_proj", backbone.projection.bias, *same)]
    for d, direction in enumerate(("forward", "backward")):
        for k, lstm in enumerate(backbone.lstms[direction]):
            root = LSTM_ROOT.format(d=d, k=k)
            rows += [(f"{root}/W_0", lstm.kernel, *same), (f"{root}/B", lstm.bias, *same),
                     (f"{root}/W_P_0", lstm.projection, *same)]
    return rows


def published_shapes(config):
    """{dataset name: shape} a weight file of `config` holds (no model is
    built)."""
    return dict(declared_shapes(config))


def declared_shapes(config):
    """(dataset name, shape) of each weight `config` declares, in the
    file's order, one at a time: a check can stop at the first one the
    file lacks, whatever count the options declare (2^40 layers)."""
    config = {**ElmoBackbone.default_config(), **config}
    dim, width = config["character_embedding_dim"], sum(n for _, n in config["filters"])
    proj, cells = config["projection_dim"], config["lstm_dim"]
    yield "char_embed", [config["num_characters"] - 1, dim]
    for i, (w, n) in enumerate(config["filters"]):
        yield f"CNN/W_cnn_{i}", [1, w, dim, n]
        yield f"CNN/b_cnn_{i}", [n]
    for i in range(config["num_highway"]):
        for name in ("W_carry", "W_transform"):
            yield f"CNN_high_{i}/{name}", [width, width]
        for name in ("b_carry", "b_transform"):
            yield f"CNN_high_{i}/{name}", [width]
    if width != proj:
        yield "CNN_proj/W_proj", [width, proj]
        yield "CNN_proj/b_proj", [proj]
    for d in (0, 1):
        for k in range(config["num_layers"]):
            root = LSTM_ROOT.format(d=d, k=k)
            yield f"{root}/W_0", [2 * proj, 4 * cells]
            yield f"{root}/B", [4 * cells]
            yield f"{root}/W_P_0", [cells, proj]


def read_hdf5(path, shapes_only=False):
    """{dataset name: array} of every dataset in an HDF5 file, or with
    `shapes_only` {dataset name: shape tuple}, read from the file's
    metadata without reading any data."""
    import h5py  # lazy: h5py is needed only for ELMo's files

    found = {}

    def take(name, obj):
        if isinstance(obj, h5py.Dataset):
            found[name] = tuple(obj.shape) if shapes_only else obj[()]

    try:
        with h5py.File(path, "r") as f:
            f.visititems(take)
    except OSError as err:
        raise CheckpointError(f"{path}: not a readable HDF5 file ({err}).") from None
    return found


def check_declared_shapes(config, stored, where):
    """Refuses options that describe other weights than the file holds
    (`stored`: {dataset name: shape}), before anything is built: a 300-byte
    options.json may declare a model of gigabytes next to a 50 KB file.

    Raises:
        CheckpointError: the first dataset missing or of another shape,
            naming it and both shapes.
    """
    declared = set()
    for name, shape in declared_shapes(config):
        declared.add(name)
        if name not in stored:
            raise CheckpointError(f"{where}: no dataset {name} (the options describe it).")
        if tuple(stored[name]) != tuple(shape):
            raise CheckpointError(f"{where}: dataset {name} has shape {list(stored[name])}, the "
                                  f"options call for {list(shape)}.")
    # and the reverse: weights the options leave out would be dropped
    extra = sorted(set(stored) - declared)
    if extra:
        raise CheckpointError(f"{where}: {len(extra)} dataset(s) the options do not describe, "
                              f"e.g. {extra[0]} (options.json and the weights disagree).")


def load_elmo(path, dtype=None, **overrides):
    """An `ElmoBackbone` with the weights of a bilm-tf directory.

    Args:
        path: a directory `kerasbert.sources.source.elmo_files` recognises.
        dtype: the backbone's dtype policy.
        **overrides: arguments that keep the weights' shapes (dropout,
            freeze_bilm, add_sentence_boundaries).

    Raises:
        CheckpointError: a missing file, a dataset missing or of another
            shape than the options say (naming the dataset and both shapes),
            an override that changes a shape.
    """
    files = elmo_files(path)
    if files is None:
        raise CheckpointError(f"{path}: no {OPTIONS_FILE} + {WEIGHTS_FILE} pair.")
    options_path, weights_path = files
    try:
        with open(options_path, encoding="utf-8") as f:
            options = json.load(f)
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{options_path}: not a JSON options file ({err}).") from None
    config = config_from_options(options, options_path)
    shapes = read_hdf5(weights_path, shapes_only=True)
    # The published inference options say 262; a file's table decides.
    if len(shapes.get("char_embed", ())) == 2:
        config["num_characters"] = shapes["char_embed"][0] + 1
    check_declared_shapes(config, shapes, weights_path)
    weights = read_hdf5(weights_path)
    unknown = sorted(set(overrides) - set(ElmoBackbone.config_names()))
    if unknown:
        raise CheckpointError(f"{', '.join(unknown)}: not arguments of ElmoBackbone.")
    for key, value in overrides.items():
        if key in config and config[key] != value:
            raise CheckpointError(f"{key}={value!r} contradicts {options_path}'s "
                                  f"{key}={config[key]!r}.")
    backbone = ElmoBackbone(**{**config, **overrides}, dtype=dtype)
    assign_weights(backbone, weights, weights_path)
    return backbone


def assign_weights(backbone, weights, where):
    """Copies {dataset name: array} into `backbone`.

    Raises:
        CheckpointError: a dataset missing, or of another shape, naming it.
    """
    for name, variable, to_ours, _ in weight_table(backbone):
        if name not in weights:
            raise CheckpointError(f"{where}: no dataset {name} (the options describe it).")
        value = to_ours(np.asarray(weights[name]))
        if tuple(value.shape) != tuple(variable.shape):
            expected = (1, *variable.shape) if name.startswith("CNN/W_cnn") else variable.shape
            raise CheckpointError(
                f"{where}: dataset {name} has shape {list(np.shape(weights[name]))}, the "
                f"options call for {list(expected)}.")
        variable.assign(value.astype(variable.dtype))


def save_elmo(backbone, directory):
    """Writes `backbone` as a bilm-tf directory (options.json +
    weights.hdf5) that `load_elmo`, bilm-tf and AllenNLP read; the directory
    appears complete or not at all."""
    import h5py  # lazy: h5py is needed only for ELMo's files

    with atomic_directory(directory) as tmp:
        with open(os.path.join(tmp, OPTIONS_FILE), "w", encoding="utf-8") as f:
            json.dump(options_from_config(backbone.get_config()), f, indent=1)
        with h5py.File(os.path.join(tmp, WEIGHTS_FILE), "w") as f:
            for name, variable, _, to_file in weight_table(backbone):
                f.create_dataset(name, data=to_file(np.asarray(variable.numpy(), "float32")))
