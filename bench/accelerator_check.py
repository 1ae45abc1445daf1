"""The Keras backbones and task models on one accelerator, under JAX.

    KERAS_BACKEND=jax python bench/accelerator_check.py --out results.json
    KERAS_BACKEND=jax python bench/accelerator_check.py --smoke   # tiny, CPU, seconds

Runs where only JAX (with CUDA) and Keras are installed: no TensorFlow, no
tensorflow-text, no keras-hub (`kerasbert.models` and `kerasbert.tasks`
import none of them under the JAX backend; tests/bench/
test_accelerator_check.py runs `--smoke` with all three blocked). Sections,
in this order (`--budget-s` skips what no longer fits, with a note, so one
run stays under 10 minutes; `--sections` picks some):

  train      BertPretrainer (masked LM + NSP, its default sparse last layer)
             training steps/s and model FLOPs utilisation (MFU), for each
             model (bert_base, bert_large) x sequence (128, 512) x precision
             (mixed_bfloat16, float32)
  equality   one seeded training step's loss (and the next step's, after the
             update) on the default device against the same step on the CPU
             (`jax.devices("cpu")`), within a tolerance
  serving    latency of the jit-compiled forward pass (a TextClassifier:
             `stateless_call` under `jax.jit`) at batch 1 and 32, bfloat16
  tasks      a training step of TextClassifier, TokenClassifier,
             QuestionAnswerer and MultipleChoice (steps/s, MFU)
  max_batch  the largest batch that fits (bfloat16 pretraining): doubling
             from twice the timing batch up to a cap, out-of-memory caught

The step is the canonical Keras-on-JAX loop: `model.stateless_call` +
`jax.value_and_grad` + `optimizer.stateless_apply` under one `jax.jit`
(state donated), with kerasbert's pretraining optimizer (AdamW, warm-up
and decay, global-norm clipping 1.0).

FLOPs (`pretraining_flops`, `task_flops`): matmuls only, 2 per multiply-add,
forward + backward = 3 x forward. Per sequence of T tokens, with L layers,
width H, feed-forward I, vocabulary V, P masked positions:

    one layer, R query rows   2*T*2*H^2 (K, V) + 2*R*(2*H^2 + 2*H*I) (Q, output, FFN)
                              + 4*R*T*H (scores and weighted values)
    encoder                   L layers with R = T; with the sparse last layer
                              (BertPretrainer's default), its R = 1 + P
    heads                     2*P*(H^2 + H*V) (MLM transform, tied decoder)
                              + 2*H^2 + 4*H (pooler, NSP)
    step                      3 * B * (encoder + heads)

With R = T throughout this is the usual 6 * N * tokens + 12 * L * T * H *
tokens (N = L * (4*H^2 + 2*H*I) encoder matmul weights) plus the heads.
MFU = FLOPs per step * steps/s / the card's peak (`PEAK_TFLOPS`, dense, by
device name). float32 runs with `jax_default_matmul_precision="highest"`
(true FP32, peak 67 on H100/H200) unless `--fp32-matmul tf32`. XLA's own
count of the compiled step (`cost_analysis`) is reported beside the
analytic one.
"""

import argparse
import contextlib
import dataclasses
import gc
import json
import math
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent

# Dense (no sparsity) peak TFLOP/s by a substring of JAX's `device_kind`,
# first match wins. NVIDIA's data sheets; float32 is the non-tensor-core
# rate, tf32 the tensor-core rate float32 matmuls get by default on JAX.
PEAK_TFLOPS = (
    ("H100 PCIe", {"bfloat16": 756.0, "tf32": 378.0, "float32": 51.0}),
    ("H100 NVL", {"bfloat16": 835.0, "tf32": 418.0, "float32": 60.0}),
    ("H100", {"bfloat16": 989.0, "tf32": 494.0, "float32": 67.0}),  # SXM
    ("H200", {"bfloat16": 989.0, "tf32": 494.0, "float32": 67.0}),  # GH200 too
    ("A100", {"bfloat16": 312.0, "tf32": 156.0, "float32": 19.5}),
)

GOAL_MFU = 0.5  # bert_base pretraining, bfloat16 (issue 35)
SECTIONS = ("train", "equality", "serving", "tasks", "max_batch")
PRECISIONS = ("mixed_bfloat16", "float32")
TASKS = ("TextClassifier", "TokenClassifier", "QuestionAnswerer", "MultipleChoice")
# The optimisation level that makes XLA:CPU compile in a fraction of the
# time (smoke mode: its timings mean nothing anyway).
SMOKE_XLA_FLAGS = "--xla_backend_optimization_level=0"


class CheckError(Exception):
    """A usage problem: printed as one line, exit 2."""


@dataclasses.dataclass
class Plan:
    """What one run measures."""

    models: dict  # name -> (preset, overrides)
    seqs: tuple
    batch: dict  # sequence length -> timing batch
    batch_cap: dict  # sequence length -> largest batch the search tries
    serving_batches: tuple = (1, 32)
    equality_batch: int = 4
    equality_precisions: tuple = PRECISIONS[::-1]  # float32 first
    min_seconds: float = 3.0  # timing window of a row
    chunk: int = 5  # steps between syncs while timing
    reserve_s: dict = dataclasses.field(default_factory=dict)  # item -> seconds it needs


FULL = Plan(
    models={"bert_base": ("bert_base", {}), "bert_large": ("bert_large", {})},
    seqs=(128, 512),
    batch={128: 64, 512: 16},
    batch_cap={128: 2048, 512: 512},
    reserve_s={"train:bert_base": 45, "train:bert_large": 75, "equality": 90,
               "serving:bert_base": 15, "serving:bert_large": 25, "tasks": 30,
               "max_batch:bert_base": 30, "max_batch:bert_large": 60},
)
SMOKE = Plan(
    models={"tiny": ("bert_tiny", {"num_layers": 2, "hidden_dim": 32, "num_heads": 2,
                                   "intermediate_dim": 64, "vocabulary_size": 512,
                                   "max_sequence_length": 32})},
    seqs=(16,),
    batch={16: 4},
    batch_cap={16: 8},
    serving_batches=(1, 32),
    equality_batch=2,
    equality_precisions=("float32",),
    min_seconds=0.05,
    chunk=1,
)


def masked_positions(seq):
    """P: BERT's max_predictions_per_seq (20 at 128, 80 at 512), 15% of T."""
    return {128: 20, 512: 80}.get(seq, max(1, round(0.15 * seq)))


# --- FLOPs and MFU (plain Python) ----------------------------------------------


def _layer_flops(seq, rows, hidden, intermediate):
    """Forward matmul FLOPs of one encoder layer whose keys and values cover
    `seq` positions and whose queries (and everything after) `rows`."""
    return (2 * seq * 2 * hidden * hidden
            + 2 * rows * (2 * hidden * hidden + 2 * hidden * intermediate)
            + 4 * rows * seq * hidden)


def encoder_flops(config, seq, last_rows=None):
    """Forward matmul FLOPs of the encoder on one sequence (`last_rows`:
    query rows of the last layer; None: all `seq`)."""
    layers, hidden, inter = config["num_layers"], config["hidden_dim"], config["intermediate_dim"]
    last = seq if last_rows is None else last_rows
    return ((layers - 1) * _layer_flops(seq, seq, hidden, inter)
            + _layer_flops(seq, last, hidden, inter))


def pretraining_flops(config, batch, seq, predictions, sparse_last_layer=True,
                      sentence=True):
    """Matmul FLOPs of one BertPretrainer training step (module doc)."""
    hidden, vocab = config["hidden_dim"], config["vocabulary_size"]
    forward = encoder_flops(config, seq, 1 + predictions if sparse_last_layer else None)
    forward += 2 * predictions * (hidden * hidden + hidden * vocab)
    if sentence:
        forward += 2 * hidden * hidden + 2 * hidden * 2
    return 3 * batch * forward


def task_flops(task, config, batch, seq, outputs):
    """Matmul FLOPs of one training step of a task model (`outputs`:
    classes, labels or choices; MultipleChoice's batch counts questions)."""
    hidden = config["hidden_dim"]
    rows = batch * (outputs if task == "MultipleChoice" else 1)
    forward = encoder_flops(config, seq)
    if task in ("TextClassifier", "MultipleChoice"):
        forward += 2 * hidden * hidden + 2 * hidden * (1 if task == "MultipleChoice" else outputs)
    else:  # a dense head on every token: labels, or start/end logits
        forward += 2 * seq * hidden * (outputs if task == "TokenClassifier" else 2)
    return 3 * rows * forward


def peak_tflops(device_kind, precision, fp32_matmul="highest", override=None):
    """The card's dense peak for `precision` ("mixed_bfloat16", "float32"),
    or None for a card not in `PEAK_TFLOPS` (and no `override`)."""
    key = "bfloat16" if "bfloat16" in precision else (
        "tf32" if fp32_matmul == "tf32" else "float32")
    if override:
        return override.get(key, override.get("any"))
    for name, peaks in PEAK_TFLOPS:
        if name.lower() in (device_kind or "").lower():
            return peaks[key]
    return None


def mfu(flops_per_step, steps_per_s, peak):
    if not peak or not steps_per_s:
        return None
    return flops_per_step * steps_per_s / (peak * 1e12)


# --- budget, out of memory, the batch search (plain Python) ----------------------


class Budget:
    """Seconds left of `--budget-s`, counted from the script's start."""

    def __init__(self, seconds, start=None, clock=time.monotonic):
        self.seconds, self.clock = float(seconds), clock
        self.start = clock() if start is None else start

    def left(self):
        return self.seconds - (self.clock() - self.start)

    def allows(self, reserve):
        """Whether an item needing `reserve` seconds still fits."""
        return self.left() > reserve


def is_out_of_memory(error):
    text = f"{type(error).__name__}: {error}"
    return any(s in text for s in ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory",
                                   "OOM when allocating"))


def largest_batch(try_batch, start, cap, allows=lambda: True):
    """Doubling search: `try_batch(b)` for b = start, 2*start, ... <= cap,
    until one runs out of memory (`is_out_of_memory`; other errors pass
    through) or `allows()` says the budget is spent. Returns
    {"largest_fit", "first_failed", "stopped_by", "tries"}; `try_batch`
    returns a dict of measurements for a batch that fits."""
    tries, largest, failed, stopped = [], None, None, "cap"
    batch = start
    while batch <= cap:
        if not allows():
            stopped = "budget"
            break
        try:
            row = try_batch(batch)
        except Exception as err:  # noqa: BLE001 (only out-of-memory is expected)
            if not is_out_of_memory(err):
                raise
            tries.append({"batch": batch, "fits": False,
                          "error": str(err).strip().splitlines()[0][:200]})
            failed, stopped = batch, "out_of_memory"
            break
        tries.append({"batch": batch, "fits": True, **row})
        largest = batch
        batch *= 2
    return {"largest_fit": largest, "first_failed": failed, "stopped_by": stopped,
            "tries": tries}


# --- the accelerator part (imports JAX and Keras) -----------------------------------


def _set_up_environment(args):
    backend = os.environ.setdefault("KERAS_BACKEND", "jax")
    if backend != "jax":
        raise CheckError(f"KERAS_BACKEND={backend}: this check runs under KERAS_BACKEND=jax.")
    if "keras" in sys.modules and sys.modules["keras"].backend.backend() != "jax":
        raise CheckError("Keras is already imported with another backend; run this "
                         "script in a fresh process with KERAS_BACKEND=jax.")
    if args.smoke:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_backend_optimization_level" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} {SMOKE_XLA_FLAGS}".strip()
    # JAX takes 75% of the GPU by default; the batch search wants more.
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.92")
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))  # a checkout, not installed


class Runner:
    """Builds the models and runs the sections; `results` is the report."""

    def __init__(self, args, plan, budget):
        import jax
        import keras
        import numpy as np

        self.jax, self.keras, self.np = jax, keras, np
        self.args, self.plan, self.budget = args, plan, budget
        self.device = jax.devices()[0]
        try:
            self.cpu = jax.devices("cpu")[0]
        except RuntimeError:  # JAX_PLATFORMS without "cpu"
            self.cpu = None
        self.kind = getattr(self.device, "device_kind", self.device.platform)
        self.override = _parse_peak(args.peak_tflops)
        self.results = {"train": [], "equality": [], "serving": [], "tasks": [],
                        "max_batch": [], "skipped": []}
        self.out = args.out

    # --- building ---------------------------------------------------------

    def backbone_config(self, model_name, dropout=None):
        from kerasbert.models import BertBackbone

        preset, overrides = self.plan.models[model_name]
        config = BertBackbone.preset_config(preset, **overrides)
        if dropout is not None:
            config["dropout"] = dropout
        return config

    def backbone(self, model_name, precision, dropout=None):
        from kerasbert.models import BertBackbone

        return BertBackbone(**self.backbone_config(model_name, dropout), dtype=precision)

    def pretrainer(self, model_name, precision, dropout=None):
        from kerasbert.optimizers import create_optimizer
        from kerasbert.tasks import BertPretrainer

        self.keras.utils.set_random_seed(self.args.seed)
        model = BertPretrainer(self.backbone(model_name, precision, dropout))
        optimizer = create_optimizer(1e-4, num_train_steps=10_000, warmup_steps=1_000)
        optimizer.build(model.trainable_variables)
        return model, optimizer

    def pretraining_batch(self, model_name, batch, seq):
        np = self.np
        config = self.backbone_config(model_name)
        rng = np.random.default_rng(self.args.seed)
        predictions = masked_positions(seq)
        vocab = config["vocabulary_size"]
        positions = np.sort(np.argsort(rng.random((batch, seq - 2)), axis=1)[:, :predictions] + 1,
                            axis=1)
        types = (np.arange(seq)[None] >= seq // 2).astype("int32")
        return {
            "input_word_ids": rng.integers(5, vocab, (batch, seq)).astype("int32"),
            "input_mask": np.ones((batch, seq), "int32"),
            "input_type_ids": np.repeat(types, batch, axis=0),
            "masked_lm_positions": positions.astype("int32"),
            "masked_lm_ids": rng.integers(5, vocab, (batch, predictions)).astype("int32"),
            "masked_lm_weights": np.ones((batch, predictions), "float32"),
            "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
        }

    # --- the step ---------------------------------------------------------

    def train_step(self, model, optimizer, loss_of, donate=True):
        """jit(step)(state, (x, y)) -> (loss, state); state = (trainable,
        non-trainable, optimizer variables)."""
        jax = self.jax

        def compute(trainable, non_trainable, x, y):
            outputs, non_trainable = model.stateless_call(trainable, non_trainable, x,
                                                          training=True)
            return loss_of(x, y, outputs), non_trainable

        grad = jax.value_and_grad(compute, has_aux=True)

        def step(state, data):
            trainable, non_trainable, opt = state
            (loss, non_trainable), grads = grad(trainable, non_trainable, *data)
            trainable, opt = optimizer.stateless_apply(opt, grads, trainable)
            return loss, (trainable, non_trainable, opt)

        return jax.jit(step, donate_argnums=(0,) if donate else ())

    @staticmethod
    def state_of(model, optimizer):
        return ([v.value for v in model.trainable_variables],
                [v.value for v in model.non_trainable_variables],
                [v.value for v in optimizer.variables])

    def compile(self, jitted, *args):
        start = time.perf_counter()
        compiled = jitted.lower(*args).compile()
        seconds = time.perf_counter() - start
        cost = compiled.cost_analysis()
        if isinstance(cost, (list, tuple)):
            cost = cost[0] if cost else {}
        return compiled, seconds, float((cost or {}).get("flops", 0.0)) or None

    def time_steps(self, run, state, data):
        """(first loss, last loss, steps/s, state): one warm-up step, then
        chunks of steps until the timing window is over."""
        jax = self.jax
        loss, state = run(state, data)
        first = float(loss)
        steps, start = 0, time.perf_counter()
        while True:
            for _ in range(self.plan.chunk):
                loss, state = run(state, data)
            steps += self.plan.chunk
            jax.block_until_ready((loss, state))
            elapsed = time.perf_counter() - start
            if (elapsed >= self.plan.min_seconds and steps >= 3) or steps >= 500:
                break
        return first, float(loss), steps / elapsed, state

    def matmul_precision(self, precision):
        if precision == "float32" and self.args.fp32_matmul == "highest":
            return self.jax.default_matmul_precision("highest")
        return contextlib.nullcontext()

    def peak(self, precision):
        return peak_tflops(self.kind, precision, self.args.fp32_matmul, self.override)

    # --- sections ---------------------------------------------------------

    def skip(self, item, why):
        note = {"item": item, "why": why}
        self.results["skipped"].append(note)
        print(f"skipped {item}: {why}", flush=True)

    def fits(self, item, reserve_key):
        reserve = self.plan.reserve_s.get(reserve_key, 0)
        if self.budget.allows(reserve):
            return True
        self.skip(item, f"budget ({self.budget.left():.0f}s left of --budget-s "
                        f"{self.budget.seconds:.0f}, the item needs ~{reserve}s)")
        return False

    def pretraining_row(self, model_name, seq, precision, batch, built=None, host_state=None):
        """One timed row; `built` (model, optimizer) and its `host_state`
        (numpy) let the batch search start every try from the same
        weights (the step donates, so it gets fresh device buffers)."""
        jax = self.jax
        model, optimizer = built or self.pretrainer(model_name, precision)
        config = self.backbone_config(model_name)
        data = (jax.device_put(self.pretraining_batch(model_name, batch, seq), self.device),
                None)
        loss_of = pretraining_loss(model)
        with self.matmul_precision(precision):
            state = jax.device_put(self.state_of(model, optimizer) if host_state is None
                                   else host_state, self.device)
            compiled, compile_s, xla_flops = self.compile(
                self.train_step(model, optimizer, loss_of), state, data)
            first, last, rate, state = self.time_steps(compiled, state, data)
        del state, data, compiled
        flops = pretraining_flops(config, batch, seq, masked_positions(seq),
                                  sparse_last_layer=model.sparse_last_layer)
        peak = self.peak(precision)
        return {"model": model_name, "seq": seq, "precision": precision, "batch": batch,
                "tokens_per_step": batch * seq, "compile_s": round(compile_s, 2),
                "steps_per_s": rate, "sequences_per_s": rate * batch,
                "model_tflop_per_step": flops / 1e12,
                "xla_tflop_per_step": xla_flops / 1e12 if xla_flops else None,
                "achieved_tflops": flops * rate / 1e12, "peak_tflops": peak,
                "mfu": mfu(flops, rate, peak), "first_loss": first, "last_loss": last,
                "finite": math.isfinite(first) and math.isfinite(last)}

    def run_train(self):
        # bfloat16 first (the goal's rows), bert_base before bert_large.
        order = [(m, s, p) for p in PRECISIONS for m in self.plan.models for s in self.plan.seqs]
        for model_name, seq, precision in order:
            item = f"train {model_name} T={seq} {precision}"
            if not self.fits(item, f"train:{model_name}"):
                continue
            row = self.pretraining_row(model_name, seq, precision, self.plan.batch[seq])
            self.results["train"].append(row)
            self.report(item, row)
            self.collect()

    def run_equality(self):
        jax, np = self.jax, self.np
        model_name, seq = next(iter(self.plan.models)), self.plan.seqs[0]
        on_cpu = self.device.platform == "cpu"
        if self.cpu is None:
            self.skip("equality", "no CPU device (JAX_PLATFORMS leaves out cpu)")
            return
        for precision in self.plan.equality_precisions:
            rtol = 1e-3 if precision == "float32" else 3e-2
            item = f"equality {model_name} T={seq} {precision}"
            if not self.fits(item, "equality"):
                continue
            model, optimizer = self.pretrainer(model_name, precision, dropout=0.0)
            step = self.train_step(model, optimizer, pretraining_loss(model), donate=False)
            host_state = jax.device_get(self.state_of(model, optimizer))
            batch = self.pretraining_batch(model_name, self.plan.equality_batch, seq)
            losses = {}
            # float32 matmuls at full precision on both sides, whatever --fp32-matmul.
            with jax.default_matmul_precision("highest"):
                for where, device in (("device", self.device), ("cpu", self.cpu)):
                    state = jax.device_put(host_state, device)
                    data = (jax.device_put(batch, device), None)
                    first, state = step(state, data)
                    second, _ = step(state, data)
                    losses[where] = (float(first), float(second))
            diffs = [abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses["device"],
                                                                      losses["cpu"])]
            row = {"model": model_name, "seq": seq, "precision": precision,
                   "batch": self.plan.equality_batch, "device_losses": losses["device"],
                   "cpu_losses": losses["cpu"], "max_relative_difference": max(diffs),
                   "rtol": rtol, "equal": bool(np.all(np.array(diffs) <= rtol)),
                   "note": ("the default device is the CPU: compared with itself"
                            if on_cpu else "dropout 0; float32 matmuls at 'highest'")}
            self.results["equality"].append(row)
            self.report(item, row)
            del model, optimizer, host_state
            self.collect()

    def run_serving(self):
        from kerasbert.tasks import TextClassifier

        jax, np = self.jax, self.np
        for model_name in self.plan.models:
            for seq in self.plan.seqs:
                item = f"serving {model_name} T={seq}"
                if not self.fits(item, f"serving:{model_name}"):
                    continue
                self.keras.utils.set_random_seed(self.args.seed)
                model = TextClassifier(self.backbone(model_name, "mixed_bfloat16"),
                                       num_classes=2)
                state = jax.device_put(([v.value for v in model.trainable_variables],
                                        [v.value for v in model.non_trainable_variables]),
                                       self.device)
                forward = jax.jit(lambda tv, ntv, x: model.stateless_call(  # noqa: B023
                    tv, ntv, x, training=False)[0])
                for batch in self.plan.serving_batches:
                    full = self.pretraining_batch(model_name, batch, seq)
                    x = jax.device_put({k: full[k] for k in ("input_word_ids", "input_mask",
                                                             "input_type_ids")}, self.device)
                    compiled, compile_s, _ = self.compile(forward, *state, x)
                    for _ in range(2):
                        jax.block_until_ready(compiled(*state, x))
                    times, start = [], time.perf_counter()
                    while len(times) < 5 or (time.perf_counter() - start < 1.0
                                             and len(times) < 200):
                        t = time.perf_counter()
                        jax.block_until_ready(compiled(*state, x))
                        times.append((time.perf_counter() - t) * 1e3)
                    row = {"model": model_name, "seq": seq, "precision": "mixed_bfloat16",
                           "batch": batch, "compile_s": round(compile_s, 2),
                           "p50_ms": statistics.median(times),
                           "p90_ms": float(np.percentile(times, 90)), "min_ms": min(times),
                           "calls": len(times)}
                    self.results["serving"].append(row)
                    self.report(f"{item} batch {batch}", row)
                del model, state
                self.collect()

    def task_case(self, task, model_name, seq, batch):
        """(model, loss_of, (x, (y, sample_weight)), outputs) of one task."""
        from kerasbert import tasks

        np = self.np
        rng = np.random.default_rng(self.args.seed)
        backbone = self.backbone(model_name, "mixed_bfloat16")
        vocab = backbone.vocabulary_size

        def ids(*shape):
            return {"input_word_ids": rng.integers(5, vocab, shape).astype("int32"),
                    "input_mask": np.ones(shape, "int32"),
                    "input_type_ids": np.zeros(shape, "int32")}

        weights = None
        if task == "TextClassifier":
            outputs, model = 3, tasks.TextClassifier(backbone, num_classes=3)
            x, y = ids(batch, seq), rng.integers(0, 3, (batch,))
        elif task == "TokenClassifier":
            outputs, model = 9, tasks.TokenClassifier(backbone, num_labels=9)
            x, y = ids(batch, seq), rng.integers(0, 9, (batch, seq))
            weights = (rng.random((batch, seq)) < 0.7).astype("float32")
        elif task == "QuestionAnswerer":
            outputs, model = 2, tasks.QuestionAnswerer(backbone)
            x = ids(batch, seq)
            y = {"start_logits": rng.integers(0, seq, (batch,)),
                 "end_logits": rng.integers(0, seq, (batch,))}
        else:
            outputs, model = 4, tasks.MultipleChoice(backbone, num_choices=4)
            x, y = ids(batch, 4, seq), rng.integers(0, 4, (batch,))
        loss = model.default_loss()

        def loss_of(x, labels, out):
            y, w = labels
            if isinstance(loss, dict):
                return sum(loss[k](y[k], out[k]) for k in loss)
            return loss(y, out, sample_weight=w)

        return model, loss_of, (x, (y, weights)), outputs

    def run_tasks(self):
        from kerasbert.optimizers import create_optimizer

        jax = self.jax
        model_name, seq = next(iter(self.plan.models)), self.plan.seqs[0]
        config = self.backbone_config(model_name)
        for task in TASKS:
            item = f"tasks {task} {model_name} T={seq} mixed_bfloat16"
            if not self.fits(item, "tasks"):
                continue
            self.keras.utils.set_random_seed(self.args.seed)
            batch = self.plan.batch[seq] // (4 if task == "MultipleChoice" else 1) or 1
            model, loss_of, data, outputs = self.task_case(task, model_name, seq, batch)
            optimizer = create_optimizer(2e-5, num_train_steps=1_000, warmup_steps=100)
            optimizer.build(model.trainable_variables)
            data = jax.device_put(data, self.device)
            state = jax.device_put(self.state_of(model, optimizer), self.device)
            compiled, compile_s, xla_flops = self.compile(
                self.train_step(model, optimizer, loss_of), state, data)
            first, last, rate, state = self.time_steps(compiled, state, data)
            flops = task_flops(task, config, batch, seq, outputs)
            peak = self.peak("mixed_bfloat16")
            row = {"task": task, "model": model_name, "seq": seq, "precision": "mixed_bfloat16",
                   "batch": batch, "compile_s": round(compile_s, 2), "steps_per_s": rate,
                   "model_tflop_per_step": flops / 1e12,
                   "xla_tflop_per_step": xla_flops / 1e12 if xla_flops else None,
                   "mfu": mfu(flops, rate, peak), "first_loss": first, "last_loss": last,
                   "finite": math.isfinite(first) and math.isfinite(last)}
            self.results["tasks"].append(row)
            self.report(item, row)
            del model, state, compiled, data
            self.collect()

    def run_max_batch(self):
        jax = self.jax
        precision = "mixed_bfloat16"
        for model_name in self.plan.models:
            for seq in self.plan.seqs:
                item = f"max_batch {model_name} T={seq} {precision}"
                reserve = f"max_batch:{model_name}"
                if not self.fits(item, reserve):
                    continue
                built = self.pretrainer(model_name, precision)
                host = jax.device_get(self.state_of(*built))

                def try_batch(batch):
                    try:
                        row = self.pretraining_row(model_name, seq, precision, batch,
                                                   built=built, host_state=host)  # noqa: B023
                    finally:
                        self.collect()
                    return {k: row[k] for k in ("steps_per_s", "sequences_per_s", "mfu",
                                                 "compile_s", "finite")}

                start = 2 * self.plan.batch[seq]
                result = largest_batch(
                    try_batch, start, self.plan.batch_cap[seq],
                    allows=lambda: self.budget.allows(  # noqa: B023
                        self.plan.reserve_s.get(reserve, 0)))
                row = {"model": model_name, "seq": seq, "precision": precision,
                       "cap": self.plan.batch_cap[seq], **result}
                self.results["max_batch"].append(row)
                self.report(item, row)
                del built, host
                self.collect()

    # --- reporting ----------------------------------------------------------

    def collect(self):
        gc.collect()

    def report(self, item, row):
        shown = {k: (float(f"{v:.4g}") if isinstance(v, float) else v)
                 for k, v in row.items() if k not in ("tries",)}
        print(f"{item}: {json.dumps(shown)}", flush=True)
        self.write()

    def environment(self):
        import jax
        import keras

        memory = None
        with contextlib.suppress(Exception):
            stats = self.device.memory_stats() or {}
            memory = stats.get("bytes_limit")
        return {"python": platform.python_version(), "platform": platform.platform(),
                "jax": jax.__version__, "keras": keras.__version__,
                "backend": keras.backend.backend(), "device": str(self.device),
                "device_kind": self.kind, "device_platform": self.device.platform,
                "device_count": jax.device_count(),
                "device_memory_gb": round(memory / 2**30, 1) if memory else None,
                "xla_flags": os.environ.get("XLA_FLAGS", ""),
                "fp32_matmul": self.args.fp32_matmul,
                "peak_tflops": {p: self.peak(p) for p in PRECISIONS},
                "tensorflow_imported": "tensorflow" in sys.modules,
                "keras_hub_imported": "keras_hub" in sys.modules}

    def goal(self):
        rows = [r for r in self.results["train"] if r["model"] == "bert_base"
                and r["precision"] == "mixed_bfloat16" and r["mfu"] is not None]
        rows += [dict(t, model="bert_base") for m in self.results["max_batch"]
                 if m["model"] == "bert_base" for t in m["tries"]
                 if t.get("fits") and t.get("mfu") is not None]
        best = max((r["mfu"] for r in rows), default=None)
        return {"what": "MFU of bert_base pretraining in bfloat16", "target": GOAL_MFU,
                "best_measured": best, "met": None if best is None else best >= GOAL_MFU}

    def write(self):
        if not self.out:
            return
        payload = dict(self.results, env=self.environment(), goal=self.goal(),
                       plan=dataclasses.asdict(self.plan),
                       smoke=self.args.smoke, budget_s=self.budget.seconds,
                       elapsed_s=round(self.budget.clock() - self.budget.start, 1),
                       flops_formula=FLOPS_FORMULA)
        _write_json(self.out, payload)
        return payload


FLOPS_FORMULA = (
    "matmul FLOPs, 2 per multiply-add, step = 3 x forward; one layer with R query rows over "
    "T positions: 4*T*H^2 + 2*R*(2*H^2 + 2*H*I) + 4*R*T*H; encoder: L layers with R = T "
    "(BertPretrainer's sparse last layer: R = 1 + P); heads: 2*P*(H^2 + H*V) + 2*H^2 + 4*H; "
    "= 6*N*tokens + 12*L*T*H*tokens + heads when R = T (N = L*(4H^2 + 2HI))")


def pretraining_loss(model):
    """loss_of(x, y, outputs) of a pretrainer: its own loss terms from the
    feature dict (the labels are features; y is None)."""
    def loss_of(x, y, outputs):
        del y
        return model.combine_loss_terms(model.loss_terms(x, outputs))

    return loss_of


def _parse_peak(text):
    if not text:
        return None
    parts = [float(p) for p in str(text).split(",")]
    if len(parts) == 1:
        return {"any": parts[0]}
    if len(parts) == 2:
        return {"bfloat16": parts[0], "float32": parts[1], "tf32": parts[1]}
    raise CheckError(f"--peak-tflops {text!r}: give X, or BF16,FP32.")


def _write_json(path, payload):
    """Atomically (a killed run leaves the last complete report)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1, default=float)
        f.write("\n")
    os.replace(tmp, path)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="A tiny model on the CPU (seconds): the suite's run.")
    parser.add_argument("--out", default=None, help="Write the results JSON here.")
    parser.add_argument("--budget-s", type=float, default=480.0,
                        help="Start no item after this many seconds minus what it needs "
                        "(default 480: the run ends under 10 minutes).")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"Comma-separated, from {', '.join(SECTIONS)} (default all).")
    parser.add_argument("--models", default=None,
                        help="Comma-separated model names (default bert_base,bert_large).")
    parser.add_argument("--seqs", default=None, help="Sequence lengths (default 128,512).")
    parser.add_argument("--fp32-matmul", choices=("highest", "tf32"), default="highest",
                        help="float32 matmuls: true FP32 (peak 67 on H100) or TF32.")
    parser.add_argument("--peak-tflops", default=None,
                        help="Peak TFLOP/s for a card not in the table: X, or BF16,FP32.")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown {', '.join(unknown)}; known: {', '.join(SECTIONS)}.")
    args.sections = sections
    if args.budget_s < 0:
        parser.error("--budget-s must be >= 0.")
    return args


def make_plan(args):
    base = SMOKE if args.smoke else FULL
    plan = dataclasses.replace(base, models=dict(base.models), batch=dict(base.batch),
                               batch_cap=dict(base.batch_cap))
    if args.models:
        known = {**FULL.models, **SMOKE.models}
        names = args.models.split(",")
        missing = [n for n in names if n not in known]
        if missing:
            raise CheckError(f"--models: unknown {', '.join(missing)}; known: "
                             f"{', '.join(known)}.")
        plan.models = {n: known[n] for n in names}
    if args.seqs:
        plan.seqs = tuple(int(s) for s in args.seqs.split(","))
        for seq in plan.seqs:
            plan.batch.setdefault(seq, max(1, 8192 // seq) if not args.smoke else 4)
            plan.batch_cap.setdefault(seq, 16 * plan.batch[seq])
    return plan


def main(argv=None):
    clock_start = time.monotonic()
    args = parse_args(argv)
    try:
        plan = make_plan(args)
        _set_up_environment(args)
        runner = Runner(args, plan, Budget(args.budget_s, start=clock_start))
    except CheckError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"device: {runner.kind} ({runner.device.platform}); budget {args.budget_s:.0f}s; "
          f"sections {', '.join(args.sections)}", flush=True)
    for section in SECTIONS:
        if section in args.sections:
            getattr(runner, f"run_{section}")()
    payload = runner.write() or dict(runner.results, goal=runner.goal(),
                                     env=runner.environment())
    goal = payload["goal"]
    best = goal["best_measured"]
    verdict = ("no peak for this device" if goal["met"] is None
               else "met" if goal["met"] else "NOT met")
    print(f"goal: {goal['what']} >= {goal['target']:.0%}: best "
          f"{'n/a' if best is None else format(best, '.1%')} ({verdict})")
    print(f"total {time.monotonic() - clock_start:.1f}s")
    bad = [r for r in payload["equality"] if not r["equal"]]
    bad += [r for r in payload["train"] + payload["tasks"] if not r["finite"]]
    if bad:
        print(f"FAILED: {len(bad)} row(s) not equal to the CPU or not finite", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
