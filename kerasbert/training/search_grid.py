"""The grid of `kerasbert finetune --search`: `--search` items parsed,
completed from the recipe, described; the step past the grid's edge and
where the best learning rate lies (search.py runs the search).
"""

import itertools
import math

from kerasbert.errors import UsageError
from kerasbert.optimizers.recipes import RECIPES
from kerasbert.optimizers.recipes import default_recipe
from kerasbert.optimizers.recipes import is_published_checkpoint

#: `--search` keys -> FinetuneConfig fields
KEYS = {"lr": "learning_rate", "learning_rate": "learning_rate", "batch": "batch_size",
        "batch_size": "batch_size", "epochs": "epochs"}
VALUE_TYPES = {"learning_rate": float, "batch_size": int, "epochs": int}

def parse_grid(items):
    """`["lr=1e-4,3e-4", "batch=16,32"]` -> {"learning_rate": (1e-4, 3e-4),
    "batch_size": (16, 32)}; [] -> {} (the recipe's grid).

    Raises:
        UsageError: an unknown or repeated key (`lr` and `learning_rate` are
            one key), a value that is not a finite number > 0 (NaN and
            infinity included: every trial would fail), a repeated value.
    """
    grid, given = {}, {}
    for item in items or ():
        key, _, values = item.partition("=")
        field = KEYS.get(key.strip())
        if field is None or not values:
            raise UsageError(f"--search {item!r}: expected KEY=V1,V2,... with KEY one of "
                             "lr, batch, epochs.")
        if field in given:
            raise UsageError(f"--search gives {field} twice ({given[field]!r} and {item!r}): "
                             "give each key once, with all its values.")
        given[field] = item
        try:
            parsed = tuple(VALUE_TYPES[field](v) for v in values.split(","))
        except ValueError:
            raise UsageError(f"--search {item!r}: {values!r} are not "
                             f"{VALUE_TYPES[field].__name__}s.") from None
        bad = [v for v in parsed if not (math.isfinite(v) and v > 0)]
        if bad:
            raise UsageError(f"--search {item!r}: {bad[0]!r} is not a finite number > 0.")
        repeated = sorted({v for v in parsed if parsed.count(v) > 1})
        if repeated:
            raise UsageError(f"--search {item!r}: {repeated[0]!r} is given more than once "
                             "(values must be distinct).")
        grid[field] = parsed
    return grid


def describe_grid(grid, restarts=1):
    """`lr=1e-4,3e-4 batch=16 epochs=3` (x N seeds): a grid as --search
    takes it."""
    names = {"learning_rate": "lr", "batch_size": "batch", "epochs": "epochs"}
    text = " ".join(f"{names.get(k, k)}={','.join(f'{v:g}' for v in vals)}"
                    for k, vals in grid.items())
    return text + (f" x {restarts} seeds" if restarts > 1 else "")


def full_grid(given, config, family, num_layers, hidden_dim):
    """{field: values} of every dimension: `given`, else the recipe's grid,
    else the run's own single value; a flag given on the command line fixes
    its dimension unless `--search` names it."""
    published = is_published_checkpoint(config.preset or config.init_checkpoint)
    recipe = (RECIPES[config.recipe] if config.recipe
              else default_recipe(family, num_layers, hidden_dim, published))
    grid = {}
    for field in ("learning_rate", "batch_size", "epochs"):
        if field in given:
            grid[field] = given[field]
        elif getattr(config, field) is not None:
            grid[field] = (getattr(config, field),)
        else:
            grid[field] = tuple(recipe.grid.get(field, (getattr(recipe, field),)))
    return grid


def edge_extension(rates, best_rate):
    """The learning rate one step past the edge of `rates` that `best_rate`
    lies on, with the grid's own spacing (the ratio of that edge to its
    neighbour: 3e-3 past 1e-3 and 3e-4, 1e-5 below 3e-5 and 1e-4), rounded
    to one significant digit like the papers' grids (the exact step where
    rounding would land back inside a finely spaced grid); None when the
    best rate lies inside the grid, the grid has one rate, or the step would
    leave (0, 1)."""
    rates = sorted(set(rates))
    if len(rates) < 2 or best_rate not in (rates[0], rates[-1]):
        return None
    upper = best_rate == rates[-1]
    exact = rates[-1] ** 2 / rates[-2] if upper else rates[0] ** 2 / rates[1]
    rounded = float(f"{exact:.0e}")
    step = rounded if (rounded > rates[-1] if upper else rounded < rates[0]) else exact
    return step if 0.0 < step < 1.0 else None


def best_record(records):
    """The best finished record (ties: the earliest trial)."""
    return max(records, key=lambda r: (r["score"], -int(r["trial"])))


def locate_optimum(records, grid_rates, extended=None):
    """Where the best learning rate lies: {"learning_rate", "position"
    ("inside": rates on both sides scored lower; "edge": the highest or
    lowest rate tried, so the optimum may lie beyond it; "single": one rate
    tried), "side" ("upper"/"lower" at an edge), "grid", "extended" (the
    rate tried one step past the grid's edge, or None), "tried",
    "summary" (one line for people)}."""
    done = [r for r in records if r["score"] is not None]
    best = best_record(done)
    rate = best["values"].get("learning_rate")
    tried = sorted({r["values"].get("learning_rate") for r in done})
    side = None
    if len(tried) < 2:
        position, summary = "single", f"one learning rate, {rate:g}, was tried: not searched"
    elif rate in (tried[0], tried[-1]):
        position, side = "edge", "upper" if rate == tried[-1] else "lower"
        if extended is not None and rate == extended:
            summary = (f"{rate:g}, one step past the grid's {side} edge, beat every rate of "
                       "the grid: the optimum may lie further out (the search stops after "
                       "one step)")
        else:
            summary = (f"{rate:g} is the {side} edge of the rates tried: the optimum may lie "
                       "beyond it" + (f" (the step past it, {extended:g}, did not finish)"
                                     if extended is not None else ""))
    else:
        position = "inside"
        summary = (f"{rate:g} lies inside the rates tried ({', '.join(f'{r:g}' for r in tried)})"
                   + (f"; one step past the grid's edge, {extended:g}, scored lower"
                      if extended is not None else ""))
    return {"learning_rate": rate, "position": position, "side": side,
            "grid": sorted(grid_rates), "extended": extended, "tried": tried,
            "summary": summary}


def trial_list(grid, restarts, seed):
    """Every trial of the grid in the order they run: its values and seed."""
    return [dict(zip(grid, values), seed=seed + 1000 * restart)
            for values in itertools.product(*grid.values()) for restart in range(restarts)]
