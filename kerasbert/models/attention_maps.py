"""Attention probabilities of any backbone in the zoo, and a plot of them.

`attention_maps(backbone, inputs)` runs the backbone's own functional graph
(`encoder_graph`) and, at every attention block it applies, asks the block
for its attention's probabilities as well (`attention_probabilities`)
(`return_attention_scores=True`, which `MultiHeadSelfAttention` and
`BlockSparseSelfAttention` both support) with the very tensors the block
receives: its input and the graph's attention bias (padding, or causal for
GPT). Nothing of the encoder's math is repeated here, so every family built
on `encoder_graph` is covered: BERT, ALBERT (shared blocks give one map per
application), RoBERTa, DistilBERT, ELECTRA, GPT (causal) and BigBird (full
or block-sparse attention; the sparse path scatters its blocks to a dense
[T, T] map, O(T^2) memory, for inspection only).

Inference mode: dropout is off.
"""

import numpy as np

from kerasbert.models.backbone import Backbone
from kerasbert.plotting import new_figure

_INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def _find_backbone(model):
    """A backbone, or a task model that holds one as `.backbone`."""
    if isinstance(model, Backbone):
        return model
    inner = getattr(model, "backbone", None)
    if isinstance(inner, Backbone):
        return inner
    raise TypeError(
        f"attention_maps needs a kerasbert backbone (or a task model with a "
        f".backbone), got {type(model).__name__}."
    )


def _graph_inputs(inputs):
    """dict of array-likes -> dict of int32 tensors with the three names."""
    from keras import ops

    if not isinstance(inputs, dict) or "input_word_ids" not in inputs:
        raise ValueError(
            "inputs must be a dict with input_word_ids and input_mask "
            f"(int [B, T]; input_type_ids optional), got {type(inputs).__name__}"
            + (f" with keys {sorted(inputs)}" if isinstance(inputs, dict) else "")
            + "."
        )
    if "input_mask" not in inputs:
        raise ValueError("inputs has no input_mask (int [B, T], 1 for real tokens).")
    word_ids = np.asarray(inputs["input_word_ids"])
    if word_ids.ndim != 2:
        raise ValueError(
            f"input_word_ids must be [B, T], got shape {word_ids.shape}."
        )
    values = {
        "input_word_ids": word_ids,
        "input_mask": np.asarray(inputs["input_mask"]),
        "input_type_ids": np.asarray(
            inputs.get("input_type_ids", np.zeros_like(word_ids))
        ),
    }
    for name, value in values.items():
        if value.shape != word_ids.shape:
            raise ValueError(
                f"{name} has shape {value.shape}, input_word_ids {word_ids.shape}."
            )
    return {
        name: ops.convert_to_tensor(values[name].astype("int32"))
        for name in _INPUT_NAMES
    }


def attention_maps(backbone, inputs):
    """Attention probabilities of every block application, in call order.

    Args:
        backbone: any zoo backbone built on `encoder_graph` (BertBackbone,
            AlbertBackbone, RobertaBackbone, DistilBertBackbone,
            ElectraBackbone, GptBackbone, BigBirdBackbone,
            ModernBertBackbone), or a task model
            with a `.backbone` (e.g. a loaded `TextClassifier`).
        inputs: dict of int arrays [B, T]: `input_word_ids`, `input_mask`
            (1 real token, 0 padding) and, optionally, `input_type_ids`
            (zeros when absent).

    Returns:
        list of float32 numpy arrays [B, num_heads, T, T], one per block
        application (len == num_layers for BERT; ALBERT's shared blocks
        give one entry per application, i.e. num_layers *
        num_inner_repetitions). Entry [b, n, t, s] is how much query t
        attends key s: every row sums to 1 over the real keys, padded keys
        get 0, and under GPT's causal mask keys s > t get 0 too. (An input
        with no real token at all gets uniform rows, as the layers give.)

    Raises:
        TypeError: not a backbone nor a model with one.
        ValueError: missing or misshaped inputs; a backbone without
            attention blocks (their `attention_probabilities`).
    """
    backbone = _find_backbone(backbone)
    maps = []

    def operation_fn(operation):
        # Inference: ops that take `training` get False (dropout off).
        training = (
            {"training": False}
            if "training" in getattr(operation, "_call_context_args", {})
            else {}
        )
        if not hasattr(operation, "attention_probabilities"):
            return lambda *args, **kwargs: operation(*args, **{**kwargs, **training})

        def run_block(x, *args, **kwargs):
            bias = kwargs.get("attention_bias", args[0] if args else None)
            probs = operation.attention_probabilities(x, bias)
            maps.append(np.asarray(probs, dtype="float32"))
            return operation(x, *args, **{**kwargs, **training})

        return run_block

    # Keras 3.15 private API (Keras is pinned in constraints.txt):
    # `Function._run_through_graph` executes a functional model node by node
    # and calls `operation_fn(op)(*args, **kwargs)` at each node, which lets
    # us observe every block application with its real inputs. The dict is
    # flattened like the model's own input dict (sorted keys).
    if not hasattr(backbone, "_run_through_graph"):  # pragma: no cover
        import keras

        raise RuntimeError(
            f"attention_maps relies on Keras 3.15's Functional._run_through_graph, "
            f"which Keras {keras.__version__} lacks; install the pinned versions "
            "(pip install -c constraints.txt)."
        )
    backbone._run_through_graph(
        _graph_inputs(inputs), operation_fn=operation_fn
    )
    if not maps:
        raise ValueError(
            f"{type(backbone).__name__} applies no attention block "
            "(`attention_probabilities`); "
            "attention_maps works on backbones built with encoder_graph."
        )
    return maps


def plot_attention(tokens, probabilities, ax=None, title=None):
    """Heat map of attention probabilities, queries down, keys across.

    Args:
        tokens: list of T' token strings; the map is cut to its first T'
            rows and columns (the real tokens of a padded input).
        probabilities: float array [T, T] (one head) or [N, T, T] (one
            panel per head, side by side), T >= T'. E.g.
            `attention_maps(backbone, inputs)[layer][0]` for all heads of
            the first example, or `[layer][0, head]` for one.
        ax: a matplotlib Axes to draw a [T, T] map on, or None for a new
            figure (no pyplot state: show it with `display(fig)`).
        title: str or None. With several heads each panel gets
            "<title> head n".

    Returns:
        the matplotlib `Figure`.
    """
    probs = np.asarray(probabilities, dtype="float32")
    if probs.ndim not in (2, 3) or probs.shape[-1] != probs.shape[-2]:
        raise ValueError(
            f"probabilities must be [T, T] or [N, T, T], got shape {probs.shape}."
        )
    length = len(tokens)
    if length > probs.shape[-1]:
        raise ValueError(
            f"{length} tokens but the map covers only {probs.shape[-1]} positions."
        )
    heads = probs[None] if probs.ndim == 2 else probs
    heads = heads[:, :length, :length]
    if ax is not None and len(heads) != 1:
        raise ValueError(
            f"ax draws one map; got {len(heads)} heads (pass [T, T] or ax=None)."
        )
    if ax is None:
        size = max(3.0, 0.28 * length + 1.5)
        fig = new_figure(figsize=(size * len(heads), size))
        axes = fig.subplots(1, len(heads), squeeze=False)[0]
    else:
        fig, axes = ax.figure, [ax]
    labels = [str(t) for t in tokens]
    for n, (panel, head) in enumerate(zip(axes, heads)):
        image = panel.imshow(head, cmap="viridis", vmin=0.0, vmax=max(float(head.max()), 1e-6))
        panel.set_xticks(range(length), labels, rotation=90, fontsize=8)
        panel.set_yticks(range(length), labels, fontsize=8)
        panel.set_xlabel("key")
        panel.set_ylabel("query")
        name = title if len(heads) == 1 else f"{title + ' ' if title else ''}head {n + 1}"
        if name:
            panel.set_title(name)
        fig.colorbar(image, ax=panel, fraction=0.046, pad=0.04)
    if ax is None:
        fig.tight_layout()
    return fig
