"""Export variants (`GraphOptions`): padding to the batch's longest row and
an XLA-compiled model function give the plain export's outputs (full
padding, no XLA) within 1e-5 for every task type, on both signatures, in a
fresh process that imports only tensorflow and tensorflow_text."""

import json
import os

import numpy as np
import pytest

from serving_fixtures import run_fresh
from serving_fixtures import run_in_process
from serving_fixtures import shared_export
from test_export import TASKS
from test_export import _inputs

from slow_marks import slow_covered_by

VARIANTS = {  # name: export options
    "plain": {"pad_to_longest": False, "jit_compile": False},
    "longest": {"pad_to_longest": True, "jit_compile": False},
    # XLA on trimmed batches and, in the second batch (a row longer than the
    # exported length), on the full length.
    "longest_xla": {"pad_to_longest": True, "jit_compile": True},
}
# What `export` does without flags: that variant is the shared export itself.
DEFAULT = {"pad_to_longest": True, "jit_compile": False}
# Short rows (trimmed to 16 of 32 positions), then a batch with one row
# longer than the exported length (no trimming possible), then one row.
BATCHES = [
    ["John lives in Paris.", "the dog runs", "a", ""],
    ["the quick brown fox jumps over the lazy dog " * 6, "mary works at the bank"],
    ["Naïve café owners in Tokyo work fast!"],
]

SERVE_SCRIPT = """
spec = json.load(open(sys.argv[1]))
result = {}
for name, (path, requests, ids) in spec.items():
    loaded = tf.saved_model.load(path)
    rows = []
    for inputs in requests:
        out = loaded.signatures["serving_default"](
            **{k: tf.constant(v, tf.string) for k, v in inputs.items()})
        rows.append({k: v.numpy().tolist() for k, v in out.items()})
    out = loaded.signatures["serve_token_ids"](**{k: tf.constant(v, tf.int32) for k, v in ids.items()})
    rows.append({k: v.numpy().tolist() for k, v in out.items()})
    result[name] = json.loads(json.dumps(rows, default=lambda b: b.decode("utf-8")))
_check_imports()
print(json.dumps(result))
"""


def _token_ids_request(ft):
    """A `serve_token_ids` request the run's own serving module packs."""
    from kerasbert import runs
    from kerasbert.serving.exporter import build_serving_module

    run = runs.open_finetuned(ft)
    module = build_serving_module(run.load_model(runs.MODEL), run.tokenizer(), run.config,
                                  run.config["max_seq_length"])
    return {k: np.asarray(v).tolist() for k, v in module.warmup_token_ids().items()}


def _recorded_graph(path):
    """The graph options an export recorded in its export.json."""
    with open(os.path.join(path, "assets.extra", "export.json")) as f:
        return json.load(f)["graph"]


def _serve_variants(root, shared_builds, task_types, runner, batches=BATCHES):
    """{task type: {variant: [outputs of each request]}}, every variant of
    every task type served by one run of SERVE_SCRIPT (`runner`: run_fresh
    or run_in_process).

    The runs and their default export ("longest") are test_export's
    (`shared_export`); the other variants are exported here from the same
    FT dirs."""
    from kerasbert.serving.exporter import export_finetuned

    spec = {}
    for task_type in task_types:
        ft, default = shared_export(shared_builds, task_type)
        requests = [_inputs(task_type, batch) for batch in batches]
        ids = _token_ids_request(ft)
        for variant, options in VARIANTS.items():
            if options == DEFAULT:
                result = default
                graph = _recorded_graph(result["path"])
                assert {k: graph[k] for k in DEFAULT} == DEFAULT, graph
            else:
                result = export_finetuned(ft, str(root / f"{task_type}_{variant}"), graph=options)
            spec[f"{task_type}/{variant}"] = (result["path"], requests, ids)
        assert _recorded_graph(result["path"])["jit_compile"] is True
    path = root / "spec.json"
    path.write_text(json.dumps(spec))
    out = json.loads(runner(SERVE_SCRIPT, path).strip().splitlines()[-1])
    grouped = {}
    for key, rows in out.items():
        task_type, variant = key.split("/")
        grouped.setdefault(task_type, {})[variant] = rows
    return grouped


@pytest.fixture(scope="module")
def served(tmp_path_factory, shared_builds):
    """{task type: {variant: [outputs of each request]}} from one fresh process."""
    return _serve_variants(tmp_path_factory.mktemp("variants"), shared_builds, TASKS, run_fresh)


def _assert_same(got, want, where):
    assert set(got) == set(want), where
    for name in want:
        a, b = np.asarray(got[name]), np.asarray(want[name])
        assert a.shape == b.shape, f"{where} {name}: shape {a.shape} != {b.shape}"
        if b.dtype.kind == "f":
            np.testing.assert_allclose(a, b, atol=1e-5, rtol=0, err_msg=f"{where} {name}")
        else:
            assert a.tolist() == b.tolist(), f"{where} {name}"


def _assert_variants_equal_plain(served, task_type):
    plain = served[task_type]["plain"]
    for variant in VARIANTS:
        if variant == "plain":
            continue
        rows = served[task_type][variant]
        assert len(rows) == len(plain)
        for i, (got, want) in enumerate(zip(rows, plain)):
            _assert_same(got, want, f"{task_type} {variant} request {i}")


# 110 s (the first parameter pays the module's 12 exports and the fresh
# process): every task type's variants; the default suite checks the
# classification variants in-process, and test_export checks every task
# type's default ("longest") export against the Keras model (full padding).
@pytest.mark.parametrize("task_type", [
    pytest.param(task_type, marks=slow_covered_by(
        "tests/serving/test_graph_options.py::test_classification_variants_equal_plain_in_process",
        "tests/serving/test_export.py::test_probabilities_match_keras",
        "tests/serving/test_export.py::test_tagging_words_labels_and_entities"), id=task_type)
    for task_type in TASKS])
def test_variants_equal_plain_export(served, task_type):
    _assert_variants_equal_plain(served, task_type)


def test_classification_variants_equal_plain_in_process(tmp_path, shared_builds):
    """The classification run's variants (plain, the default export,
    XLA) give the plain export's outputs on the short rows (trimmed to 16
    of 32 positions) and on serve_token_ids, served in this process
    (`run_in_process`)."""
    served = _serve_variants(tmp_path, shared_builds, ["classification"], run_in_process,
                             batches=BATCHES[:1])
    _assert_variants_equal_plain(served, "classification")


def test_bigbird_keeps_full_length_above_its_sparse_threshold(tmp_path):
    from kerasbert import models
    from kerasbert import tasks
    from kerasbert.serving.graph_options import GraphOptions
    from kerasbert.serving.graph_options import check_options

    backbone = models.BertBackbone(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
                                   intermediate_dim=32, max_sequence_length=512,
                                   attention="bigbird", block_size=16, num_random_blocks=1)
    model = tasks.TextClassifier(backbone, num_classes=2)
    # (5 + 2 * 1) * 16 = 112 tokens still use full attention.
    check_options(GraphOptions(pad_to_longest=True), model.backbone, 112)
    check_options(GraphOptions(pad_to_longest=False), model.backbone, 512)
    assert not check_options(GraphOptions(pad_to_longest=True), model.backbone, 113).pad_to_longest


def test_options_config_round_trip_and_errors():
    from kerasbert.serving.graph_options import GraphOptions

    options = GraphOptions(pad_to_longest=False, length_multiple=8, jit_compile=True)
    assert GraphOptions.from_config(options.to_config()) == options
    assert GraphOptions.from_config(None) == GraphOptions()
    with pytest.raises(ValueError, match="Unknown graph options: padding"):
        GraphOptions.from_config({"padding": "max"})
    with pytest.raises(ValueError, match="length_multiple"):
        GraphOptions(length_multiple=0)
