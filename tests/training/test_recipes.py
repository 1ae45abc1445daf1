"""Fine-tuning values by model family and size, named recipes from the
papers, and the recipe table of docs/fine-tuning.md, which must say what the
code does."""

import re
from pathlib import Path

import pytest

from kerasbert.errors import UsageError
from kerasbert.optimizers import recipes

FINE_TUNING_DOC = Path(__file__).resolve().parents[2] / "docs" / "fine-tuning.md"


@pytest.mark.parametrize("family, layers, hidden, rate, epochs", [
    ("bert", 2, 128, 1e-3, 4),        # BERT-Tiny: measured (bench/finetune_bench.py)
    ("bert", 4, 256, 1e-3, 4),        # BERT-Mini: measured
    ("bert", 4, 512, 1e-3, 4),        # BERT-Small: measured
    ("bert", 12, 768, 3e-5, 3),       # BERT-Base: the paper's range
    ("bert", 24, 1024, 2e-5, 3),      # BERT-Large
    ("distil_bert", 6, 768, 3e-5, 3),  # fine-tuned as BERT
    ("roberta", 12, 768, 2e-5, 3),
    ("big_bird", 12, 768, 2e-5, 3),
    ("albert", 12, 768, 3e-5, 3),
    ("electra", 12, 256, 3e-4, 3),    # ELECTRA-Small
    ("electra", 12, 768, 1e-4, 3),    # ELECTRA-Base
    ("electra", 24, 1024, 5e-5, 3),   # ELECTRA-Large
    ("gpt", 12, 768, 6.25e-5, 3),
])
def test_defaults_by_family_and_size(family, layers, hidden, rate, epochs):
    recipe = recipes.default_recipe(family, layers, hidden)
    assert recipe.learning_rate == rate and recipe.epochs == epochs
    assert recipe.source and recipe.why and f"{layers} layers x {hidden}" in recipe.why
    # Narrower BERTs never get a smaller rate than wider ones.
    if family == "bert":
        wider = recipes.default_recipe("bert", layers, hidden * 2)
        assert wider.learning_rate <= rate


def test_electra_layerwise_decay_and_no_weight_decay():
    small, large = (recipes.default_recipe("electra", 12, h) for h in (256, 1024))
    assert (small.layerwise_lr_decay, large.layerwise_lr_decay) == (0.8, 0.9)
    assert small.weight_decay == 0.0


def test_modernbert_has_its_own_starting_point_and_masking_rate():
    """ModernBERT's row comes from its paper's GLUE sweep (a starting point,
    said so), whatever the width; its pretraining masks 30%, everyone
    else 15%."""
    for hidden in (32, 768, 1024):
        recipe = recipes.default_recipe("modern_bert", 22, hidden)
        assert (recipe.learning_rate, recipe.batch_size, recipe.warmup_ratio) == (5e-5, 32, 0.06)
        assert recipe.grid == recipes.MODERNBERT_GRID
        assert "starting point" in recipe.source and "starting point" in recipe.why
    assert recipes.MODERNBERT_GRID["learning_rate"] == (1e-5, 3e-5, 5e-5, 8e-5)
    assert recipes.get_recipe("modernbert-glue").values() == {
        k: v for k, v in recipe.values().items()}
    assert recipes.rate_warning("modern_bert", 8e-5) is None
    assert recipes.rate_warning("modern_bert", 1e-3) is not None
    assert recipes.pretraining_masked_lm_prob("modern_bert") == 0.3
    for family in ("bert", "roberta", "albert", "big_bird", "electra"):
        assert recipes.pretraining_masked_lm_prob(family) == 0.15


def test_every_presets_family_has_defaults():
    from kerasbert.models import presets

    for name in presets.list_presets():
        preset = presets.get_preset(name)
        family = presets.family_of(preset["backbone_class"])
        config = preset["config"]
        # ELMo has no hidden_dim: its layers are 2 x projection_dim wide.
        hidden = config.get("hidden_dim") or 2 * config["projection_dim"]
        recipe = recipes.default_recipe(family, config["num_layers"], hidden)
        assert recipe.learning_rate > 0 and recipes.rate_warning(
            family, recipe.learning_rate) is None, name


def test_flags_given_win_over_the_recipe():
    given = dict.fromkeys(recipes.FIELDS)
    given["epochs"] = 7
    values, recipe, taken = recipes.resolve(given, "bert", 2, 128)
    assert values["epochs"] == 7 and values["learning_rate"] == 1e-3
    assert "epochs" not in taken and "learning_rate" in taken and recipe.name == "default"
    values, recipe, _ = recipes.resolve(given, "bert", 12, 768, recipe="squad2")
    assert (values["learning_rate"], values["batch_size"], values["epochs"]) == (5e-5, 48, 7)
    values, _, _ = recipes.resolve(dict.fromkeys(recipes.FIELDS), "electra", 12, 256,
                                   recipe="electra-glue")
    assert values["learning_rate"] == 3e-4  # the recipe takes the backbone's size row
    with pytest.raises(UsageError, match="known recipes are glue, squad1"):
        recipes.get_recipe("gleu")


def test_a_rate_far_outside_the_familys_range_warns():
    assert recipes.rate_warning("bert", 2e-5) is None
    assert recipes.rate_warning("bert", 1e-3) is None
    assert "far outside" in recipes.rate_warning("bert", 1e-2)
    assert "far outside" in recipes.rate_warning("roberta", 1e-3)
    assert "far outside" in recipes.rate_warning("electra", 1e-6)


def _documented_recipes():
    """The rows of docs/fine-tuning.md's recipe table: {name: {flag: value}}."""
    text = FINE_TUNING_DOC.read_text(encoding="utf-8")
    section = text[text.index("| recipe | learning rate |"):]
    rows = {}
    for line in section.splitlines()[2:]:
        if not line.startswith("| `"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = {
            "learning_rate": float(cells[1]), "batch_size": int(cells[2]),
            "epochs": int(cells[3]), "warmup_ratio": float(cells[4]),
            "weight_decay": float(cells[5]),
            "layerwise_lr_decay": None if cells[6] == "—" else float(cells[6]),
            "grid": cells[7]}
    return rows


def test_every_recipe_is_what_the_docs_say():
    table = _documented_recipes()
    assert set(table) == set(recipes.RECIPES)
    for name, recipe in recipes.RECIPES.items():
        row = table[name]
        for flag in recipes.FIELDS:
            assert row[flag] == getattr(recipe, flag), (name, flag)
        grid = "; ".join(f"{k}: {', '.join(f'{x:g}' for x in v)}"
                         for k, v in recipe.grid.items()) or "—"
        assert re.sub(r"\s+", " ", row["grid"]) == grid, name


def test_published_checkpoints_are_told_from_runs_and_presets(tmp_path):
    published = recipes.is_published_checkpoint
    assert published("hf://sentence-transformers/all-MiniLM-L6-v2")
    assert published("kaggle://keras/bert/keras/bert_tiny_en_uncased/2")
    assert not published("bert_tiny") and not published(None)
    hf, keras_hub, run = ('{"model_type": "bert"}', '{"registered_name": "keras_hub>BertBackbone"}',
                          '{"task_type": "classification", "vocab": "vocab.txt"}')
    for name, files in {"hf": {"config.json": hf, "model.safetensors": ""},
                        "keras_hub": {"config.json": keras_hub, "model.weights.h5": ""},
                        "tf1": {"bert_config.json": "{}", "bert_model.ckpt.index": ""},
                        "tf_hub": {"saved_model.pb": ""},
                        "run": {"config.json": "{}", "backbone.keras": ""},
                        "finetuned": {"config.json": run, "model.keras": "", "vocab.txt": ""},
                        "empty": {}}.items():
        folder = tmp_path / name
        folder.mkdir()
        for file, text in files.items():
            (folder / file).write_text(text)
        assert published(str(folder)) == (name not in ("run", "finetuned", "empty")), name
    (tmp_path / "b.keras").write_text("")
    assert not published(str(tmp_path / "b.keras"))


def test_published_narrow_berts_take_their_own_row():
    """The row measured on a published checkpoint (bench/finetune_bench.py's
    published section): narrow BERT-like models only; the wider rows and the
    other families' are the papers', measured on published checkpoints."""
    row = recipes.default_recipe("bert", 6, 384, published=True)
    assert "published" in row.why and "6 layers x 384" in row.why
    assert row.learning_rate in row.grid["learning_rate"]
    assert recipes.default_recipe("distil_bert", 4, 256, published=True) == \
        recipes.default_recipe("bert", 4, 256, published=True)
    for family, layers, hidden in (("bert", 12, 768), ("roberta", 12, 768),
                                   ("electra", 12, 256), ("albert", 12, 768)):
        assert recipes.default_recipe(family, layers, hidden, published=True) == \
            recipes.default_recipe(family, layers, hidden), family
    values, recipe, _ = recipes.resolve(dict.fromkeys(recipes.FIELDS), "bert", 6, 384,
                                        published=True)
    assert recipe == row and values["learning_rate"] == row.learning_rate


def test_the_transformer_recipe_is_the_papers():
    recipe = recipes.default_recipe("transformer", 6, 512)
    assert recipe.learning_rate == pytest.approx((512 * 4000) ** -0.5, rel=1e-5)  # 6.99e-4
    assert recipe.weight_decay == 0.0 and recipe.label_smoothing == 0.1
    assert "beta_2 0.98, epsilon 1e-9" in recipe.optimizer
    assert recipes.default_recipe("transformer", 1, 32).learning_rate == pytest.approx(
        (32 * 4000) ** -0.5, rel=1e-5)
    assert recipes.get_recipe("transformer", "transformer", 1, 32).learning_rate == (
        recipes.default_recipe("transformer", 1, 32).learning_rate)
    shown = recipe.describe()
    assert "label_smoothing      0.1" in shown and "inverse-square-root" in shown
    # Warm-up: a tenth of a short run, the paper's 4000 from 40,000 steps on.
    assert [recipes.transformer_warmup_steps(n, 0.1) for n in (3, 300, 40000, 10 ** 6)] == [
        1, 30, 4000, 4000]
    assert recipes.transformer_warmup_steps(None) == 4000
    assert recipes.rate_warning("transformer", None) is None
