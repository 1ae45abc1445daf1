"""The fenced examples of README.md and docs/*.md, run as a reader runs them.

Every ```python and ```bash block carries a decision, in an HTML comment on
the line right before its opening fence (invisible on GitHub):

    <!-- runs -->            this test executes it
    <!-- needs: KIND -->     shown, not run; KIND is a key of NEEDS below

A fence of another language (`text`: layouts, diagrams, printed output) is
not code and takes no comment; a fence without a language is refused, so a
new block cannot slip past with no decision. The README's blocks all run
but the quickstart's `make` commands: each job's example on the front page
works as printed.

The runnable blocks of one page run in page order in one fresh temporary
folder, so a later block reads what an earlier one wrote, as a reader
following the page does: python blocks with this interpreter in a
subprocess, bash blocks with `bash -e -o pipefail`, with this environment's
`kerasbert` and `python` first on PATH and this checkout on PYTHONPATH (the
page documents the code beside it, not whatever kerasbert is installed).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Why a block is shown but not run (the KIND of `<!-- needs: KIND -->`).
NEEDS = {
    "download": "fetches weights or data over the network (hf://, kaggle://, TFDS, pip)",
    "hardware": "needs hardware this suite does not assume (GPU, TPU, bfloat16 CPU kernels)",
    "cluster": "needs a cloud account, a cluster, Docker or a Beam job server",
    "your-data": "names files a reader brings (corpus.txt, reviews.csv, a run of theirs)",
    "hours": "full-size training or a long run; the suite runs the path on tiny sizes elsewhere",
    "suite": "is the demo or the test suite itself (tests/test_cli.py runs the demo)",
}
CODE_LANGUAGES = {"python": "python", "bash": "bash"}
NOT_CODE = {"text"}

FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
DECISION = re.compile(r"^\s*<!--\s*(runs|needs:\s*(\S+))\s*-->\s*$")


def read_blocks(page):
    """The fenced blocks of `page`: dicts with line (1-based, the opening
    fence), language, decision line (or None) and source."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, language = opening.group(1), opening.group(2)
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{page.name}:{index + 1}: a fence that is never closed")
        body = [line[len(indent):] if line.startswith(indent) else line
                for line in lines[index + 1:end]]
        before = lines[index - 1] if index else ""
        blocks.append({"line": index + 1, "language": language,
                       "decision": before if DECISION.match(before) else None,
                       "source": "\n".join(body) + "\n"})
        index = end + 1
    return blocks


def decision_errors(page, root=ROOT):
    """One message per block of `page` without a valid decision (paths
    shown relative to `root`)."""
    errors = []
    for block in read_blocks(page):
        where = f"{page.relative_to(root)}:{block['line']}"
        language, decision = block["language"], block["decision"]
        if language in NOT_CODE:
            if decision:
                errors.append(f"{where}: a `{language}` block is not code; drop its decision")
            continue
        if language not in CODE_LANGUAGES:
            errors.append(f"{where}: fence language {language!r}; use one of "
                          f"{sorted(CODE_LANGUAGES) + sorted(NOT_CODE)}")
            continue
        if decision is None:
            errors.append(f"{where}: no `<!-- runs -->` or `<!-- needs: KIND -->` on the line "
                          "before the fence")
            continue
        kind = DECISION.match(decision).group(2)
        if kind is not None and kind not in NEEDS:
            errors.append(f"{where}: unknown need {kind!r}; one of {sorted(NEEDS)}")
    return errors


def runnable(page):
    return [block for block in read_blocks(page)
            if block["language"] in CODE_LANGUAGES and block["decision"]
            and DECISION.match(block["decision"]).group(1) == "runs"]


def reader_env():
    """A reader's shell: this environment's scripts first on PATH, this
    checkout importable, CPU only, quiet TensorFlow, no plot windows."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(ROOT)
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0",
               MPLBACKEND="Agg", KERAS_BACKEND="tensorflow")
    return env


def run_block(block, cwd, env):
    if block["language"] == "python":
        command = [sys.executable, "-c", block["source"]]
    else:
        command = ["bash", "-e", "-o", "pipefail", "-c", block["source"]]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          errors="replace", timeout=900)


def test_every_code_block_says_whether_it_runs():
    errors = [error for page in PAGES for error in decision_errors(page)]
    assert not errors, "\n".join(errors)


def test_the_check_refuses_an_unmarked_block_and_an_unknown_need(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1)\n```\n\n<!-- needs: magic -->\n```bash\nls\n```\n\n"
                    "<!-- runs -->\n```python\nprint(2)\n```\n\n```\nuntagged\n```\n"
                    "\n```text\nlayout\n```\n", encoding="utf-8")
    errors = decision_errors(page, root=tmp_path)
    assert len(errors) == 3, errors
    assert "page.md:1: no `<!-- runs -->`" in errors[0]
    assert "unknown need 'magic'" in errors[1]
    assert "fence language ''" in errors[2]
    assert [block["source"] for block in runnable(page)] == ["print(2)\n"]


def test_every_readme_block_runs():
    """The front page shows one example per job, and each works as printed;
    only the quickstart (the demo, the suite) is left to `make`."""
    blocks = [block for block in read_blocks(ROOT / "README.md")
              if block["language"] in CODE_LANGUAGES]
    shown = [(block["line"], block["decision"]) for block in blocks
             if block["decision"] is None or DECISION.match(block["decision"]).group(2)]
    assert len(runnable(ROOT / "README.md")) >= 4
    assert all(DECISION.match(decision).group(2) == "suite" for _, decision in shown
               if decision), shown
    assert all(decision for _, decision in shown), shown


def test_relative_links_reach_files():
    pages = [*PAGES, ROOT / "bench" / "README.md", *sorted((ROOT / "bench" / "docs").glob("*.md")),
             ROOT / "ARCHITECTURE.md"]
    missing = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://|#|mailto:", target):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                missing.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("page", [page for page in PAGES if runnable(page)],
                         ids=lambda page: page.name)
def test_the_runnable_blocks_run(page, tmp_path):
    env = reader_env()
    for block in runnable(page):
        done = run_block(block, tmp_path, env)
        assert done.returncode == 0, (
            f"{page.relative_to(ROOT)}:{block['line']} exited {done.returncode}\n"
            f"--- block\n{block['source']}--- stdout\n{done.stdout[-3000:]}\n"
            f"--- stderr\n{done.stderr[-3000:]}")
