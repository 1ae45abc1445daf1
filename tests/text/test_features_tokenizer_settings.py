"""Pre-tokenized features remember the tokenizer that made them:
`kerasbert create-finetuning-data` records the tokenizer's settings
(special_tokens_in_strings, the longest word in characters,
truncate_at_nul, ...) in metadata.json, and `kerasbert finetune --features`
refuses, in one line with exit code 2, features made with other settings
than its own tokenizer's; with the same settings it fine-tunes, and the run
keeps them. Run through the installed `kerasbert` console script."""

import json
import os

import pytest
from reliability.console import in_process
from reliability.console import kerasbert

from kerasbert.data.finetuning import read_features
from kerasbert.errors import TaskDataError
from kerasbert.testing.files import write_csv
from kerasbert.testing.files import write_vocabulary
from kerasbert.text import ids_settings
from kerasbert.text import load_tokenizer

from slow_marks import slow_covered_by

WORDS = "the a movie good bad great film plot was not [ ] mask sep".split()


def _cli(*argv):
    """The console script's (exit code, stdout, stderr)."""
    done = kerasbert(*argv, cwd=os.getcwd())
    return done.returncode, done.stdout, done.stderr


def _in_process(*argv):
    """The same, through `kerasbert.cli.main` in this process (the default
    suite runs one refusal through the console script and the others here,
    without a second TensorFlow start)."""
    done = in_process(*argv)
    return done.returncode, done.stdout, done.stderr


def _error_lines(stderr):
    """The lines kerasbert itself printed (TensorFlow's start-up log lines,
    which carry a timestamp or a bracketed source, left out)."""
    return [line for line in stderr.splitlines() if line.startswith("kerasbert")]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A vocabulary, a tiny saved backbone, a CSV task and its features made
    with --special-tokens-in-strings --truncate-at-nul by the console script."""
    import keras

    from kerasbert.models import BertBackbone

    root = tmp_path_factory.mktemp("features")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [
        "##" + c for c in "abcdefghijklmnopqrstuvwxyz"] + list("abcdefghijklmnopqrstuvwxyz")
    tokens = list(dict.fromkeys(tokens))
    vocab = write_vocabulary(str(root / "vocab.txt"), tokens)
    rows = [["good movie [MASK]", "pos"], ["bad film\x00 not shown", "neg"],
            ["great plot", "pos"], ["the plot was bad [SEP] not good", "neg"]] * 2
    train = write_csv(root / "train.csv", ["text", "label"], rows)
    backbone = BertBackbone(vocabulary_size=len(tokens), num_layers=1, num_heads=2,
                            hidden_dim=16, intermediate_dim=32, max_sequence_length=32)
    backbone.save(str(root / "backbone.keras"))
    keras.backend.clear_session()
    features = root / "features"
    code, out, err = _cli("create-finetuning-data", "--task", f"csv:{train}", "--vocab", vocab,
                          "--max-seq-length", "16", "--output-dir", str(features),
                          "--special-tokens-in-strings", "--truncate-at-nul")
    assert code == 0, err[-2000:]
    return {"root": root, "vocab": vocab, "train": train, "features": features,
            "backbone": str(root / "backbone.keras")}


def test_features_record_the_tokenizer_settings(made):
    meta = json.loads((made["features"] / "metadata.json").read_text())
    settings = meta["tokenizer_settings"]
    assert settings["special_tokens_in_strings"] is True
    assert settings["truncate_at_nul"] is True
    assert settings["max_chars_per_word"] == 100 and settings["lower_case"] is True
    assert settings["type"] == "wordpiece"
    # They are the settings of the tokenizer the flags name, and reading with
    # it passes the check.
    same = load_tokenizer(made["vocab"], special_tokens_in_strings=True, truncate_at_nul=True)
    assert settings == json.loads(json.dumps(ids_settings(same)))
    features = read_features(str(made["features"]), "train", vocab_file=made["vocab"],
                             tokenizer_settings=ids_settings(same))
    # [MASK] became its id (the switch was on); the text after the NUL is gone.
    assert same.mask_id in features.x["input_word_ids"][0]
    cut = same.tokenize_ids("bad film").numpy().tolist()
    assert features.x["input_word_ids"][1][1:len(cut) + 2].tolist() == cut + [same.sep_id]


def _finetune(made, out, *flags, run=_cli):
    return run("finetune", "--features", str(made["features"]), "--vocab", made["vocab"],
                "--backbone", made["backbone"], "--output-dir", str(out), "--epochs", "1",
                "--batch-size", "4", "--learning-rate", "1e-3", "--no-progress", *flags)


# The first case through the console script, the others in process.
@pytest.mark.parametrize("run, flags, setting, recorded, given, flag", [
    (_cli, (), "special_tokens_in_strings", True, False, "--[no-]special-tokens-in-strings"),
    (_in_process, ("--special-tokens-in-strings",), "truncate_at_nul", True, False,
     "--[no-]truncate-at-nul"),
    (_in_process, ("--special-tokens-in-strings", "--truncate-at-nul", "--no-lower-case"),
     "lower_case", True, False, "--[no-]lower-case"),
], ids=["special_tokens", "truncate_at_nul", "lower_case"])
def test_finetune_refuses_features_of_other_settings(made, tmp_path, run, flags, setting,
                                                      recorded, given, flag):
    out = tmp_path / "run"
    code, stdout, stderr = _finetune(made, out, *flags, run=run)
    assert code == 2, stderr[-2000:]
    lines = _error_lines(stderr)
    assert len(lines) == 1, stderr[-2000:]
    assert lines[0].startswith("kerasbert finetune: error: ") and str(made["features"]) in lines[0]
    assert f"whose {setting} is {recorded!r}, but this run's is {given!r}" in lines[0]
    assert flag in lines[0]
    assert not (out / "model.keras").exists()


def test_finetune_takes_features_of_the_same_settings_in_process(made, tmp_path):
    """`kerasbert finetune --features` in this process (`main`), with the
    settings the features were made with: it trains, and the run keeps them."""
    from kerasbert.cli import main

    out = tmp_path / "run"
    assert main(["finetune", "--features", str(made["features"]), "--vocab", made["vocab"],
                 "--backbone", made["backbone"], "--output-dir", str(out), "--epochs", "1",
                 "--batch-size", "4", "--learning-rate", "1e-3", "--no-progress",
                 "--special-tokens-in-strings", "--truncate-at-nul"]) == 0
    tokenizer = json.loads((out / "config.json").read_text())["tokenizer"]
    assert tokenizer["special_tokens_in_strings"] is True and tokenizer["truncate_at_nul"] is True
    assert load_tokenizer(str(out)).truncate_at_nul is True


# 16 s: the same fine-tuning as a fresh console-script process; the default suite runs it in
# process, and the refusals through the console script.
@slow_covered_by(
    "tests/text/test_features_tokenizer_settings.py::test_finetune_takes_features_of_the_same_settings_in_process",
    "tests/text/test_features_tokenizer_settings.py::test_finetune_refuses_features_of_other_settings")
def test_finetune_takes_features_of_the_same_settings(made, tmp_path):
    out = tmp_path / "run"
    code, stdout, stderr = _finetune(made, out, "--special-tokens-in-strings",
                                     "--truncate-at-nul")
    assert code == 0, stderr[-3000:]
    tokenizer = json.loads((out / "config.json").read_text())["tokenizer"]
    assert tokenizer["special_tokens_in_strings"] is True and tokenizer["truncate_at_nul"] is True
    # The run's tokenizer comes back with the setting (an export uses it).
    assert load_tokenizer(str(out)).truncate_at_nul is True


def test_the_longest_word_is_checked_too(made, tmp_path):
    """A Hugging Face directory whose tokenizer_config.json says 200
    characters per word makes features that a plain vocab.txt's tokenizer
    (100) may not read, though the vocabulary file is the same."""
    directory = tmp_path / "hf"
    directory.mkdir()
    (directory / "vocab.txt").write_bytes(open(made["vocab"], "rb").read())
    (directory / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "max_input_chars_per_word": 200}))
    out = tmp_path / "features"
    code, _, err = _in_process("create-finetuning-data", "--task", f"csv:{made['train']}",
                               "--vocab", str(directory), "--max-seq-length", "16",
                               "--output-dir", str(out))
    assert code == 0, err[-2000:]
    plain = load_tokenizer(made["vocab"])
    with pytest.raises(TaskDataError, match="whose max_chars_per_word is 200, but this run's "
                                            "is 100"):
        read_features(str(out), "train", vocab_file=made["vocab"],
                      tokenizer_settings=ids_settings(plain))
    source = load_tokenizer(str(directory))
    assert read_features(str(out), "train", vocab_file=made["vocab"],
                         tokenizer_settings=ids_settings(source)).task_type == "classification"
