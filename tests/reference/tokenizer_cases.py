#!/usr/bin/env python3
"""Reference tokenizations for engine/tokenizer's parity tests.

Usage:
    python3 tests/reference/tokenizer_cases.py OUTDIR            # needs `tokenizers`
    python3 tests/reference/tokenizer_cases.py --texts-only OUTDIR

Reads the vendored Qwen3 tokenizer (../testdata/qwen3-tokenizer/tokenizer.json,
relative to this script), tokenizes a fixed, deterministic set of texts with the
Hugging Face `tokenizers` package and writes:

  OUTDIR/qwen3_cases.json     {"tokenizers_version", "generator", "cases": [
                                 {"text", "ids", "decoded", "decoded_skip"}],
                               "decode_cases": [{"ids", "decoded", "decoded_skip"}]}
  OUTDIR/variants_cases.json  {"tokenizers_version", "generator", "variants": [
                                 {"name", "patch", "cases": [...]}]}

Each variant is the Qwen3 tokenizer.json with `patch` applied (see apply_patch;
the Go test applies the same patch) to exercise the other pre-tokenizers,
normalizers and added-token options the Go package supports.

--texts-only writes OUTDIR/texts.json (the same texts, patches and decode id
lists, without ids) and needs nothing beyond the standard library; it lets
another implementation of HF tokenizers produce the same fixtures.

The lead copies the two JSON files to tests/testdata/tokenizer/.
"""

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER_JSON = os.path.join(HERE, "..", "testdata", "qwen3-tokenizer", "tokenizer.json")

PAT_QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
              r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PAT_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
              r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def log(msg):
    print("[tokenizer_cases] " + msg, flush=True)


# ---------------------------------------------------------------- texts

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How are you doing today?",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "In 1969, Neil Armstrong became the first person to walk on the Moon.",
    "She sells seashells by the seashore; the shells she sells are surely seashells.",
    "Dr. Smith's patients (all 23 of them) arrived at 9:45 a.m. on Tuesday.",
    "\"Quoted text,\" she said, 'and single quotes' too.",
    "Wait... what?! No way!!! Really???",
    "e.g., i.e., etc., vs. -- em-dash — en-dash – ellipsis …",
    "The café served crème brûlée, jalapeño poppers and a piña colada.",
    "Ünïcödé ñämés: Zoë, Björk, Søren, Łukasz, Çağlar, Đorđe.",
    "A sentence with trailing spaces.   ",
    "   Leading spaces before text.",
    "Multiple     internal     spaces.",
    "Line one.\nLine two.\nLine three.",
    "Paragraph one.\n\nParagraph two.\n\n\nParagraph three.",
    "Windows\r\nline\r\nendings\r\n",
    "Tabs\tbetween\twords\t\tand\t\t\tmore.",
    "MiXeD CaSe WoRdS and ALLCAPS and lowercase.",
    "ALL CAPS SENTENCE WITH NUMBERS 12345 AND PUNCTUATION!",
]

CONTRACTIONS = [
    "I'm sure you'll see it's what we've wanted, they'd said, and we're here.",
    "I'M SURE YOU'LL SEE IT'S WHAT WE'VE WANTED, THEY'D SAID, AND WE'RE HERE.",
    "It'S, you'Ll, we'Ve, they'D, I'M, you'RE, don'T",
    "'s 't 're 've 'm 'll 'd",
    "'S 'T 'RE 'VE 'M 'LL 'D",
    "'sup 'twas 'round 'em 'lloyd 'dear",
    "rock 'n' roll, ma'am, o'clock, y'all",
    "the dog's bone; the dogs' bones",
    "\u2019s curly apostrophe isn\u2019t a contraction",
    "long s: '\u017f '\u017ft and Kelvin '\u212a",
    "''s '''ll 'x's",
    "can't won't shouldn't",
    "'",
    "'s",
    "x'",
    "'TWAS", "'\u017ftop", "'Kelvin", "'\ufb06", "'LLama", "'REady", "'VEry", "'Me", "'Dx", "x'Tx", "'sUP",
    "(\"'Sup\")\n'TWAS\n'\u017fx",
]

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "function add(a, b) {\n  return a + b; // sum\n}\nconsole.log(add(1, 2));\n",
    "fn main() {\n    let v: Vec<i32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC;",
    "<!DOCTYPE html>\n<html><body><div class=\"x\">Hi &amp; bye</div></body></html>",
    "#!/bin/bash\nfor f in *.txt; do echo \"$f\" | tr a-z A-Z; done\n",
    "public class Main {\n    public static void main(String[] args) {\n        System.out.println(\"x\");\n    }\n}",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares",
    "if (a != b && c <= d || !e) { x += 1; y -= 2; z *= 3; }",
    "lambda x: x >> 2 << 3 ^ 0xFF & 0b1010 | 0o17",
    "    indented four\n        indented eight\n\t\ttabbed\n",
    "key: value\nlist:\n  - item1\n  - item2\n",
    "a=1;b=2;;c===d!==e=>f",
    "/* block comment */ // line comment\n# hash comment",
    "{{ template }} {% if x %}{{ y | upper }}{% endif %}",
    "C:\\Users\\name\\Documents\\file.txt",
    "$ ls -la | grep '\\.go$' > out.txt 2>&1",
    "```python\nprint('hello')\n```",
]

JSON_MD_URLS = [
    '{"name": "Alice", "age": 30, "tags": ["a", "b"], "nested": {"x": null, "y": true}}',
    '[1, 2.5, -3e10, "str", false]',
    '{"emoji": "\\ud83d\\ude00", "escaped": "line\\nbreak\\ttab"}',
    "# Title\n\n## Subtitle\n\n- bullet one\n- bullet two\n\n1. first\n2. second\n",
    "**bold** _italic_ `code` ~~strike~~ [link](https://example.com) ![img](a.png)",
    "| col1 | col2 |\n|------|------|\n| a    | b    |\n",
    "> quoted line\n>> nested quote",
    "https://www.example.com/path/to/page?query=value&other=123#section",
    "http://localhost:8080/api/v1/users/42",
    "ftp://files.example.org/pub/file-1.2.3.tar.gz",
    "mailto:someone@example.com and user.name+tag@sub.domain.co.uk",
    "Visit www.google.com or github.com/user/repo/blob/main/README.md",
    "IPv4 192.168.1.1, IPv6 2001:0db8:85a3::8a2e:0370:7334",
    "---\ntitle: Front matter\n---\n",
    "Footnote[^1] and a horizontal rule\n\n***\n",
]

SCRIPTS = [
    "你好，世界！今天天气很好。",
    "我爱自然语言处理和机器学习。",
    "中文English混合mixed文本text。",
    "日本語のテキストです。カタカナとひらがなと漢字。",
    "東京タワーは１９５８年に完成しました。",
    "한국어 텍스트입니다. 안녕하세요!",
    "\u1100\u1161\u11a8 decomposed hangul jamo",
    "مرحبا بالعالم! هذا نص عربي.",
    "اَلْعَرَبِيَّةُ مع التشكيل",
    "שלום עולם! זה טקסט בעברית.",
    "בְּרֵאשִׁית בָּרָא אֱלֹהִים",
    "नमस्ते दुनिया! यह हिंदी पाठ है।",
    "क्षत्रिय संस्कृत ऋषि",
    "สวัสดีชาวโลก นี่คือข้อความภาษาไทย",
    "Привет, мир! Это русский текст.",
    "Γειά σου Κόσμε! Αυτό είναι ελληνικό κείμενο.",
    "Բարեւ աշխարհ",
    "გამარჯობა მსოფლიო",
    "ሰላም ዓለም",
    "வணக்கம் உலகம்",
    "ສະບາຍດີ",
    "བཀྲ་ཤིས་བདེ་ལེགས།",
    "Tiếng Việt có dấu: Xin chào thế giới!",
    "Türkçe: İstanbul, ılık, ĞÜŞÖÇ",
    "Polski: zażółć gęślą jaźń",
    "Mixed: hello 世界 مرحبا שלום привет 🌍",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ！？",
    "ﾊﾝｶｸｶﾀｶﾅ half-width katakana",
    "𠀀𠀁𠀂 CJK extension B 𪚥",
    "ᚠᚢᚦᚨᚱᚲ runes and 𐌰𐌱𐌲 gothic",
]

EMOJI = [
    "😀😃😄😁😆",
    "👍👍🏻👍🏼👍🏽👍🏾👍🏿",
    "👨‍👩‍👧‍👦 family ZWJ sequence",
    "🏳️‍🌈 🏴‍☠️ flags with ZWJ",
    "🇺🇸🇬🇧🇯🇵🇩🇪🇫🇷 regional indicator flags",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿 tag sequence flag",
    "1️⃣ 2️⃣ #️⃣ keycaps",
    "❤️ ❤ ☺️ ☺ variation selectors",
    "👩🏽‍💻 woman technologist medium skin",
    "Hello 👋 world 🌍!",
    "🤖🦾🧠 AI",
    "emoji at end 🎉",
    "🎉 emoji at start",
    "a😀b😀c",
    "✅ ❌ ⚠️ ℹ️ ™ © ®",
]

NUMBERS = [
    "0", "7", "42", "123", "1234", "12345", "123456789",
    "3.14159265358979323846264338327950288419716939937510",
    "1,000,000.00", "$1,234.56", "€99,99", "¥10000", "-273.15°C",
    "2024-01-15T10:30:00Z", "+1 (555) 123-4567", "1e-10", "0xDEADBEEF", "1/2 + 3/4 = 5/4",
    "99999999999999999999999999999999999999999999999999999999999999999999",
    "x²+y²=z² ½ ¼ ¾ ⅓", "Ⅻ Ⅳ ⅷ roman numerals", "① ② ③ circled", "٠١٢٣٤٥٦٧٨٩ Arabic-Indic",
    "०१२३४५६७८९ Devanagari digits", "𝟘𝟙𝟚 math digits", "v1.2.3-beta.4+build.5",
    "abc123def456", "123abc", "a1b2c3",
]

WHITESPACE = [
    "", " ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", "\n\n\n", "\r\n\r\n", " \n", "\n ",
    " \n ", "  \n  ", "\t\n\t", "a b", "a  b", "a   b", "a\tb", "a\nb", "a\r\nb", "a \nb", "a\n b",
    "a \n b", "a  \n\n  b", "a\n\n\nb", "a\r\rb", "a \r\n b", " a", "a ", "  a  ",
    "\u00a0", "a\u00a0b", "a \u00a0 b", "\u3000", "漢\u3000字", "a\u2009b", "a\u2009\u2009b",
    "\u2002\u2003\u2004 en/em spaces", "\u1680ogham", "a\u202fb\u205fc", "a\u2028b\u2029c",
    "a\u0085b", "a\u000bb\u000cc", "a\u001cb\u001dc\u001ed\u001ff", "a\u200bb zero width",
    "a\ufeffb bom", "a\u180eb mongolian", "a\u200cb\u200dc joiners", "x" + " " * 50 + "y",
    " " * 200, "\n" * 30, "\t" * 20 + "x", " \t \n \r\n \t", "word \t\n", "end with newline\n",
    "end with spaces  ", ".  \n", "!!\n\n", "?? \n", "a.\r\n\r\nb",
]

CONTROL = [
    "\x00", "a\x00b", "\x07bell", "esc\x1b[31mred\x1b[0m", "del\x7f", "\x01\x02\x03",
    "\u0080\u0081\u009f c1 controls", "\ufffd replacement", "\uffff\ufffe noncharacters",
    "\U0010ffff last code point", "\ue000 private use", "\u202eright-to-left override\u202c",
]

COMBINING = [
    "e\u0301", "cafe\u0301", "A\u030a", "o\u0308", "n\u0303", "\u0301", "a\u0301\u0302\u0303",
    "Z\u0351\u0362\u0315\u0316a\u0317\u0327lgo", "\u0041\u030a\u0301", "x\u0301", "1\u0301", ".\u0301",
    " \u0301", "\u212b angstrom sign", "\u2126 ohm sign", "\ufb01 ligature fi", "\u1e9b\u0323",
    "\u0958 devanagari qa", "\uac00\u11a8", ">\u0338 composes", "<\u0338", "=\u0338",
]

# HF normalizes with Unicode 9.0 tables: marks assigned later neither reorder nor
# let a following mark compose (U+1DF6, U+0D3B, U+08D3, U+0C3C, U+1DFA are
# post-9.0; U+1E94A and U+08E3 are not); U+1E035 has an NFKC mapping since 15.0.
NORMALIZATION = [
    "a\u1df6\u0301", "a\u0d3b\u0301", "a\U0001e94a\u0301", "a\u08e3\u0301", "a\u1dfa\u0323",
    "a\u0301\u1dfa", "a\u08d3\u0301", "e\u0c3c\u0301x", "a\u2dff\u0323", "\U0001e035 \u0870\u0301",
    "\u1100\u1161\u0d3b\u11a8", "o\u0308\u1ab0\u0304", "\u0915\u093c\u1df6",
]


def mark_soups():
    """Seeded random mixtures of letters, old and new combining marks, jamo."""
    atoms = ["a", "e", "o", "A", "n", ">", " ", "\u0301", "\u0323", "\u0308", "\u0302", "\u0327",
             "\u1df6", "\u1dfa", "\u0d3b", "\u08d3", "\u0c3c", "\U0001e94a", "\u1ab0", "\u1100",
             "\u1161", "\u11a8", "\u0338", "\u05b0", "\u0f71", "\u0f72", "\U0001e035", "\u0870",
             "\ufb01", "\u2460", "\u212b", "\u0958", "\u093c", "\u3099", "\u304b", "\u0b47",
             "\u0b3e", "\U00011131", "\U00011127"]
    rnd = random.Random(99)
    return ["".join(rnd.choice(atoms) for _ in range(rnd.randint(2, 10))) for _ in range(30)]


SPECIAL = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>",
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n",
    "<think>\nLet me think about this.\n</think>\n\nThe answer is 42.",
    "<think>\n\n</think>\n\n",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "<tool_response>\n{\"temp\": 20}\n</tool_response>",
    "<|fim_prefix|>def f():<|fim_suffix|>\n    return 1<|fim_middle|>",
    "<|repo_name|>infernix<|file_sep|>main.go",
    "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>describe",
    "<|box_start|>(10,20),(30,40)<|box_end|><|quad_start|><|quad_end|><|object_ref_start|>x<|object_ref_end|>",
    "<|video_pad|><|vision_pad|><|fim_pad|>",
    "text<|im_end|>text", "a <|im_end|> b", "  <|im_end|>  ", "\n<|im_start|>\n",
    "<|im_start", "im_start|>", "<|im_start|", "<|IM_START|>", "< |im_start|>",
    "<<|im_end|>>", "<|im_end|><|im_end|><|im_end|>", "<|endoftext|><|endoftext|>",
    "<think><think></think></think>", "<thinking>", "</think", "<think >", "<tool_call><tool_call>",
    "x<think>y</think>z", "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>",
    "ok<|endoftext|>", "<|endoftext|>ok", "<|im_start|>user\n你好<|im_end|>",
]

SINGLE = [
    "a", "Z", "!", "?", ".", ",", "-", "_", "@", "#", "$", "%", "^", "&", "*", "(", ")", "[", "]",
    "{", "}", "<", ">", "/", "\\", "|", "~", "`", "\"", ";", ":", "=", "+", "é", "ß", "中", "あ", "한",
    "😀", "€", "→", "∑", "√", "∞",
]


def mixed_texts():
    """Deterministic pseudo-random mixtures of fragments from all groups."""
    rnd = random.Random(20240601)
    pool = [s for g in (PROSE, CONTRACTIONS, CODE, SCRIPTS, EMOJI, NUMBERS, WHITESPACE, SPECIAL,
                        COMBINING, SINGLE) for s in g if s]
    seps = ["", " ", "\n", "  ", "\t", "\r\n", "", ""]
    out = []
    for _ in range(60):
        parts = [rnd.choice(pool) for _ in range(rnd.randint(2, 5))]
        out.append("".join(p + rnd.choice(seps) for p in parts))
    # Random code points from interesting ranges, including unassigned ones.
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF),
              (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F),
              (0x2190, 0x23FF), (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00),
              (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF), (0x1F900, 0x1F9FF), (0x20000, 0x20100)]
    for _ in range(40):
        chars = []
        for _ in range(rnd.randint(1, 24)):
            lo, hi = rnd.choice(ranges)
            cp = rnd.randint(lo, hi)
            if 0xD800 <= cp <= 0xDFFF:
                cp = 0x41
            chars.append(chr(cp))
        out.append("".join(chars))
    return out


def long_texts():
    para = " ".join(PROSE[:6])
    return [
        (para + "\n\n") * 20,
        "".join(CODE) * 3,
        "".join(SCRIPTS),
        "-" * 300,
        "=" * 64 + "\n" + "#" * 64,
        "ab" * 500,
        "1234567890" * 30,
        "😀" * 100,
        "a" * 1000,
        "\u00a0" * 40 + "x",
    ]


def base_texts():
    texts = []
    for g in (PROSE, CONTRACTIONS, CODE, JSON_MD_URLS, SCRIPTS, EMOJI, NUMBERS, WHITESPACE, CONTROL,
              COMBINING, NORMALIZATION, SPECIAL, SINGLE):
        texts.extend(g)
    texts.extend(mark_soups())
    texts.extend(long_texts())
    texts.extend(mixed_texts())
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


# ---------------------------------------------------------------- variants

def variants():
    """Patches of the Qwen3 tokenizer.json and the texts to run under each."""
    short = [t for t in base_texts() if len(t) < 400]
    sample = short[::3]
    bytelevel_split = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                       "use_regex": False}

    def split_seq(pattern):
        return {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            bytelevel_split]}

    added_texts = [
        "x [LS] y", "x   [LS]y", "[LS]", "  [LS]  ", "a\t\n[LS]b", "x [RS] y", "x[RS]   y", "[RS]\n\n",
        "a  [BS]  b", "[BS][BS]", " [BS] [BS] ", "[LS][RS][BS]", "a [RS] [LS] b",
        "wordy", "a wordy b", "awordy", "wordyb", "wordy_x", "(wordy)", "wordy.", "éwordy", "wordy1",
        "über", "ein über ab", "Süber", "überall", "über_", "über-x",
        "héllo", "he\u0301llo", "say he\u0301llo!", "HÉLLO", "é", "café", "e\u0301",
        "<gap>", "a<gap>b", "Hello", "Hello world", "HelloHello",
        "<|im_start|>x", "<|im_start|>xy", "<|im_start|>", "aa<|im_start|>xb",
        "ab", "abc", "xabcx", "abab",
    ]
    added = [
        {"id": 151669, "content": "[LS]", "single_word": False, "lstrip": True, "rstrip": False,
         "normalized": False, "special": False},
        {"id": 151670, "content": "[RS]", "single_word": False, "lstrip": False, "rstrip": True,
         "normalized": False, "special": False},
        {"id": 151671, "content": "[BS]", "single_word": False, "lstrip": True, "rstrip": True,
         "normalized": False, "special": True},
        {"id": 151672, "content": "wordy", "single_word": True, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"id": 151673, "content": "über", "single_word": True, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
        {"id": 151674, "content": "héllo", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
        {"id": 151675, "content": "é", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"id": 151690, "content": "<gap>", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True},
        {"id": 151691, "content": "Hello", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"id": 151692, "content": "<|im_start|>x", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True},
        {"id": 151693, "content": "ab", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"id": 151694, "content": "abc", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
    ]
    return [
        {"name": "gpt2_bytelevel", "patch": {"pre_tokenizer": {
            "type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}},
         "texts": sample},
        {"name": "gpt2_prefix_space", "patch": {"pre_tokenizer": {
            "type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}},
         "texts": sample},
        {"name": "qwen35_regex", "patch": {"pre_tokenizer": split_seq(PAT_QWEN35)}, "texts": sample},
        {"name": "llama3_regex", "patch": {"pre_tokenizer": split_seq(PAT_LLAMA3)}, "texts": sample},
        {"name": "nfkc_string_merges_ignore_merges",
         "patch": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}]},
                   "merges_as_strings": True, "ignore_merges": True},
         "texts": sample},
        {"name": "no_normalizer", "patch": {"normalizer": None},
         "texts": [t for t in short if any(ord(c) > 0x2FF for c in t)][::2]},
        {"name": "added_flags", "patch": {"added_tokens_append": added}, "texts": added_texts},
    ]


def apply_patch(tok, patch):
    """Applies a variant patch to a parsed tokenizer.json (in place)."""
    for key in ("pre_tokenizer", "normalizer"):
        if key in patch:
            tok[key] = patch[key]
    if patch.get("merges_as_strings"):
        tok["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]]
    if "ignore_merges" in patch:
        tok["model"]["ignore_merges"] = patch["ignore_merges"]
    if "added_tokens_append" in patch:
        tok["added_tokens"] = tok["added_tokens"] + patch["added_tokens_append"]
    return tok


# ---------------------------------------------------------------- decode cases

def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def decode_id_lists(token_to_id):
    """Id sequences for decode-only checks: split and broken UTF-8, specials."""
    b2u = bytes_to_unicode()
    byte_id = {b: token_to_id(b2u[b]) for b in range(256)}
    seqs = [
        [byte_id[b] for b in "é".encode()],
        [byte_id[b] for b in "😀".encode()][:3],
        [byte_id[b] for b in "😀".encode()][:3] + [byte_id[ord("A")]],
        [byte_id[0xE2], byte_id[0x82]],
        [byte_id[0xE2], byte_id[0x82], byte_id[0x41]],
        [byte_id[0x80], byte_id[0x80], byte_id[0xBF]],
        [byte_id[0xC0], byte_id[0xAF]],
        [byte_id[0xED], byte_id[0xA0], byte_id[0x80]],
        [byte_id[0xF4], byte_id[0x90], byte_id[0x80], byte_id[0x80]],
        [byte_id[0xF0], byte_id[0x9F], byte_id[0x98]],
        [byte_id[0xFF], byte_id[0xFE], byte_id[0x41]],
        [byte_id[0xE0], byte_id[0x80], byte_id[0x80]],
        [byte_id[0xF0], byte_id[0x80]],
        [byte_id[0xE4], 151644, byte_id[0xB8], byte_id[0xAD]],
        [151644, 872, 198, 151645, 151643, 151667, 151668, 151657],
        [151643, 151643],
        [],
    ]
    rnd = random.Random(7)
    for _ in range(40):
        n = rnd.randint(1, 12)
        seq = []
        for _ in range(n):
            r = rnd.random()
            if r < 0.6:
                seq.append(byte_id[rnd.randint(0x80, 0xFF)])
            elif r < 0.8:
                seq.append(byte_id[rnd.randint(0x20, 0x7E)])
            elif r < 0.9:
                seq.append(rnd.randint(151643, 151668))
            else:
                seq.append(rnd.randint(0, 151642))
        seqs.append(seq)
    return [s for s in seqs if all(i is not None for i in s)]


# ---------------------------------------------------------------- main

def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    log("wrote %s (%d bytes)" % (path, os.path.getsize(path)))


def texts_only(outdir, tok_json):
    vocab = tok_json["model"]["vocab"]
    obj = {
        "cases": base_texts(),
        "decode_ids": decode_id_lists(vocab.get),
        "variants": [{"name": v["name"], "patch": v["patch"], "texts": v["texts"]} for v in variants()],
    }
    write_json(os.path.join(outdir, "texts.json"), obj)


def encode_all(tk, texts, label):
    cases = []
    for i, text in enumerate(texts):
        ids = tk.encode(text, add_special_tokens=False).ids
        cases.append({
            "text": text,
            "ids": ids,
            "decoded": tk.decode(ids, skip_special_tokens=False),
            "decoded_skip": tk.decode(ids, skip_special_tokens=True),
        })
    log("%s: %d cases" % (label, len(cases)))
    return cases


def main(argv):
    only_texts = "--texts-only" in argv
    args = [a for a in argv if a != "--texts-only"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    outdir = args[0]
    os.makedirs(outdir, exist_ok=True)
    log("reading %s" % TOKENIZER_JSON)
    with open(TOKENIZER_JSON, encoding="utf-8") as f:
        raw = f.read()
    tok_json = json.loads(raw)
    if only_texts:
        texts_only(outdir, tok_json)
        return 0

    import tokenizers
    from tokenizers import Tokenizer
    version = tokenizers.__version__
    generator = "python tokenizers %s (tests/reference/tokenizer_cases.py)" % version
    log("tokenizers %s" % version)

    tk = Tokenizer.from_file(TOKENIZER_JSON)
    texts = base_texts()
    cases = encode_all(tk, texts, "qwen3")
    decode_cases = []
    for ids in decode_id_lists(tk.token_to_id):
        try:
            decode_cases.append({"ids": ids, "decoded": tk.decode(ids, skip_special_tokens=False),
                                 "decoded_skip": tk.decode(ids, skip_special_tokens=True)})
        except Exception as e:  # keep going: one odd id list must not lose the run
            log("decode %r failed: %s" % (ids, e))
    write_json(os.path.join(outdir, "qwen3_cases.json"), {
        "tokenizers_version": version, "generator": generator, "cases": cases,
        "decode_cases": decode_cases})

    out_variants = []
    for v in variants():
        try:
            patched = apply_patch(json.loads(raw), v["patch"])
            vt = Tokenizer.from_str(json.dumps(patched))
            out_variants.append({"name": v["name"], "patch": v["patch"],
                                 "cases": encode_all(vt, v["texts"], v["name"])})
        except Exception as e:  # a variant the library rejects is reported, not fatal
            log("variant %s failed: %s" % (v["name"], e))
    write_json(os.path.join(outdir, "variants_cases.json"), {
        "tokenizers_version": version, "generator": generator, "variants": out_variants})
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
