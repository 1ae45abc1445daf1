"""The figures a fine-tuning run writes beside its metrics: the training
curve (loss and the main metric per epoch) and, for classification, the
confusion matrix on the validation data."""

import numpy as np

from kerasbert.metrics import confusion_matrix
from kerasbert.plotting import new_figure
from kerasbert.plotting import save_figure_atomically


def plot_curves(history, path):
    """One panel per metric of `fit`'s history ({name: [value per epoch]}):
    the training values, and the validation ones beside them."""
    keys = [k for k in history if not k.startswith("val_") and k != "learning_rate"]
    fig = new_figure(figsize=(4.5 * len(keys), 3.4))
    axes = fig.subplots(1, len(keys), squeeze=False)
    for ax, key in zip(axes[0], keys):
        epochs = range(1, len(history[key]) + 1)
        # dev_<metric>: the task metric on the dev split (BestEpoch).
        ax.plot(epochs, history[key], marker="o",
                label="validation" if key.startswith("dev_") else "train")
        if f"val_{key}" in history:
            ax.plot(epochs, history[f"val_{key}"], marker="o", label="validation")
        ax.set(xlabel="epoch", title=key)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure_atomically(fig, path)


def plot_confusion_matrix(labels, predictions, label_names, path):
    """Gold `labels` and `predictions` (int [N]) counted per class pair,
    rows gold, columns predicted."""
    matrix = confusion_matrix(labels, predictions, len(label_names))
    size = max(3.5, 0.6 * len(label_names) + 2)
    fig = new_figure(figsize=(size, size))
    ax = fig.subplots()
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(label_names)), [str(n) for n in label_names], rotation=45)
    ax.set_yticks(range(len(label_names)), [str(n) for n in label_names])
    ax.set(xlabel="predicted", ylabel="gold", title="Confusion matrix (validation)")
    for (i, j), count in np.ndenumerate(matrix):
        ax.text(j, i, str(count), ha="center", va="center",
                color="white" if count > matrix.max() / 2 else "black")
    fig.tight_layout()
    save_figure_atomically(fig, path)
