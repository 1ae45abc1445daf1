"""The Reformer's life cycle as a user runs it, one installed `kerasbert`
command per fresh process, from a working directory that is neither the
data's nor the repository:

    corpus -> create-pretraining-data --vocab bytes --objective none
              --no-masking --max-seq-length 16384
      -> pretrain --preset reformer_tiny (16384-token sequences)
      -> generate (greedy, twice: the same text from two processes)
      -> export at 16384 positions -> generation in a process with only
         tensorflow and tensorflow_text
      -> finetune a classifier -> export at 16384 positions -> serve a
         12000-byte document
"""

import csv
import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

from reliability.console import kerasbert, ok, one_line_error, tree
from slow_marks import slow_covered_by

LENGTH = 16384
WORDS = ("river", "stone", "garden", "lamp", "violin", "harbour", "orchard", "ledger")


def _document(rng, sentences):
    return "\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) + "."
                     for _ in range(sentences))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("reformer")
    rng = random.Random(3)
    (root / "inputs").mkdir()
    with open(root / "inputs" / "corpus.txt", "w", encoding="utf-8") as f:
        # Two documents, one longer than a 16384-byte sequence.
        f.write(_document(rng, 400) + "\n\n" + _document(rng, 60) + "\n")
    work = root / "work"
    work.mkdir()
    return {"root": root, "work": work, "corpus": "../inputs/corpus.txt"}


@pytest.fixture(scope="module")
def pretrained(world):
    work = world["work"]
    ok(kerasbert("create-pretraining-data", "--input", world["corpus"], "--vocab", "bytes",
                 "--output-dir", "data", "--objective", "none", "--no-masking",
                 "--max-seq-length", LENGTH, "--dupe-factor", 1, cwd=work))
    meta = json.loads((work / "data" / "metadata.json").read_text())
    assert meta["max_seq_length"] == LENGTH and meta["tokenizer"] == "bytes"
    ok(kerasbert("pretrain", "--preset", "reformer_tiny", "--vocab", "bytes", "--data", "data",
                 "--output-dir", "run", "--steps", 2, "--batch-size", 1, "--no-progress",
                 "--seed", 1, cwd=work, timeout=600))
    return work / "run"


# 122 s (the module's 16384-byte data and 2-step reformer_tiny run, fresh processes):
# greedy `generate` equal across processes; the default suite trains, saves and
# generates with a Reformer causal LM in process and writes bytes data without masks.
@slow_covered_by("tests/models/reformer/test_reformer_tasks.py::test_causal_lm_trains_saves_and_generates",
                 "tests/data/test_writer.py::test_objective_none_and_no_masking",
                 "tests/text/test_byte_tokenizer.py::test_masked_data_with_bytes_is_refused",
                 "tests/training/test_gpt_pretrain.py::test_generate_regenerates_the_memorised_text")
def test_pretraining_on_16k_sequences_writes_a_generating_run(world, pretrained):
    config = json.loads((pretrained / "config.json").read_text())
    assert config["backbone_class"] == "ReformerBackbone"
    assert config["backbone"]["causal"] and config["pretrain"]["vocab"] == "bytes"
    assert (pretrained / "pretrainer.keras").is_file()
    elsewhere = world["root"]
    greedy = ok(kerasbert("generate", "--model", "work/run", "--prompt", "the river",
                          "--max-new-tokens", 8, cwd=elsewhere))
    again = ok(kerasbert("generate", "--model", "work/run", "--prompt", "the river",
                         "--max-new-tokens", 8, cwd=elsewhere))
    assert greedy == again  # greedy is deterministic across processes


GENERATE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401

function = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
out = function(prompt=tf.constant(["the river", "héllo 한국어"]), max_new_tokens=tf.constant(6))
assert not [m for m in sys.modules if m.split(".")[0] in ("kerasbert", "keras_hub", "keras_nlp")]
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()},
                 default=lambda b: b.decode("utf-8", "replace")))
"""


def _fresh(script, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                            cwd="/", env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# 22 s: a generation SavedModel at 16384 positions served with only TensorFlow; the
# default suite serves exports of fine-tuned models that way.
@slow_covered_by("tests/models/reformer/test_reformer_tasks.py::test_causal_lm_trains_saves_and_generates",
                 "tests/serving/test_gpt_export.py::test_generation_export_errors",
                 "tests/serving/test_export.py::test_question_answering_outputs")
def test_generation_export_at_16k_positions_serves_without_kerasbert(world, pretrained):
    work = world["work"]
    out = ok(kerasbert("export", "--model", "run", "--output", "serving/charlm",
                       "--max-seq-length", LENGTH, cwd=work))
    assert "exported generation model" in out
    version = work / "serving" / "charlm" / "1"
    assert (version / "assets.extra" / "tf_serving_warmup_requests").is_file()
    served = _fresh(GENERATE, version)
    assert len(served["completion"]) == 2
    assert all(0 <= n <= 6 for n in served["num_tokens"])


CLASSIFY = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401

function = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
texts = [sys.argv[2], "violin violin violin."]
out = function(text=tf.constant(texts))
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()},
                 default=lambda b: b.decode("utf-8")))
"""


# 55 s: a Reformer classifier fine-tuned on bytes, exported at 16384 positions, serving
# a 12000-byte document; the default suite builds the Reformer classifier in process
# and fine-tunes, exports and serves other backbones.
@slow_covered_by("tests/models/reformer/test_reformer_tasks.py::test_classifier_and_refusals",
                 "tests/training/test_finetune_cli.py::test_a_run_made_from_relative_paths_travels",
                 "tests/serving/test_export.py::test_regression_score_matches_keras")
def test_long_document_classifier_finetunes_exports_and_serves(world, pretrained):
    work, rng = world["work"], random.Random(5)
    rows = []
    for i in range(24):
        label = ("music", "water")[i % 2]
        words = ("violin", "lamp") if label == "music" else ("river", "harbour")
        body = " ".join(rng.choice(words + WORDS) for _ in range(rng.randint(100, 160)))
        rows.append({"sentence": body, "label": label})
    for name, part in (("train.csv", rows[:18]), ("validation.csv", rows[18:])):
        with open(world["root"] / "inputs" / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, ["sentence", "label"])
            writer.writeheader()
            writer.writerows(part)
    ok(kerasbert("finetune", "--task", "../inputs/train.csv", "--validation",
                 "../inputs/validation.csv", "--task-type", "classification",
                 "--backbone", "run/backbone.keras", "--vocab", "bytes", "--output-dir", "ft",
                 "--epochs", 1, "--batch-size", 4, "--max-seq-length", 1024, cwd=work,
                 timeout=600))
    # Exported for 16384-byte documents (the backbone's positions), longer
    # than it was fine-tuned on; a 12000-byte document is served whole.
    ok(kerasbert("export", "--model", "ft", "--output", "serving/topic", "--max-seq-length",
                 LENGTH, cwd=work))
    export = json.loads((work / "serving" / "topic" / "1" / "assets.extra" /
                         "export.json").read_text())
    assert export["seq_length"] == LENGTH
    long_document = (rows[0]["sentence"] + " ") * (12000 // len(rows[0]["sentence"]) + 1)
    served = _fresh(CLASSIFY, work / "serving" / "topic" / "1", long_document[:12000])
    assert set(served["label"]) <= {"music", "water"}
    for row in served["probabilities"]:
        assert sum(row) == pytest.approx(1.0, abs=1e-5)


# 38 s (fresh processes on the module's run): --max-new-tokens past 16384 positions and
# --to hf / tf-hub of a bytes Reformer refused; the default suite refuses impossible
# Reformer settings and conversions of other models in process.
@slow_covered_by(
    "tests/models/test_config_validation.py::test_impossible_reformer_overrides_are_refused_before_anything_is_built",
    "tests/serving/test_model_conversion.py::test_refusals",
    "tests/tasks/test_causal_lm.py::TestGenerate::test_same_seed_same_samples_and_bad_options")
def test_generation_length_and_conversion_refusals_are_one_line(world, pretrained):
    """--max-new-tokens is bounded by the model's positions; --to hf of this
    byte-level Reformer suggests no target that fails (none writes it: the
    TF Hub pair needs a vocabulary file, and says so in one line)."""
    elsewhere, before = world["root"], tree(pretrained)
    for tokens in (LENGTH, 10**12):
        one_line_error(kerasbert("generate", "--model", "work/run", "--prompt", "the river",
                                 "--max-new-tokens", tokens, cwd=elsewhere),
                       f"--max-new-tokens {tokens}", f"{LENGTH} positions",
                       f"at most {LENGTH - 1}")
    line = one_line_error(kerasbert("convert", "--model", "work/run", "--to", "hf",
                                    "--output", "hf", cwd=elsewhere),
                          "--to hf writes no ReformerBackbone",
                          "no other --to target writes a ReformerBackbone with a bytes tokenizer")
    assert "keras-hub" not in line and "tf1" not in line and "tf-hub" not in line
    one_line_error(kerasbert("convert", "--model", "work/run", "--to", "tf-hub", "--output",
                             "hub", cwd=elsewhere),
                   "reads a vocabulary file", "bytes tokenizer has none")
    assert not (elsewhere / "hf").exists() and not (elsewhere / "hub").exists()
    assert tree(pretrained) == before
