"""`kerasbert info`: a preset's architecture and parameter count."""

from kerasbert.commands._args import add_preset_arguments

NAME = "info"
HELP = "Print a preset's architecture and size."


def run(args):
    from kerasbert.models import presets  # lazy: keras

    backbone = presets.build_backbone(args.preset, presets.parse_overrides(args.set))
    print(f"preset {args.preset}")
    print(backbone.describe())


def add_arguments(parser):
    return add_preset_arguments(parser)
