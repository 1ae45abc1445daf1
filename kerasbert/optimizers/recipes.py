"""Fine-tuning hyperparameters that fit the model and the task, with where
each number comes from (plain Python: `finetune` resolves them before
TensorFlow loads, `info` shows them).

Two kinds of entries:

* `default_recipe(family, num_layers, hidden_dim, published)`: what
  `finetune` uses for a flag the user did not give, by family and size.
  Narrow models want larger learning rates (Turc et al., 2019, "Well-Read
  Students Learn Better": the 24 Small-BERTs were fine-tuned with rates up
  to 3e-4, and the best rate grows as the width shrinks; for H <= 512 our
  own measurement, bench/finetune_bench.py, found 1e-3 best on models
  pretrained here for 600-1,000 steps, and 3e-4 on a published checkpoint,
  `is_published_checkpoint`: its published row, 3 epochs); BERT-Base/Large
  use the BERT paper's range; RoBERTa, ALBERT, ELECTRA and GPT-1 use their papers'.
* `RECIPES`: named recipes from the papers for the task kinds of the zoo
  (`finetune --recipe NAME`), each with the grid `--search` runs by default.

    name            lr            batch  epochs  warm-up  wd     source
    glue            5e-5..2e-5    32     3       0.1      0.01   BERT (Devlin et al., 2019) sec. 4.1
    squad1          5e-5          32     3       0.1      0.01   BERT sec. 4.2
    squad2          5e-5          48     2       0.1      0.01   BERT sec. 4.3
    swag            2e-5          16     3       0.1      0.01   BERT sec. 4.4
    conll           5e-5..2e-5    32     3       0.1      0.01   BERT sec. 5.3 / App. A.3
    roberta-glue    1e-5..3e-5    16,32  10      0.06     0.1    RoBERTa (Liu et al., 2019) Table 10
    roberta-squad   1.5e-5        48     2       0.06     0.01   RoBERTa Table 10
    albert-glue     1e-5..5e-5    16-128 3       0.06     0.0    ALBERT (Lan et al., 2020) Table 14
    albert-squad1   5e-5          48     2       0.1      0.0    ALBERT Table 14
    albert-squad2   3e-5          48     2       0.1      0.0    ALBERT Table 14
    electra-glue    by size       32     3       0.1      0.0    ELECTRA (Clark et al., 2020) Table 7
    electra-squad   by size       32     2       0.1      0.0    ELECTRA Table 7
    gpt             6.25e-5       32     3       0.002    0.01   GPT (Radford et al., 2018) sec. 4.1
    modernbert-glue 1e-5..8e-5    16,32  3       0.06     0.01   ModernBERT (Warner et al., 2024)
                                                                 GLUE sweeps; a starting point
    transformer     (d*4000)^-.5  32     10      0.1      0.0    Transformer (Vaswani et al., 2017)
                                                                 sec. 5.3-5.4

ModernBERT's row is a STARTING POINT, not a measured optimum: the paper
sweeps every GLUE task over rates {1e-5, 3e-5, 5e-5, 8e-5}, batch 16/32
and 1-3 epochs (2-10 on the small tasks) and keeps the best per task; the
row takes 5e-5 (the middle of the sweep) and RoBERTa's 6% warm-up. The
paper's weight decays (1e-6..1e-5) are decoupled from the rate (Composer's
DecoupledAdamW), not AdamW's rate-scaled ones: the row keeps BERT's 0.01.

Pretraining has one per-family default here as well: the share of tokens
dynamic masking chooses (`PRETRAINING_MASKED_LM_PROB`; ModernBERT 30%, as
its paper, everyone else BERT's 15%), which `kerasbert pretrain` takes
unless --masked-lm-prob says otherwise.

ELECTRA's rate by size: 3e-4 Small, 1e-4 Base, 5e-5 Large, with
layer-wise decay 0.8 (0.9 Large). ALBERT's table gives steps, not epochs:
the recipe keeps its rates, batches and warm-up share and trains 3 epochs.

The Transformer (encoder-decoder, `Seq2SeqLM`) trains with its paper's
optimizer, whatever the recipe: Adam(beta_1 0.9, beta_2 0.98, epsilon
1e-9) on the inverse-square-root schedule, label smoothing 0.1, no
clipping. Its recipe's numbers mean:

    learning_rate  the schedule's PEAK, reached on the last warm-up step:
                   lr(n) = learning_rate * min(sqrt(w / n), n / w), which is
                   the paper's d^-0.5 * min(n^-0.5, n * w^-1.5) times the
                   factor learning_rate * sqrt(d * w). Default: the paper's
                   peak at this width, (d * 4000)^-0.5 (6.99e-4 for d 512).
    warmup_ratio   w = min(4000, round(warmup_ratio * the run's steps)),
                   at least 1: the paper's 4000 once the run has 40,000
                   steps (at 0.1), a share of shorter runs (4000 steps of a
                   300-step run would never reach the peak).
    weight_decay   0 (Adam); above 0, AdamW with the same moments.

Precision does not change a recipe: under `--precision mixed_bfloat16` the
published narrow row (3e-4, batch 32; 2 epochs) fine-tuned all-MiniLM-L6-v2 on the
built-in task within 0.84 points of float32 with the same values, both ways
(bench/finetune_speed_bench.py, bench/README.md), so no row has a bfloat16
variant; `describe` says so (`PRECISION_NOTE`).
"""

import dataclasses
import os

from kerasbert.errors import UsageError
from kerasbert.sources import handles
from kerasbert.sources import source

#: The flags a recipe sets, in the order they are printed.
FIELDS = ("learning_rate", "batch_size", "epochs", "warmup_ratio", "weight_decay",
          "layerwise_lr_decay")

#: What the Transformer's recipe prints for its optimizer (`Recipe.optimizer`).
TRANSFORMER_OPTIMIZER = ("Adam(beta_1 0.9, beta_2 0.98, epsilon 1e-9) on the inverse-square-"
                         "root schedule d^-0.5 * min(n^-0.5, n * w^-1.5), scaled so its peak "
                         "(step w) is learning_rate; w = min(4000, warmup_ratio * steps)")

#: The BERT paper's fine-tuning grid (Appendix A.3).
BERT_GRID = {"learning_rate": (5e-5, 4e-5, 3e-5, 2e-5), "batch_size": (16, 32),
             "epochs": (2, 3, 4)}
#: The Small-BERT grid (google-research/bert README, Turc et al.: 3e-4..3e-5,
#: 4 epochs) with 1e-3 added: bench/finetune_bench.py found 1e-3 best for
#: bert_tiny, bert_mini and bert_small pretrained by `kerasbert pretrain`.
SMALL_BERT_GRID = {"learning_rate": (1e-3, 3e-4, 1e-4, 5e-5, 3e-5),
                   "batch_size": (8, 16, 32, 64, 128), "epochs": (4,)}
#: Narrow BERTs as published (pretrained far longer than the bench's): the
#: Small-BERT rates, ours (1e-3) and the BERT paper's middle (3e-5), 1-3-10
#: spaced, at the batch and epochs bench/finetune_bench.py's published section
#: measured them with (the step past an edge comes from `--search` itself).
PUBLISHED_SMALL_GRID = {"learning_rate": (1e-3, 3e-4, 1e-4, 3e-5), "batch_size": (32,),
                        "epochs": (3,)}


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Fine-tuning values and where they come from.

    Attributes:
        name: how `--recipe` names it ("default" for `default_recipe`).
        learning_rate, batch_size, epochs, warmup_ratio, weight_decay,
        layerwise_lr_decay: `finetune`'s flags (None: not set).
        source: the paper and table the values are from.
        grid: {flag: values} `--search` tries by default.
        why: one line saying why these values apply to this model.
        optimizer: None (the task model's fine-tuning AdamW) or a line
            naming another one (the Transformer's), printed.
        label_smoothing: epsilon of the loss's smoothed targets, or None.
    """

    name: str
    learning_rate: float
    batch_size: int
    epochs: int
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    layerwise_lr_decay: float = None
    source: str = ""
    grid: dict = dataclasses.field(default_factory=dict)
    why: str = ""
    optimizer: str = None
    label_smoothing: float = None

    def values(self):
        """{flag: value} of the set fields."""
        return {f: getattr(self, f) for f in FIELDS if getattr(self, f) is not None}

    def describe(self, values=None):
        """One line per value (`values`, default the recipe's own), then the
        grid and the source (what `finetune` and `info` print)."""
        values = self.values() if values is None else values
        rows = [f"  {f:<20} {_show(v)}" for f, v in values.items() if v is not None]
        if self.optimizer:
            rows.append(f"  {'optimizer':<20} {self.optimizer}")
        if self.label_smoothing is not None:
            rows.append(f"  {'label_smoothing':<20} {_show(self.label_smoothing)}")
        if self.grid:
            rows.append("  search grid          " + "  ".join(
                f"{k}={','.join(f'{x:g}' for x in v)}" for k, v in self.grid.items()))
        return "\n".join(rows + [f"  source: {self.source}"]
                         + ([f"  why: {self.why}"] if self.why else [])
                         + [f"  precision: {PRECISION_NOTE}"])


#: What `describe` says of bfloat16 (measured, see the module docstring).
PRECISION_NOTE = ("the same values under --precision mixed_bfloat16 (measured on the published "
                  "all-MiniLM-L6-v2 at 3e-4, batch 32, 2 epochs: within 0.84 points of float32, "
                  "bench/finetune_speed_bench.py)")


def _show(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


_BERT = "BERT (Devlin et al., 2019), Appendix A.3"
_SMALL = ("Small-BERT (Turc et al., 2019; google-research/bert README): rates up to 3e-4, "
          "4 epochs; 1e-3 for H <= 512 measured by bench/finetune_bench.py")
_ROBERTA = "RoBERTa (Liu et al., 2019), Table 10"
_ALBERT = "ALBERT (Lan et al., 2020), Table 14 (steps given there; 3 epochs here)"
_ELECTRA = "ELECTRA (Clark et al., 2020), Table 7"
_GPT = "GPT (Radford et al., 2018), section 4.1"
_TRANSFORMER = "Transformer (Vaswani et al., 2017), sections 5.3-5.4"
_MODERNBERT = ("ModernBERT (Warner et al., 2024), GLUE fine-tuning sweeps (rates 1e-5, 3e-5, "
               "5e-5, 8e-5; batch 16/32; best per task): a starting point, not a measured "
               "optimum")
#: The GLUE sweep of the ModernBERT paper (what `--search` tries).
MODERNBERT_GRID = {"learning_rate": (1e-5, 3e-5, 5e-5, 8e-5), "batch_size": (16, 32),
                   "epochs": (1, 2, 3)}

#: Pretraining: the share of tokens dynamic masking chooses, by family
#: (`kerasbert pretrain` without --masked-lm-prob); absent: BERT's 0.15.
#: ModernBERT masks 30% (Warner et al., 2024, section 2.2, after Wettig et
#: al., 2023).
PRETRAINING_MASKED_LM_PROB = {"modern_bert": 0.3}
BERT_MASKED_LM_PROB = 0.15


def pretraining_masked_lm_prob(family):
    """The masking rate `kerasbert pretrain` draws dynamic masks with for
    `family` (`kerasbert.models.presets.family_of`).

    >>> pretraining_masked_lm_prob("modern_bert"), pretraining_masked_lm_prob("roberta")
    (0.3, 0.15)
    """
    return PRETRAINING_MASKED_LM_PROB.get(family, BERT_MASKED_LM_PROB)

#: The Transformer's training optimizer (Vaswani et al., 2017, section 5.3),
#: which `Seq2SeqLM.compile()` builds: Adam with these moments on
#: `schedules.InverseSquareRootSchedule(hidden_dim, warmup_steps)` (peak
#: 512^-0.5 * 4000^-0.5 = 6.99e-4 for the base model), no weight decay, no
#: clipping, label smoothing 0.1 in the loss. The paper batches by length
#: (about 25000 source and 25000 target tokens a step) for 100k steps (base)
#: or 300k (big); those stay the data pipeline's business.
TRANSFORMER_TRAINING = {"beta_1": 0.9, "beta_2": 0.98, "epsilon": 1e-9, "warmup_steps": 4000,
                        "label_smoothing": 0.1,
                        "source": "Transformer (Vaswani et al., 2017), sections 5.3-5.4"}

#: Width bounds of the BERT-family size rows: (largest hidden_dim, rate,
#: why). A rate above the Small-BERT grid for the narrowest models (measured),
#: falling with width to the BERT paper's range at Base width and above.
_BERT_BY_WIDTH = (
    (512, 1e-3, "BERT-Tiny/Mini/Small/Medium width (H <= 512): measured in "
                "bench/finetune_bench.py, where 1e-3 beat every rate of the Small-BERT grid "
                "on bert_tiny, bert_mini and bert_small (3e-4 by 1-35 points)"),
    (768, 3e-5, "BERT-Base width: the middle of the BERT paper's 5e-5..2e-5"),
    (None, 2e-5, "BERT-Large width: the BERT paper's lowest rate (large models are unstable "
                 "at high rates)"),
)

#: ELECTRA's rows by width: (largest hidden_dim, rate, layer-wise decay, size name).
_ELECTRA_BY_WIDTH = ((256, 3e-4, 0.8, "Small"), (768, 1e-4, 0.8, "Base"),
                     (None, 5e-5, 0.9, "Large"))

#: Families that follow BERT's fine-tuning procedure and sizes.
_BERT_LIKE = ("bert", "distil_bert")
#: Families warm-started from (or trained like) RoBERTa.
_ROBERTA_LIKE = ("roberta", "big_bird")


#: The published-checkpoint row of narrow BERTs (H <= 512): (rate, why).
#: Measured 2026-11-27 (bench/README.md): on all-MiniLM-L6-v2, 3 epochs, the
#: search's best was 3e-4 on stdlib-area (0.849; 1e-3 0.828, 1e-4 0.811) and
#: 1e-3 = 1e-4 on return-or-raise (0.837; 3e-4 0.829, one dev sentence less);
#: both optima inside the rates tried (3e-3 and 3e-5 fell to 0.47-0.70). 3e-4
#: is within 0.8 points of the best on both; 1e-3, the row of models
#: pretrained here, was 2.1 points short on stdlib-area.
_PUBLISHED_SMALL = (3e-4, "a published BERT of Small-BERT width (H <= 512): measured in "
                    "bench/finetune_bench.py's published section on all-MiniLM-L6-v2, where 3e-4 "
                    "was within 1 point of the search's best on both tasks (1e-3, the row of "
                    "models pretrained here, 2.1 points short on one)")
_SMALL_PUBLISHED = ("Small-BERT (Turc et al., 2019; google-research/bert README): rates up "
                    "to 3e-4, on published checkpoints; measured by bench/finetune_bench.py's "
                    "published section")


def is_published_checkpoint(handle):
    """True when `handle` names weights someone published: a hub handle
    (hf://, kaggle://) or a Hugging Face, keras-hub, google-research/bert,
    TF Hub or ELMo directory (`kerasbert.sources.source`'s layouts). False
    for a built-in preset (random weights), a `.keras` file and a kerasbert
    run (pretrained here, for as long as the run went).

    Args:
        handle: a resolved `Source` (asked, nothing read again), or a handle
            string: file checks only, no download and no TensorFlow, since
            `info` and `finetune` ask before anything loads.
    """
    if isinstance(handle, source.Source):
        return handle.is_published or handle.is_remote
    if not handle:
        return False
    handle = os.fspath(handle)
    if handles.is_remote(handle):
        return True
    return os.path.isdir(handle) and source.resolve(handle).is_published


def _by_width(rows, hidden_dim):
    return next(row for row in rows if row[0] is None or hidden_dim <= row[0])


def default_recipe(family, num_layers, hidden_dim, published=False):
    """The values `finetune` uses for the flags a user leaves out.

    Args:
        family: the backbone's family ("bert", "roberta", "albert",
            "electra", "distil_bert", "big_bird", "gpt", "reformer", "modern_bert":
            `kerasbert.models.presets.family_of`).
        num_layers, hidden_dim: the backbone's size.
        published: the weights are a published checkpoint
            (`is_published_checkpoint`), not pretrained here: narrow BERTs
            take the published row (the papers' rows of the wider models and
            of the other families were measured on published checkpoints
            already).

    Returns:
        a `Recipe` named "default" whose `why` names the size row.
    """
    size = f"{num_layers} layers x {hidden_dim}"
    if family == "transformer":
        return dataclasses.replace(transformer_recipe(hidden_dim), name="default",
                                   why=f"the Transformer paper's training ({size})")
    if family == "gpt":
        return Recipe("default", 6.25e-5, 32, 3, warmup_ratio=0.002, source=_GPT,
                      why=f"GPT-1's fine-tuning values ({size})")
    if family == "electra":
        _, rate, decay, name = _by_width(_ELECTRA_BY_WIDTH, hidden_dim)
        return Recipe("default", rate, 32, 3, weight_decay=0.0, layerwise_lr_decay=decay,
                      source=_ELECTRA, why=f"ELECTRA-{name} row ({size})")
    if family in _ROBERTA_LIKE:
        return Recipe("default", 2e-5, 32, 3, warmup_ratio=0.06, weight_decay=0.1,
                      source=_ROBERTA, grid={"learning_rate": (1e-5, 2e-5, 3e-5),
                                             "batch_size": (16, 32)},
                      why=f"RoBERTa's GLUE range, middle rate ({size}; 3 epochs, best epoch "
                          "kept, instead of the paper's 10)")
    if family == "modern_bert":
        return dataclasses.replace(RECIPES["modernbert-glue"], name="default",
                                   why=f"ModernBERT's GLUE sweep, middle rate ({size}); a "
                                       "starting point: search the grid per task")
    if family == "albert":
        return Recipe("default", 3e-5, 32, 3, warmup_ratio=0.06, weight_decay=0.0,
                      source=_ALBERT, why=f"ALBERT's GLUE rates, middle ({size})")
    bound, rate, why = _by_width(_BERT_BY_WIDTH, hidden_dim)
    small = bound is not None and bound <= 512
    if published and small and family in _BERT_LIKE:
        rate, why = _PUBLISHED_SMALL
        return Recipe("default", rate, 32, 3, source=_SMALL_PUBLISHED,
                      grid=PUBLISHED_SMALL_GRID, why=f"{why} ({size})")
    source = _SMALL if small else _BERT
    if family == "reformer":
        # The Reformer paper publishes language-model training only.
        source = f"no published Reformer fine-tuning recipe: BERT's rows by width ({source})"
    return Recipe("default", rate, 32, 4 if small else 3, source=source,
                  grid=SMALL_BERT_GRID if small else BERT_GRID, why=f"{why} ({size})")


#: Named recipes (`--recipe`); see the module docstring's table.
RECIPES = {r.name: r for r in (
    Recipe("glue", 3e-5, 32, 3, source="BERT (Devlin et al., 2019), section 4.1: batch 32, "
           "3 epochs, the best of 5e-5, 4e-5, 3e-5, 2e-5 on the dev set",
           grid={"learning_rate": (5e-5, 4e-5, 3e-5, 2e-5)}),
    Recipe("squad1", 5e-5, 32, 3, source="BERT, section 4.2: 3 epochs, 5e-5, batch 32"),
    Recipe("squad2", 5e-5, 48, 2, source="BERT, section 4.3: 2 epochs, 5e-5, batch 48"),
    Recipe("swag", 2e-5, 16, 3, source="BERT, section 4.4: 3 epochs, 2e-5, batch 16"),
    Recipe("conll", 5e-5, 32, 3, source="BERT, section 5.3 and Appendix A.3 (the paper's "
           "grid, searched on the dev set)", grid=dict(BERT_GRID)),
    Recipe("roberta-glue", 2e-5, 32, 10, warmup_ratio=0.06, weight_decay=0.1, source=_ROBERTA,
           grid={"learning_rate": (1e-5, 2e-5, 3e-5), "batch_size": (16, 32)}),
    Recipe("roberta-squad", 1.5e-5, 48, 2, warmup_ratio=0.06, weight_decay=0.01,
           source=_ROBERTA),
    Recipe("albert-glue", 3e-5, 32, 3, warmup_ratio=0.06, weight_decay=0.0, source=_ALBERT,
           grid={"learning_rate": (1e-5, 2e-5, 3e-5, 5e-5), "batch_size": (16, 32, 128)}),
    Recipe("albert-squad1", 5e-5, 48, 2, weight_decay=0.0, source=_ALBERT),
    Recipe("albert-squad2", 3e-5, 48, 2, weight_decay=0.0, source=_ALBERT),
    Recipe("electra-glue", 1e-4, 32, 3, weight_decay=0.0, layerwise_lr_decay=0.8,
           source=_ELECTRA + " (Base; Small 3e-4, Large 5e-5 with decay 0.9: the size's "
           "default when the backbone is not Base)"),
    Recipe("electra-squad", 1e-4, 32, 2, weight_decay=0.0, layerwise_lr_decay=0.8,
           source=_ELECTRA + " (Base; by size as electra-glue)"),
    Recipe("gpt", 6.25e-5, 32, 3, warmup_ratio=0.002, source=_GPT),
    Recipe("modernbert-glue", 5e-5, 32, 3, warmup_ratio=0.06, source=_MODERNBERT,
           grid=MODERNBERT_GRID),
)}




def transformer_peak(hidden_dim, warmup_steps=None):
    """The peak of the paper's schedule, (d * w)^-0.5 (w default 4000)."""
    return float((int(hidden_dim) * int(warmup_steps or TRANSFORMER_TRAINING["warmup_steps"]))
                 ** -0.5)


def transformer_recipe(hidden_dim=512):
    """The Transformer's training recipe (module docstring) at width
    `hidden_dim`: its peak rate is the paper's schedule's at that width."""
    return Recipe("transformer", round(transformer_peak(hidden_dim), 8), 32, 10,
                  warmup_ratio=0.1, weight_decay=0.0, source=_TRANSFORMER,
                  optimizer=TRANSFORMER_OPTIMIZER,
                  label_smoothing=TRANSFORMER_TRAINING["label_smoothing"],
                  grid={"learning_rate": (3e-3, 1e-3, 7e-4, 3e-4)})


RECIPES["transformer"] = transformer_recipe()  # --recipe transformer: d 512, by size in get_recipe


def transformer_warmup_steps(num_train_steps=None, warmup_ratio=None):
    """Warm-up length of the Transformer's schedule: the paper's 4000, or
    `warmup_ratio` (default 0.1) of a run's `num_train_steps` when that is
    less (at least 1). Without a run length, 4000."""
    paper = TRANSFORMER_TRAINING["warmup_steps"]
    if num_train_steps is None:
        return paper
    ratio = 0.1 if warmup_ratio is None else float(warmup_ratio)
    return max(1, min(paper, int(round(ratio * int(num_train_steps)))))


def get_recipe(name, family=None, num_layers=None, hidden_dim=None):
    """The named recipe; the ELECTRA and Transformer recipes take the
    backbone's size row.

    Raises:
        UsageError: an unknown name, listing the known ones.
    """
    if name not in RECIPES:
        raise UsageError(f"--recipe {name!r}: known recipes are {', '.join(RECIPES)}.")
    recipe = RECIPES[name]
    if name.startswith("electra-") and family == "electra" and hidden_dim is not None:
        _, rate, decay, _ = _by_width(_ELECTRA_BY_WIDTH, hidden_dim)
        recipe = dataclasses.replace(recipe, learning_rate=rate, layerwise_lr_decay=decay)
    if name == "transformer" and hidden_dim is not None:
        recipe = transformer_recipe(hidden_dim)
    return recipe


#: Learning rates a family is fine-tuned with in its papers, widened 3x
#: each way; outside it `finetune` warns.
SANE_RATES = {"transformer": (1.6e-4, 1.7e-2),  # peaks (d * 4000)^-0.5, d 1024..8
              "gpt": (6e-6, 6e-4), "electra": (1e-5, 1e-3), "roberta": (3e-6, 1e-4),
              "big_bird": (3e-6, 1e-4), "albert": (3e-6, 1.5e-4),
              "modern_bert": (3e-6, 2.4e-4)}  # its sweep 1e-5..8e-5, 3x each way
_BERT_RATES = (6e-6, 3e-3)


def rate_warning(family, learning_rate):
    """A warning line when `learning_rate` is far outside what the family is
    fine-tuned with, else None (also for None: the recipe's own)."""
    if learning_rate is None:
        return None
    low, high = SANE_RATES.get(family, _BERT_RATES)
    if low <= learning_rate <= high:
        return None
    return (f"warning: --learning-rate {learning_rate:g} is far outside the {low:g}..{high:g} "
            f"that {family} models are fine-tuned with in their papers; the model may not "
            "learn (too low) or diverge (too high).")


def resolve(given, family, num_layers, hidden_dim, recipe=None, published=False):
    """(values, recipe, chosen): the flags to train with.

    Args:
        given: {flag: value or None} from the command line (None: not given).
        family, num_layers, hidden_dim: the backbone's.
        recipe: a `--recipe` name, or None for `default_recipe`.
        published: the weights are a published checkpoint (`default_recipe`).

    Returns:
        ({flag: value} for every flag of `FIELDS`, the `Recipe` the missing
        values came from, the flags taken from it).
    """
    chosen_recipe = (get_recipe(recipe, family, num_layers, hidden_dim) if recipe
                     else default_recipe(family, num_layers, hidden_dim, published))
    defaults = chosen_recipe.values()
    values, taken = {}, []
    for flag in FIELDS:
        if given.get(flag) is not None:
            values[flag] = given[flag]
        else:
            values[flag] = defaults.get(flag)
            if flag in defaults:
                taken.append(flag)
    return values, chosen_recipe, taken
