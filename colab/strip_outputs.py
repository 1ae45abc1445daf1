"""Strips outputs and execution counts from the notebooks (run before committing).

    python colab/strip_outputs.py            # rewrite colab/*.ipynb in place
    python colab/strip_outputs.py --check    # exit 1 if any notebook has outputs
"""

import pathlib
import sys

import nbformat

HERE = pathlib.Path(__file__).resolve().parent


def strip(nb):
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "code":
            if cell.outputs or cell.execution_count is not None:
                changed = True
            cell.outputs, cell.execution_count = [], None
        for key in ("execution", "collapsed", "scrolled"):
            if key in cell.metadata:
                del cell.metadata[key]
                changed = True
    return changed


def main(argv):
    check = "--check" in argv
    dirty = []
    for path in sorted(HERE.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if strip(nb):
            dirty.append(path.name)
            if not check:
                nbformat.write(nb, path)
    if dirty:
        print(("has outputs: " if check else "stripped: ") + ", ".join(dirty))
    return 1 if check and dirty else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
