"""The door from `Task.export` (the tasks layer) to the TF Serving exporter
(serving layer, above it): the package root installs the exporter when
`kerasbert` is imported, so the tasks layer never imports upwards. Plain
Python, so `import kerasbert` stays instant."""

from kerasbert.errors import UsageError

_EXPORTER = []


def install_exporter(exporter):
    """Sets `exporter(model, filepath, **options) -> dict`, the function
    `Task.export` writes a TF Serving model with."""
    _EXPORTER[:] = [exporter]


def export(model, filepath, **options):
    """Exports through the installed exporter."""
    if not _EXPORTER:
        raise UsageError("No TF Serving exporter is installed (import kerasbert first).")
    return _EXPORTER[0](model, filepath, **options)
