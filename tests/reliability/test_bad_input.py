"""Impossible or undecodable input is refused up front (issue 18, items 3-4):
exit 2, one `error:` line naming the file / key and the value, and nothing
written (or, over earlier output, nothing lost). Most cases call
`kerasbert.cli.main` in-process; a few run the installed console script in a
fresh process (`console.kerasbert`), as a user does."""

import json
import os

import pytest

from kerasbert.cli import main
from kerasbert.testing.files import write_vocabulary
from reliability.console import kerasbert
from reliability.console import one_line_error
from slow_marks import slow_covered_by

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = "the a cat dog sat on mat good bad movie great is was . , ! ?".split()
LATIN1 = "Good movie.\nGreat one!\n".encode() + "Caf\u00e9 au lait.\n".encode("latin-1")
BAD_OFFSET = len(b"Good movie.\nGreat one!\nCaf")  # the 0xe9 of "Café" in Latin-1


def write_vocab(directory):
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = SPECIALS + letters + ["##" + c for c in letters] + WORDS
    return write_vocabulary(directory, tokens)


def error_line(capsys, *fragments):
    """The one `error:` line of a failed in-process command; each fragment
    must appear in it."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


def listing(folder):
    """{relative path: bytes} of every file under `folder` (hidden included)."""
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = f.read()
    return found


# --- create-pretraining-data / vocab: corpora without text ------------------


EMPTY_CORPORA = {"empty": b"", "blank_lines": b"\n\n  \n\t\n\r\n", "bom_only": b"\xef\xbb\xbf\n \n"}


def create_args(corpus, vocab, out, *extra):
    return ["create-pretraining-data", "--input", str(corpus), "--vocab", vocab,
            "--output-dir", str(out), "--dupe-factor", "1", "--no-progress", *extra]


@pytest.mark.parametrize("content", EMPTY_CORPORA.values(), ids=EMPTY_CORPORA.keys())
def test_create_pretraining_data_refuses_a_corpus_without_documents(tmp_path, capsys, content):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    out = tmp_path / "data"
    assert main(create_args(corpus, write_vocab(str(tmp_path)), out)) == 2
    error_line(capsys, "no documents in --input", "corpus.txt")
    assert not out.exists()


def test_documents_without_tokens_write_nothing_and_keep_earlier_data(tmp_path, capsys):
    """Documents whose sentences tokenize to nothing (control characters)
    give 0 instances: exit 2, and the data already in --output-dir stays."""
    vocab = write_vocab(str(tmp_path))
    good = tmp_path / "good.txt"
    good.write_text("the cat sat .\nthe dog is good .\n\nthe movie was great !\n", encoding="utf-8")
    out = tmp_path / "data"
    assert main(create_args(good, vocab, out)) == 0
    before = listing(out)
    assert "metadata.json" in before
    capsys.readouterr()
    control = tmp_path / "control.txt"
    control.write_text("\x07\x07\n\n\x01\x02\n", encoding="utf-8")
    assert main(create_args(control, vocab, out, "--overwrite")) == 2
    error_line(capsys, "no instances from the 2 document(s)", "control.txt")
    assert listing(out) == before  # no temporary left, nothing replaced
    fresh = tmp_path / "fresh"
    assert main(create_args(control, vocab, fresh)) == 2
    assert not fresh.exists()


@pytest.mark.parametrize("vocab_type", ["wordpiece", "bpe", "sentencepiece"])
@pytest.mark.parametrize("content", EMPTY_CORPORA.values(), ids=EMPTY_CORPORA.keys())
def test_vocab_refuses_a_corpus_without_text(tmp_path, capsys, vocab_type, content):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    out = tmp_path / "vocab_out"
    assert main(["vocab", "--type", vocab_type, "--input", str(corpus), "--vocab-size", "300",
                 "--output", str(out)]) == 2
    error_line(capsys, "no text in --input", "corpus.txt")
    assert os.listdir(tmp_path) == ["corpus.txt"]


# --- not UTF-8 ---------------------------------------------------------------


@pytest.mark.parametrize("vocab_type", ["wordpiece", "bpe", "sentencepiece"])
def test_vocab_refuses_a_non_utf8_corpus_naming_file_and_byte_offset(tmp_path, capsys,
                                                                      vocab_type):
    good = tmp_path / "good.txt"
    good.write_text("the cat sat on the mat .\n" * 20, encoding="utf-8")
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes(LATIN1)
    out = tmp_path / "vocab_out"
    assert main(["vocab", "--type", vocab_type, "--input", str(good), str(corpus),
                 "--vocab-size", "300", "--output", str(out)]) == 2
    error_line(capsys, f"{corpus}: not UTF-8 text", "byte 0xe9",
               f"byte offset {BAD_OFFSET} (line 3)")
    assert sorted(os.listdir(tmp_path)) == ["good.txt", "latin1.txt"]


def test_create_pretraining_data_refuses_a_binary_corpus_in_a_fresh_process(tmp_path):
    """A binary file (not UTF-8) given as the corpus, as a user runs it: the
    installed script exits 2 with the file and the first bad byte's offset,
    and writes nothing."""
    vocab = write_vocab(str(tmp_path))
    corpus = tmp_path / "corpus.bin"
    corpus.write_bytes(b"the cat sat .\n" * 3 + bytes(range(256)))
    work = tmp_path / "elsewhere"
    work.mkdir()
    result = kerasbert(*create_args(corpus, vocab, "data"), cwd=work)
    one_line_error(result, "kerasbert create-pretraining-data: error:", str(corpus),
                   "not UTF-8", f"byte offset {14 * 3 + 0x80}")
    assert os.listdir(work) == []


# --- fine-tuning task files and features --------------------------------------


TASK_FILES = {
    "csv": ("text,label\nGood movie,pos\n", "Caf\u00e9,neg\n"),
    "tsv": ("text\tlabel\nGood movie\tpos\n", "Caf\u00e9\tneg\n"),
    "jsonl": ('{"text": "Good movie", "label": "pos"}\n', '{"text": "Caf\u00e9", "label": "neg"}\n'),
    "conll": ("Paris B-LOC\nis O\n\n", "Caf\u00e9 O\n"),
    "squad_json": ('{"data": [{"paragraphs": [{"context": "x", "qas": [', "\u00e9]}]}]}"),
}


@pytest.mark.parametrize("kind", TASK_FILES)
def test_create_finetuning_data_refuses_non_utf8_task_files(tmp_path, capsys, kind):
    good, latin = TASK_FILES[kind]
    path = tmp_path / f"task.{kind}"
    path.write_bytes(good.encode() + latin.encode("latin-1"))
    offset = len(good.encode()) + latin.index("\u00e9")
    out = tmp_path / "features"
    assert main(["create-finetuning-data", "--task", f"{kind}:{path}", "--vocab",
                 write_vocab(str(tmp_path)), "--output-dir", str(out)]) == 2
    error_line(capsys, f"{path}: not UTF-8 text", f"byte offset {offset}")
    assert not out.exists()


def test_finetune_refuses_a_non_utf8_csv(tmp_path, capsys):
    path = tmp_path / "reviews.csv"
    path.write_bytes(b"text,label\n" + "Caf\u00e9 ok,pos\n".encode("cp1252"))
    out = tmp_path / "run"
    assert main(["finetune", "--task", f"csv:{path}", "--vocab", write_vocab(str(tmp_path)),
                 "--preset", "bert_tiny", "--output-dir", str(out)]) == 2
    error_line(capsys, str(path), "byte offset 14 (line 2)")
    assert not out.exists()


@pytest.fixture()
def features(tmp_path, capsys):
    """(vocab, features folder with train and validation splits, path of
    one shard of each)."""
    vocab = write_vocab(str(tmp_path))
    rows = [f"{'good' if i % 2 else 'bad'} movie {'!' * (i % 3)},{i % 2}\n" for i in range(120)]
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(rows), encoding="utf-8")
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\n" + "".join(rows[:30]), encoding="utf-8")
    out = tmp_path / "features"
    assert main(["create-finetuning-data", "--task", f"csv:{train}", "--splits",
                 f"train,validation={dev}", "--vocab", vocab, "--max-seq-length", "8",
                 "--output-dir", str(out)]) == 0
    capsys.readouterr()
    shards = {name.split("-")[0]: out / name for name in os.listdir(out)
              if name.endswith(".tfrecord")}
    return vocab, out, shards


def finetune_features(vocab, features, out):
    return main(["finetune", "--features", str(features), "--vocab", vocab, "--preset",
                 "bert_tiny", "--epochs", "1", "--output-dir", str(out), "--no-progress"])


@pytest.mark.parametrize("damage", ["truncated", "flipped_byte"])
def test_finetune_names_file_and_record_of_corrupt_features(tmp_path, capsys, features, damage):
    vocab, folder, shards = features
    data = shards["train"].read_bytes()
    if damage == "truncated":  # cut inside the last record's 12-byte header
        shards["train"].write_bytes(data[:-(len(data) // 120) + 6])
        fragments = ("record 119", "truncated")
    else:
        shards["train"].write_bytes(data[:200] + bytes([data[200] ^ 0x55]) + data[201:])
        fragments = ("record ", "corrupted")
    out = tmp_path / "run"
    assert finetune_features(vocab, folder, out) == 2
    error_line(capsys, f"{shards['train']} record", *fragments)
    assert not out.exists()


def test_finetune_refuses_a_corrupt_validation_split(tmp_path, capsys, features):
    """A listed validation split that cannot be read is an error naming the
    file, not a silent run without validation."""
    vocab, folder, shards = features
    data = shards["validation"].read_bytes()
    shards["validation"].write_bytes(data[: len(data) // 2])
    out = tmp_path / "run"
    assert finetune_features(vocab, folder, out) == 2
    error_line(capsys, f"{shards['validation']} record")
    assert not out.exists()


def test_finetune_refuses_token_ids_outside_the_vocabulary(tmp_path, capsys, features):
    """A well-formed record whose ids do not fit the vocabulary (a file
    edited by hand, or made for another model) is refused before training:
    on a GPU the lookup would quietly return zeros."""
    import tensorflow as tf

    vocab, folder, shards = features
    meta = json.loads((folder / "metadata.json").read_text())
    too_big = meta["vocab_size"] + 3  # still a one-byte varint: the file keeps its size
    records = list(tf.data.TFRecordDataset(str(shards["train"])).as_numpy_iterator())
    example = tf.train.Example.FromString(records[7])
    example.features.feature["input_ids"].int64_list.value[1] = too_big
    records[7] = example.SerializeToString()
    with tf.io.TFRecordWriter(str(shards["train"])) as writer:
        for record in records:
            writer.write(record)
    out = tmp_path / "run"
    assert finetune_features(vocab, folder, out) == 2
    error_line(capsys, "split 'train' record 7", f"token id {too_big} is outside the vocabulary",
               f"vocab_size {meta['vocab_size']}")
    assert not out.exists()


def test_finetune_refuses_features_of_another_length(tmp_path, capsys, features):
    """finetune --features with a --max-seq-length other than the features'
    is refused, not ignored; nothing is written."""
    vocab, folder, _ = features
    out = tmp_path / "run"
    assert main(["finetune", "--features", str(folder), "--max-seq-length", "16", "--vocab",
                 vocab, "--preset", "bert_tiny", "--output-dir", str(out)]) == 2
    error_line(capsys, "--max-seq-length 16 differs from the length of the --features",
               "(8 tokens)")
    assert not out.exists()


def test_evaluate_of_a_run_without_validation_data_names_split(tmp_path, capsys):
    """evaluate on a run fine-tuned without validation data asks for
    evaluate's own --split (not finetune's --validation), writing nothing."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "serving"))
    from serving_fixtures import make_finetuned_dir

    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification", sequence_length=16,
                            task="csv:train.csv")
    with open(os.path.join(ft, "config.json")) as f:
        config = json.load(f)
    config["validation_source"] = None  # as fine-tuned without --validation
    with open(os.path.join(ft, "config.json"), "w") as f:
        json.dump(config, f)
    before = listing(ft)
    assert main(["evaluate", "--model", ft]) == 2
    line = error_line(capsys, "fine-tuned without validation data", "--split")
    assert "--validation" not in line and listing(ft) == before


# --- architectures that cannot be built ---------------------------------------


BAD_OVERRIDES = [
    ("num_layers=-1", "num_layers=-1: must be an integer >= 1"),
    ("num_layers=0", "num_layers=0: must be an integer >= 1"),
    ("num_heads=0", "num_heads=0: must be an integer >= 1"),
    ("num_heads=3", "hidden_dim=128 is not divisible by num_heads=3"),
    ("hidden_dim=101", "hidden_dim=101 is not divisible by num_heads=2"),
    ("intermediate_dim=0", "intermediate_dim=0: must be an integer >= 1"),
    ("vocabulary_size=-5", "vocabulary_size=-5: must be an integer >= 1"),
    ("max_sequence_length=0", "max_sequence_length=0: must be an integer >= 1"),
    ("dropout=1.0", "dropout=1.0: must be a number in [0, 1)"),
    ("dropout=-0.1", "dropout=-0.1: must be a number in [0, 1)"),
    ("num_layers=True", "num_layers=True: must be an integer"),
    ("num_layers=2.5", "num_layers=2.5 must be an integer"),
    ("layer_norm_epsilon=0", "layer_norm_epsilon=0: must be a finite number > 0"),
    ("embedding_dim=-3", "embedding_dim=-3: must be an integer >= 1"),
    ("num_hidden_layers=2", "Unknown override(s) num_hidden_layers"),
]


@pytest.mark.parametrize("override, message", BAD_OVERRIDES, ids=[o for o, _ in BAD_OVERRIDES])
def test_info_refuses_architectures_that_cannot_be_built(capsys, override, message):
    assert main(["info", "--preset", "bert_tiny", "--set", override]) == 2
    error_line(capsys, "kerasbert info: error:", message)


@pytest.mark.parametrize("field, value, message", [
    ("num_attention_heads", 0, "num_attention_heads=0: must be an integer >= 1"),
    ("num_attention_heads", 3, "hidden_size=8 is not divisible by num_attention_heads=3"),
    ("num_hidden_layers", -1, "num_hidden_layers=-1: must be an integer >= 1"),
    ("hidden_dropout_prob", 1.5, "hidden_dropout_prob=1.5: must be a number in [0, 1)"),
])
def test_finetune_refuses_a_bert_config_that_cannot_be_built(tmp_path, capsys, field, value,
                                                             message):
    """finetune has no --set: its architecture comes from a preset or from
    --bert-config (with --init-checkpoint), checked before anything runs."""
    import json

    config = {"vocab_size": 60, "hidden_size": 8, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 16, field: value}
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["finetune", "--task", "csv:none.csv", "--vocab", write_vocab(str(tmp_path)),
                 "--preset", "bert_tiny", "--init-checkpoint", str(tmp_path / "bert_model.ckpt"),
                 "--bert-config", str(path), "--output-dir", str(out)]) == 2
    error_line(capsys, "--bert-config BERT config", "bert_config.json", message)
    assert not out.exists()


# 8-12 s: a fresh process for one `--set` refusal; the default suite checks
# every bad value in process and `info`'s exit 2 through the console script
# on an untrusted checkpoint.
@slow_covered_by("tests/reliability/test_bad_input.py::test_info_refuses_architectures_that_cannot_be_built",
                 "tests/reliability/test_untrusted_checkpoints.py::"
                 "test_the_console_script_exits_2_with_one_line_and_writes_nothing")
def test_info_refuses_zero_layers_in_a_fresh_process(tmp_path):
    result = kerasbert("info", "--preset", "albert_base", "--set", "num_layers=0", cwd=tmp_path)
    line = one_line_error(result, "kerasbert info: error:", "num_layers=0", "integer >= 1")
    assert result.returncode == 2 and line.startswith("kerasbert info: error:")


# --- learning rates -------------------------------------------------------------


BAD_RATES = ["nan", "inf", "-inf", "-1", "0"]


@pytest.mark.parametrize("rate", BAD_RATES)
def test_finetune_refuses_a_learning_rate_that_cannot_train(tmp_path, capsys, rate):
    out = tmp_path / "run"
    assert main(["finetune", "--task", "csv:none.csv", "--vocab", "none.txt", "--preset",
                 "bert_tiny", "--output-dir", str(out), f"--learning-rate={rate}"]) == 2
    error_line(capsys, f"--learning-rate {float(rate)}: must be a finite number > 0")
    assert not out.exists()


@pytest.mark.parametrize("rate", BAD_RATES)
def test_distill_refuses_a_learning_rate_that_cannot_train(tmp_path, capsys, rate):
    out = tmp_path / "student"
    assert main(["distill", "--teacher", "none.keras", "--preset", "distilbert_base",
                 "--vocab", "none.txt", "--data", "none", "--output-dir", str(out),
                 "--steps", "5", f"--learning-rate={rate}"]) == 2
    error_line(capsys, f"--learning-rate {float(rate)}: must be a finite number > 0")
    assert not out.exists()


@pytest.mark.parametrize("flag, value", [("--temperature", "nan"), ("--end-learning-rate", "inf"),
                                         ("--weight-decay", "nan")])
def test_distill_refuses_other_non_finite_hyperparameters(tmp_path, capsys, flag, value):
    assert main(["distill", "--teacher", "none.keras", "--preset", "distilbert_base",
                 "--vocab", "none.txt", "--data", "none", "--output-dir", str(tmp_path / "s"),
                 "--steps", "5", f"{flag}={value}"]) == 2
    error_line(capsys, f"{flag} {float(value)}: must be a finite number")


# Issue 51: a length or count of 0 used to read as "not given" (finetune
# trained at 128 and wrote "sequence_length": 0). Every such flag is refused
# by the parser, before anything loads.
@pytest.mark.parametrize("args", [
    ["finetune", "--task", "csv:t.csv", "--output-dir", "ft", "--max-seq-length", "0"],
    ["export", "--model-dir", "ft", "--output", "out", "--max-seq-length", "0"],
    ["embed", "--model", "m", "--input", "in.txt", "--output", "v.npy", "--batch-size", "-1"],
    ["create-finetuning-data", "--task", "csv:t.csv", "--vocab", "v.txt", "--output-dir", "d",
     "--max-seq-length", "0"],
    ["pretrain", "--preset", "bert_tiny", "--steps", "0", "--output-dir", "run"],
    ["generate", "--model", "m", "--prompt", "x", "--max-new-tokens", "0"],
])
def test_non_positive_lengths_and_counts_are_refused(tmp_path, capsys, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:  # argparse's exit, in this process
        main(args)
    assert exited.value.code == 2
    flag = next(arg for arg in args if arg.startswith("--") and args[args.index(arg) + 1]
                in ("0", "-1"))
    error_line(capsys, f"argument {flag}: must be at least 1")
    assert os.listdir(tmp_path) == []


def test_a_zero_length_is_one_line_from_the_console(tmp_path):
    result = kerasbert("finetune", "--task", "csv:t.csv", "--output-dir", "ft",
                       "--max-seq-length", "0", cwd=tmp_path)
    one_line_error(result, "--max-seq-length: must be at least 1, got 0")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("extra,fragment", [
    (["--vocab", "v.txt"], "--vocab v.txt: elmo_small reads characters (ELMo)"),
    (["--special-tokens-in-strings"], "--special-tokens-in-strings: elmo_small reads characters"),
])
def test_elmo_refuses_tokenizer_files_and_switches(tmp_path, capsys, extra, fragment):
    """Issue 51: an ELMo run ignored --vocab's files (an override error
    named vocabulary_size) and the token switches (silently)."""
    (tmp_path / "t.csv").write_text("text,label\ngood film,pos\nbad film,neg\n")
    write_vocab(tmp_path / "v.txt")
    before = listing(tmp_path)
    args = ["finetune", "--task", f"csv:{tmp_path / 't.csv'}", "--preset", "elmo_small",
            "--output-dir", str(tmp_path / "o"), "--epochs", "1"]
    args = [a if a != "v.txt" else str(tmp_path / "v.txt") for a in args + extra]
    assert main(args) == 2
    error_line(capsys, fragment.replace("v.txt", str(tmp_path / "v.txt")))
    assert listing(tmp_path) == before
