"""The epoch kept is the one with the best dev metric, also when later
epochs are worse; early stopping counts epochs since the best; and
`kerasbert finetune` records the choice."""

import json

import keras
import numpy as np
import pytest

from kerasbert.training.best_epoch import BestEpoch


class _Snapshots(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append([w.copy() for w in self.model.get_weights()])


def _fit(scores, patience=None, epochs=None):
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    y = x.sum(-1, keepdims=True)
    given = iter(scores)
    selection = BestEpoch(lambda: {"accuracy": next(given), "f1": 0.0}, "accuracy",
                          patience=patience)
    snapshots = _Snapshots()
    history = model.fit(x, y, epochs=epochs or len(scores), batch_size=8, verbose=0,
                        callbacks=[snapshots, selection]).history
    return model, selection, snapshots, history


def test_the_best_epoch_is_kept_when_the_last_is_worse():
    model, selection, snapshots, history = _fit([0.5, 0.9, 0.7, 0.6])
    assert selection.best_epoch == 2 and not selection.stopped_early
    for kept, at_two in zip(model.get_weights(), snapshots.weights[1]):
        np.testing.assert_array_equal(kept, at_two)
    assert not np.array_equal(model.get_weights()[0], snapshots.weights[-1][0])
    assert history["dev_accuracy"] == [0.5, 0.9, 0.7, 0.6]
    summary = selection.summary()
    assert summary["kept_epoch"] == 2 and summary["epochs_run"] == 4
    assert selection.best_metrics == {"accuracy": 0.9, "f1": 0.0}


def test_early_stopping_counts_epochs_since_the_best():
    _, selection, _, history = _fit([0.5, 0.9, 0.7, 0.6, 0.95, 0.99], patience=2)
    assert selection.stopped_early and len(history["loss"]) == 4 and selection.best_epoch == 2
    _, selection, _, history = _fit([0.5, 0.6, 0.7, 0.8], patience=1)
    assert not selection.stopped_early and selection.best_epoch == 4


def test_nan_scores_count_as_worst():
    _, selection, _, _ = _fit([float("nan"), 0.2, float("nan")])
    assert selection.best_epoch == 2
    assert selection.summary()["per_epoch"] == [None, 0.2, None]
    with pytest.raises(ValueError, match="patience must be >= 1"):
        BestEpoch(lambda: {}, "accuracy", patience=0)


def test_finetune_chooses_values_for_the_model_and_keeps_the_best_epoch(tmp_path, capsys):
    """No learning rate, batch size or epochs given: the tiny backbone's
    size row is used and printed; with --early-stopping the run records the
    kept epoch, whose score is the reported validation metric."""
    import pretrain_data as pd
    from test_finetune_cli import write_classification

    from kerasbert.cli import main
    from kerasbert.models import BertBackbone

    vocab, _ = pd.make_data(str(tmp_path))
    size = len(open(vocab, encoding="utf-8").read().splitlines())
    BertBackbone(vocabulary_size=size, num_layers=1, num_heads=2, hidden_dim=32,
                 intermediate_dim=64, max_sequence_length=64).save(str(tmp_path / "b.keras"))
    train = write_classification(tmp_path / "train.csv", 160, 0)
    valid = write_classification(tmp_path / "valid.csv", 60, 1)
    out = tmp_path / "ft"
    assert main(["finetune", "--backbone", str(tmp_path / "b.keras"), "--vocab", vocab,
                 "--task", f"csv:{train}", "--validation", str(valid), "--output-dir", str(out),
                 "--max-seq-length", "24", "--epochs", "3", "--early-stopping", "1",
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "fine-tuning values from this model's defaults (given on the command line: epochs)" \
        in printed
    assert "learning_rate        0.001" in printed and "Small-BERT" in printed
    config = json.loads((out / "config.json").read_text())
    assert config["recipe"]["values"]["learning_rate"] == 1e-3
    assert "epochs" not in config["recipe"]["from_recipe"]
    assert config["finetune"]["batch_size"] == 32
    metrics = json.loads((out / "metrics.json").read_text())
    selection = metrics["selection"]
    scores = selection["per_epoch"]
    assert selection["metric"] == "accuracy" and 1 <= len(scores) <= 3
    assert selection["kept_epoch"] == 1 + int(np.argmax(scores))
    assert metrics["validation"]["accuracy"] == pytest.approx(max(scores), abs=1e-9)
    assert metrics["history"]["dev_accuracy"] == scores


def test_a_recipe_is_printed_in_full_and_recorded(tmp_path, capsys):
    import pretrain_data as pd
    from test_finetune_cli import write_classification

    from kerasbert.cli import main
    from kerasbert.models import BertBackbone

    vocab, _ = pd.make_data(str(tmp_path))
    size = len(open(vocab, encoding="utf-8").read().splitlines())
    BertBackbone(vocabulary_size=size, num_layers=1, num_heads=2, hidden_dim=32,
                 intermediate_dim=64, max_sequence_length=64).save(str(tmp_path / "b.keras"))
    train = write_classification(tmp_path / "train.csv", 64, 0)
    out = tmp_path / "ft"
    assert main(["finetune", "--backbone", str(tmp_path / "b.keras"), "--vocab", vocab,
                 "--task", f"csv:{train}", "--output-dir", str(out), "--recipe", "swag",
                 "--epochs", "1", "--learning-rate", "1e-1", "--max-seq-length", "24",
                 "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "fine-tuning values from recipe swag" in captured.out
    assert "batch_size           16" in captured.out and "BERT, section 4.4" in captured.out
    assert "far outside" in captured.err  # 1e-1 for a BERT
    config = json.loads((out / "config.json").read_text())
    assert config["recipe"]["name"] == "swag" and config["finetune"]["batch_size"] == 16
    assert config["finetune"]["learning_rate"] == 0.1 and config["finetune"]["recipe"] == "swag"
    assert json.loads((out / "metrics.json").read_text())["selection"] is None  # no dev data
