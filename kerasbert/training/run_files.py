"""What a training run writes beside its checkpoints: the metric history,
TensorBoard scalars, the training-curve plot and atomically saved models.

    RUN/history.jsonl       one JSON object per logged step
    RUN/logs/train/         TensorBoard event files
    RUN/training_curve.png  loss and masked-LM accuracy against steps
"""

import json
import os

from kerasbert.plotting import new_figure
from kerasbert.plotting import save_figure_atomically

HISTORY_FILE = "history.jsonl"
CURVE_FILE = "training_curve.png"


def read_history(run_dir):
    path = os.path.join(run_dir, HISTORY_FILE)
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line cut by a kill: everything after it is lost anyway
    return rows


class History:
    """Appends logged rows to RUN/history.jsonl; on resume, rows after the
    restored step are dropped (they will be logged again)."""

    def __init__(self, run_dir, resume_step=0, enabled=True):
        self.path = os.path.join(run_dir, HISTORY_FILE)
        self.enabled = enabled
        if not enabled:
            return
        rows = [r for r in read_history(run_dir) if r["step"] <= resume_step]
        from kerasbert.io_utils import atomic_write_text

        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in rows))

    def append(self, row):
        if self.enabled:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()


class TensorBoardLog:
    """Scalars under RUN/logs/train (chief only)."""

    def __init__(self, run_dir, enabled=True):
        self.writer = None
        if enabled:
            import tensorflow as tf

            self.writer = tf.summary.create_file_writer(os.path.join(run_dir, "logs", "train"))

    def write(self, step, scalars):
        if self.writer is None:
            return
        import tensorflow as tf

        with self.writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
        self.writer.flush()

    def close(self):
        if self.writer is not None:
            self.writer.close()


def plot_training_curve(run_dir):
    """RUN/training_curve.png from history.jsonl: loss (left) and masked-LM
    accuracy (right) against the step. Returns the path or None."""
    rows = [r for r in read_history(run_dir) if "loss" in r]  # not the resume notes
    if not rows:
        return None
    steps = [r["step"] for r in rows]
    fig = new_figure(figsize=(10, 3.6))
    ax_loss, ax_acc = fig.subplots(1, 2)
    ax_loss.plot(steps, [r["loss"] for r in rows], label="total")
    # Each pretrainer logs its own terms (masked LM; the causal LM's lm_*).
    for key, label in (("mlm_loss", "masked LM"), ("lm_loss", "next token")):
        if key in rows[0]:
            ax_loss.plot(steps, [r[key] for r in rows], label=label)
    if "sentence_loss" in rows[0]:
        ax_loss.plot(steps, [r["sentence_loss"] for r in rows], label="sentence")
    ax_loss.set(xlabel="step", ylabel="loss", title="Training loss")
    ax_loss.legend()
    for key, label in (("mlm_accuracy", "masked LM"), ("lm_accuracy", "next token")):
        if key in rows[0]:
            ax_acc.plot(steps, [r[key] for r in rows], label=label)
    if "sentence_accuracy" in rows[0]:
        ax_acc.plot(steps, [r["sentence_accuracy"] for r in rows], label="sentence")
    ax_acc.set(xlabel="step", ylabel="accuracy", title="Accuracy", ylim=(0, 1))
    ax_acc.legend()
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.path.join(run_dir, CURVE_FILE)
    save_figure_atomically(fig, path)
    return path


def save_keras_atomically(model, path):
    """`model.save(path)` through a temporary name in the same folder."""
    from kerasbert.io_utils import atomic_file

    with atomic_file(path, suffix=".keras") as tmp:
        model.save(tmp)
