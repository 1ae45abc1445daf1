"""The notebooks' install cell and Colab badge, written from one place.

Every notebook opens with an Open-in-Colab badge and, as its first code cell,
the install cell. Both name the same GitHub repository and branch, the two
constants below, so a notebook installs kerasbert from the repository it was
opened from. Change them here, then:

    python colab/install_cell.py            # rewrite the badge link, the install cell
                                            # and its caption in colab/*.ipynb
    python colab/install_cell.py --check    # exit 1 if any notebook differs

Nothing else in a notebook is touched. tests/colab/test_notebooks.py checks
that every notebook holds exactly this cell and this badge, and runs the cell
in a fresh virtual environment with a wheel built from the checkout.
"""

import json
import os
import pathlib
import re
import string
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent

# The repository and branch the Colab badges open (github.com/OWNER/NAME).
GITHUB_REPOSITORY = "kerasbert/kerasbert"
BRANCH = "main"

REPOSITORY_URL = f"https://github.com/{GITHUB_REPOSITORY}"
# The environment variables the cell reads.
FORCE = "KERASBERT_FORCE_INSTALL"
WHEEL = "KERASBERT_WHEEL"
CONSTRAINTS = "KERASBERT_CONSTRAINTS"


def badge_url(name):
    """The Open-in-Colab link of notebook `name` (its file name without .ipynb)."""
    return f"https://colab.research.google.com/github/{GITHUB_REPOSITORY}/blob/{BRANCH}/colab/{name}.ipynb"


_BADGE_LINK = re.compile(r"\(https://colab\.research\.google\.com/github/[^)\s]+\)")

# The cell runs alone on a bare Colab runtime: standard library only, and no
# `import keras`/`import kerasbert` (KERAS_BACKEND is set in the next cell).
_CELL = string.Template('''\
# Install kerasbert with every dependency pinned; skipped when kerasbert is already importable.
#   KERASBERT_FORCE_INSTALL=1    install even so (uninstalls the kerasbert found first)
#   KERASBERT_WHEEL=PATH_OR_URL  install this wheel (`pip wheel --no-deps -w dist .` in a checkout)
#   KERASBERT_CONSTRAINTS=PATH   pin with this file instead of the repository's constraints.txt
import importlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys

# The repository and branch this notebook's Open-in-Colab badge opens.
KERASBERT_REPO = "$repository_url"
KERASBERT_REF = "$branch"


def _pip(*args):
    done = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"pip {args[0]} failed (exit {done.returncode}):\\n"
                           f"{done.stdout[-3000:]}{done.stderr[-3000:]}")


if importlib.util.find_spec("kerasbert") is None or os.environ.get("$force") == "1":
    package = os.environ.get("$wheel") or f"kerasbert @ git+{KERASBERT_REPO}@{KERASBERT_REF}"
    constraints = os.environ.get("$constraints") or (
        KERASBERT_REPO.replace("//github.com/", "//raw.githubusercontent.com/")
        + f"/{KERASBERT_REF}/constraints.txt")
    loaded = {m: importlib.metadata.version(m) for m in ("numpy", "tensorflow", "keras") if m in sys.modules}
    if importlib.util.find_spec("kerasbert") is not None:
        _pip("uninstall", "-y", "kerasbert")
    _pip("install", "-q", "-c", constraints, package)
    importlib.invalidate_caches()
    print(f"installed kerasbert {importlib.metadata.version('kerasbert')} from {package}")
    replaced = [m for m, version in loaded.items() if importlib.metadata.version(m) != version]
    if replaced:
        print(f"pip replaced {', '.join(replaced)}, already imported in this session: restart the "
              "session (Runtime > Restart session) and run the notebook again from the top.")
else:
    print("kerasbert is already installed; nothing to do.")''')

CELL = _CELL.substitute(repository_url=REPOSITORY_URL, branch=BRANCH, force=FORCE,
                        wheel=WHEEL, constraints=CONSTRAINTS)

# The paragraph of the "## Setup" cell that says what the install cell does.
CAPTION = f"""\
**Install.** On Colab this installs kerasbert from the GitHub repository this notebook opens from
(`{GITHUB_REPOSITORY}`, branch `{BRANCH}`), with every dependency pinned to the versions it was
tested with (that branch's `constraints.txt`). It takes a few minutes. When kerasbert is already
importable (a local checkout after `make test`, or a second run of this cell) it does nothing;
`{FORCE}=1` installs anyway, and `{WHEEL}=PATH` installs a wheel
built from a checkout (`pip wheel --no-deps -w dist .`) instead."""

_CAPTION = re.compile(r"\*\*Install\.\*\*.*?(?=\n\n|\Z)", re.S)


def _text(cell):
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _set_text(cell, text):
    cell["source"] = text.splitlines(keepends=True)


def sync(nb, name):
    """Writes the badge link, install cell and caption into notebook JSON `nb`;
    returns the names of the parts that changed."""
    changed = []
    cells = nb["cells"]
    title = _text(cells[0])
    new_title = _BADGE_LINK.sub(lambda _: f"({badge_url(name)})", title, count=1)
    if new_title != title:
        _set_text(cells[0], new_title)
        changed.append("badge")
    first_code = next(i for i, cell in enumerate(cells) if cell["cell_type"] == "code")
    if _text(cells[first_code]) != CELL:
        _set_text(cells[first_code], CELL)
        changed.append("install cell")
    setup = cells[first_code - 1]
    if setup["cell_type"] == "markdown" and _CAPTION.search(_text(setup)):
        text = _text(setup)
        new_text = _CAPTION.sub(lambda _: CAPTION, text, count=1)
        if new_text != text:
            _set_text(setup, new_text)
            changed.append("caption")
    return changed


def _write(path, nb):
    # nbformat's own layout (sort_keys, indent=1), without the cell ids
    # nbformat.write would add to cells that have none.
    text = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def main(argv):
    check = "--check" in argv
    status = 0
    for path in sorted(HERE.glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        changed = sync(nb, path.stem)
        if changed:
            print(f"{path.name}: {'differs' if check else 'rewrote'}: {', '.join(changed)}")
            if check:
                status = 1
            else:
                _write(path, nb)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
