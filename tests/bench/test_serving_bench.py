"""bench/serving_bench.py runs end to end (--quick: a one-layer model at
length 32, every serving path); timings are never asserted, agreement is."""

import json

from bench_loader import assert_loads_and_refuses_an_unknown_flag
from bench_loader import run_quick
from slow_marks import slow_covered_by


# About 100 s: ten serving paths timed on one export. The default suite
# exports and serves through the same code, and checks the batching file.
@slow_covered_by("tests/bench/test_serving_bench.py::test_the_script_loads_and_refuses_an_unknown_flag",
                 "tests/serving/test_export.py::test_export_model_trained_in_a_script",
                 "tests/serving/test_batching.py::test_committed_measurements_give_valid_parameters")
def test_quick_run_serves_every_path(tmp_path):
    [case] = run_quick("serving_bench", "--json", str(tmp_path / "serving.json"))["cases"]
    assert set(case["paths"]) == {
        "a_plain", "a_longest", "a_xla", "a_longest_xla", "b_predict", "b_predict_on_batch",
        "b_direct", "b_direct_tf_function", "c_token_ids", "d_model_garden"}
    # Same weights, same tokenization: every path gives (a)'s probabilities.
    assert max(case["agreement_max_abs"].values()) <= 1e-4
    for rows in case["paths"].values():
        assert all(row["calls"] >= 3 and row["examples_per_s"] > 0 for row in rows.values())
    assert 0 < case["tokenization_share"][1] < 5
    assert set(case["cold_start"]) >= {"a_plain", "b_keras_hub"}
    params = case["batching"]["parameters"]
    assert params["max_batch_size"] in case["batching"]["measured_entry"]["throughput"]
    assert json.loads((tmp_path / "serving.json").read_text())["cases"][0]["size"] == "quick"


def test_the_script_loads_and_refuses_an_unknown_flag(capsys):
    assert_loads_and_refuses_an_unknown_flag("serving_bench", capsys)
