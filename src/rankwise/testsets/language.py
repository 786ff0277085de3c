"""A small language guess for passages and questions: writing system first, then common function
words.

No dependency and no model: scripts (CJK, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai, Hangul,
kana) decide at once; Latin-script text is scored by how many of its words are among the 40-odd most
frequent function words of English, German, French, Spanish, Italian, Dutch, Portuguese, Swedish and
Polish. ``und`` (undetermined) when nothing stands out. Good enough to tell a passage's language and
to catch an English question written from a German passage; not a general-purpose detector.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["detect_language", "language_name", "LANGUAGE_NAMES"]

_WORDS = {
    "en": "the of and to in is that for it as with was on are be by this which or from at an not have has "
          "can you when its into their more will all if these does each what how must only used",
    "de": "der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als auch es an werden "
          "aus er hat dass sie nach wird bei einer um am sind noch wie einem über einen so zum oder kann wenn",
    "fr": "le la les de des et en un une du est que qui dans pour par sur au pas plus ne se ce il sont avec "
          "ou son aux sa mais leur nous vous cette ces lorsque chaque peut être été elle",
    "es": "el la los las de del y en un una que es por con para se no al lo como más pero sus su le ya o "
          "este esta son entre cuando muy sin sobre también cada puede ser fue hay",
    "it": "il lo la i gli le di del della e in un una che è per con non si da al dei delle sono come più ma "
          "anche questo questa ogni può essere nel nella ad",
    "nl": "de het een en van in is dat op te zijn met voor niet die aan er om ook als bij door maar of uit "
          "wordt worden dan naar kan deze nog elk wanneer",
    "pt": "o a os as de do da dos das e em um uma que é para com não por se no na mais ao como mas foi seu "
          "sua ou ser quando cada pode são também pelo pela",
    "sv": "och i att det som en på är av för med till den har de inte om ett men var sig så kan när eller "
          "från vid detta alla under",
    "pl": "i w nie na się z do to że jest o jak co po tak za od ale przez są lub jego dla może gdy oraz już "
          "tylko każdy",
}
_SETS = {lang: frozenset(words.split()) for lang, words in _WORDS.items()}
_SCRIPTS = [("ja", re.compile(r"[\u3040-\u30ff]")), ("ko", re.compile(r"[\uac00-\ud7af]")),
            ("zh", re.compile(r"[\u4e00-\u9fff]")), ("ru", re.compile(r"[\u0400-\u04ff]")),
            ("el", re.compile(r"[\u0370-\u03ff]")), ("ar", re.compile(r"[\u0600-\u06ff]")),
            ("he", re.compile(r"[\u0590-\u05ff]")), ("hi", re.compile(r"[\u0900-\u097f]")),
            ("th", re.compile(r"[\u0e00-\u0e7f]"))]
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian",
                  "nl": "Dutch", "pt": "Portuguese", "sv": "Swedish", "pl": "Polish", "ja": "Japanese",
                  "ko": "Korean", "zh": "Chinese", "ru": "Russian", "el": "Greek", "ar": "Arabic",
                  "he": "Hebrew", "hi": "Hindi", "th": "Thai", "und": "the same language as the passage"}
_WORD = re.compile(r"[^\W\d_]+", re.U)


def _scores(text: str) -> Counter:
    words = [w.casefold() for w in _WORD.findall(text)]
    scores: Counter = Counter()
    for w in words:
        for lang, vocab in _SETS.items():
            if w in vocab:
                scores[lang] += 1
    return scores


def detect_language(text: str, *, min_hits: int = 2) -> str:
    """ISO 639-1 code of ``text``'s language, or ``und`` when it cannot be told.

    Example:
        >>> detect_language(
        ...     "Die Replikation schreibt jede Änderung auf drei Knoten, bevor sie bestätigt wird."
        ... )
        'de'
        >>> detect_language("Each range is copied to three nodes before the write is acknowledged.")
        'en'
        >>> detect_language("12345")
        'und'
    """
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "und"
    for lang, pattern in _SCRIPTS:
        if len(pattern.findall(text)) >= max(1, len(letters) // 5):
            return lang
    scores = _scores(text)
    if not scores:
        return "und"
    (best, top), *rest = scores.most_common(2) + [("", 0)]
    second = rest[0][1]
    if top < min_hits or top <= second:
        return "und"
    return best


def language_name(code: str) -> str:
    """The English name of a language code (as prompts say it).

    Example:
        >>> language_name("fr")
        'French'
    """
    return LANGUAGE_NAMES.get(code, code)
