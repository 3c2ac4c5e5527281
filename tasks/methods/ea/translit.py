"""Name normalisation for character n-gram similarity: NFKC, accents stripped, kana -> Hepburn romaji.

Inputs: entity names. Outputs: lower-case ASCII-leaning strings. all-MiniLM-L6-v2 is English-only, so
Japanese katakana names (``アリアンツ・リヴィエラ``) share no characters with their English counterparts
(``Allianz Riviera``); romanising kana (``ariantsu riviera``) gives overlapping character n-grams. Kanji and
hanzi are left as they are (no reading dictionary is installed); Latin letters inside CJK names
(``2014年FIFAワールドカップ``) are kept and match directly.
"""

from __future__ import annotations

import unicodedata

_BASE = {
    "あ": "a", "い": "i", "う": "u", "え": "e", "お": "o",
    "か": "ka", "き": "ki", "く": "ku", "け": "ke", "こ": "ko",
    "が": "ga", "ぎ": "gi", "ぐ": "gu", "げ": "ge", "ご": "go",
    "さ": "sa", "し": "shi", "す": "su", "せ": "se", "そ": "so",
    "ざ": "za", "じ": "ji", "ず": "zu", "ぜ": "ze", "ぞ": "zo",
    "た": "ta", "ち": "chi", "つ": "tsu", "て": "te", "と": "to",
    "だ": "da", "ぢ": "ji", "づ": "zu", "で": "de", "ど": "do",
    "な": "na", "に": "ni", "ぬ": "nu", "ね": "ne", "の": "no",
    "は": "ha", "ひ": "hi", "ふ": "fu", "へ": "he", "ほ": "ho",
    "ば": "ba", "び": "bi", "ぶ": "bu", "べ": "be", "ぼ": "bo",
    "ぱ": "pa", "ぴ": "pi", "ぷ": "pu", "ぺ": "pe", "ぽ": "po",
    "ま": "ma", "み": "mi", "む": "mu", "め": "me", "も": "mo",
    "や": "ya", "ゆ": "yu", "よ": "yo",
    "ら": "ra", "り": "ri", "る": "ru", "れ": "re", "ろ": "ro",
    "わ": "wa", "ゐ": "i", "ゑ": "e", "を": "o", "ん": "n", "ゔ": "vu",
    "ぁ": "a", "ぃ": "i", "ぅ": "u", "ぇ": "e", "ぉ": "o", "ゎ": "wa",
}
_YOON = {"ゃ": "ya", "ゅ": "yu", "ょ": "yo"}
# small vowels after a consonant kana form foreign syllables: ファ fa, ティ ti, ヴィ vi, ウィ wi...
_SMALL_VOWEL = {"ぁ": "a", "ぃ": "i", "ぅ": "u", "ぇ": "e", "ぉ": "o"}
_SEPARATORS = {"・": " ", "＝": " ", "゠": " ", "、": " ", "。": " "}


def _hira(ch: str) -> str:
    o = ord(ch)
    if 0x30A1 <= o <= 0x30F6:  # katakana -> hiragana
        return chr(o - 0x60)
    if ch == "ヴ":
        return "ゔ"
    return ch


def kana_to_romaji(text: str) -> str:
    """Romanise hiragana/katakana (Hepburn-like); other characters pass through unchanged.

    Example:
        >>> kana_to_romaji("アリアンツ・リヴィエラ")
        'ariantsu riviera'
    """
    chars = [_hira(c) for c in text]
    out: list[str] = []
    i = 0
    double_next = False
    while i < len(chars):
        c = chars[i]
        nxt = chars[i + 1] if i + 1 < len(chars) else ""
        if c == "っ":
            double_next = True
            i += 1
            continue
        if c == "ー":
            if out and out[-1] and out[-1][-1] in "aeiou":
                out.append(out[-1][-1])
            i += 1
            continue
        if c in _SEPARATORS:
            out.append(_SEPARATORS[c])
            i += 1
            continue
        if c in _BASE:
            syl = _BASE[c]
            if nxt in _YOON and syl.endswith("i") and len(syl) > 1:
                stem = syl[:-1]
                syl = stem + (_YOON[nxt][1:] if stem in ("sh", "ch", "j") else _YOON[nxt])
                i += 1
            elif nxt in _SMALL_VOWEL and c not in _SMALL_VOWEL and len(syl) > 1:
                stem = syl[:-1]
                stem = {"shi": "sh", "chi": "ch", "tsu": "ts", "fu": "f", "vu": "v", "u": "w"}.get(syl, stem)
                syl = stem + _SMALL_VOWEL[nxt]
                i += 1
            elif c == "う" and nxt in _SMALL_VOWEL:
                syl = "w" + _SMALL_VOWEL[nxt]
                i += 1
            if double_next and syl[0] not in "aeiou":
                syl = ("t" if syl.startswith("ch") else syl[0]) + syl
            double_next = False
            out.append(syl)
            i += 1
            continue
        double_next = False
        out.append(c)
        i += 1
    return "".join(out)


def strip_accents(text: str) -> str:
    """Remove combining marks after NFKD decomposition (``libéraux`` -> ``liberaux``)."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def normalize_name(name: str, transliterate: bool = True) -> str:
    """Name as used by the character n-gram similarity.

    NFKC (full-width Latin and digits become ASCII), kana romanised when ``transliterate``, accents stripped,
    lower-cased, punctuation runs collapsed to single spaces.
    """
    text = unicodedata.normalize("NFKC", name)
    if transliterate:
        text = kana_to_romaji(text)
    text = strip_accents(text).lower()
    cleaned = "".join(c if c.isalnum() else " " for c in text)
    return " ".join(cleaned.split())
