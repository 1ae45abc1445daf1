"""`kerasbert info`: the architecture and size of a preset or of published
weights (any handle: hf://, kaggle://, a directory, a .keras file), the
fine-tuning values `finetune` defaults to for it, and whether this CPU runs
bfloat16 natively (`kerasbert.hardware`)."""

from kerasbert.commands._args import add_preset_arguments
from kerasbert.hardware import precision_advice
from kerasbert.optimizers.recipes import default_recipe
from kerasbert.optimizers.recipes import is_published_checkpoint

NAME = "info"
HELP = "Print the architecture and size of a preset or of a model handle."


def run(args):
    from kerasbert.models import presets  # lazy: keras
    from kerasbert.loading.backbones import load_backbone  # lazy: keras

    builtin = presets.is_preset(args.preset)
    backbone = load_backbone(args.preset, **presets.parse_overrides(args.set))
    print(f"{'preset' if builtin else 'model'} {args.preset}"
          f"{' (architecture, random weights)' if builtin else ''}")
    print(backbone.describe())
    recipe = default_recipe(presets.family_of(type(backbone)), backbone.num_layers,
                            backbone.hidden_dim, is_published_checkpoint(args.preset))
    print("fine-tuning defaults (kerasbert finetune, for the flags not given):")
    print(recipe.describe())
    print(precision_advice())


def add_arguments(parser):
    return add_preset_arguments(parser, help="A built-in preset (bert_base) or a handle: "
                                "hf://OWNER/NAME[@REV], kaggle://..., a model directory or "
                                ".keras file.")
