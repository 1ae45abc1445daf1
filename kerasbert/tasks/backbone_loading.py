"""Loading the backbone a command works on, in one place: a saved `.keras`
backbone (or a saved pretrainer / task model: its `.backbone`), a Hugging
Face model directory (`--preset DIR`: config.json + safetensors), or a preset
architecture with the weights of an original google-research/bert TF1
checkpoint. Used by `finetune`, `extract-features` and `export-hub` (their
flags: `kerasbert.commands._args.add_backbone_arguments`)."""

import os
import sys

from kerasbert.errors import UsageError
from kerasbert.saving import load_model


def load_backbone(backbone=None, preset=None, init_checkpoint=None, bert_config=None,
                  vocabulary_size=None):
    """A backbone from a saved .keras file, or a preset (+ TF1 checkpoint).

    `vocabulary_size` overrides a preset's (the size of the user's vocab.txt).

    Raises:
        UsageError: missing files, unknown preset, a checkpoint that does not
            fit the architecture, a model without a backbone.
    """
    if backbone is not None:
        if init_checkpoint or bert_config:
            raise UsageError("--init-checkpoint/--bert-config go with --preset, not --backbone.")
        if not os.path.exists(backbone):
            raise UsageError(f"Backbone not found: {backbone}")
        try:
            model = load_model(backbone)
        except UsageError as err:
            raise UsageError(f"--backbone {err}") from None
        if not _has_encoder_outputs(model):
            inner = getattr(model, "backbone", None)
            if inner is None or not _has_encoder_outputs(inner):
                raise UsageError(
                    f"{backbone} is a {type(model).__name__} without encoder_outputs "
                    "(expected a backbone, or a model with a .backbone)."
                )
            model = inner
        return model
    if preset is None:
        raise UsageError("Give --backbone PATH or --preset NAME.")
    from kerasbert.models import list_presets  # lazy: keras (registers every family)

    if preset not in list_presets() and os.path.isdir(preset):
        # A Hugging Face model directory (config.json + safetensors weights);
        # a built-in name wins over a folder of the same name.
        if init_checkpoint or bert_config:
            raise UsageError(f"--preset {preset} is a Hugging Face model directory; "
                             "--init-checkpoint/--bert-config go with a preset name.")
        from kerasbert.convert.hf_checkpoint import from_hf_directory  # lazy: keras

        overrides = {"vocabulary_size": vocabulary_size} if vocabulary_size else {}
        try:
            return from_hf_directory(preset, **overrides)
        except UsageError as err:
            raise UsageError(f"--preset {err}") from None
    from kerasbert.models.presets import build_backbone  # lazy: keras

    overrides = {"vocabulary_size": vocabulary_size} if vocabulary_size else {}

    if init_checkpoint is None:
        if bert_config:
            raise UsageError("--bert-config needs --init-checkpoint.")
        print(f"warning: --preset {preset} without --init-checkpoint has RANDOM weights.",
              file=sys.stderr)
        return build_backbone(preset, overrides)
    # lazy: tensorflow (the TF1 checkpoint reader; usage errors come first)
    from kerasbert.convert.bert_config import kwargs_to_bert_config
    from kerasbert.convert.tf1_checkpoint import load_bert_checkpoint

    config = bert_config or kwargs_to_bert_config(build_backbone(preset, overrides))
    try:
        return load_bert_checkpoint(init_checkpoint, config)
    except (ValueError, KeyError) as err:
        raise UsageError(f"--init-checkpoint {init_checkpoint}: {err}") from None


def _has_encoder_outputs(model):
    try:
        output = model.output
    except (AttributeError, ValueError):
        return False
    return isinstance(output, dict) and "encoder_outputs" in output
