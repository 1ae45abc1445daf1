"""`kerasbert predict`: query an exported SavedModel with only TensorFlow and
tensorflow-text (no Keras, no kerasbert model code), as a deployment would."""

import json
import os

from kerasbert.errors import UsageError

NAME = "predict"
HELP = "Run an exported SavedModel on raw text and print its decoded outputs."
DESCRIPTION = (
    "Loads OUTPUT/<version> with tensorflow + tensorflow_text only and prints "
    "one JSON object per example. Repeat --text (and --text-b, --question, --context) for "
    "a batch; a text2text model takes --source (or --text) and prints its generated "
    "target.")


def _inputs_from_args(args, names):
    """The request {input name: list} for the signature's input names."""
    given = {
        "text": args.text, "text_a": args.text, "text_b": args.text_b,
        "question": args.question, "context": args.context,
        "source": args.source or args.text,
    }
    inputs = {}
    for name in names:
        if name == "choices":
            if not args.choice:
                raise UsageError("This model takes --context and --choice (repeat it per choice).")
            inputs[name] = [args.choice] * len(args.context or [""])
            continue
        values = given.get(name)
        if not values:
            flag = {"text_a": "--text", "text_b": "--text-b",
                    "source": "--source (or --text)"}.get(name, f"--{name.replace('_', '-')}")
            raise UsageError(f"This model's inputs are {', '.join(names)}: give {flag}.")
        inputs[name] = values
    sizes = {len(v) for k, v in inputs.items() if k != "choices"}
    if len(sizes) > 1:
        raise UsageError(f"Give the same number of values for {', '.join(names)}.")
    return inputs


def _plain(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    return value


def _length_output(name, outputs):
    """The count output that says how much of `name`'s rows is real."""
    if name.startswith("token"):
        return "num_tokens"
    if "num_entities" in outputs and (name.startswith("entity") or name in ("start_char", "end_char")):
        return "num_entities"
    return None


def decode_rows(outputs):
    """{output: [B, ...] array} -> one dict per example, padding removed."""
    batch = len(next(iter(outputs.values())))
    rows = []
    for b in range(batch):
        row = {}
        for name, value in sorted(outputs.items()):
            item = value[b]
            length = _length_output(name, outputs)
            if length in outputs:
                item = item[: int(outputs[length][b])]
            row[name] = _plain(item)
        rows.append(row)
    return rows


def run(args):
    if not os.path.isfile(os.path.join(args.saved_model, "saved_model.pb")):
        raise UsageError(f"--saved-model {args.saved_model}: no saved_model.pb there "
                         "(give the version directory, e.g. export/NAME/1).")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    loaded = tf.saved_model.load(args.saved_model)
    function = loaded.signatures["serving_default"]
    names = sorted(function.structured_input_signature[1])
    inputs = _inputs_from_args(args, names)
    outputs = function(**{k: tf.constant(v, tf.string) for k, v in inputs.items()})
    for row in decode_rows({k: v.numpy() for k, v in outputs.items()}):
        print(json.dumps(row, ensure_ascii=False))


def add_arguments(parser):
    parser.add_argument("--saved-model", required=True, metavar="export/NAME/VERSION")
    parser.add_argument("--text", action="append", help="Text (classification, tagging) or "
                        "first text of a pair.")
    parser.add_argument("--text-b", action="append", help="Second text of a pair.")
    parser.add_argument("--question", action="append", help="Question (QA).")
    parser.add_argument("--context", action="append", help="Context (QA, multiple choice).")
    parser.add_argument("--choice", action="append", help="A choice (multiple choice); repeat.")
    parser.add_argument("--source", action="append",
                        help="Text to rewrite (text2text: translate, ...); repeat for a batch.")
    return parser
