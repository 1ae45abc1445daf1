"""Weight files nobody vouches for, one case at a time (issue 37, item 1):
safetensors headers checked as the format requires (the `safetensors`
package, the format's own reader, refuses each of these files too), sharded
indexes, google-research/bert configs, keras-hub presets and `.keras` files
whose config declares a model the file does not hold. Each refusal is one
line naming the file and the value, raised before any model is built. The
property-based tests over mutated headers and configs are in
tests/reliability/test_untrusted_checkpoints.py."""

import json
import os
import struct
import zipfile

import numpy as np
import pytest

from kerasbert.convert.bert_config import bert_config_to_kwargs
from kerasbert.convert.safetensors_files import read_checkpoint_directory
from kerasbert.convert.safetensors_files import read_safetensors
from kerasbert.convert.safetensors_files import write_safetensors
from kerasbert.convert.tf1_checkpoint import load_bert_checkpoint
from kerasbert.convert.tf1_checkpoint import save_bert_checkpoint
from kerasbert.errors import CheckpointError
from kerasbert.errors import UsageError
from kerasbert.loading.backbones import load_backbone
from kerasbert.models import BertBackbone

TENSORS = {"a": np.arange(6, dtype=np.float32).reshape(2, 3),
           "b": np.arange(4, dtype=np.float32), "c": np.ones((2, 2), np.float32)}


def write_raw(path, header, data):
    raw = json.dumps(header).encode() if not isinstance(header, bytes) else header
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + data)
    return str(path)


def parts(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(length)), f.read()


def format_refuses(path):
    from safetensors.numpy import load_file

    try:
        load_file(str(path))
    except Exception:  # noqa: BLE001 - any refusal of the reference reader
        return True
    return False


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), TENSORS)
    return path


def spoiled(good, change):
    header, data = parts(good)
    header, data = change(header, data)
    return write_raw(good, header, data)


def set_offsets(name, offsets):
    def change(header, data):
        header[name]["data_offsets"] = offsets
        return header, data
    return change


CASES = {
    # a tensor reading another's bytes (b over a's first 16 bytes)
    "overlap": (set_offsets("b", [0, 16]), "overlaps"),
    "gap": (lambda h, d: (h, d + b"\0" * 8), "belong to no tensor"),
    "trailing_bytes": (lambda h, d: (h, d + b"junk"), "belong to no tensor"),
    "out_of_file": (set_offsets("c", [40, 1 << 40]), "spans bytes"),
    "backwards": (set_offsets("b", [24, 8]), "data_offsets"),
    "count_mismatch": (lambda h, d: ({**h, "a": {**h["a"], "shape": [3, 3]}}, d), "needs 36"),
    "negative_dim": (lambda h, d: ({**h, "a": {**h["a"], "shape": [-2, -3]}}, d), "shape"),
    "bool_dim": (lambda h, d: ({**h, "b": {**h["b"], "shape": [True, 4]}}, d), "shape"),
    # 2^40 x 2^40 x 0 elements: int64 arithmetic overflows to 0 bytes here
    "overflowing_shape": (lambda h, d: ({**h, "z": {"dtype": "F32", "shape": [2**40, 2**40, 2**40],
                                                    "data_offsets": [56, 56]}}, d), "needs"),
    "unknown_dtype": (lambda h, d: ({**h, "a": {**h["a"], "dtype": "F7"}}, d), "dtype 'F7'"),
    "offsets_text": (set_offsets("a", "0-24"), "data_offsets"),
    "metadata_numbers": (lambda h, d: ({**h, "__metadata__": {"format": 3}}, d), "__metadata__"),
    "deep": (lambda h, d: (json.dumps(h)[:-1].encode() + b', "x": ' + b"[" * 100_000
                           + b"]" * 100_000 + b"}", d), "nested 100001 levels"),
    "duplicate_name": (lambda h, d: (json.dumps(h)[:-1].encode() + b', "a": '
                                     + json.dumps(h["a"]).encode() + b"}", d), "twice"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_header_the_format_refuses_is_refused_in_one_line(good, case):
    change, fragment = CASES[case]
    path = spoiled(good, change)
    with pytest.raises(CheckpointError) as err:
        read_safetensors(path)
    message = str(err.value)
    assert fragment in message and path in message and "\n" not in message, message
    if case not in ("deep", "duplicate_name"):  # stricter than the format: see below
        assert format_refuses(path)


def test_the_checked_reader_reads_what_the_format_reads(good):
    """A valid file whose tensors are stored out of name order still reads
    (the order of the bytes is free), equal to the `safetensors` package."""
    from safetensors.numpy import load_file

    header, data = parts(good)
    # Store c first, then a, then b.
    order = ["c", "a", "b"]
    chunks, offset = [], 0
    for name in order:
        begin, end = header[name]["data_offsets"]
        chunks.append(data[begin:end])
        header[name]["data_offsets"] = [offset, offset + end - begin]
        offset += end - begin
    path = write_raw(good, header, b"".join(chunks))
    ours, theirs = read_safetensors(path), load_file(path)
    for name in TENSORS:
        np.testing.assert_array_equal(np.asarray(ours[name]), theirs[name])
        np.testing.assert_array_equal(theirs[name], TENSORS[name])


def test_a_header_length_past_the_file_or_the_limit_is_refused(good):
    raw = good.read_bytes()
    good.write_bytes(struct.pack("<Q", 2**62) + raw[8:])
    with pytest.raises(CheckpointError, match="does not fit"):
        read_safetensors(str(good))


def test_a_sharded_index_must_name_each_tensor_once(tmp_path):
    write_safetensors(str(tmp_path / "one.safetensors"), {"a": TENSORS["a"]})
    write_safetensors(str(tmp_path / "two.safetensors"), {"a": TENSORS["c"], "b": TENSORS["b"]})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"a": "one.safetensors", "b": "two.safetensors"}}))
    with pytest.raises(CheckpointError, match="'a' is stored in two shards"):
        read_checkpoint_directory(str(tmp_path))
    for weight_map, fragment in (({"a": "../one.safetensors"}, "missing"),
                                 ([1, 2], "weight_map"), ({"a": 3}, "weight_map")):
        index.write_text(json.dumps({"weight_map": weight_map}))
        with pytest.raises(CheckpointError, match=fragment):
            read_checkpoint_directory(str(tmp_path))
    index.write_text('{"weight_map": ' + "[" * 1000 + "]" * 1000 + "}")
    with pytest.raises(CheckpointError, match="nested 1001 levels"):
        read_checkpoint_directory(str(tmp_path))


# --- google-research/bert (TF1) ------------------------------------------------

BERT_CONFIG = {"vocab_size": 30, "hidden_size": 8, "num_hidden_layers": 2,
               "num_attention_heads": 2, "intermediate_size": 16,
               "max_position_embeddings": 16, "type_vocab_size": 2}


@pytest.fixture(scope="module")
def tf1_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tf1")
    backbone = BertBackbone(vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
                            intermediate_dim=16, max_sequence_length=16)
    save_bert_checkpoint(backbone, str(directory / "bert_model.ckpt"))
    (directory / "bert_config.json").write_text(json.dumps(BERT_CONFIG))
    return directory


@pytest.mark.parametrize("change, fragment", [
    ({"vocab_size": "abc"}, "vocab_size='abc'"),
    ({"num_attention_heads": 0}, "num_attention_heads=0"),
    ({"hidden_size": 8.5}, "hidden_size=8.5"),
    ({"hidden_dropout_prob": "0.1"}, "hidden_dropout_prob='0.1'"),
    ({"hidden_act": ["gelu"]}, "hidden_act"),
])
def test_a_bert_config_with_impossible_values_is_refused(change, fragment):
    with pytest.raises(ValueError) as err:
        bert_config_to_kwargs({**BERT_CONFIG, **change})
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_bert_config_declaring_more_than_the_checkpoint_holds_is_refused(tf1_checkpoint,
                                                                          tmp_path):
    config = tmp_path / "bert_config.json"
    config.write_text(json.dumps({**BERT_CONFIG, "num_hidden_layers": 10**9}))
    with pytest.raises(ValueError, match="lacks 16 variable"):  # listed up to layer 2 only
        load_bert_checkpoint(str(tf1_checkpoint / "bert_model.ckpt"), str(config))
    # A truncated data shard is one line too.
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    for name in os.listdir(tf1_checkpoint):
        data = (tf1_checkpoint / name).read_bytes()
        (truncated / name).write_bytes(data[:len(data) // 2] if ".data-" in name else data)
    with pytest.raises(ValueError, match="corrupt .data-. shard") as err:
        load_bert_checkpoint(str(truncated / "bert_model.ckpt"),
                             str(tf1_checkpoint / "bert_config.json"))
    assert "\n" not in str(err.value)
    # Fewer layers than stored: not the first N layers of it, silently.
    config.write_text(json.dumps({**BERT_CONFIG, "num_hidden_layers": 1}))
    with pytest.raises(UsageError, match="num_hidden_layers=1 but TF1 checkpoint .* holds 2 "
                       "layers"):
        load_bert_checkpoint(str(tf1_checkpoint / "bert_model.ckpt"), str(config))
    config.write_text('{"vocab_size": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError, match="nested 100001 levels"):
        load_bert_checkpoint(str(tf1_checkpoint / "bert_model.ckpt"), str(config))


def test_a_tf1_directory_with_a_lying_config_is_one_line(tf1_checkpoint, tmp_path):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    for name in os.listdir(tf1_checkpoint):
        os.symlink(tf1_checkpoint / name, directory / name)
    os.unlink(directory / "bert_config.json")
    (directory / "bert_config.json").write_text(json.dumps({**BERT_CONFIG, "vocab_size": 10**7}))
    with pytest.raises(UsageError) as err:
        load_backbone(str(directory))
    assert "word_embeddings" in str(err.value) and "(10000000, 8)" in str(err.value)


# --- keras-hub presets ------------------------------------------------------------


@pytest.fixture(scope="module")
def keras_hub_preset(tmp_path_factory):
    import keras_hub

    directory = tmp_path_factory.mktemp("keras_hub")
    peer = keras_hub.models.BertBackbone(vocabulary_size=30, num_layers=2, num_heads=2,
                                         hidden_dim=8, intermediate_dim=16,
                                         max_sequence_length=16)
    peer.save_to_preset(str(directory))
    return directory


def preset_copy(source, target, change):
    target.mkdir()
    for name in os.listdir(source):
        if name != "config.json" and os.path.isfile(source / name):
            os.symlink(source / name, target / name)
    spec = json.loads((source / "config.json").read_text())
    (target / "config.json").write_text(change(spec) if callable(change) else change)
    return target


@pytest.mark.parametrize("name, change, fragment", [
    ("huge_vocab", lambda s: json.dumps({**s, "config": {**s["config"],
                                                         "vocabulary_size": 50_000_000}}),
     "declares a BertBackbone of"),
    ("layers", lambda s: json.dumps({**s, "config": {**s["config"], "num_layers": 10**9}}),
     "num_layers=1000000000"),
    ("heads", lambda s: json.dumps({**s, "config": {**s["config"], "num_heads": 0}}),
     "num_heads=0"),
    ("text", lambda s: json.dumps({**s, "config": {**s["config"], "hidden_dim": "8"}}),
     "hidden_dim='8'"),
    ("not_an_object", lambda s: json.dumps({**s, "config": [1, 2]}), "\"config\""),
    ("deep", '{"registered_name": "keras_hub>BertBackbone", "config": '
     + "[" * 100_000 + "]" * 100_000 + "}", "nested 100001 levels"),
    ("name", lambda s: json.dumps({**s, "registered_name": 7}), "a keras-hub model"),
])
def test_a_keras_hub_preset_with_a_lying_config_is_one_line(keras_hub_preset, tmp_path, name,
                                                            change, fragment):
    directory = preset_copy(keras_hub_preset, tmp_path / name, change)
    with pytest.raises(UsageError) as err:
        load_backbone(str(directory))
    assert fragment in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_keras_hub_preset_itself_loads(keras_hub_preset):
    assert load_backbone(str(keras_hub_preset)).vocabulary_size == 30


# --- .keras files ----------------------------------------------------------------


@pytest.fixture(scope="module")
def keras_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("keras") / "backbone.keras"
    BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
                 intermediate_dim=16, max_sequence_length=16).save(str(path))
    return path


def rewritten(source, target, change):
    """A copy of a .keras archive with its config.json changed."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            data = old.read(info)
            if info.filename == "config.json":
                data = change(json.loads(data))
            new.writestr(info, data)
    return str(target)


def with_backbone_config(**changes):
    def change(spec):
        spec["config"].update(changes)
        return json.dumps(spec).encode()
    return change


@pytest.mark.parametrize("name, change, fragment", [
    ("huge_vocab", with_backbone_config(vocabulary_size=50_000_000),
     "declares a BertBackbone of 400,"),
    ("heads", with_backbone_config(num_heads=0), "num_heads=0"),
    ("reformer_rule", with_backbone_config(hidden_dim=9), "hidden_dim=9 is not divisible"),
    ("deep", lambda spec: b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "nested 100001 levels"),
])
def test_a_keras_file_with_a_lying_config_is_refused_before_keras_builds_it(keras_file,
                                                                            tmp_path, name,
                                                                            change, fragment):
    path = rewritten(keras_file, tmp_path / f"{name}.keras", change)
    with pytest.raises(UsageError) as err:
        load_backbone(path)
    assert fragment in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_keras_file_itself_loads(keras_file):
    assert load_backbone(str(keras_file)).vocabulary_size == 30


# --- TF Hub encoders (export-hub's SavedModel) -------------------------------------


@pytest.fixture(scope="module")
def hub_encoder(keras_file, tmp_path_factory):
    """OUTPUT/encoder of `export-hub` for the tiny .keras backbone."""
    from kerasbert.serving.hub_export import export_hub
    from kerasbert.testing.files import write_vocabulary

    root = tmp_path_factory.mktemp("hub")
    vocab = write_vocabulary(str(root), ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                             + [f"w{i}" for i in range(25)])
    return export_hub(str(keras_file), vocab, str(root / "out"), include_mlm=False)["encoder"]


def spoiled_copy(source, target, name, change):
    """A copy of a SavedModel directory with the file `name` changed:
    `change(bytes) -> bytes`."""
    import shutil

    shutil.copytree(source, target)
    path = os.path.join(target, name)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(change(data))
    return str(target)


def described(**changes):
    def change(data):
        spec = json.loads(data)
        spec["config"].update(changes)
        return json.dumps(spec).encode()
    return change


DESCRIPTION = os.path.join("assets.extra", "kerasbert_backbone.json")
VARIABLES = os.path.join("variables", "variables.data-00000-of-00001")


@pytest.mark.parametrize("name, file, change, fragment", [
    ("huge_vocab", DESCRIPTION, described(vocabulary_size=50_000_000),
     "declares a BertBackbone of 400,"),
    ("heads", DESCRIPTION, described(num_heads=0), "num_heads=0"),
    ("layers", DESCRIPTION, described(num_layers=3), "declares a BertBackbone of 2,272"),
    ("width", DESCRIPTION, described(intermediate_dim=17), "has shape"),
    ("deep", DESCRIPTION, lambda data: b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "nested 100001 levels"),
    ("truncated", VARIABLES, lambda data: data[:len(data) // 2], "not a loadable SavedModel"),
    ("zeroed", "saved_model.pb", lambda data: bytes(len(data)), "not a loadable SavedModel"),
])
def test_a_spoiled_tf_hub_encoder_is_one_line(hub_encoder, tmp_path, name, file, change,
                                              fragment):
    directory = spoiled_copy(hub_encoder, tmp_path / name, file, change)
    with pytest.raises(UsageError) as err:
        load_backbone(directory)
    assert fragment in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_tf_hub_encoder_itself_loads(hub_encoder):
    assert load_backbone(hub_encoder).vocabulary_size == 30


# --- pytorch weights ----------------------------------------------------------------


class _Trap:
    """Unpickling this creates a file: proof that nobody unpickled it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_directory_with_only_pytorch_weights_is_refused_without_unpickling(tmp_path):
    import pickle

    marker = tmp_path / "unpickled"
    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({"model_type": "bert", **BERT_CONFIG}))
    (directory / "pytorch_model.bin").write_bytes(pickle.dumps(_Trap(str(marker))))
    with pytest.raises(UsageError) as err:
        load_backbone(str(directory))
    assert "model.safetensors" in str(err.value) and "\n" not in str(err.value)
    assert not marker.exists()
