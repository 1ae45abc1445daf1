"""bench/serving_bench.py runs end to end (--quick: a one-layer model at
length 32, every serving path); timings are never asserted, agreement is."""

import json

from bench_loader import load_bench


def test_quick_run_serves_every_path(tmp_path):
    bench = load_bench("serving_bench")
    results = bench.main(["--quick", "--json", str(tmp_path / "serving.json")])
    [case] = results["cases"]
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
