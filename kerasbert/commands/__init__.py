"""The `kerasbert` verbs, one module each.

A command module defines `NAME` (the verb), `HELP` (one line for
`kerasbert --help`), optionally `DESCRIPTION` and `SHOW_DEFAULTS`,
`add_arguments(parser)` and `run(args)`. Its top level imports nothing
heavy, so `kerasbert --help` stays instant; `run` imports what it needs.
Flag groups that several verbs share live in `_args.py`.

Adding a verb: write `commands/<verb>.py`, import it here and add it to `MODULES`.
"""

import argparse

from kerasbert.commands import convert
from kerasbert.commands import create_finetuning_data
from kerasbert.commands import create_pretraining_data
from kerasbert.commands import demo
from kerasbert.commands import distill
from kerasbert.commands import embed
from kerasbert.commands import evaluate
from kerasbert.commands import export
from kerasbert.commands import export_hub
from kerasbert.commands import extract_features
from kerasbert.commands import fill_mask
from kerasbert.commands import finetune
from kerasbert.commands import generate
from kerasbert.commands import info
from kerasbert.commands import predict
from kerasbert.commands import presets
from kerasbert.commands import pretrain
from kerasbert.commands import vocab

#: The verbs' modules, in the order `kerasbert --help` lists them.
MODULES = (
    info, presets, demo, vocab, create_pretraining_data, pretrain, create_finetuning_data,
    extract_features, embed, fill_mask, generate, finetune, evaluate, distill, export,
    export_hub, convert, predict,
)
#: Their module names ("create_pretraining_data"), in the same order.
COMMANDS = tuple(module.__name__.rsplit(".", 1)[-1] for module in MODULES)


def command_module(name):
    """The module of a verb, by module name ("create_pretraining_data")."""
    return MODULES[COMMANDS.index(name)]


def register(subparsers, name):
    """Adds the verb of module `name` to an argparse sub-parser set; its
    `func` default is the module's `run`. Returns the verb's parser."""
    module = command_module(name)
    formatter = (argparse.ArgumentDefaultsHelpFormatter if getattr(module, "SHOW_DEFAULTS", False)
                 else argparse.HelpFormatter)
    parser = subparsers.add_parser(module.NAME, help=module.HELP,
                                   description=getattr(module, "DESCRIPTION", None),
                                   formatter_class=formatter)
    module.add_arguments(parser)
    parser.set_defaults(func=module.run)
    return parser


def standalone_parser(name, prog, description):
    """A parser for one verb run as its own script (tfrecords/*.py,
    export/export_saved_model.py): the verb's flags, the script's name."""
    module = command_module(name)
    return module.add_arguments(argparse.ArgumentParser(prog=prog, description=description))
