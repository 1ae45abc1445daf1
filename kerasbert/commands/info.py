"""`kerasbert info`: the architecture and size of a preset or of published
weights (any handle: hf://, kaggle://, a directory, a .keras file), the
fine-tuning values `finetune` defaults to for it, the masking rate
`pretrain` draws dynamic masks with, and whether this CPU runs
bfloat16 natively (`kerasbert.hardware`)."""

from kerasbert.commands._args import add_preset_arguments
from kerasbert.hardware import precision_advice
from kerasbert.optimizers.recipes import default_recipe
from kerasbert.optimizers.recipes import is_published_checkpoint
from kerasbert.optimizers.recipes import pretraining_masked_lm_prob

NAME = "info"
HELP = "Print the architecture and size of a preset or of a model handle."


def run(args):
    from kerasbert.models import presets  # lazy: keras
    from kerasbert.loading.backbones import backbone_source, load_backbone  # lazy: keras

    found = backbone_source(args.preset)
    backbone = load_backbone(found, **presets.parse_overrides(args.set))
    print(f"{'preset' if found.is_preset else 'model'} {args.preset}"
          f"{' (architecture, random weights)' if found.is_preset else ''}")
    print(backbone.describe())
    family = presets.family_of(type(backbone))
    recipe = default_recipe(family, backbone.num_layers, backbone.hidden_dim,
                            is_published_checkpoint(found))
    print("fine-tuning defaults (kerasbert finetune, for the flags not given):")
    print(recipe.describe())
    print(f"pretraining: dynamic masking chooses {pretraining_masked_lm_prob(family):g} of the "
          "tokens (kerasbert pretrain --masked-lm-prob overrides)")
    print(precision_advice())


def add_arguments(parser):
    return add_preset_arguments(parser, help="A built-in preset (bert_base) or a handle: "
                                "hf://OWNER/NAME[@REV], kaggle://..., a model directory or "
                                ".keras file.")
