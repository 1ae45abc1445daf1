"""Input readers and the sentence splitter of kerasbert.data.text_input."""

import pytest

from kerasbert.data import text_input as ti
from kerasbert.errors import UsageError


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello there. How are you? Fine!", ["Hello there.", "How are you?", "Fine!"]),
        ("Mr. Smith paid $3.50 for it. Then he left.",
         ["Mr. Smith paid $3.50 for it.", "Then he left."]),
        ("We met Dr. J. Watson, e.g. at home. It was late.",
         ["We met Dr. J. Watson, e.g. at home.", "It was late."]),
        ("The U.S. economy grew 2.5 percent. Prices rose.",
         ["The U.S. economy grew 2.5 percent.", "Prices rose."]),
        ('He said "Stop." She stopped.', ['He said "Stop."', "She stopped."]),
        ("오늘은 날씨가 좋다. 영화를 봤어요! 재미있었나요? 네.",
         ["오늘은 날씨가 좋다.", "영화를 봤어요!", "재미있었나요?", "네."]),
        ("今天天气很好。我们去公园吧！你来吗？", ["今天天气很好。", "我们去公园吧！", "你来吗？"]),
        ("「行こう。」と彼は言った。", ["「行こう。」", "と彼は言った。"]),
        ("version 3.14 is out", ["version 3.14 is out"]),
        ("", []),
    ],
)
def test_split_sentences(text, expected):
    assert ti.split_sentences(text) == expected


def test_original_format_documents(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("a b.\nc d.\n\n\ne f.\n  \ng h.\n", encoding="utf-8")
    assert ti.detect_format(str(path)) == "sentences"
    assert list(ti.iter_documents([str(path)])) == [["a b.", "c d."], ["e f."], ["g h."]]


def test_plain_paragraphs_one_per_line_are_detected_and_split(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text(
        "The cat sat. The dog ran. Birds sing.\n\n"
        "영화가 정말 좋았다. 배우들이 훌륭했어요!\n"
        "中文句子。第二句。\n",
        encoding="utf-8",
    )
    assert ti.detect_format(str(path)) == "paragraphs"
    docs = list(ti.iter_documents([str(path)]))
    assert docs == [
        ["The cat sat.", "The dog ran.", "Birds sing."],
        ["영화가 정말 좋았다.", "배우들이 훌륭했어요!"],
        ["中文句子。", "第二句。"],
    ]
    # Forcing the original format keeps one line = one sentence.
    forced = list(ti.iter_documents([str(path)], input_format="sentences"))
    assert forced[0] == ["The cat sat. The dog ran. Birds sing."]


def test_hard_wrapped_paragraphs_are_joined(tmp_path):
    path = tmp_path / "wrapped.txt"
    path.write_text(
        "The quick brown fox jumped over the lazy dog and kept\n"
        "running through the field. Then it stopped near the\n"
        "river, because Mr. Smith was\n"
        "fishing there.\n"
        "\n"
        "오늘은 날씨가 정말\n"
        "좋았다. 우리는 공원에\n"
        "갔어요!\n"
        "\n"
        "今天天气\n"
        "很好。我们去\n"
        "公园吧！\n"
        "\n"
        "  \n"
        "A second English paragraph that wraps\n"
        "onto a second line.\n",
        encoding="utf-8",
    )
    assert ti.detect_format(str(path)) == "paragraphs"
    assert list(ti.iter_documents([str(path)])) == [
        ["The quick brown fox jumped over the lazy dog and kept running through the field.",
         "Then it stopped near the river, because Mr. Smith was fishing there."],
        # Hangul joins with a space; Chinese without one.
        ["오늘은 날씨가 정말 좋았다.", "우리는 공원에 갔어요!"],
        ["今天天气很好。", "我们去公园吧！"],
        ["A second English paragraph that wraps onto a second line."],
    ]


def test_join_wrapped_lines_spacing():
    assert ti.join_wrapped_lines(["日本語の", "映画"]) == "日本語の映画"
    assert ti.join_wrapped_lines(["中文", "word"]) == "中文 word"
    assert ti.join_wrapped_lines(["end。", "「次」"]) == "end。「次」"
    assert ti.join_wrapped_lines(["a", "b", "c"]) == "a b c"


def test_long_paragraph_is_cut_to_bound_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(ti, "MAX_PARAGRAPH_LINES", 3)
    path = tmp_path / "long.txt"
    path.write_text("one line that\ngoes on\nand on\nand on\nforever\n", encoding="utf-8")
    docs = list(ti.iter_paragraph_file(str(path)))
    assert docs == [["one line that goes on and on"], ["and on forever"]]


def test_missing_file_is_named(tmp_path):
    with pytest.raises(UsageError, match="nope.txt"):
        list(ti.iter_documents([str(tmp_path / "nope.txt")]))


def test_tfds_needs_text_field():
    with pytest.raises(UsageError, match="--text-field"):
        ti.check_inputs(["tfds:wikipedia/20230601.en"])


def test_tfds_mock_data_documents():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=5):
        docs = list(ti.iter_documents(["tfds:wikipedia/20230601.en:train"], text_field="text"))
    assert len(docs) == 5
    assert all(isinstance(s, str) and s for doc in docs for s in doc)


def test_tfds_missing_field_and_unknown_name():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=2):
        with pytest.raises(UsageError, match="'body'.*fields"):
            list(ti.iter_documents(["tfds:wikipedia/20230601.en"], text_field="body"))
    with pytest.raises(UsageError, match="no_such_dataset_xyz"):
        list(ti.iter_documents(["tfds:no_such_dataset_xyz"], text_field="text"))


# --- linear cost (issue 18, item 5) ------------------------------------------


class _CountingPattern:
    """A compiled pattern that adds, per call, the number of characters the
    call may scan (from pos to endpos) to `counter["chars"]`."""

    def __init__(self, pattern, counter):
        self._pattern, self._counter = pattern, counter

    def __getattr__(self, name):
        method = getattr(self._pattern, name)
        if name not in ("search", "match", "fullmatch", "finditer", "findall", "sub", "split"):
            return method

        def counted(string, *args, **kwargs):
            pos = args[0] if args and isinstance(args[0], int) else kwargs.get("pos", 0)
            endpos = args[1] if len(args) > 1 else kwargs.get("endpos", len(string))
            self._counter["chars"] += max(0, min(endpos, len(string)) - pos)
            return method(string, *args, **kwargs)

        return counted


def _count_scans(monkeypatch):
    """Instruments every module-level pattern of text_input and its per-word
    rules; returns the counter {"chars": regex characters, "word_chars":
    characters handed to the per-word rules, "words": their calls}."""
    import re

    counter = {"chars": 0, "word_chars": 0, "words": 0}
    for name, value in list(vars(ti).items()):
        if isinstance(value, re.Pattern):
            monkeypatch.setattr(ti, name, _CountingPattern(value, counter))
    word_cuts = ti._word_cuts

    def counted_word_cuts(word, next_char):
        counter["words"] += 1
        counter["word_chars"] += len(word)
        return word_cuts(word, next_char)

    monkeypatch.setattr(ti, "_word_cuts", counted_word_cuts)
    return counter


UNIT = ("Mr. Smith paid $3.50 for it. Then he left! 오늘은 날씨가 좋다. "
        "The U.S. economy grew 2.5 percent. 今天天气很好。我们去公园吧！ ")
UNIT_SENTENCES = ["Mr. Smith paid $3.50 for it.", "Then he left!", "오늘은 날씨가 좋다.",
                  "The U.S. economy grew 2.5 percent.", "今天天气很好。", "我们去公园吧！"]


def test_one_line_document_of_1mb_is_split_in_linear_operations(tmp_path, monkeypatch):
    """The reader's whole path (format detection, paragraph reading,
    splitting) on a one-line document of 1,000,000+ characters scans each
    character a bounded number of times: the old look-behind rescanned the
    paragraph from 0 for every period (~10^10 characters here)."""
    repeats = 1_000_000 // len(UNIT) + 1
    line = (UNIT * repeats).strip()
    assert len(line) >= 1_000_000
    path = tmp_path / "one_line.txt"
    path.write_text(line + "\n", encoding="utf-8")
    counter = _count_scans(monkeypatch)
    docs = list(ti.iter_documents([str(path)]))
    assert docs == [UNIT_SENTENCES * repeats]
    # Detection and reading each split the line once: two passes, each
    # scanning every character at most a few times.
    assert counter["chars"] <= 2 * 3 * len(line), counter
    assert counter["word_chars"] <= 2 * len(line), counter


@pytest.mark.parametrize("line", ["a." * 100_000, "." * 200_000, "。" * 200_000,
                                  "x" * 199_999 + ".", "Dr. " * 50_000])
def test_pathological_lines_are_linear_too(monkeypatch, line):
    """Runs of punctuation without spaces, one 200 kB word, 50,000
    abbreviations: no pattern backtracks over a run, no rule looks back
    (the bounds hold at any length; these are long enough to show it)."""
    counter = _count_scans(monkeypatch)
    sentences = ti.split_sentences(line)
    assert "".join(sentences).replace(" ", "") == line.replace(" ", "")
    assert counter["chars"] <= 3 * len(line), counter
    assert counter["word_chars"] <= len(line), counter


def test_non_utf8_input_is_refused_with_file_and_byte_offset(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("First sentence.\n\nSecond one.\n".encode() + b"caf\xe9 au lait.\n")
    prefix = len("First sentence.\n\nSecond one.\ncaf".encode())
    with pytest.raises(UsageError, match=rf"latin1.txt: not UTF-8 text: byte 0xe9 at byte "
                                         rf"offset {prefix} \(line 4\)"):
        list(ti.iter_documents([str(path)]))
    with pytest.raises(UsageError, match=rf"byte offset {prefix} "):
        ti.check_text_files([str(path)])


def test_byte_order_mark_is_not_text(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfHello there.\nBye.\n")
    assert list(ti.iter_documents([str(path)])) == [["Hello there.", "Bye."]]
    blank = tmp_path / "bom_blank.txt"
    blank.write_bytes(b"\xef\xbb\xbf \n\n\t\n")
    with pytest.raises(UsageError, match="no documents in --input .*bom_blank.txt"):
        ti.check_text_files([str(blank)])
