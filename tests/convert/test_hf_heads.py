"""Published masked-LM heads: a Hugging Face `BertForMaskedLM`-style
checkpoint's `cls.predictions.*` become our pretrainer's masked-LM head, and
`kerasbert fill-mask` scores the vocabulary as a NumPy BERT head computes it
(transform Linear + GELU + LayerNorm, decoder tied to the word embeddings,
output bias)."""

import json
import math
import os

import numpy as np
from reliability.console import kerasbert
from reliability.console import ok
from test_hf_checkpoint import H, V, hf_config, hf_tensors, write_hf

from kerasbert.convert.hf_heads import pretraining_heads_from_hf
from kerasbert.loading.masked_lm import load_masked_lm_from_handle
from kerasbert.loading.masked_lm import fill_mask
from kerasbert.text import load_tokenizer

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(V - 5)]


def _checkpoint(directory):
    rng = np.random.default_rng(5)
    tensors = hf_tensors(prefix="bert.")
    tensors.update({
        "cls.predictions.transform.dense.weight": rng.normal(0, 0.3, (H, H)).astype("float32"),
        "cls.predictions.transform.dense.bias": rng.normal(0, 0.1, H).astype("float32"),
        "cls.predictions.transform.LayerNorm.weight": (1 + rng.normal(0, 0.1, H)).astype("float32"),
        "cls.predictions.transform.LayerNorm.bias": rng.normal(0, 0.1, H).astype("float32"),
        "cls.predictions.bias": rng.normal(0, 1.0, V).astype("float32"),
        "cls.seq_relationship.weight": rng.normal(0, 0.3, (2, H)).astype("float32"),
        "cls.seq_relationship.bias": rng.normal(0, 0.1, 2).astype("float32"),
    })
    path = write_hf(directory, tensors, hf_config())
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(WORDS) + "\n")
    return path, tensors


def _reference_probabilities(tensors, sequence_output):
    erf = np.vectorize(math.erf)
    x = sequence_output @ tensors["cls.predictions.transform.dense.weight"].T \
        + tensors["cls.predictions.transform.dense.bias"]
    x = x * 0.5 * (1 + erf(x / math.sqrt(2)))
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    x = (x - mean) / np.sqrt(var + 1e-12) * tensors["cls.predictions.transform.LayerNorm.weight"] \
        + tensors["cls.predictions.transform.LayerNorm.bias"]
    logits = x @ tensors["bert.embeddings.word_embeddings.weight"].T + tensors["cls.predictions.bias"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_fill_mask_scores_as_the_published_head_does(tmp_path):
    path, tensors = _checkpoint(tmp_path / "mlm")
    heads = pretraining_heads_from_hf(path, "bert")
    assert set(heads) >= {"transform_kernel", "output_bias", "sentence_kernel"}
    _fill_mask_matches_numpy(load_masked_lm_from_handle(path), path, tensors, top_k=3)


def _fill_mask_matches_numpy(pretrainer, path, tensors, top_k):
    """`fill_mask`'s top tokens and probabilities at "w1 [MASK] w3" are the
    NumPy head's (`_reference_probabilities`), whose top is no near tie."""
    [[top]] = fill_mask(pretrainer, load_tokenizer(path), ["w1 [MASK] w3"], top_k=top_k)
    ids = np.array([[2, WORDS.index("w1"), 4, WORDS.index("w3"), 3]], "int32")
    sequence = pretrainer.backbone({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                                    "input_type_ids": np.zeros_like(ids)})["sequence_output"]
    expected = _reference_probabilities(tensors, np.asarray(sequence)[0, 2])
    order = np.argsort(-expected)
    assert min(np.diff(-expected[order[:top_k + 1]])) > 1e-4
    assert [t for t, _ in top] == [WORDS[i] for i in order[:top_k]]
    np.testing.assert_allclose([p for _, p in top], expected[order[:top_k]], atol=1e-5)


def test_fill_mask_cli(tmp_path, capsys):
    """`kerasbert fill-mask` as the installed console script, from another
    folder: one JSON row with the top k of each [MASK]. In this process
    (`main`): a checkpoint without a masked-LM head and a text without
    [MASK] exit 2 naming the problem."""
    from kerasbert.cli import main

    path, _ = _checkpoint(tmp_path / "mlm")
    (tmp_path / "elsewhere").mkdir()
    printed = ok(kerasbert("fill-mask", "--model", "../mlm", "--text", "w1 [MASK] w3 [MASK]",
                           "--top-k", "2", cwd=tmp_path / "elsewhere"))
    row = json.loads(printed.strip().splitlines()[-1])
    assert len(row["masks"]) == 2 and all(len(m) == 2 for m in row["masks"])
    bare = write_hf(tmp_path / "bare", hf_tensors(), hf_config())
    assert main(["fill-mask", "--model", str(bare), "--vocab", os.path.join(path, "vocab.txt"),
                 "--text", "w1 [MASK]"]) == 2
    assert "no masked-LM head" in capsys.readouterr().err
    assert main(["fill-mask", "--model", str(path), "--text", "w1 w2"]) == 2
    assert "has no [MASK]" in capsys.readouterr().err


def test_pretrain_init_from_a_checkpoint_takes_its_heads(tmp_path):
    """`pretrain --init-from HF_DIR`'s loader: the backbone and the published
    masked-LM and NSP heads go into a new run's pretrainer."""
    from kerasbert.models import BertBackbone
    from kerasbert.tasks import BertPretrainer
    from kerasbert.training.pretrain_model import init_weights_from

    path, tensors = _checkpoint(tmp_path / "mlm")
    fresh = BertPretrainer(BertBackbone(vocabulary_size=V, num_layers=2, num_heads=2,
                                        hidden_dim=H, intermediate_dim=32,
                                        max_sequence_length=12))
    said = init_weights_from(path, fresh)
    assert "masked-LM and NSP heads" in said
    np.testing.assert_array_equal(fresh.masked_lm_head.output_bias.numpy(),
                                  tensors["cls.predictions.bias"])
    np.testing.assert_array_equal(fresh.next_sentence_head.dense.kernel.numpy(),
                                  tensors["cls.seq_relationship.weight"].T)
    np.testing.assert_array_equal(fresh.backbone.embeddings.token_embedding.embeddings.numpy(),
                                  tensors["bert.embeddings.word_embeddings.weight"])


def test_pretrain_init_from_an_electra_discriminator_takes_its_head(tmp_path):
    from kerasbert.models import ElectraBackbone
    from kerasbert.tasks import ElectraPretrainer
    from kerasbert.training.pretrain_model import init_weights_from

    rng = np.random.default_rng(8)
    tensors = {"electra." + k: v for k, v in hf_tensors().items()
               if not k.startswith("pooler")}
    tensors["discriminator_predictions.dense.weight"] = rng.normal(0, .3, (H, H)).astype("float32")
    tensors["discriminator_predictions.dense.bias"] = rng.normal(0, .1, H).astype("float32")
    tensors["discriminator_predictions.dense_prediction.weight"] = \
        rng.normal(0, .3, (1, H)).astype("float32")
    tensors["discriminator_predictions.dense_prediction.bias"] = np.float32([0.25])
    path = write_hf(tmp_path / "disc", tensors, hf_config(model_type="electra"))
    fresh = ElectraPretrainer(ElectraBackbone(vocabulary_size=V, num_layers=2, num_heads=2,
                                              hidden_dim=H, intermediate_dim=32,
                                              max_sequence_length=12),
                              generator_fraction=0.5)
    said = init_weights_from(path, fresh)
    assert "replaced-token heads" in said
    np.testing.assert_array_equal(fresh.rtd_head.logits.kernel.numpy(),
                                  tensors["discriminator_predictions.dense_prediction.weight"].T)
    np.testing.assert_array_equal(fresh.rtd_head.dense.kernel.numpy(),
                                  tensors["discriminator_predictions.dense.weight"].T)


def _electra_generator(directory, embedding=8):
    """An `ElectraForMaskedLM` checkpoint whose embeddings are narrower than
    its hidden width (as electra-small-generator: 128 vs 256)."""
    rng = np.random.default_rng(11)
    rand = lambda *shape, mean=0.0: (mean + rng.normal(0, 0.3, shape)).astype("float32")  # noqa: E731
    tensors = {"electra." + k: v for k, v in hf_tensors(seed=3).items()
               if not k.startswith(("pooler", "embeddings."))}
    E = embedding
    tensors.update({
        "electra.embeddings.word_embeddings.weight": rand(V, E),
        "electra.embeddings.position_embeddings.weight": rand(hf_config()[
            "max_position_embeddings"], E),
        "electra.embeddings.token_type_embeddings.weight": rand(2, E),
        "electra.embeddings.LayerNorm.weight": rand(E, mean=1.0),
        "electra.embeddings.LayerNorm.bias": rand(E),
        "electra.embeddings_project.weight": rand(H, E), "electra.embeddings_project.bias": rand(H),
        "generator_predictions.dense.weight": rand(E, H),
        "generator_predictions.dense.bias": rand(E),
        "generator_predictions.LayerNorm.weight": rand(E, mean=1.0),
        "generator_predictions.LayerNorm.bias": rand(E),
        "generator_lm_head.bias": rand(V) * 3,
    })
    tensors["generator_lm_head.weight"] = tensors["electra.embeddings.word_embeddings.weight"]
    path = write_hf(directory, tensors, hf_config(model_type="electra", embedding_size=E))
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(WORDS) + "\n")
    names = {"cls.predictions.transform.dense.weight": "generator_predictions.dense.weight",
             "cls.predictions.transform.dense.bias": "generator_predictions.dense.bias",
             "cls.predictions.transform.LayerNorm.weight": "generator_predictions.LayerNorm.weight",
             "cls.predictions.transform.LayerNorm.bias": "generator_predictions.LayerNorm.bias",
             "cls.predictions.bias": "generator_lm_head.bias",
             "bert.embeddings.word_embeddings.weight": "electra.embeddings.word_embeddings.weight"}
    return path, {ours: tensors[theirs] for ours, theirs in names.items()}


def test_fill_mask_with_a_published_electra_generator(tmp_path):
    """ELECTRA's generator is a masked LM: its head (transform to the
    embedding width, GELU, LayerNorm, decoder tied to the word embeddings,
    bias) scores the vocabulary as NumPy does; a discriminator checkpoint
    has no such head."""
    from kerasbert.models import ElectraBackbone

    path, tensors = _electra_generator(tmp_path / "generator")
    pretrainer = load_masked_lm_from_handle(path)
    assert isinstance(pretrainer.backbone, ElectraBackbone)
    _fill_mask_matches_numpy(pretrainer, path, tensors, top_k=2)
