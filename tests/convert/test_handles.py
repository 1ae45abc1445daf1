"""One handle for every source of weights: `Backbone.from_preset(handle)`,
`kerasbert.text.load_tokenizer(handle)` and the CLI's `--preset`.

Every source is written in the test by its own library: keras-hub's
`save_to_preset`, tf-models-official's TF Hub export, our TF1 writer, the
Hugging Face cache layout that `huggingface_hub` reads in offline mode and
the kagglehub cache layout. Nothing touches the network."""

import json
import os
import shutil

import keras
import numpy as np
import pytest
from peer_fixtures import assert_close, hub_inputs, ours_inputs, padded_batch, randomize
from reliability.console import kerasbert
from reliability.console import ok
from test_hf_checkpoint import hf_config, hf_tensors, write_hf

from kerasbert.sources import handles
from kerasbert.errors import UsageError
from kerasbert.models import Backbone
from kerasbert.models import BertBackbone
from kerasbert.models import RobertaBackbone
from kerasbert.models import UnknownPresetError
from kerasbert.text import load_tokenizer

from slow_marks import slow_covered_by

V, H = 50, 16
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(V - 5)]
TINY = dict(num_layers=2, num_heads=2, hidden_dim=H, intermediate_dim=32, max_sequence_length=24)
SHA = "0123456789abcdef0123456789abcdef01234567"


def _outputs(model, inputs):
    return {k: keras.ops.convert_to_numpy(v) for k, v in model(inputs).items()
            if k in ("sequence_output", "pooled_output")}


def _keras_hub_preset(directory, family):
    """A tiny keras-hub backbone + tokenizer saved with `save_to_preset`;
    returns keras-hub's outputs on the test batch and the batch."""
    import keras_hub

    ids, mask, types = padded_batch(V)
    if family == "bert":
        peer = keras_hub.models.BertBackbone(vocabulary_size=V, **TINY)
        tokenizer = keras_hub.models.BertTokenizer(vocabulary=WORDS, lowercase=False)
        inputs = hub_inputs(ids, mask, types)
    else:
        peer = keras_hub.models.DistilBertBackbone(vocabulary_size=V, **TINY)
        tokenizer = keras_hub.models.DistilBertTokenizer(vocabulary=WORDS, lowercase=True)
        inputs, types = hub_inputs(ids, mask), None
    randomize(peer, seed=3, gammas_near_one=True)
    peer.save_to_preset(str(directory))
    tokenizer.save_to_preset(str(directory))
    outputs = peer(inputs)  # DistilBERT's is the sequence output alone
    outputs = outputs if isinstance(outputs, dict) else {"sequence_output": outputs}
    expected = {k: keras.ops.convert_to_numpy(v) for k, v in outputs.items()}
    return expected, ours_inputs(ids, mask, types)


@pytest.mark.parametrize("family", ["bert", "distil_bert"])
def test_keras_hub_preset_directories(tmp_path, family):
    expected, inputs = _keras_hub_preset(tmp_path / "preset", family)
    ours = Backbone.from_preset(str(tmp_path / "preset"))
    assert type(ours).__name__ == ("BertBackbone" if family == "bert" else "DistilBertBackbone")
    got = _outputs(ours, inputs)
    assert_close(expected, got, keys=["sequence_output"] + (
        ["pooled_output"] if family == "bert" else []))
    # The tokenizer comes along, with the casing the preset saved.
    tokenizer = load_tokenizer(str(tmp_path / "preset"))
    assert tokenizer.vocabulary_size == V
    assert tokenizer.lower_case is (family != "bert")
    # Overrides that keep the shapes apply; one that contradicts them is named.
    assert Backbone.from_preset(str(tmp_path / "preset"), dropout=0.0).dropout == 0.0
    with pytest.raises(UsageError, match="hidden_dim=32 contradicts the weights' hidden_dim=16"):
        Backbone.from_preset(str(tmp_path / "preset"), hidden_dim=32)


def _hf_cache(cache, repo="kb-test/tiny-bert", tensors=None):
    """A Hugging Face cache (HF_HUB_CACHE) holding `repo` at commit SHA,
    `main` pointing at it: what `hf download` leaves behind."""
    folder = os.path.join(cache, "models--" + repo.replace("/", "--"))
    snapshot = os.path.join(folder, "snapshots", SHA)
    write_hf(snapshot, tensors if tensors is not None else hf_tensors(), hf_config())
    with open(os.path.join(snapshot, "vocab.txt"), "w") as f:
        f.write("\n".join(WORDS) + "\n")
    with open(os.path.join(snapshot, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": False}, f)
    os.makedirs(os.path.join(folder, "refs"), exist_ok=True)
    with open(os.path.join(folder, "refs", "main"), "w") as f:
        f.write(SHA)
    return snapshot


def test_hf_handles_read_the_hugging_face_cache_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    tensors = hf_tensors()
    snapshot = _hf_cache(str(tmp_path / "hub"), tensors=tensors)
    for handle in ("hf://kb-test/tiny-bert", f"hf://kb-test/tiny-bert@{SHA}"):
        assert os.path.samefile(handles.local_path(handle), snapshot)
    ours = BertBackbone.from_preset("hf://kb-test/tiny-bert")
    np.testing.assert_array_equal(ours.embeddings.token_embedding.embeddings.numpy(),
                                  tensors["embeddings.word_embeddings.weight"])
    tokenizer = load_tokenizer("hf://kb-test/tiny-bert")
    assert tokenizer.vocabulary_size == V and tokenizer.lower_case is False
    with pytest.raises(handles.HandleError, match="hf://kb-test/other is not in the Hugging "
                                                  "Face cache .* Offline alternatives"):
        Backbone.from_preset("hf://kb-test/other")
    with pytest.raises(handles.HandleError, match="not in the Hugging Face cache"):
        Backbone.from_preset("hf://kb-test/tiny-bert@v9")
    with pytest.raises(ValueError, match="holds a BertBackbone, not a RobertaBackbone"):
        RobertaBackbone.from_preset("hf://kb-test/tiny-bert")


def test_a_repository_with_only_a_pickle_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(handles, "local_path", lambda handle: str(tmp_path / "snap"))
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / "pytorch_model.bin").write_bytes(b"not unpickled")
    with pytest.raises(UsageError, match="never unpickles.*refs/pr/N"):
        Backbone.from_preset("hf://kb-test/pickles")


def test_kaggle_handles_read_the_kagglehub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KAGGLEHUB_CACHE", str(tmp_path / "kaggle"))
    folder = tmp_path / "kaggle" / "models" / "kb" / "bert" / "keras" / "tiny"
    expected, inputs = _keras_hub_preset(folder / "2", "bert")
    (folder / "2.complete").write_text("")
    got = _outputs(Backbone.from_preset("kaggle://kb/bert/keras/tiny/2"), inputs)
    assert_close(expected, got)
    # Unversioned: kaggle.com says which version is the latest; offline the
    # error lists the cached versions to pin.
    monkeypatch.setenv("KAGGLE_API_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(handles.HandleError, match="versions in the cache: 2. Pin one: "
                                                  "kaggle://kb/bert/keras/tiny/2"):
        Backbone.from_preset("kaggle://kb/bert/keras/tiny")
    with pytest.raises(handles.HandleError, match="kaggle://OWNER/MODEL/FRAMEWORK/VARIANT"):
        Backbone.from_preset("kaggle://kb/bert")


def test_google_research_bert_directories(tmp_path):
    from kerasbert.convert import save_bert_checkpoint
    from kerasbert.loading.backbones import load_backbone_from_flags

    source = randomize(BertBackbone(vocabulary_size=V, **TINY), seed=5)
    folder = tmp_path / "cased_L-2_H-16_A-2"
    folder.mkdir()
    save_bert_checkpoint(source, str(folder / "bert_model.ckpt"))
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    inputs = ours_inputs(*padded_batch(V))
    expected = _outputs(source, inputs)
    assert_close(expected, _outputs(Backbone.from_preset(str(folder)), inputs))
    # --init-checkpoint DIR is the same handle.
    assert_close(expected, _outputs(load_backbone_from_flags(init_checkpoint=str(folder)), inputs))
    assert load_tokenizer(str(folder)).lower_case is False  # "cased_..." by name


def test_tf_hub_encoders_from_model_garden_and_from_export_hub(tmp_path):
    import tensorflow as tf
    from official.legacy.bert import configs
    from official.nlp.tools import export_tfhub_lib

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    config = configs.BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=32,
                                max_position_embeddings=24, type_vocab_size=2)
    encoder = export_tfhub_lib.get_bert_encoder(config)
    ids, mask, types = padded_batch(V)
    encoder(ours_inputs(ids, mask, types))
    randomize(encoder, seed=9, gammas_near_one=True)
    checkpoint = tf.train.Checkpoint(encoder=encoder).save(str(tmp_path / "ckpt"))
    export_tfhub_lib.export_model(str(tmp_path / "hub"), bert_config=config,
                                  model_checkpoint_path=checkpoint, with_mlm=False,
                                  vocab_file=str(vocab), do_lower_case=False)
    expected = encoder(ours_inputs(ids, mask, types))
    got = _outputs(Backbone.from_preset(str(tmp_path / "hub")), ours_inputs(ids, mask, types))
    assert_close({k: expected[k].numpy() for k in ("sequence_output", "pooled_output")}, got)
    assert load_tokenizer(str(tmp_path / "hub")).lower_case is False  # its do_lower_case


def test_run_directories_and_keras_files(tmp_path):
    source = randomize(BertBackbone(vocabulary_size=V, **TINY), seed=2)
    run = tmp_path / "run"
    run.mkdir()
    source.save(str(run / "backbone.keras"))
    inputs = ours_inputs(*padded_batch(V))
    expected = _outputs(source, inputs)
    for handle in (run, run / "backbone.keras"):
        assert_close(expected, _outputs(Backbone.from_preset(str(handle)), inputs))
    mixed = Backbone.from_preset(str(run), dtype="mixed_float16")
    assert mixed.dtype_policy.name == "mixed_float16"


def test_bad_handles_are_one_clear_error(tmp_path):
    with pytest.raises(UnknownPresetError, match="Did you mean bert_base"):
        Backbone.from_preset("bert_bse")
    with pytest.raises(UsageError, match="no such file or directory"):
        Backbone.from_preset(str(tmp_path / "missing"))
    (tmp_path / "weights.npz").write_bytes(b"x")
    with pytest.raises(UsageError, match="not a .keras model"):
        Backbone.from_preset(str(tmp_path / "weights.npz"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a built-in preset, hf://"):
        Backbone.from_preset(str(tmp_path / "empty"))
    with pytest.raises(handles.HandleError, match="hf://OWNER/NAME"):
        Backbone.from_preset("hf://no-owner")


def _offline_hf_cache(tmp_path, monkeypatch):
    """The Hugging Face cache of `_hf_cache`, offline, for this process."""
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return _hf_cache(str(tmp_path / "hub"))


def test_cli_takes_a_hub_handle_in_process(tmp_path, monkeypatch, capsys):
    """The commands of the fresh-process test below, in this process
    (`main`): `info --preset hf://...` and `finetune --preset hf://...`
    without --vocab (the tokenizer and its casing from the checkpoint); an
    uncached handle exits 2 in one line."""
    from kerasbert.cli import main

    _offline_hf_cache(tmp_path, monkeypatch)
    rows = [f"w{i % 7} w{(3 * i) % 11},{'a' if i % 2 else 'b'}" for i in range(8)]
    (tmp_path / "train.csv").write_text("sentence,label\n" + "\n".join(rows) + "\n")
    assert main(["info", "--preset", "hf://kb-test/tiny-bert"]) == 0
    shown = capsys.readouterr().out
    assert "BertBackbone" in shown and "hidden_dim" in shown
    assert main(["finetune", "--preset", "hf://kb-test/tiny-bert", "--task",
                 f"csv:{tmp_path / 'train.csv'}", "--output-dir", str(tmp_path / "ft"),
                 "--epochs", "1", "--batch-size", "8", "--max-seq-length", "8",
                 "--no-progress"]) == 0
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["tokenizer"]["lower_case"] is False  # tokenizer_config.json's do_lower_case
    capsys.readouterr()
    assert main(["info", "--preset", "hf://kb-test/absent"]) == 2
    assert "not in the Hugging Face cache" in capsys.readouterr().err


def test_export_hub_and_extract_features_take_a_handle(tmp_path):
    """`export-hub --preset hf://...` and `extract-features --preset
    hf://...` as installed console scripts, offline, the cache named by
    environment variables; the encoder export-hub writes is a handle of the
    same backbone, with or without its own vocabulary."""
    cache = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    snapshot = _hf_cache(str(tmp_path / "hub"))
    done = kerasbert("export-hub", "--preset", "hf://kb-test/tiny-bert", "--output", "hubout",
                     "--seq-length", "8", cwd=tmp_path, **cache)
    ok(done)
    assert "without .mlm" in done.stderr
    assert (tmp_path / "hubout" / "preprocess" / "assets" / "vocab.txt").read_text() == \
        open(os.path.join(snapshot, "vocab.txt")).read()
    assert load_tokenizer(str(tmp_path / "hubout" / "encoder")).lower_case is False
    # An encoder without its own vocabulary asset finds its preprocessor's beside it.
    shutil.copytree(tmp_path / "hubout", tmp_path / "pair")
    os.remove(tmp_path / "pair" / "encoder" / "assets" / "vocab.txt")
    assert load_tokenizer(str(tmp_path / "pair" / "encoder")).vocabulary_size == V
    inputs = ours_inputs(*padded_batch(V))
    assert_close(_outputs(Backbone.from_preset(snapshot), inputs),
                 _outputs(Backbone.from_preset(str(tmp_path / "hubout" / "encoder")), inputs))
    (tmp_path / "input.txt").write_text("w1 w2 w3\nw4 ||| w5\n")
    ok(kerasbert("extract-features", "--preset", "hf://kb-test/tiny-bert", "--input",
                 "input.txt", "--output", "features.jsonl", "--layers", "-1",
                 "--max-seq-length", "8", cwd=tmp_path, **cache))
    assert len((tmp_path / "features.jsonl").read_text().splitlines()) == 2


# 30 s: info, finetune and an uncached handle, each a fresh console-script process with the
# cache given by environment variables; the default suite runs the same commands in process.
@slow_covered_by("tests/convert/test_handles.py::test_cli_takes_a_hub_handle_in_process",
                 "tests/convert/test_handles.py::test_hf_handles_read_the_hugging_face_cache_offline")
def test_cli_takes_a_hub_handle_in_a_fresh_process(tmp_path):
    """`kerasbert info --preset hf://...` and `finetune --preset hf://...`
    without --vocab (the tokenizer comes from the checkpoint), offline,
    from another working directory; an uncached handle exits 2 in one line."""
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    _hf_cache(str(tmp_path / "hub"))
    rows = [f"w{i % 7} w{(3 * i) % 11},{'a' if i % 2 else 'b'}" for i in range(16)]
    (tmp_path / "train.csv").write_text("sentence,label\n" + "\n".join(rows) + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    info = kerasbert("info", "--preset", "hf://kb-test/tiny-bert", cwd=elsewhere, **env)
    assert info.returncode == 0, info.stderr
    assert "BertBackbone" in info.stdout and "hidden_dim" in info.stdout
    done = kerasbert("finetune", "--preset", "hf://kb-test/tiny-bert", "--task",
                     f"csv:{tmp_path / 'train.csv'}", "--output-dir", tmp_path / "ft",
                     "--epochs", "1", "--batch-size", "8", "--max-seq-length", "8",
                     "--no-progress", cwd=elsewhere, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["tokenizer"]["lower_case"] is False  # tokenizer_config.json's do_lower_case
    missing = kerasbert("info", "--preset", "hf://kb-test/absent", cwd=elsewhere, **env)
    assert missing.returncode == 2
    assert "not in the Hugging Face cache" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_task_models_start_from_a_handle(tmp_path):
    from kerasbert.tasks import TextClassifier

    source = randomize(BertBackbone(vocabulary_size=V, **TINY), seed=4)
    source.save(str(tmp_path / "backbone.keras"))
    model = TextClassifier.from_preset(str(tmp_path / "backbone.keras"), num_classes=3,
                                       backbone_overrides={"dropout": 0.0})
    assert model.backbone.dropout == 0.0
    np.testing.assert_array_equal(model.backbone.embeddings.token_embedding.embeddings.numpy(),
                                  source.embeddings.token_embedding.embeddings.numpy())
    logits = model(ours_inputs(*padded_batch(V)))
    assert tuple(logits.shape) == (3, 3)
    assert isinstance(TextClassifier.from_preset("bert_tiny", num_classes=2).backbone,
                      BertBackbone)


@pytest.mark.parametrize("name, config, segments", [
    ("RobertaBackbone", dict(vocabulary_size=V, **TINY), False),
    ("AlbertBackbone", dict(vocabulary_size=V, embedding_dim=8, **TINY), True),
    ("ElectraBackbone", dict(vocab_size=V, embedding_dim=8, **TINY), True),
])
def test_keras_hub_preset_directories_of_the_other_families(tmp_path, name, config, segments):
    import keras_hub

    peer = randomize(getattr(keras_hub.models, name)(**config), seed=6, gammas_near_one=True)
    peer.save_to_preset(str(tmp_path / "preset"))
    ids, mask, types = padded_batch(V)
    expected = peer(hub_inputs(ids, mask, types if segments else None))
    expected = expected if isinstance(expected, dict) else {"sequence_output": expected}
    ours = Backbone.from_preset(str(tmp_path / "preset"))
    assert type(ours).__name__ == name
    got = _outputs(ours, ours_inputs(ids, mask, types if segments else None))
    keys = ["sequence_output", "pooled_output"] if "pooled_output" in expected else \
        ["sequence_output"]
    assert_close({k: keras.ops.convert_to_numpy(expected[k]) for k in keys}, got, keys=keys)


@pytest.mark.parametrize("name, extra", [
    ("RobertaBackbone", {}), ("DistilBertBackbone", {}),
    ("AlbertBackbone", {"embedding_dim": 8}), ("ElectraBackbone", {"embedding_dim": 8}),
    ("BigBirdBackbone", {"attention": "bigbird", "block_size": 2, "num_random_blocks": 1}),
])
def test_our_tf_hub_encoders_of_every_family_read_back(tmp_path, name, extra):
    """The encoder SavedModel `export-hub` writes is a handle for every
    family (its variables by our paths, its assets.extra description)."""
    import tensorflow as tf

    import kerasbert.models as families
    from kerasbert.serving.hub_encoder import HubEncoder
    from kerasbert.serving.hub_export import _describe_backbone
    from kerasbert.testing.fixtures import tiny_encoder_config, tiny_encoder_inputs

    config = tiny_encoder_config(**extra)
    if name == "BigBirdBackbone":
        config["max_sequence_length"] = 16
    source = randomize(getattr(families, name)(**config), seed=8)
    root, signatures = HubEncoder(source).build()
    tf.saved_model.save(root, str(tmp_path / "encoder"), signatures=signatures)
    _describe_backbone(source, str(tmp_path / "encoder"))
    inputs = tiny_encoder_inputs(length=16 if name == "BigBirdBackbone" else 8)
    loaded = Backbone.from_preset(str(tmp_path / "encoder"))
    assert type(loaded) is type(source) and loaded.get_config() == source.get_config()
    keys = [k for k in ("sequence_output", "pooled_output") if k in source.output]
    assert_close(_outputs(source, inputs), _outputs(loaded, inputs), keys=keys)


def test_sliced_assignment_gives_the_same_weights(tmp_path, monkeypatch):
    """Large tensors are assigned in row slices (a bert_base load's word
    embeddings, its Linear weights); with a tiny slice size every tensor of
    a tiny model takes that path, from safetensors and from keras-hub's
    HDF5 alike, and the weights are the ones a whole assignment gives."""
    from kerasbert.convert import bert_weights

    hf_dir = write_hf(tmp_path / "hf", hf_tensors(), hf_config())
    _keras_hub_preset(tmp_path / "preset", "bert")
    whole = [Backbone.from_preset(str(d)).get_weights() for d in (hf_dir, tmp_path / "preset")]
    monkeypatch.setattr(bert_weights, "_SLICE_BYTES", 64)
    sliced = [Backbone.from_preset(str(d)).get_weights() for d in (hf_dir, tmp_path / "preset")]
    for a_model, b_model in zip(whole, sliced):
        for a, b in zip(a_model, b_model):
            np.testing.assert_array_equal(a, b)


def test_sliced_assignment_leaves_dense_reads_uncopied(tmp_path, monkeypatch):
    """The row scatter of a sliced load puts a variable in TensorFlow's
    copy-on-read mode, where every dense read copies the whole tensor (a
    forward pass and an optimizer step read the word embeddings); the load
    turns it off. Two reads of a variable share one buffer exactly when
    reads do not copy."""
    from kerasbert.convert import bert_weights

    if keras.backend.backend() != "tensorflow":
        pytest.skip("copy-on-read is TensorFlow's")
    hf_dir = write_hf(tmp_path / "hf", hf_tensors(), hf_config())
    monkeypatch.setattr(bert_weights, "_SLICE_BYTES", 64)
    backbone = Backbone.from_preset(str(hf_dir))
    table = backbone.get_layer("embeddings").token_embedding.embeddings.value

    def buffer():
        return table.read_value().numpy().__array_interface__["data"][0]

    assert buffer() == buffer()
