#!/usr/bin/env python3
"""Generates tests/tokenizer/data/pre_split_cases.json: how each pre-tokenizer preset's published regex
splits a set of texts, according to a real regex engine (the Python `regex` package, which has \\p{..}
classes, set difference and Unicode case folding). The C++ scanners must split the same way.

The patterns are the models' own (HF tokenizer.json / tiktoken), as quoted in llama.cpp's
llama-vocab.cpp; \\s is written as \\p{White_Space} as in Rust's regex and Oniguruma.
Texts: the visible conformance corpus lines up to 160 code points, hand-picked edge cases, and seeded
random strings over an alphabet covering every class the patterns distinguish.

Needs the `regex` package (Debian: python3-regex); only to regenerate the file, not to run the tests.
Usage: scripts/gen_pre_split_cases.py [../shared/tokenizers/corpus.jsonl] > tests/tokenizer/data/pre_split_cases.json
"""
import json
import random
import sys

import regex

S, NS = r"\p{White_Space}", r"\P{White_Space}"
C = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
UP, LO = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
UP_NO_HAN, LO_NO_HAN = r"[[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]--\p{Han}]", r"[[\p{Ll}\p{Lm}\p{Lo}\p{M}]--\p{Han}]"
WS_TAIL = rf"{S}*[\r\n]+|{S}+(?!{NS})|{S}+"

PRESETS = {
    "default": [
        r"[\p{P}\$\+<=>\^~\|]+",
        rf"'s|'t|'re|'ve|'m|'ll|'d| ?\p{{L}}+| ?\p{{N}}+| ?[^{S}\p{{L}}\p{{N}}]+|{S}+(?!{NS})",
        r"\p{N}+",
        r"[0-9][0-9][0-9]",
    ],
    "olmo": [rf"'s|'t|'re|'ve|'m|'ll|'d| ?\p{{L}}+| ?\p{{N}}+| ?[^{S}\p{{L}}\p{{N}}]+|{S}+(?!{NS})|{S}+"],
    "llama3": [rf"{C}|[^\r\n\p{{L}}\p{{N}}]?\p{{L}}+|\p{{N}}{{1,3}}| ?[^{S}\p{{L}}\p{{N}}]+[\r\n]*|{WS_TAIL}"],
    "qwen2": [rf"{C}|[^\r\n\p{{L}}\p{{N}}]?\p{{L}}+|\p{{N}}| ?[^{S}\p{{L}}\p{{N}}]+[\r\n]*|{WS_TAIL}"],
    "qwen35": [rf"{C}|[^\r\n\p{{L}}\p{{N}}]?[\p{{L}}\p{{M}}]+|\p{{N}}| ?[^{S}\p{{L}}\p{{M}}\p{{N}}]+[\r\n]*|{WS_TAIL}"],
    "tekken": [rf"[^\r\n\p{{L}}\p{{N}}]?{UP}*{LO}+|[^\r\n\p{{L}}\p{{N}}]?{UP}+{LO}*|\p{{N}}| ?[^{S}\p{{L}}\p{{N}}]+[\r\n/]*|{WS_TAIL}"],
    "gpt-4o": [rf"[^\r\n\p{{L}}\p{{N}}]?{UP}*{LO}+{C}?|[^\r\n\p{{L}}\p{{N}}]?{UP}+{LO}*{C}?|\p{{N}}{{1,3}}| ?[^{S}\p{{L}}\p{{N}}]+[\r\n/]*|{WS_TAIL}"],
    "kimi-k2": [rf"\p{{Han}}+|[^\r\n\p{{L}}\p{{N}}]?{UP_NO_HAN}*{LO_NO_HAN}+{C}?|[^\r\n\p{{L}}\p{{N}}]?{UP_NO_HAN}+{LO_NO_HAN}*{C}?|\p{{N}}{{1,3}}| ?[^{S}\p{{L}}\p{{N}}]+[\r\n]*|{WS_TAIL}"],
    "deepseek-v3": [
        r"\p{N}{1,3}",
        r"[一-龥぀-ゟ゠-ヿ]+",
        rf"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{{|}}~][A-Za-z]+|[^\r\n\p{{L}}\p{{P}}\p{{S}}]?[\p{{L}}\p{{M}}]+| ?[\p{{P}}\p{{S}}]+[\r\n]*|{WS_TAIL}",
    ],
}
PRESETS["glm4"] = PRESETS["llama3"]

ALPHABET = list("aZbYz  \t\n\r'.,!?-/:;\"()[]$+<=>^~|`@#%&*_\\09") + [
    "\x0b", "\x85", "\xa0", "\u3000", "\u2028", "\x1c", "\x01", "\u200b", "\u200d", "\ufeff",  # spaces, controls, formats
    "\u017f", "\u212a", "S", "T", "R", "E", "L", "V", "M", "D", "s", "t", "r", "e", "l", "v", "m", "d",  # contractions
    "\u0301", "\u0300", "\u0e31", "\u094d", "\u20e3",  # marks
    "\u00e9", "\u00c9", "\u01c5", "\u02b0", "\u0e01", "\u0915", "\u05d0",  # Ll Lu Lt Lm Lo
    "\u4e2d", "\u56fd", "\u4e00", "\u9fa5", "\u9fa6", "\u3042", "\u30ab", "\u30ff", "\ud55c", "\u3400",  # Han, kana, Hangul
    "\u0663", "\u216b", "\u00bd", "\u00b2", "\u3002", "\uff0c", "\u00a9", "\U0001f600", "\u2014",  # N, P, S
]


def split_sequence(patterns, text):
    pieces = [text]
    for p in patterns:
        rx = regex.compile(p, regex.V1)
        out = []
        for piece in pieces:
            at = 0
            for m in rx.finditer(piece):
                if m.start() > at:
                    out.append(piece[at:m.start()])
                out.append(m.group())
                at = m.end()
            if at < len(piece):
                out.append(piece[at:])
        pieces = out
    return pieces


def main():
    corpus = sys.argv[1] if len(sys.argv) > 1 else "../shared/tokenizers/corpus.jsonl"
    texts = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)["text"]
            if 0 < len(t) <= 160:
                texts.append(t)
    texts += [
        "HELLOworld HelloWORLD helloWorld XMLHttpRequest", "it's IT'S it'\u017f '\u017f 'K", "a/b//c/\n/",
        "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u0928\u092e\u0938\u094d\u0924\u0947", "e\u0301\u0301 \u0301a \u0301",
        "\u4e2d\u6587English\u4e2d\u6587text123\u5929", "x  \n\n y", "  \t \r\n\r\n  z", "a\u3000\u3000b", "1234567",
    ]
    rng = random.Random(20240601)
    for _ in range(600):
        texts.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 14))))
    splits = {}
    for name, patterns in PRESETS.items():
        rows = []
        for t in texts:
            pieces = split_sequence(patterns, t)
            assert "".join(pieces) == t
            rows.append([len(p.encode("utf-8")) for p in pieces])
        splits[name] = rows
    json.dump({"generator": "scripts/gen_pre_split_cases.py", "regex_version": regex.__version__,
               "texts": texts, "splits": splits}, sys.stdout, ensure_ascii=True, separators=(",", ":"))
    print()


main()
