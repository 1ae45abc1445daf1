"""What commands print when they finish: metrics and the files written."""


def print_metrics(metrics):
    """One `  name  value` line per scalar metric (floats to 4 places)."""
    for name, value in metrics.items():
        if isinstance(value, float):
            print(f"  {name:<28} {value:.4f}")
        elif not isinstance(value, dict):
            print(f"  {name:<28} {value}")


def print_outputs(outputs, width=17):
    """One `  name  path` line per file or folder a run wrote."""
    for name, path in outputs.items():
        print(f"  {name:<{width}} {path}")
