"""A published GPT-1 directory (openai-gpt's layout: config.json,
model.safetensors, vocab.json + merges.txt with "</w>" word ends and no
special tokens) is a model handle end to end: `generate` continues a
prompt exactly as a NumPy GPT-1 does greedily (the prompt's ids are the
`tokenizers` library's, no start token), and `finetune` grows the
embeddings by the tokenizer's appended special tokens, trains, and the run
exports and serves raw text in fresh processes."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from test_hf_checkpoint import write_hf
from test_hf_gpt import _reference
from test_hf_gpt import gpt_tensors

from kerasbert.models import GptBackbone
from kerasbert.models.vocabulary_growth import grow_vocabulary
from reliability.console import kerasbert
from reliability.console import ok
from slow_marks import slow_covered_by

tokenizers = pytest.importorskip("tokenizers")

HEADS = 2
TEXT = ["the cat sat on the mat .", "a dog ran in the park !", "the bird sang a song ."] * 30


def _tokenizer_files(directory):
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    reference = tokenizers.Tokenizer(models.BPE(end_of_word_suffix="</w>"))
    reference.normalizer = normalizers.BertNormalizer(lowercase=True)
    reference.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    # As published: characters and merges only, no special token at all.
    reference.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=60,
                                                            end_of_word_suffix="</w>"))
    reference.model.save(str(directory))
    return reference


@pytest.fixture(scope="module")
def gpt1_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("openai_gpt")
    reference = _tokenizer_files(root)
    V, H, P, L = reference.get_vocab_size(), 16, 32, 2
    t = gpt_tensors(np.random.default_rng(3), V, H, P, L, embedding_std=0.5)
    write_hf(root, t, {"model_type": "openai-gpt", "vocab_size": V, "n_positions": P,
                       "n_embd": H, "n_layer": L, "n_head": HEADS, "afn": "gelu"})
    return root, t, reference


def _greedy(t, ids, steps):
    """NumPy GPT-1 greedy continuation (tied output embedding)."""
    ids = list(ids)
    for _ in range(steps):
        hidden = _reference(t, np.array([ids]), HEADS)[0, -1]
        ids.append(int(np.argmax(hidden @ t["tokens_embed.weight"].T)))
    return ids


def test_generate_from_the_published_directory_is_gpt1s_greedy_continuation(gpt1_dir):
    from kerasbert.loading.generation import encode_prompt
    from kerasbert.loading.generation import generate_text
    from kerasbert.loading.generation import load_generator

    root, t, reference = gpt1_dir
    lm, tokenizer, _ = load_generator(str(root))
    vocabulary = t["tokens_embed.weight"].shape[0]
    assert lm.backbone.vocabulary_size == vocabulary == tokenizer.published_size
    assert len(tokenizer.added_ids) == 5  # <s> <pad> </s> <unk> <mask>
    prompt = "The cat sat on"
    ids = encode_prompt(tokenizer, prompt, vocabulary)
    assert ids == reference.encode(prompt).ids  # no start token, the library's ids
    expected = _greedy(t, ids, 4)[len(ids):]
    got = lm.generate(ids, max_new_tokens=4, end_token_id=None)
    assert list(got) == expected
    # A character outside the vocabulary is left out, as the model has no row for it.
    assert encode_prompt(tokenizer, "The cat ✓ sat on", vocabulary) == ids
    text = generate_text(lm, tokenizer, prompt, max_new_tokens=4)
    assert text == tokenizer.detokenize(tf.constant([expected])).numpy()[0].decode()


def test_grown_vocabulary_keeps_every_published_row(gpt1_dir):
    from kerasbert.convert import from_hf_directory

    root, t, _ = gpt1_dir
    backbone = from_hf_directory(str(root))
    grown = grow_vocabulary(backbone, backbone.vocabulary_size + 5, seed=1)
    assert isinstance(grown, GptBackbone) and grown.vocabulary_size == backbone.vocabulary_size + 5
    table = grown.embeddings.token_embedding.embeddings.numpy()
    np.testing.assert_array_equal(table[:-5], t["tokens_embed.weight"])
    assert 0 < np.abs(table[-5:]).mean() < 0.1  # N(0, 0.02) rows
    ids = np.array([[1, 2, 3, 4]], "int32")
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
              "input_type_ids": np.zeros_like(ids)}
    np.testing.assert_allclose(grown(inputs)["sequence_output"],
                               backbone(inputs)["sequence_output"], atol=1e-6)
    assert grow_vocabulary(grown, grown.vocabulary_size) is grown


def test_finetune_and_pretraining_grow_the_published_directory_in_process(gpt1_dir, tmp_path,
                                                                           capsys):
    """`kerasbert finetune --preset DIR` in this process (`main`): the
    embeddings grow by the tokenizer's 5 appended special tokens, the run
    records GPT-1's tokenizer; `pretrain --preset DIR` builds its backbone
    the same way (`build_backbone` with the 5 added tokens), keeping every
    published row."""
    from kerasbert.cli import main
    from kerasbert.loading.generation import load_generator
    from kerasbert.training.configs import PretrainConfig
    from kerasbert.training.pretrain_model import build_backbone

    root, t, _ = gpt1_dir
    _, tokenizer, _ = load_generator(str(root))
    rows = [f"{TEXT[i % 3]},{'animal' if i % 3 else 'bird'}" for i in range(8)]
    (tmp_path / "train.csv").write_text("sentence,label\n" + "\n".join(rows) + "\n")
    assert main(["finetune", "--preset", str(root), "--task", f"csv:{tmp_path / 'train.csv'}",
                 "--output-dir", str(tmp_path / "ft"), "--epochs", "1", "--batch-size", "8",
                 "--max-seq-length", "16", "--no-progress"]) == 0
    assert "5 token embeddings added" in capsys.readouterr().err
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["tokenizer"]["type"] == "gpt1_bpe" and config["model_class"] == "GptClassifier"
    assert config["backbone"]["vocabulary_size"] == tokenizer.vocabulary_size
    published = t["tokens_embed.weight"].shape[0]
    backbone = build_backbone(PretrainConfig(preset=str(root), vocab=str(root), data="unused",
                                             output_dir=str(tmp_path / "run"), steps=2),
                              published + 5, 16, added_tokens=5)
    assert backbone.vocabulary_size == published + 5 == tokenizer.vocabulary_size
    np.testing.assert_array_equal(
        backbone.embeddings.token_embedding.embeddings.numpy()[:published],
        t["tokens_embed.weight"])


# 66 s: generate, finetune, export, convert and predict, each a fresh console-script process;
# the default suite runs finetune in process and generate, convert and growth through the API.
@slow_covered_by("tests/convert/test_gpt1_published.py::"
                 "test_finetune_and_pretraining_grow_the_published_directory_in_process",
                 "tests/convert/test_gpt1_published.py::"
                 "test_generate_from_the_published_directory_is_gpt1s_greedy_continuation",
                 "tests/convert/test_gpt1_published.py::test_convert_to_hf_writes_openai_gpts_names_and_reads_back",
                 "tests/convert/test_gpt1_published.py::test_grown_vocabulary_keeps_every_published_row")
def test_cli_generates_fine_tunes_exports_and_serves_gpt1_in_fresh_processes(gpt1_dir, tmp_path):
    from kerasbert.loading.generation import generate_text
    from kerasbert.loading.generation import load_generator

    root, _, _ = gpt1_dir
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lm, tokenizer, _ = load_generator(str(root))
    expected = generate_text(lm, tokenizer, "the dog", max_new_tokens=3)
    out = ok(kerasbert("generate", "--model", root, "--prompt", "the dog",
                       "--max-new-tokens", "3", cwd=elsewhere))
    assert out.strip() == expected.strip()

    rows = [f"{TEXT[i % 3]},{'animal' if i % 3 else 'bird'}" for i in range(24)]
    (tmp_path / "train.csv").write_text("sentence,label\n" + "\n".join(rows) + "\n")
    done = kerasbert("finetune", "--preset", root, "--task", f"csv:{tmp_path / 'train.csv'}",
                     "--output-dir", tmp_path / "ft", "--epochs", "1", "--batch-size", "8",
                     "--max-seq-length", "16", "--no-progress", cwd=elsewhere)
    ok(done)
    assert "5 token embeddings added" in done.stderr
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["tokenizer"]["type"] == "gpt1_bpe"
    assert config["backbone"]["vocabulary_size"] == tokenizer.vocabulary_size

    ok(kerasbert("export", "--model", tmp_path / "ft", "--output", tmp_path / "serving",
                 cwd=elsewhere))
    # Back to the Hugging Face layout, the appended tokens listed for transformers.
    ok(kerasbert("convert", "--model", tmp_path / "ft", "--to", "hf", "--output",
                 tmp_path / "hf_out", cwd=elsewhere))
    added = json.loads((tmp_path / "hf_out" / "added_tokens.json").read_text())
    assert added == {tokenizer.id_to_token(i): i for i in sorted(tokenizer.added_ids)}
    assert json.loads((tmp_path / "hf_out" / "config.json").read_text())["vocab_size"] \
        == tokenizer.vocabulary_size
    versions = sorted(p for p in (tmp_path / "serving").iterdir() if p.name.isdigit())
    served = ok(kerasbert("predict", "--saved-model", versions[-1], "--text", "the cat sat",
                          cwd=elsewhere))
    assert "animal" in served or "bird" in served


# 36 s: create-pretraining-data, 2 pretraining steps and generate in fresh processes; the
# default suite builds the pretraining backbone from the directory and generates from it.
@slow_covered_by("tests/convert/test_gpt1_published.py::"
                 "test_finetune_and_pretraining_grow_the_published_directory_in_process",
                 "tests/convert/test_gpt1_published.py::"
                 "test_generate_from_the_published_directory_is_gpt1s_greedy_continuation",
                 "tests/training/test_gpt_pretrain.py::test_reader_without_masked_lm_gives_original_tokens")
def test_pretraining_continues_from_the_published_directory(gpt1_dir, tmp_path):
    """create-pretraining-data with GPT-1's files, `pretrain --preset DIR`
    (embeddings grown for <s> </s> ...), then `generate` from the run, each
    in a fresh process."""
    root, _, _ = gpt1_dir
    docs = ["\n".join(TEXT[i % 3:i % 3 + 3]) for i in range(12)]
    (tmp_path / "corpus.txt").write_text("\n\n".join(docs) + "\n")
    ok(kerasbert("create-pretraining-data", "--input", "corpus.txt", "--vocab", root,
                 "--output", "data", "--max-seq-length", "16", "--max-predictions-per-seq", "2",
                 "--objective", "none", cwd=tmp_path))
    ok(kerasbert("pretrain", "--preset", root, "--data", "data/*.tfrecord", "--vocab", root,
                 "--output-dir", "run", "--steps", "2", "--batch-size", "4", cwd=tmp_path))
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["backbone"]["vocabulary_size"] == json.loads(
        (root / "config.json").read_text())["vocab_size"] + 5
    ok(kerasbert("generate", "--model", "run", "--prompt", "the cat", "--max-new-tokens", "2",
                 cwd=tmp_path))


def test_convert_to_hf_writes_openai_gpts_names_and_reads_back(gpt1_dir, tmp_path):
    from kerasbert.convert import from_hf_directory
    from kerasbert.convert.safetensors_files import read_checkpoint_directory
    from kerasbert.serving.model_conversion import convert_model

    root, t, _ = gpt1_dir
    out = convert_model(str(root), "hf", tmp_path / "again")
    written = read_checkpoint_directory(out)
    assert set(written) == set(t)
    for name, value in t.items():
        np.testing.assert_array_equal(np.asarray(written[name]), value)
    config = json.loads((tmp_path / "again" / "config.json").read_text())
    source = json.loads((root / "config.json").read_text())
    assert {k: config[k] for k in source} == source
    assert not (tmp_path / "again" / "added_tokens.json").exists()  # nothing was appended
    fixture = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures",
                                          "openai_gpt.json")))
    assert {n for n in fixture["tensors"] if n.startswith(("h.0.", "tokens", "positions"))} == {
        n for n in written if n.startswith(("h.0.", "tokens", "positions"))}
    assert isinstance(from_hf_directory(out), GptBackbone)
