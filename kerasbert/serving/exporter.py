"""`export_finetuned(model_dir, output)`: a `kerasbert finetune` directory
-> a TF Serving version directory; `export_model(model, tokenizer, ...)`:
the same for a task model trained in your own script.

    OUTPUT/<version>/saved_model.pb, variables/
    OUTPUT/<version>/assets/vocab.txt                      (self-contained;
                         sentencepiece.model, or vocab.json + merges.txt)
    OUTPUT/<version>/assets.extra/tf_serving_warmup_requests
    OUTPUT/<version>/assets.extra/ops.json                 custom ops used
    OUTPUT/<version>/assets.extra/export.json              task, labels, inputs

The version is written under a hidden temporary name in OUTPUT (TF Serving
ignores names that are not integers), loaded back and run on every warm-up
request, and only then renamed to its number: a failed export leaves
nothing behind, and TF Serving never sees a half-written version.
"""

import json
import os
import re

import numpy as np

import tensorflow as tf

from kerasbert.data.finetuning import check_max_seq_length
from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_directory
from kerasbert.io_utils import file_sha256
from kerasbert import runs
from kerasbert.preprocessing.elmo_inputs import character_preprocessor
from kerasbert.preprocessing.text2text_preprocessor import check_target_length
from kerasbert.serving.batching import PER_MODEL_FILENAME
from kerasbert.serving.batching import batching_file_text
from kerasbert.serving.batching import write_server_file
from kerasbert.serving.elmo_serving import elmo_serving
from kerasbert.serving.graph_options import GraphOptions
from kerasbert.serving.op_manifest import write_manifest
from kerasbert.serving.task_servings import serving_class
from kerasbert.tasks import task_types
from kerasbert.serving.warmup import write_warmup
from kerasbert.text import tokenizer_files
from kerasbert.text import tokenizer_kind
from kerasbert.text.tokenizer_loading import SWITCHES

SIGNATURES = ("serving_default", "serve_token_ids")

#: What export.json says instead of a batching file for a model that
#: generates (text2text): why `serving.batching`'s values do not fit it.
NO_BATCHING_FOR_GENERATION = (
    "not written: the batching values come from throughput measured on encoder models "
    "(bench/serving_bench.py: one forward pass per batch); a generating model runs up to "
    "max_length decoder steps per batch (beam search: beam_size rows per source), a cost "
    "per batch none of them measures. Measure this model before enabling TF Serving batching.")


#: The same for a model that reads characters (ELMo): a biLSTM's cost per
#: batch is not the measured encoders' (layers * hidden^2 * length).
NO_BATCHING_FOR_CHARACTERS = (
    "not written: the batching values come from throughput measured on Transformer encoders "
    "(bench/serving_bench.py); an ELMo biLSTM's cost per batch is not theirs. Measure this "
    "model before enabling TF Serving batching.")


def build_serving_module(model, tokenizer, config, sequence_length):
    """The `TaskServing` of the model's task type (`task_servings`)."""
    serving = serving_class(config["task_type"])
    if tokenizer is None:  # a model that reads characters (ELMo)
        serving = elmo_serving(serving)
    return serving.for_run(model, tokenizer, sequence_length, config)


def describe_source(model_file):
    """What export.json records of the exported model: the run folder's name
    and the model file's SHA-256. Never an absolute path: it would say
    nothing on the serving machine and leak the exporting machine's layout."""
    run = os.path.basename(os.path.dirname(os.path.abspath(model_file)))
    return {"run": run, "file": os.path.basename(model_file), "sha256": file_sha256(model_file)}


def describe_task(config, run_dir):
    """(what export.json records as the task, its training file or None): a
    TFDS name as it is; a local file by its name (`csv:train.csv`), with
    the file's name and SHA-256 when it is still there. Never a path of the
    exporting machine."""
    spec = config.get("task")
    located = runs.located_spec(config.get("task_source") or spec, run_dir)
    found = runs.file_spec(located) if located else None
    if found is None:
        prefix, sep, rest = (spec or "").partition(":")
        if sep and prefix == "features":  # create-finetuning-data's folder, by its name
            return f"features:{os.path.basename(os.path.normpath(rest))}", None
        return spec, None
    kind, path = found
    name = os.path.basename(os.path.normpath(path))
    info = ({"name": name, "sha256": file_sha256(path)} if os.path.isfile(path) else None)
    return f"{kind}:{name}", info


def next_version(output):
    """1 + the largest integer version directory in `output` (1 if none)."""
    if not os.path.isdir(output):
        return 1
    versions = [int(n) for n in os.listdir(output) if re.fullmatch(r"\d+", n)]
    return max(versions, default=0) + 1


def warmup_requests(module):
    """(signature, inputs) pairs: the module's string requests and one
    `serve_token_ids` request."""
    requests = [("serving_default", r) for r in module.warmup_requests()]
    requests.append(("serve_token_ids", module.warmup_token_ids()))
    return requests


def check_outputs(outputs, where):
    """Raises if any float output is non-finite."""
    for name, value in outputs.items():
        value = np.asarray(value)
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise RuntimeError(f"{where}: output {name!r} is not finite.")


def replay_warmup(saved_model_dir, requests):
    """Loads the SavedModel and runs every warm-up request, as TF Serving
    will; raises on the first failure or non-finite output."""

    loaded = tf.saved_model.load(saved_model_dir)
    for i, (signature, inputs) in enumerate(requests):
        function = loaded.signatures[signature]
        tensors = {k: tf.constant(v) for k, v in inputs.items()}
        outputs = {k: v.numpy() for k, v in function(**tensors).items()}
        check_outputs(outputs, f"warm-up request {i} ({signature})")


def _version_dir(output, version, overwrite):
    version = next_version(output) if version is None else int(version)
    if version < 1:
        raise UsageError(f"--version must be a positive integer, got {version}.")
    target = os.path.join(output, str(version))
    if os.path.exists(target) and not overwrite:
        raise UsageError(f"{target} already exists; pass --overwrite to replace it, or leave "
                         "out --version to write the next free version.")
    return version, target


def export_finetuned(model_dir, output, version=None, sequence_length=None, overwrite=False,
                     model_name=None, graph=None, tokenizer_switches=None, target_length=None,
                     precision=None):
    """Exports a `kerasbert finetune` output directory for TF Serving.

    Args:
        model_dir: the fine-tuning directory (model.keras, config.json and
            the tokenizer files config.json names).
        output, version, overwrite, model_name, graph, precision: as
            `export_task`.
        sequence_length: packed length in the graph; default the one the
            model was fine-tuned with (at most its positions).
        tokenizer_switches: {switch: bool} over the run's settings (kept in
            its config.json's tokenizer description; `kerasbert.text.
            loading.SWITCHES`); a switch left out or None keeps the run's.
        target_length: text2text: the longest generation (pieces with
            [end]); default the run's (`finetune --max-target-length`, kept
            in its config.json), else the source length.

    Returns:
        dict: path, version, task_type, signatures, custom_ops.
    """
    run = runs.open_finetuned(model_dir)
    config = run.config
    _version_dir(output, version, overwrite)  # fail before loading anything
    given = [name for name, value in (tokenizer_switches or {}).items() if value is not None]
    if runs.reads_characters(config) and given:
        raise UsageError(f"{model_dir} reads characters (ELMo): it has no tokenizer for "
                         f"--{given[0].replace('_', '-')} to change.")
    model = run.load_model(runs.MODEL)
    tokenizer = run.tokenizer(**(tokenizer_switches or {}))
    # The run's config.json is the record of how it was trained (a model
    # saved before task models carried a preprocessor has none, and a flag
    # here may override the tokenizer's switch): the preprocessor is rebuilt
    # from it, then the export is `Task.export`'s.
    model.preprocessor = run_preprocessor(model, tokenizer, config, target_length)
    task, task_file = describe_task(config, run.directory)
    source = describe_source(run.path(runs.MODEL))
    if task_file is not None:
        source["task_file"] = task_file
    return export_task(model, output, version=version, overwrite=overwrite,
                       model_name=model_name, graph=graph,
                       sequence_length=sequence_length or config["max_seq_length"],
                       task=task, source=source, precision=precision)


def run_preprocessor(model, tokenizer, config, target_length=None):
    """The preprocessor a fine-tuning run's config.json describes
    (`target_length`: text2text, over the run's own)."""
    cls = model.preprocessor_class
    options = {name: value for name, value in (config.get("qa") or {}).items()
               if name in cls.options}
    if target_length is not None and "target_length" not in cls.options:
        raise UsageError(f"--max-target-length applies to text2text models, not to a "
                         f"{config['task_type']} model.")
    if "target_length" in cls.options:
        target_length = target_length or (config.get("finetune") or {}).get("target_length")
        if target_length is not None:
            options["target_length"] = check_target_length(target_length, model.backbone)
    if config["task_type"] == "qa" and "version_2_with_negative" not in options:
        options["version_2_with_negative"] = "v2" in str(config.get("task", ""))
    arguments = {**model.preprocessor_arguments(), "task_type": config["task_type"], **options}
    if tokenizer is None:  # ELMo: the task's character-reading counterpart
        cls = character_preprocessor(cls, task_types.get(config["task_type"]))
        arguments["max_characters"] = model.backbone.max_characters_per_token
    return cls(tokenizer, config["max_seq_length"], config.get("label_names"), **arguments)


def export_task(model, output, version=None, overwrite=False, model_name=None, graph=None,
                sequence_length=None, task=None, source=None, precision=None):
    """`Task.export`: a task model with its preprocessor (tokenizer, packed
    length, label names, QA options) -> a TF Serving version directory, as
    `export_model` writes it.

    Args:
        model: a `kerasbert.tasks` model whose `preprocessor` is set.
        output, version, overwrite, model_name, graph: as `export_model`.
        sequence_length: packed length in the graph (default the
            preprocessor's).
        task: what export.json records as the task (default "").
        source: what export.json records of the model's origin (default
            its class).
        precision: "float32" or "bfloat16": the graph's model computes in
            it (`GraphOptions.precision`; outputs float32); over `graph`'s.

    Returns:
        dict: path, version, task_type, signatures, custom_ops.
    """
    if precision is not None:
        graph = GraphOptions.from_config(graph).to_config() | {"precision": precision}
    preprocessor = model.preprocessor
    label_names = preprocessor.label_names
    size = model.num_label_names()
    if label_names is None and size:
        label_names = [str(i) for i in range(size)]
    qa_options = preprocessor.qa_options() if hasattr(preprocessor, "qa_options") else None
    return export_model(model, preprocessor.tokenizer, preprocessor.task_type, output,
                        label_names=label_names,
                        sequence_length=sequence_length or preprocessor.sequence_length,
                        qa_options=qa_options, version=version, overwrite=overwrite,
                        model_name=model_name, task=task, graph=graph,
                        source=source or {"model": type(model).__name__})


def export_model(model, tokenizer, task_type, output, label_names=None, sequence_length=128,
                 qa_options=None, version=None, overwrite=False, model_name=None, task=None,
                 source=None, graph=None, module=None):
    """Exports any fine-tuned task model (e.g. one trained with `model.fit`
    in your own script) for TF Serving, with its tokenizer in the graph.

    Args:
        model: a `kerasbert.tasks` model (TextClassifier, TokenClassifier,
            QuestionAnswerer, MultipleChoice).
        tokenizer: the tokenizer it was trained with (`WordPieceTokenizer`,
            `SentencePieceTokenizer` or `BytePairTokenizer`); its files
            become the SavedModel's assets.
        task_type: classification, pair, regression, tagging, qa or
            multiple_choice.
        output: the model's base directory (`export/NAME`).
        label_names: class / tag names (classification, pair, tagging).
        sequence_length: packed length in the graph (at most the positions).
        qa_options: for qa: doc_stride, max_query_length,
            max_answer_length, null_score_diff_threshold,
            version_2_with_negative.
        version: int; default the next free version.
        overwrite: replace an existing version directory.
        model_name: the TF Serving model name in the warm-up requests
            (default: the base directory's name).
        task, source: recorded in assets.extra/export.json.
        graph: `GraphOptions` or its dict (padding to the batch's longest
            row, XLA); default `GraphOptions()`.
        module: a built `TaskServing` to export instead of the task type's
            (a model that is no fine-tuning task type: `embedding_serving`).

    Returns:
        dict: path, version, task_type, signatures, custom_ops.
    """


    version, target = _version_dir(output, version, overwrite)
    if module is None and task_types.get(task_type).format.named_labels and not label_names:
        raise UsageError(f"A {task_type} export needs label_names (the class or tag names).")
    sequence_length = int(sequence_length)
    check_max_seq_length(sequence_length, model.backbone)
    options = GraphOptions.from_config(graph)
    config = {"task_type": task_type, "label_names": label_names, "task": task or "",
              "qa": dict(qa_options or {}), "graph": options}
    if module is None:
        module = build_serving_module(model, tokenizer, config, sequence_length)
    model_name = model_name or os.path.basename(os.path.normpath(output))
    requests = warmup_requests(module)
    with atomic_directory(target, overwrite=overwrite) as tmp:
        tf.saved_model.save(module, tmp, signatures=module.signatures())
        write_warmup(tmp, model_name, requests)
        manifest = write_manifest(tmp)
        info = {
            "task": task, "task_type": task_type, "label_names": label_names,
            "seq_length": sequence_length,
            "lower_case": bool(getattr(tokenizer, "lower_case", False)),
            # The switches a client's text meets (`kerasbert.text.tokenizer_loading.SWITCHES`).
            **{name: bool(getattr(tokenizer, name, False)) for name in SWITCHES},
            # The family tells a client how the graph packs (RoBERTa: no type ids);
            # None for a model that reads characters (its "input" says how).
            "tokenizer": None if tokenizer is None else {
                "type": tokenizer_kind(tokenizer),
                "assets": [os.path.basename(p) for p in tokenizer_files(tokenizer)]},
            "inputs": [spec.name for spec in module.input_specs()],
            "signatures": list(SIGNATURES), "source": source,
            "graph": options.to_config(),
        }
        info.update(module.export_info())
        if tokenizer is None:  # ELMo's LSTMs: no measured encoder's cost applies
            batching_text, batching_from = None, None
            info["batching"] = {"file": None, "reason": NO_BATCHING_FOR_CHARACTERS}
        else:
            batching_text, batching_from = batching_file_text(model.backbone, sequence_length)
        if getattr(module, "generates_text", False):
            # The measured curves are one forward pass a batch; none applies.
            batching_text, batching_from = None, None
            info["batching"] = {"file": None, "reason": NO_BATCHING_FOR_GENERATION}
        if batching_text:
            with open(os.path.join(tmp, PER_MODEL_FILENAME), "w", encoding="utf-8") as f:
                f.write(batching_text)
            info["batching"] = {"file": PER_MODEL_FILENAME, "measured_on": batching_from}
        with open(os.path.join(tmp, "assets.extra", "export.json"), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2)
        replay_warmup(tmp, requests)
    server_file = write_server_file(output, batching_text) if batching_text else None
    return {"path": target, "version": version, "task_type": task_type,
            "signatures": list(SIGNATURES), "custom_ops": manifest["custom_ops"],
            "batching_file": server_file}
