"""bench/encoder_bench.py runs end to end (tiny config); timings never asserted."""

import json
import math

import pytest
from bench_loader import assert_rows_saved_and_printed
from bench_loader import load_bench
from slow_marks import slow_covered_by


@pytest.fixture(scope="module")
def bench():
    return load_bench("encoder_bench")


# 32 s: BERT's rows with XLA on as well; the default suite runs the bench on
# one family with jit off, and a whole XLA-compiled training step elsewhere.
@slow_covered_by("tests/bench/test_encoder_bench.py::test_quick_run_family_without_pooler",
                 "tests/training/test_tpu_paths.py::"
                 "test_the_pretraining_step_compiles_whole_on_static_shapes_in_bfloat16")
def test_quick_run_produces_all_rows(bench, tmp_path, capsys):
    out = tmp_path / "results" / "bench.json"
    payload = bench.main(["--quick", "--json", str(out), "--backend-note", "t"])

    rows = payload["rows"]
    assert [r["row"] for r in rows] == [
        "forward jit=off",
        "forward jit=on",
        "train jit=off",
        "train jit=on",
    ]
    for row in rows:
        assert row["ours_seq_per_s"] > 0, row
        assert row["keras_hub_seq_per_s"] > 0, row
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0, row
    # Same weights: outputs agree before anything is timed.
    for name, diff in payload["meta"]["output_max_abs_diff"].items():
        assert diff <= 1e-3, (name, diff)
    assert payload["env"]["backend"] and payload["env"]["keras"]
    assert payload["env"]["note"] == "t"

    assert_rows_saved_and_printed(out, rows, capsys.readouterr().out, "ours/keras-hub")


def test_unknown_preset_is_a_clear_error(bench):
    with pytest.raises(bench.BenchError, match="Unknown preset 'bert_nope'"):
        bench.main(["--preset", "bert_nope"])


def test_sequence_longer_than_model_is_a_clear_error(bench):
    with pytest.raises(bench.BenchError, match="--seq-length 999 exceeds"):
        bench.main(["--quick", "--seq-length", "999"])


def test_bad_counts_exit_nonzero(bench):
    with pytest.raises(SystemExit) as info:
        bench.parse_args(["--repeats", "0"])
    assert info.value.code != 0


FAMILY_NAMES = ["bert", "albert", "roberta", "distil_bert", "electra"]


def test_quick_run_family_without_pooler(bench, tmp_path):
    """RoBERTa's keras-hub backbone returns only the sequence: both sides are
    timed on the first-token vector, and the outputs agree first."""
    payload = bench.main(["--quick", "--family", "roberta", "--jit", "off",
                          "--json", str(tmp_path / "roberta.json")])
    (block,) = payload["families"]
    assert block["family"] == "roberta" and block["meta"]["pooled"] == "first_token"
    assert [r["row"] for r in payload["rows"]] == ["forward jit=off", "train jit=off"]
    assert all(d <= 1e-3 for d in block["meta"]["output_max_abs_diff"].values())


# Eight families' models through the bench; the default suite runs one
# family through it and builds every family in its backbone tests.
@slow_covered_by("tests/bench/test_encoder_bench.py::test_quick_run_family_without_pooler",
                 "tests/bench/test_encoder_bench.py::test_default_sizes_per_family")
def test_quick_run_covers_every_family(bench, tmp_path, capsys):
    # jit off only: the XLA compiles of 8 models would take minutes on CPU;
    # the quick BERT test above runs the jit=on rows.
    out = tmp_path / "all.json"
    payload = bench.main(["--quick", "--family", "all", "--jit", "off",
                          "--json", str(out)])

    assert [b["family"] for b in payload["families"]] == FAMILY_NAMES
    assert [(r["family"], r["row"]) for r in payload["rows"]] == [
        (family, row) for family in FAMILY_NAMES
        for row in ("forward jit=off", "train jit=off")
    ]
    for row in payload["rows"]:
        assert row["ours_seq_per_s"] > 0 and row["keras_hub_seq_per_s"] > 0
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0, row
    pooled = {b["family"]: b["meta"]["pooled"] for b in payload["families"]}
    assert pooled == {"bert": "pooled_output", "albert": "pooled_output",
                      "roberta": "first_token", "distil_bert": "first_token",
                      "electra": "pooled_output"}
    for block in payload["families"]:
        meta = block["meta"]
        assert meta["config_name"] == "quick"
        # Same weights in every family: outputs agree before any timing.
        assert set(meta["output_max_abs_diff"]) == {
            "sequence_output", meta["pooled"], "train_wrapper_output"}
        for name, diff in meta["output_max_abs_diff"].items():
            assert diff <= 1e-3, (block["family"], name, diff)
    assert "meta" not in payload  # Several families: meta lives per block.
    assert [b["family"] for b in json.loads(out.read_text())["families"]] == (
        FAMILY_NAMES)

    printed = capsys.readouterr().out
    for peer in ("BertBackbone", "AlbertBackbone", "RobertaBackbone",
                 "DistilBertBackbone", "ElectraBackbone"):
        assert f"kerasbert vs keras-hub {peer}  [quick:" in printed
    summary = printed[printed.index("ours/keras-hub   forward jit=off"):]
    for family in FAMILY_NAMES:
        assert f"\n{family} " in summary


def test_default_sizes_per_family(bench):
    # Config resolution only (no model is built).
    resolved = bench.resolve_families(bench.parse_args(["--family", "all"]))
    assert [name for name, _, _ in resolved] == FAMILY_NAMES
    configs = {name: (config_name, config)
               for name, config_name, config in resolved}
    assert configs["bert"][0] == "bert_mini"
    for name, (config_name, config) in configs.items():
        # Every family at bert_mini's depth and widths.
        assert (config["num_layers"], config["num_heads"],
                config["hidden_dim"], config["intermediate_dim"]) == (
            4, 4, 256, 1024), name
    assert configs["albert"][0] == "albert_base scaled to bert_mini size"
    assert configs["albert"][1]["embedding_dim"] == 128
    assert configs["roberta"][1]["vocabulary_size"] == 50265
    assert "num_segments" not in configs["distil_bert"][1]


def test_preset_picks_the_family(bench):
    (name, config_name, config), = bench.resolve_families(
        bench.parse_args(["--preset", "roberta_base"]))
    assert (name, config_name, config["num_layers"]) == (
        "roberta", "roberta_base", 12)


@pytest.mark.parametrize("argv, message", [
    (["--preset", "albert_base", "--family", "roberta"],
     "'albert_base' belongs to family albert, not --family roberta"),
    (["--preset", "bert_mini", "--family", "all"],
     "with --family all each family runs its default size"),
])
def test_preset_and_family_conflicts_are_clear_errors(bench, argv, message):
    with pytest.raises(bench.BenchError, match=message):
        bench.main(argv)


def test_unknown_family_exits_nonzero(bench):
    with pytest.raises(SystemExit) as info:
        bench.parse_args(["--family", "xlnet"])
    assert info.value.code != 0
