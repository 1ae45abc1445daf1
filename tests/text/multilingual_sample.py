"""A real multilingual text sample, built offline from installed packages.

The lines come from CLDR locale data shipped with `babel` (names of
territories, languages, months and days, unit patterns in many scripts, with
accents) and from `faker`'s localized sentences and addresses, plus a fixed
set of emoji-bearing lines. Nothing is downloaded; the same package versions
(pinned in constraints.txt) give the same lines.
"""

import babel
import faker

# Locales chosen to cover Latin with accents, Cyrillic, Greek, Arabic, Hebrew,
# Devanagari, Thai, Hangul, kana and CJK ideographs.
BABEL_LOCALES = (
    "ko", "ja", "zh", "zh_Hant", "ar", "hi", "ru", "fr", "de", "es", "pt",
    "vi", "th", "el", "he", "tr", "pl", "cs", "sv", "is", "uk", "fa", "bn",
    "ta", "ka", "hy", "am", "en",
)
FAKER_LOCALES = (
    "ko_KR", "ja_JP", "zh_CN", "zh_TW", "fr_FR", "de_DE", "ru_RU", "el_GR",
    "ar_AA", "hi_IN", "vi_VN", "es_ES", "pl_PL", "cs_CZ", "th_TH", "he_IL",
)
EMOJI_LINES = (
    "I love this movie 😍😍 정말 최고 👍",
    "family: 👨‍👩‍👧‍👦 flags: 🇰🇷🇯🇵🇫🇷 skin tones: 👋🏽 👍🏿",
    "날씨가 좋아요 ☀️🌈 오늘은 산책 🚶‍♀️",
    "今日は楽しかった！🎉🍣🍺 また行こうね✨",
    "C'est génial 🥖🧀 vive les vacances 🏖️",
    "Привет 👋 как дела? 🤔 всё хорошо 💯",
    "math ∑∞ ≠ ≤ ≥ arrows → ← ↑ keycaps 1️⃣ #️⃣ ©️ ®️ ™️",
    "中文测试😀表情符号🐼熊猫",
    "¡Qué bueno! 😂🤣 jajaja ❤️🔥",
    "Tab\tseparated\u00a0nbsp and zero\u200bwidth and soft\u00adhyphen",
)
# Lines where tokenizers once differed from HF `tokenizers`: a special-token
# string in text (equal with special_tokens_in_strings on) and a word of 101-400
# bytes (HF's limit counts characters, and so does ours). The adversarial
# sample (adversarial_sample.py) has many more of both.
EDGE_LINES = (
    "Fill in the [MASK] token, then [SEP] and [CLS].",
    "A 120-letter word: " + "pneumonoultramicroscopicsilicovolcanoconiosis" * 2
    + "supercalifragilisticexpialidocious",
)


def _babel_lines():
    for code in BABEL_LOCALES:
        locale = babel.Locale.parse(code)
        for key in sorted(locale.territories):
            yield f"{locale.territories[key]} ({key})"
        names = [locale.languages[k] for k in sorted(locale.languages)]
        for start in range(0, len(names), 6):
            yield ", ".join(names[start : start + 6])
        for width in ("wide", "abbreviated"):
            months = locale.months["format"][width]
            yield " ".join(months[k] for k in sorted(months))
            days = locale.days["format"][width]
            yield " ".join(days[k] for k in sorted(days))
        for key in sorted(locale.currencies)[:60]:
            yield f"{locale.currencies[key]} {key}"


def _faker_lines(per_locale):
    for code in FAKER_LOCALES:
        fake = faker.Faker(code)
        fake.seed_instance(12345)
        for _ in range(per_locale):
            yield fake.sentence(nb_words=12)
            yield fake.address().replace("\n", " ")


def multilingual_lines(min_lines=10_000, faker_per_locale=150):
    """Returns a list of at least `min_lines` non-empty unique text lines."""
    lines, seen = [], set()
    sources = (
        _babel_lines(), _faker_lines(faker_per_locale), iter(EMOJI_LINES),
        iter(EDGE_LINES),
    )
    for source in sources:
        for line in source:
            if line.strip() and line not in seen:
                seen.add(line)
                lines.append(line)
    if len(lines) < min_lines:
        raise AssertionError(f"only {len(lines)} sample lines, need {min_lines}")
    return lines
