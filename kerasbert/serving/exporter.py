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

from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_directory
from kerasbert.io_utils import file_sha256
from kerasbert import runs
from kerasbert.preprocessing.lengths import packed_length
from kerasbert.serving.batching import PER_MODEL_FILENAME
from kerasbert.serving.batching import batching_file_text
from kerasbert.serving.batching import write_server_file
from kerasbert.serving.elmo_serving import NO_BATCHING_FOR_CHARACTERS  # noqa: F401 (its old home)
from kerasbert.serving.graph_options import GraphOptions
from kerasbert.serving.op_manifest import write_manifest
from kerasbert.serving.task_servings import serving_class
from kerasbert.tasks import task_types
from kerasbert.tasks.preprocessor_factory import preprocessor_from_config
from kerasbert.tasks.preprocessor_factory import preprocessor_from_run
from kerasbert.tasks.preprocessor_factory import with_sequence_length
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


def serving_module(model, preprocessor, label_names=None, graph=None):
    """The `TaskServing` of the preprocessor's task type (`task_servings`;
    the counterpart that reads its tokenizer's output): built on the
    preprocessor's own tokenizer and packer, so the graph serves exactly
    what training fed the model."""
    serving = serving_class(preprocessor.task_type, preprocessor.tokenizer)
    return serving.for_preprocessor(model, preprocessor, label_names, graph)


def build_serving_module(model, tokenizer, config, sequence_length):
    """`serving_module` for a config.json-like dict (task_type,
    label_names, qa, graph): the factory's preprocessor from it at
    `sequence_length`."""
    preprocessor = preprocessor_from_config(model, tokenizer, config, sequence_length)
    return serving_module(model, preprocessor, config.get("label_names"), config.get("graph"))


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
    _version_dir(output, version, overwrite)  # fail before loading anything
    tokenizer = run.tokenizer(**(tokenizer_switches or {}))
    model = run.load_model(runs.MODEL)
    # The run's config.json is the record of how it was trained (a model
    # saved before task models carried a preprocessor has none, and a flag
    # here may override the tokenizer's switch): the one factory rebuilds
    # the preprocessor from it, then the export is `Task.export`'s.
    model.preprocessor = preprocessor_from_run(model, run, tokenizer, sequence_length,
                                               target_length)
    task, task_file = describe_task(run.config, run.directory)
    source = describe_source(run.path(runs.MODEL))
    if task_file is not None:
        source["task_file"] = task_file
    return export_task(model, output, version=version, overwrite=overwrite,
                       model_name=model_name, graph=graph, task=task, source=source,
                       precision=precision)


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
    preprocessor = with_sequence_length(model, model.preprocessor, sequence_length)
    label_names = preprocessor.label_names
    size = model.num_label_names()
    if label_names is None and size:
        label_names = [str(i) for i in range(size)]
    _version_dir(output, version, overwrite)  # fail before tracing anything
    module = serving_module(model, preprocessor, label_names, graph)
    return write_export(model, module, preprocessor.task_type, output, label_names,
                        version=version, overwrite=overwrite, model_name=model_name, task=task,
                        source=source or {"model": type(model).__name__})


def export_model(model, tokenizer, task_type, output, label_names=None, sequence_length=None,
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
        sequence_length: packed length in the graph (at most the
            positions); default the task type's
            (`kerasbert.preprocessing.lengths.default_sequence_length`).
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
    _version_dir(output, version, overwrite)  # fail before building anything
    if module is None:
        if task_types.get(task_type).format.named_labels and not label_names:
            raise UsageError(f"A {task_type} export needs label_names (the class or tag names).")
        # The preprocessor training would use (the one factory), served as is.
        config = {"task_type": task_type, "label_names": label_names, "qa": qa_options or {},
                  "task": task or ""}
        preprocessor = preprocessor_from_config(model, tokenizer, config, sequence_length)
        module = serving_module(model, preprocessor, label_names, graph)
    else:
        packed_length(model.backbone, task_type, module.sequence_length)
    return write_export(model, module, task_type, output, label_names, version=version,
                        overwrite=overwrite, model_name=model_name, task=task, source=source)


def export_info(model, module, task_type, label_names, task, source):
    """assets.extra/export.json's dict (without "batching")."""
    tokenizer, options = module.tokenizer, module.options
    info = {
        "task": task, "task_type": task_type, "label_names": label_names,
        "seq_length": module.sequence_length,
        "lower_case": bool(getattr(tokenizer, "lower_case", False)),
        # The switches a client's text meets (`kerasbert.text.tokenizer_loading.SWITCHES`).
        **{name: bool(getattr(tokenizer, name, False)) for name in SWITCHES},
        # The family tells a client how the graph packs (RoBERTa: no type ids).
        "tokenizer": {"type": tokenizer_kind(tokenizer),
                      "assets": [os.path.basename(p) for p in tokenizer_files(tokenizer)]},
        "inputs": [spec.name for spec in module.input_specs()],
        "signatures": list(SIGNATURES), "source": source,
        "graph": options.to_config(),
    }
    info.update(module.export_info())
    return info


def batching_file(model, module):
    """(the batching file's text or None, what it was measured on, export.json's
    "batching" entry when none is written): the measured encoders' values,
    unless the module says why they do not apply to it."""
    reason = module.no_batching_reason
    if reason is None and getattr(module, "generates_text", False):
        # The measured curves are one forward pass a batch; none applies.
        reason = NO_BATCHING_FOR_GENERATION
    if reason is not None:
        return None, None, {"file": None, "reason": reason}
    text, measured_on = batching_file_text(model.backbone, module.sequence_length)
    return text, measured_on, None


def write_export(model, module, task_type, output, label_names=None, version=None,
                 overwrite=False, model_name=None, task=None, source=None):
    """Writes a built serving module as OUTPUT/<version> (module
    docstring): saved, warm-up records, op manifest, export.json, batching
    file; replayed before it is renamed to its number."""
    version, target = _version_dir(output, version, overwrite)
    model_name = model_name or os.path.basename(os.path.normpath(output))
    requests = warmup_requests(module)
    with atomic_directory(target, overwrite=overwrite) as tmp:
        tf.saved_model.save(module, tmp, signatures=module.signatures())
        write_warmup(tmp, model_name, requests)
        manifest = write_manifest(tmp)
        info = export_info(model, module, task_type, label_names, task, source)
        batching_text, batching_from, info["batching"] = batching_file(model, module)
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
