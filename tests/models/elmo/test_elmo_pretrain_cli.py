"""`kerasbert pretrain --preset elmo_small` on `create-pretraining-data`
output (token-id TFRecords): each token's characters come from a [V, C]
table of the vocabulary's strings, the forward and backward LMs predict
the next and previous token; the loss falls, the run resumes from its
checkpoint, and `finetune --backbone RUN --freeze-backbone` takes its
encoder. Also the sampled softmax's log-uniform proposal."""

import json

import numpy as np

from kerasbert.tasks.elmo_pretrainer import draw_candidates
from kerasbert.tasks.elmo_pretrainer import log_uniform_log_probability
from kerasbert.tasks.elmo_pretrainer import token_character_table
from kerasbert.text.elmo_characters import word_char_ids
from kerasbert.testing.files import write_csv
from reliability.console import kerasbert as console
from reliability.console import ok
from reliability.console import one_line_error
from slow_marks import slow_covered_by

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "log", "a", "saw", "."]
SENTENCES = ["the cat sat on the mat .", "the dog sat on the log .", "a cat saw a dog .",
             "the dog saw the cat on the mat ."]
TINY = ("--set", "lstm_dim=16", "--set", "projection_dim=8", "--set", "num_layers=1",
        "--set", "filters=[[1, 8], [2, 8], [3, 8]]", "--set", "max_characters_per_token=12")


def test_log_uniform_draws_follow_the_proposal():
    import keras

    draws = np.asarray(draw_candidates(20000, 50, keras.random.SeedGenerator(1)))
    assert draws.min() >= 0 and draws.max() < 50
    expected = np.exp(np.asarray(log_uniform_log_probability(np.arange(50), 50)))
    assert abs(expected.sum() - 1.0) < 1e-5
    observed = np.bincount(draws, minlength=50) / draws.size
    np.testing.assert_allclose(observed[:5], expected[:5], atol=0.015)  # id 0: ~18%
    table = token_character_table(["[CLS]", "cat"], 12)
    np.testing.assert_array_equal(table[1], word_char_ids("cat", 12))


# 83 s: create-pretraining-data, pretrain, resume and finetune as fresh console-script
# processes; the default suite trains the ELMo pretrainer, checks the token-character table
# and the proposal, and fine-tunes a frozen ELMo in process.
@slow_covered_by("tests/models/elmo/test_elmo_pretrainer.py::test_full_softmax_loss_falls_and_round_trips",
                 "tests/models/elmo/test_elmo_pretrain_cli.py::test_log_uniform_draws_follow_the_proposal",
                 "tests/models/elmo/test_elmo_features.py::test_finetune_on_a_frozen_elmo_in_process",
                 "tests/models/elmo/test_elmo_backbone.py::test_a_saved_elmo_keras_file_needs_no_vocab")
def test_console_pretrain_elmo_on_token_records_resume_and_finetune(tmp_path):
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (tmp_path / "vocab.txt").write_text("\n".join(specials + WORDS) + "\n")
    documents = ["\n".join(SENTENCES[i % 4] for i in range(k, k + 3)) for k in range(8)]
    (tmp_path / "corpus.txt").write_text("\n\n".join(documents) + "\n")
    ok(console("create-pretraining-data", "--input", "corpus.txt", "--vocab", "vocab.txt",
               "--output-dir", "data", "--objective", "none", "--max-seq-length", 16,
               "--max-predictions-per-seq", 3,
               "--dupe-factor", 2, cwd=tmp_path))
    work = tmp_path / "elsewhere"
    work.mkdir()
    common = ("--preset", "elmo_small", *TINY, "--vocab", tmp_path / "vocab.txt", "--data",
              tmp_path / "data", "--output-dir", tmp_path / "run", "--batch-size", 8,
              "--learning-rate", "1e-2", "--warmup-steps", 0, "--log-every", 5,
              "--checkpoint-every", 20, "--no-progress", "--seed", 1)
    ok(console("pretrain", *common, "--steps", 20, cwd=work))
    ok(console("pretrain", *common, "--steps", 40, "--resume", cwd=work))
    rows = [json.loads(line) for line in
            (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in rows if "loss" in row]
    assert [row["step"] for row in rows if "loss" in row] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert losses[-1] < 0.8 * losses[0] and losses[-1] < min(losses[:4]), losses
    assert {"forward_loss", "backward_loss", "lm_accuracy"} <= set(rows[-1])
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["backbone_class"] == "ElmoBackbone" and config["backbone"]["lstm_dim"] == 16
    assert (tmp_path / "run" / "backbone.keras").is_file()

    # NSP data: refused in one line (ELMo reads single sequences).
    ok(console("create-pretraining-data", "--input", "corpus.txt", "--vocab", "vocab.txt",
               "--output-dir", "nsp", "--max-seq-length", 16, "--dupe-factor", 1,
               "--max-predictions-per-seq", 3,
               cwd=tmp_path))
    one_line_error(console("pretrain", "--preset", "elmo_small", *TINY, "--vocab",
                           tmp_path / "vocab.txt", "--data", tmp_path / "nsp", "--output-dir",
                           tmp_path / "run2", "--steps", 2, "--no-progress", cwd=work),
                   "--objective none")

    # The pretrained encoder, frozen, under a classifier.
    rows = [["the cat sat", "pos"], ["a dog saw a log", "neg"]] * 4
    train = write_csv(tmp_path / "train.csv", ["sentence", "label"], rows)
    ok(console("finetune", "--task", f"csv:{train}", "--backbone", tmp_path / "run",
               "--freeze-backbone", "--output-dir", tmp_path / "ft", "--epochs", 1,
               "--batch-size", 4, "--max-seq-length", 6, "--no-progress", cwd=work))
    ft = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert ft["input"]["type"] == "elmo_characters" and ft["backbone"]["freeze_bilm"] is True
