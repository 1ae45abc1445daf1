"""Hugging Face model directories (config.json + safetensors) -> our
backbones. The checkpoints are written in the test with the `safetensors`
library (the format's own writer), in the tensor names of `transformers`;
keras-hub's Hugging Face loader reads the same directory and must compute
what ours computes."""

import json
import os

import numpy as np
import pytest
from peer_fixtures import assert_close, hub_inputs, ours_inputs, padded_batch

from kerasbert.convert import from_hf_directory
from kerasbert.convert.safetensors_files import CheckpointError

from slow_marks import slow_covered_by

V, H, HEADS, FFN, LAYERS, POSITIONS = 50, 16, 2, 32, 2, 12


def _bf16_exact(values):
    """Values a bfloat16 file stores exactly (low 16 float32 bits zero)."""
    bits = np.asarray(values, np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32)


def hf_tensors(family="bert", seed=0, prefix="", ln=("weight", "bias"), pooler=True):
    """Random weights under `transformers`' names for a tiny encoder."""
    rng = np.random.default_rng(seed)

    def rand(*shape, mean=0.0):
        return _bf16_exact(mean + rng.normal(0, 0.2, shape))

    positions = POSITIONS + 2 if family == "roberta" else POSITIONS
    segments = 1 if family == "roberta" else 2
    t = {"embeddings.word_embeddings.weight": rand(V, H),
         "embeddings.position_embeddings.weight": rand(positions, H),
         "embeddings.token_type_embeddings.weight": rand(segments, H),
         f"embeddings.LayerNorm.{ln[0]}": rand(H, mean=1.0), f"embeddings.LayerNorm.{ln[1]}": rand(H)}
    for i in range(LAYERS):
        base = f"encoder.layer.{i}."
        for module, (out, inp) in {"attention.self.query": (H, H), "attention.self.key": (H, H),
                                   "attention.self.value": (H, H),
                                   "attention.output.dense": (H, H),
                                   "intermediate.dense": (FFN, H),
                                   "output.dense": (H, FFN)}.items():
            t[f"{base}{module}.weight"], t[f"{base}{module}.bias"] = rand(out, inp), rand(out)
        for module in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[f"{base}{module}.{ln[0]}"], t[f"{base}{module}.{ln[1]}"] = rand(H, mean=1.0), rand(H)
    if pooler and family == "bert":
        t["pooler.dense.weight"], t["pooler.dense.bias"] = rand(H, H), rand(H)
    return {prefix + k: v for k, v in t.items()}


def distilbert_tensors(seed=0):
    """Random weights under transformers' DistilBERT names."""
    rng = np.random.default_rng(seed)

    def rand(*shape, mean=0.0):
        return _bf16_exact(mean + rng.normal(0, 0.2, shape))

    t = {"embeddings.word_embeddings.weight": rand(V, H),
         "embeddings.position_embeddings.weight": rand(POSITIONS, H),
         "embeddings.LayerNorm.weight": rand(H, mean=1.0), "embeddings.LayerNorm.bias": rand(H)}
    for i in range(LAYERS):
        base = f"transformer.layer.{i}."
        for module, (out, inp) in {"attention.q_lin": (H, H), "attention.k_lin": (H, H),
                                   "attention.v_lin": (H, H), "attention.out_lin": (H, H),
                                   "ffn.lin1": (FFN, H), "ffn.lin2": (H, FFN)}.items():
            t[f"{base}{module}.weight"], t[f"{base}{module}.bias"] = rand(out, inp), rand(out)
        for module in ("sa_layer_norm", "output_layer_norm"):
            t[f"{base}{module}.weight"], t[f"{base}{module}.bias"] = rand(H, mean=1.0), rand(H)
    return {"distilbert." + k: v for k, v in t.items()}


def albert_tensors(seed=0, embedding=8, groups=1, inner=1):
    """Random weights under transformers' ALBERT names."""
    rng = np.random.default_rng(seed)

    def rand(*shape, mean=0.0):
        return _bf16_exact(mean + rng.normal(0, 0.2, shape))

    t = {"embeddings.word_embeddings.weight": rand(V, embedding),
         "embeddings.position_embeddings.weight": rand(POSITIONS, embedding),
         "embeddings.token_type_embeddings.weight": rand(2, embedding),
         "embeddings.LayerNorm.weight": rand(embedding, mean=1.0),
         "embeddings.LayerNorm.bias": rand(embedding),
         "encoder.embedding_hidden_mapping_in.weight": rand(H, embedding),
         "encoder.embedding_hidden_mapping_in.bias": rand(H),
         "pooler.weight": rand(H, H), "pooler.bias": rand(H)}
    for g in range(groups):
        for r in range(inner):
            base = f"encoder.albert_layer_groups.{g}.albert_layers.{r}."
            for module, (out, inp) in {"attention.query": (H, H), "attention.key": (H, H),
                                       "attention.value": (H, H), "attention.dense": (H, H),
                                       "ffn": (FFN, H), "ffn_output": (H, FFN)}.items():
                t[f"{base}{module}.weight"], t[f"{base}{module}.bias"] = (rand(out, inp),
                                                                          rand(out))
            for module in ("attention.LayerNorm", "full_layer_layer_norm"):
                t[f"{base}{module}.weight"], t[f"{base}{module}.bias"] = (rand(H, mean=1.0),
                                                                          rand(H))
    return {"albert." + k: v for k, v in t.items()}


ALBERT_CONFIG = dict(model_type="albert", vocab_size=V, embedding_size=8, hidden_size=H,
                     num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FFN,
                     num_hidden_groups=1, inner_group_num=1, hidden_act="gelu_new",
                     max_position_embeddings=POSITIONS, type_vocab_size=2,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


DISTILBERT_CONFIG = {"model_type": "distilbert", "vocab_size": V, "dim": H, "n_layers": LAYERS,
                     "n_heads": HEADS, "hidden_dim": FFN, "max_position_embeddings": POSITIONS,
                     "dropout": 0.1, "attention_dropout": 0.1, "activation": "gelu"}


def hf_config(family="bert", **changes):
    config = {"model_type": family, "vocab_size": V, "hidden_size": H,
              "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "intermediate_size": FFN, "hidden_act": "gelu",
              "max_position_embeddings": POSITIONS + 2 if family == "roberta" else POSITIONS,
              "type_vocab_size": 1 if family == "roberta" else 2,
              "layer_norm_eps": 1e-5 if family == "roberta" else 1e-12,
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
    config.update(changes)
    return config


def write_hf(directory, tensors, config, dtype="float32", shards=1):
    """A Hugging Face model directory, written with `safetensors`."""
    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    if dtype == "bfloat16":
        import ml_dtypes

        tensors = {k: v.astype(ml_dtypes.bfloat16) for k, v in tensors.items()}
    if shards == 1:
        save_file(tensors, os.path.join(directory, "model.safetensors"))
        return str(directory)
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        shard = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        save_file(part, os.path.join(directory, shard))
        weight_map.update({n: shard for n in part})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return str(directory)


BATCH = padded_batch(V, length=10)


@pytest.mark.parametrize("family, hub_class", [("bert", "BertBackbone"),
                                               ("roberta", "RobertaBackbone")])
def test_same_outputs_as_keras_hubs_hugging_face_loader(tmp_path, family, hub_class):
    import keras_hub

    # keras-hub's BERT always uses the tanh GELU: the checkpoint says so too.
    act = "gelu_new" if family == "bert" else "gelu"
    # roberta-base's checkpoint (RobertaForMaskedLM) names the encoder "roberta.*".
    prefix = "roberta." if family == "roberta" else ""
    tensors = hf_tensors(family, prefix=prefix)
    if family == "roberta":
        # keras-hub's RoBERTa import leaves out the one token-type row that
        # transformers adds to every token; ours folds it into the position
        # table (checked below). With a zero row the two must agree.
        types = tensors.pop("roberta.embeddings.token_type_embeddings.weight")
        folded = from_hf_directory(write_hf(tmp_path / "typed", dict(
            tensors, **{"roberta.embeddings.token_type_embeddings.weight": types}),
            hf_config(family)))
        positions = tensors["roberta.embeddings.position_embeddings.weight"][2:]
        np.testing.assert_allclose(folded.embeddings.position_embedding.position_embeddings,
                                   positions + types[0], atol=1e-7)
        tensors["roberta.embeddings.token_type_embeddings.weight"] = np.zeros_like(types)
    path = write_hf(tmp_path / family, tensors, hf_config(family, hidden_act=act))
    ours = from_hf_directory(path)
    assert type(ours).__name__ == hub_class
    peer = getattr(keras_hub.models, hub_class).from_preset(path)
    ids, mask, types = BATCH
    if family == "roberta":
        expected = {"sequence_output": peer(hub_inputs(ids, mask))}
        assert_close(expected, ours(ours_inputs(ids, mask)), keys=("sequence_output",))
    else:
        assert_close(peer(hub_inputs(ids, mask, types)), ours(ours_inputs(ids, mask, types)))


def test_distilbert_same_outputs_as_keras_hubs_hugging_face_loader(tmp_path):
    import keras_hub

    path = write_hf(tmp_path / "distilbert", distilbert_tensors(), DISTILBERT_CONFIG)
    ours = from_hf_directory(path)
    assert type(ours).__name__ == "DistilBertBackbone"
    peer = keras_hub.models.DistilBertBackbone.from_preset(path)
    ids, mask, _ = BATCH
    expected = {"sequence_output": peer(hub_inputs(ids, mask))}
    assert_close(expected, ours(ours_inputs(ids, mask)), keys=("sequence_output",))


def test_albert_same_outputs_as_keras_hubs_hugging_face_loader(tmp_path):
    import keras_hub

    path = write_hf(tmp_path / "albert", albert_tensors(), ALBERT_CONFIG)
    ours = from_hf_directory(path)
    assert type(ours).__name__ == "AlbertBackbone" and ours.embedding_dim == 8
    peer = keras_hub.models.AlbertBackbone.from_preset(path)
    ids, mask, types = BATCH
    assert_close(peer(hub_inputs(ids, mask, types)), ours(ours_inputs(ids, mask, types)))


def test_albert_groups_of_blocks(tmp_path):
    """Two groups of two distinct blocks over four layers: each block of the
    checkpoint lands in its place (layers 0-1 run group 0, layers 2-3 group 1)."""
    tensors = albert_tensors(groups=2, inner=2)
    config = dict(ALBERT_CONFIG, num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    ours = from_hf_directory(write_hf(tmp_path / "albert", tensors, config))
    assert [len(group) for group in ours.groups] == [2, 2]
    for g, group in enumerate(ours.groups):
        for r, block in enumerate(group):
            name = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{r}.ffn.weight"
            np.testing.assert_array_equal(block.intermediate_dense.kernel.numpy(),
                                          tensors[name].T)
    # Every block application in call order: layers 2-3 run group 1's blocks.
    assert ours.transformer_layers[4] is ours.groups[1][0]
    assert ours.transformer_layers[7] is ours.groups[1][1]


def test_electra_discriminator_names_land_in_place(tmp_path):
    """transformers' ELECTRA discriminator names ("electra." prefix, tables
    `embedding_size` wide, `embeddings_project` to the hidden size, BERT's
    layers, no pooler): each tensor lands where it belongs."""
    rng = np.random.default_rng(3)
    tensors = {k.replace("bert.", "electra.", 1): v
               for k, v in hf_tensors(prefix="bert.", pooler=False).items()}
    e = 8
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        rows = tensors[f"electra.embeddings.{name}.weight"].shape[0]
        tensors[f"electra.embeddings.{name}.weight"] = rng.normal(size=(rows, e)).astype("f4")
    tensors["electra.embeddings.LayerNorm.weight"] = rng.normal(size=e).astype("f4")
    tensors["electra.embeddings.LayerNorm.bias"] = rng.normal(size=e).astype("f4")
    tensors["electra.embeddings_project.weight"] = rng.normal(size=(H, e)).astype("f4")
    tensors["electra.embeddings_project.bias"] = rng.normal(size=H).astype("f4")
    tensors["discriminator_predictions.dense.weight"] = rng.normal(size=(H, H)).astype("f4")
    config = hf_config("electra", embedding_size=e)
    ours = from_hf_directory(write_hf(tmp_path / "electra", tensors, config))
    assert type(ours).__name__ == "ElectraBackbone" and ours.embedding_dim == e
    np.testing.assert_array_equal(ours.embeddings.projection.kernel.numpy(),
                                  tensors["electra.embeddings_project.weight"].T)
    np.testing.assert_array_equal(ours.embeddings.token_embedding.embeddings.numpy(),
                                  tensors["electra.embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(
        ours.transformer_layers[1].intermediate_dense.kernel.numpy(),
        tensors["electra.encoder.layer.1.intermediate.dense.weight"].T)
    assert np.isfinite(np.asarray(ours(ours_inputs(*BATCH))["sequence_output"])).all()


def test_prefix_layer_norm_names_bfloat16_and_shards_read_alike(tmp_path):
    """A task checkpoint ("bert." prefix, gamma/beta LayerNorms), stored in
    bfloat16 and in 3 shards, gives the same model as the plain file."""
    plain = from_hf_directory(write_hf(tmp_path / "plain", hf_tensors(), hf_config()))
    other = from_hf_directory(write_hf(tmp_path / "other",
                                       hf_tensors(prefix="bert.", ln=("gamma", "beta")),
                                       hf_config(), dtype="bfloat16", shards=3))
    for a, b in zip(plain.weights, other.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    assert plain.activation == "gelu" and plain.layer_norm_epsilon == 1e-12


def test_a_checkpoint_without_pooler_keeps_ours(tmp_path):
    model = from_hf_directory(write_hf(tmp_path / "mlm", hf_tensors(pooler=False), hf_config()),
                              dropout=0.0)
    assert model.dropout == 0.0
    assert model.pooler is not None and np.isfinite(model.pooler.dense.kernel.numpy()).all()


def test_bad_directories_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match="no config.json"):
        from_hf_directory(tmp_path)
    path = write_hf(tmp_path / "m", hf_tensors(), hf_config())
    with pytest.raises(CheckpointError, match="hidden_dim=32 contradicts the checkpoint's "
                                              "hidden_dim=16"):
        from_hf_directory(path, hidden_dim=32)
    weights = os.path.join(path, "model.safetensors")
    with open(weights, "rb") as f:
        data = f.read()
    with open(weights, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model.safetensors: tensor .* spans bytes"):
        from_hf_directory(path)
    other = write_hf(tmp_path / "t5", hf_tensors(), hf_config(model_type="t5"))
    with pytest.raises(CheckpointError, match="model_type 't5'; this loader reads albert, bert, big_bird, "
                                              "distilbert, electra, modernbert, openai-gpt"):
        from_hf_directory(other)


def _assert_fine_tuned_from(run, tensors):
    """Fine-tuned run `run` (a learning rate of 1e-9) is the checkpoint's
    size and tokenizer, and its token table is `tensors`' (the checkpoint's)."""
    from kerasbert.saving import load_model

    config = json.load(open(run / "config.json"))
    assert config["backbone"]["hidden_dim"] == H and config["backbone"]["vocabulary_size"] == V
    assert config["tokenizer"]["type"] == "wordpiece"
    model = load_model(str(run / "model.keras"))
    table = model.backbone.embeddings.token_embedding.embeddings.numpy()
    np.testing.assert_allclose(table, tensors["embeddings.word_embeddings.weight"], atol=1e-6)


def test_finetune_from_a_hugging_face_directory_in_process(tmp_path, capsys):
    """`kerasbert finetune --preset HF_DIR --vocab HF_DIR` in this process
    (`main`): the run starts from the checkpoint's weights (a learning rate
    of 1e-9 leaves its token table where it started), and a vocabulary of
    another size is refused naming both sizes."""
    from kerasbert.cli import main

    words = [f"w{i}" for i in range(V - 5)]
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    rows = [f"{words[i % 7]} {words[(3 * i) % 11]},{'a' if i % 2 else 'b'}" for i in range(8)]
    (tmp_path / "train.csv").write_text("sentence,label\n" + "\n".join(rows) + "\n")
    tensors = hf_tensors()
    hf_dir = write_hf(tmp_path / "bert-tiny-hf", tensors, hf_config())
    (tmp_path / "bert-tiny-hf" / "vocab.txt").write_text("\n".join(specials + words) + "\n")
    assert main(["finetune", "--preset", str(hf_dir), "--vocab", str(hf_dir),
                 "--task", f"csv:{tmp_path / 'train.csv'}", "--output-dir", str(tmp_path / "ft"),
                 "--epochs", "1", "--batch-size", "8", "--learning-rate", "1e-9",
                 "--max-seq-length", "8", "--no-progress"]) == 0
    _assert_fine_tuned_from(tmp_path / "ft", tensors)
    (tmp_path / "small_vocab.txt").write_text("\n".join(specials + ["w0"]) + "\n")
    capsys.readouterr()
    assert main(["finetune", "--preset", str(hf_dir), "--vocab", str(tmp_path / "small_vocab.txt"),
                 "--task", f"csv:{tmp_path / 'train.csv'}", "--output-dir",
                 str(tmp_path / "ft2"), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert "vocabulary_size=6" in error and "vocabulary_size=50" in error
    assert not (tmp_path / "ft2").exists()


# 20 s: the same two commands as fresh console-script processes from another working
# directory; the default suite runs them in process (main).
@slow_covered_by("tests/convert/test_hf_checkpoint.py::test_finetune_from_a_hugging_face_directory_in_process",
                 "tests/convert/test_handles.py::test_cli_takes_a_hub_handle_in_process")
def test_finetune_from_a_hugging_face_directory_as_users_run_it(tmp_path):
    """`kerasbert finetune --preset HF_DIR` in a fresh process, from another
    working directory: the run starts from the checkpoint's weights (its
    fine-tuned model's token table is the checkpoint's: a learning rate of
    1e-9 leaves it where it started), and a vocabulary of another size is
    refused naming both sizes."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "reliability"))
    from console import kerasbert, ok, one_line_error

    words = [f"w{i}" for i in range(V - 5)]
    data = tmp_path / "data"
    data.mkdir()
    (data / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                              + words) + "\n")
    rows = [f"{words[i % 7]} {words[(3 * i) % 11]},{'a' if i % 2 else 'b'}" for i in range(16)]
    (data / "train.csv").write_text("sentence,label\n" + "\n".join(rows) + "\n")
    tensors = hf_tensors()
    hf_dir = write_hf(data / "bert-tiny-hf", tensors, hf_config())
    # The model directory holds its tokenizer too: --vocab DIR finds vocab.txt.
    (data / "bert-tiny-hf" / "vocab.txt").write_text((data / "vocab.txt").read_text())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ok(kerasbert("finetune", "--preset", hf_dir, "--vocab", hf_dir,
                 "--task", f"csv:{data / 'train.csv'}", "--output-dir", tmp_path / "ft",
                 "--epochs", "1", "--batch-size", "8", "--learning-rate", "1e-9",
                 "--max-seq-length", "8", "--no-progress", cwd=elsewhere))
    _assert_fine_tuned_from(tmp_path / "ft", tensors)

    (data / "small_vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                     "[MASK]", "w0"]) + "\n")
    one_line_error(kerasbert("finetune", "--preset", hf_dir, "--vocab", data / "small_vocab.txt",
                             "--task", f"csv:{data / 'train.csv'}", "--output-dir",
                             tmp_path / "ft2", "--no-progress", cwd=elsewhere),
                   "vocabulary_size=6", "vocabulary_size=50")
