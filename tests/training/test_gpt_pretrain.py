"""GPT through the CLI: `kerasbert create-pretraining-data --objective none
--no-masking` data -> `kerasbert pretrain --preset gpt1` (a causal LM, read
without masking) -> `kerasbert generate` regenerating the memorised text."""

import json
import os

import numpy as np
import pytest

import pretrain_data as pd
from reliability.console import kerasbert
from reliability.console import ok
from kerasbert.cli import main

# Every word once, so the next word is a function of the previous ones.
TEXT = "the old man follows a green tree at night with joy ."
TINY = ["--set", "num_layers=2", "--set", "hidden_dim=32", "--set", "num_heads=2",
        "--set", "intermediate_dim=64", "--set", "max_sequence_length=64",
        "--set", "dropout=0.0"]


@pytest.fixture(scope="module")
def memorised(tmp_path_factory):
    """A run trained on one text repeated (documents of one sentence)."""
    root = tmp_path_factory.mktemp("gpt-memorise")
    corpus = root / "corpus.txt"
    corpus.write_text((TEXT + "\n\n") * 60, encoding="utf-8")
    vocab, data = pd.make_data(str(root), corpus=str(corpus), sequence_length=32, objective="none",
                               masking=False, dupe_factor=1, num_shards=1)
    run = str(root / "run")
    args = ["pretrain", "--preset", "gpt1", "--vocab", vocab, "--data", data,
            "--output-dir", run, "--steps", "250", "--batch-size", "8",
            "--learning-rate", "3e-3", "--warmup-steps", "10", "--log-every", "50",
            "--checkpoint-every", "1000", "--no-progress", *TINY]
    assert main(args) == 0
    return vocab, data, run


def test_pretrain_trains_a_causal_lm_without_masking(memorised):
    _, _, run = memorised
    config = json.load(open(os.path.join(run, "config.json")))
    assert config["backbone_class"] == "GptBackbone"
    assert config["dynamic_masking"] is False
    rows = [json.loads(line) for line in open(os.path.join(run, "history.jsonl"))]
    assert {"loss", "lm_loss", "lm_accuracy", "perplexity"} <= set(rows[0])
    assert "mlm_loss" not in rows[0]
    print(f"gpt pretrain loss ratio {rows[-1]['loss'] / rows[0]['loss']:.3f}, "
          f"accuracy {rows[-1]['lm_accuracy']:.3f}")
    assert rows[-1]["loss"] < 0.25 * rows[0]["loss"]
    assert rows[-1]["lm_accuracy"] > 0.95
    for name in ("pretrainer.keras", "backbone.keras", "training_curve.png"):
        assert os.path.getsize(os.path.join(run, name)) > 0


def test_generate_regenerates_the_memorised_text(memorised, tmp_path, capsys):
    """The first prompt through the installed console script, from another
    folder; the others in this process (`main`)."""
    _, _, run = memorised
    words = TEXT.split()
    for cut in (1, 3, 6):
        prompt = " ".join(words[:cut])
        if cut == 1:
            completion = ok(kerasbert("generate", "--model", run, "--prompt", prompt,
                                      "--max-new-tokens", "30", cwd=tmp_path)).strip()
        else:
            capsys.readouterr()
            assert main(["generate", "--model", run, "--prompt", prompt,
                         "--max-new-tokens", "30"]) == 0
            completion = capsys.readouterr().out.strip()
        # Greedy decoding gives the rest of the text exactly, then stops at
        # the separator that ends the training sequences (or continues with
        # the next copy of the text).
        assert completion.startswith(" ".join(words[cut:])), (cut, completion)


def test_generate_sampling_options_and_errors(memorised, capsys):
    _, _, run = memorised
    outputs = []
    for _ in range(2):
        capsys.readouterr()
        assert main(["generate", "--model", run, "--prompt", "the old", "--strategy", "top_k",
                     "--top-k", "5", "--temperature", "1.5", "--seed", "7",
                     "--max-new-tokens", "8"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]  # same seed, same text
    assert main(["generate", "--model", run, "--prompt", "x", "--top-p", "1.5",
                 "--strategy", "top_p"]) == 2
    assert "top_p must be in (0, 1]" in capsys.readouterr().err
    assert main(["generate", "--model", os.path.dirname(run), "--prompt", "x"]) == 2
    assert "no pretrainer.keras" in capsys.readouterr().err


def test_sentence_pair_data_is_refused_for_gpt(tmp_path, capsys):
    vocab, data = pd.make_data(str(tmp_path), objective="nsp", dupe_factor=1, num_shards=1)
    args = ["pretrain", "--preset", "gpt1", "--vocab", vocab, "--data", data,
            "--output-dir", str(tmp_path / "run"), "--steps", "1", "--batch-size", "2",
            "--no-progress", *TINY]
    assert main(args) == 2
    assert "--objective none" in capsys.readouterr().err


def test_reader_without_masked_lm_gives_original_tokens(tmp_path):
    from kerasbert.data import pretraining_dataset
    from kerasbert.text.vocabulary import load_vocab

    vocab, data = pd.make_data(str(tmp_path), objective="none", masking=True, dupe_factor=1,
                               num_shards=1)
    mask_id = load_vocab(vocab).index("[MASK]")
    # deterministic=True: the two reads must give the same records in the same
    # order (by default parallel reads may reorder them, as CI once saw).
    read = dict(shuffle=False, repeat=False, deterministic=True)
    masked = next(iter(pretraining_dataset(data, 64, **read)))
    plain = next(iter(pretraining_dataset(data, 64, masked_lm=False, **read)))
    assert sorted(plain) == ["input_mask", "input_type_ids", "input_word_ids"]
    ids = plain["input_word_ids"].numpy()
    assert (masked["input_word_ids"].numpy() == mask_id).any() and not (ids == mask_id).any()
    # The stored masks were undone: the original ids are back at the positions.
    positions = masked["masked_lm_positions"].numpy()
    originals = masked["masked_lm_ids"].numpy()
    weights = masked["masked_lm_weights"].numpy()
    for row in range(len(ids)):
        real = weights[row] > 0
        np.testing.assert_array_equal(ids[row, positions[row, real]], originals[row, real])
    with pytest.raises(ValueError, match="exclude each other"):
        pretraining_dataset(data, 4, dynamic_masking=True, masked_lm=False, vocab_file=vocab)
