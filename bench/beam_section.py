"""data_bench's Beam section: the pretraining-data writer on Apache Beam's
DirectRunner (multi-process) against the local writer, at corpus scale.

The corpus is the built-in one (kerasbert.data.default_corpus: the standard
library's docstrings) resampled: documents drawn with replacement by a
seeded RNG until --beam-mb MB, written as --beam-files files (a Beam run
parallelises over files, as corpora come sharded). The S slice is the
first quarter of the files, 4S all of them.

Both writers run in a fresh process with the same options and the same
number of worker processes. Measured: input MB/s (wall time, start-up
included), the peak RSS of each process of the tree (workers and the
driver apart), and the fixed start-up cost, from the two sizes
(t = start-up + MB / throughput). The instance counts must agree (the
test suite checks the records byte for byte).
"""

import json
import os
import pathlib
import random
import subprocess
import sys
import time

import _common

MB = 2**20
POLL_S = 0.1
PSS_EVERY = 10  # polls


def resampled_corpus(work, total_mb, num_files, seed=0, log=print):
    """num_files files of about total_mb / num_files MB each, documents of
    the built-in corpus drawn with replacement. Cached under `work`."""
    from kerasbert.data.default_corpus import default_documents

    folder = pathlib.Path(work) / f"beam-corpus-{total_mb:g}mb-{num_files}f-s{seed}"
    files = [folder / f"part-{i:04d}.txt" for i in range(num_files)]
    if all(f.exists() for f in files) and (folder / "done").exists():
        return files
    folder.mkdir(parents=True, exist_ok=True)
    blocks = ["\n".join(doc) + "\n\n" for doc in default_documents()]
    sizes = [len(b.encode("utf-8")) for b in blocks]
    rng = random.Random(seed)
    per_file = total_mb * MB / num_files
    started = time.time()
    for path in files:
        written, parts = 0, []
        while written < per_file:
            i = rng.randrange(len(blocks))
            parts.append(blocks[i])
            written += sizes[i]
        path.write_text("".join(parts), encoding="utf-8")
    (folder / "done").write_text("")
    log(f"  resampled {len(blocks)} built-in documents into {num_files} files, "
        f"{sum(f.stat().st_size for f in files) / MB:.0f} MB ({time.time() - started:.0f}s)")
    return files


def run_per_process(cmd, log_path, cwd):
    """Runs `cmd`, polling every process of its tree. Returns wall seconds
    and the peak RSS of each process: {"driver": bytes, "workers": [bytes]}
    (see `_kind`), and the peak of the whole tree's summed PSS."""
    import psutil

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    peaks, kinds, tree_pss, polls = {}, {}, 0, 0
    with open(log_path, "w") as log:
        start = time.perf_counter()
        proc = psutil.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env)
        while proc.poll() is None:
            try:
                procs = [proc] + proc.children(recursive=True)
            except psutil.NoSuchProcess:
                break
            # PSS splits pages shared between processes (the local pool's
            # workers share their forkserver's TensorFlow); reading it walks
            # /proc/PID/smaps, so it is polled less often than RSS.
            with_pss = polls % PSS_EVERY == 0
            polls += 1
            pss = 0
            for p in procs:
                try:
                    m = p.memory_full_info() if with_pss else p.memory_info()
                    if p.pid not in kinds:
                        kinds[p.pid] = _kind(p, proc)
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    continue
                peaks[p.pid] = max(peaks.get(p.pid, 0), m.rss)
                pss += getattr(m, "pss", m.rss)
            if with_pss:
                tree_pss = max(tree_pss, pss)
            time.sleep(POLL_S)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        tail = pathlib.Path(log_path).read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(map(str, cmd[:6]))} ... exited with {proc.returncode}; "
                           f"log {log_path}:\n{tail}")
    out = {"seconds": wall, "driver": 0, "workers": [], "helpers": [], "tree_pss": tree_pss}
    for pid, rss in peaks.items():
        kind = kinds.get(pid, "helpers")
        if kind == "driver":
            out["driver"] = rss
        else:
            out[kind].append(rss)
    return out


def _kind(p, root):
    """driver (the command), workers (Beam's SDK harness processes; the
    local pool's workers, which the forkserver forks: grandchildren of the
    driver) or helpers (the forkserver, multiprocessing's resource
    tracker)."""
    if p.pid == root.pid:
        return "driver"
    if "sdk_worker_main" in " ".join(p.cmdline()) or p.ppid() != root.pid:
        return "workers"
    return "helpers"


def writer_command(files, vocab, out_dir, runner, workers, dupe_factor, num_shards):
    return [sys.executable, "-m", "kerasbert", "create-pretraining-data",
            "--input", *map(str, files), "--vocab", str(vocab), "--output-dir", str(out_dir),
            "--input-format", "sentences", "--dupe-factor", str(dupe_factor),
            "--num-shards", str(num_shards), "--workers", str(workers), "--runner", runner,
            "--overwrite", "--no-progress"]


def measure(work, vocab, args, log=print):
    """Runs local and direct on S and 4S; returns the results dict."""
    work = pathlib.Path(work)
    files = resampled_corpus(work, args.beam_mb, args.beam_files, log=log)
    slices = {"S": files[:max(1, len(files) // 4)], "4S": files}
    results = {"files": len(files), "dupe_factor": args.beam_dupe_factor,
               "workers": args.workers, "num_shards": args.beam_shards, "runs": {}}
    for key in ("S", "4S"):
        size = sum(f.stat().st_size for f in slices[key])
        for runner in ("local", "direct"):
            out = work / f"beam-out-{runner}-{key}"
            cmd = writer_command(slices[key], vocab, out, runner, args.workers,
                                 args.beam_dupe_factor, args.beam_shards)
            m = run_per_process(cmd, str(out) + ".log", str(_common.REPO_ROOT))
            meta = json.loads((out / "metadata.json").read_text())
            run = {"input_mb": size / MB, "seconds": m["seconds"],
                   "mb_per_s": size / MB / m["seconds"],
                   "driver_rss_mb": m["driver"] / MB,
                   "worker_rss_mb": max(m["workers"], default=0) / MB,
                   "workers_seen": len(m["workers"]),
                   "helper_rss_mb": [r / MB for r in m["helpers"]],
                   "tree_pss_mb": m["tree_pss"] / MB,
                   "instances": meta["num_instances"], "documents": meta["num_documents"]}
            results["runs"][f"{runner}-{key}"] = run
            log(f"  {runner:6s} {run['input_mb']:7.1f} MB: {run['seconds']:7.1f}s "
                f"{run['mb_per_s']:6.2f} MB/s  worker RSS {run['worker_rss_mb']:6.0f} MB "
                f"({run['workers_seen']} workers)  driver {run['driver_rss_mb']:6.0f} MB  "
                f"all processes PSS {run['tree_pss_mb']:6.0f} MB  "
                f"{run['instances']:,} instances")
        a, b = results["runs"][f"local-{key}"], results["runs"][f"direct-{key}"]
        if a["instances"] != b["instances"]:
            raise RuntimeError(f"local and direct wrote {a['instances']} vs {b['instances']} "
                               f"instances from slice {key}")
    for runner in ("local", "direct"):
        s, l4 = results["runs"][f"{runner}-S"], results["runs"][f"{runner}-4S"]
        throughput = (l4["input_mb"] - s["input_mb"]) / max(l4["seconds"] - s["seconds"], 1e-9)
        results[runner] = {
            "steady_mb_per_s": throughput,
            "startup_s": max(0.0, s["seconds"] - s["input_mb"] / throughput),
            "worker_rss_growth": l4["worker_rss_mb"] / s["worker_rss_mb"],
            "driver_rss_growth": l4["driver_rss_mb"] / s["driver_rss_mb"],
            "per_core_mb_per_s": throughput / args.workers,
        }
    return results


def rows(results, make_row):
    """data_bench table rows: Beam (direct) as "ours", local as "peer"."""
    out = []
    r = results["runs"]
    for key in ("S", "4S"):
        d, lo = r[f"direct-{key}"], r[f"local-{key}"]
        out.append(make_row("beam", f"input MB/s, {d['input_mb']:.0f} MB", d["mb_per_s"],
                            lo["mb_per_s"], "MB/s", note="direct vs local"))
        out.append(make_row("beam", f"peak RSS per worker, {d['input_mb']:.0f} MB",
                            d["worker_rss_mb"], lo["worker_rss_mb"], "MB", better="lower"))
        out.append(make_row("beam", f"peak RSS of the driver, {d['input_mb']:.0f} MB",
                            d["driver_rss_mb"], lo["driver_rss_mb"], "MB", better="lower"))
        out.append(make_row("beam", f"peak PSS, all processes, {d['input_mb']:.0f} MB",
                            d["tree_pss_mb"], lo["tree_pss_mb"], "MB", better="lower"))
    d, lo = results["direct"], results["local"]
    out.append(make_row("beam", "peak RSS per worker growth, 4x corpus",
                        d["worker_rss_growth"], lo["worker_rss_growth"], "x", better="lower"))
    out.append(make_row("beam", "steady input MB/s per core", d["per_core_mb_per_s"],
                        lo["per_core_mb_per_s"], "MB/s"))
    out.append(make_row("beam", "fixed start-up cost, s", d["startup_s"], lo["startup_s"],
                        "s", better="lower"))
    return out


def extrapolate(results, corpus_gb=16.0, workers=(8, 32, 128)):
    """Hours for a corpus_gb corpus at the measured per-core throughput of
    the Beam run: EXTRAPOLATED, assuming linear scaling and cores like
    these."""
    per_core = results["direct"]["per_core_mb_per_s"]
    startup = results["direct"]["startup_s"]
    return {n: (startup + corpus_gb * 1024 / (per_core * n)) / 3600 for n in workers}
