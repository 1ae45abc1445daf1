"""`kerasbert presets`: every registered preset, by family."""

NAME = "presets"
HELP = "List every preset."


def run(args):
    from kerasbert.models import get_preset  # lazy: keras (registers every family)
    from kerasbert.models.presets import presets_by_family

    for family, names in presets_by_family().items():
        print(f"{family}:")
        for name in names:
            print(f"  {name:<22} {get_preset(name)['description']}")


def add_arguments(parser):
    return parser
