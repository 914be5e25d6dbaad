"""Hand-made structural features of a prompt that are not family identity:
sizes, numbers, operations, nesting, character-level and counting cues,
answer type. Pure Python (a router could compute them in microseconds)."""
import math, re

NUM = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
QUOTED = re.compile(r"'([^']{1,60})'")
OPS = re.compile(r"(?<=[\d\s)])[-+*/%](?=[\s\d(])")
WORDS = re.compile(r"[A-Za-z]+")
CHAR_CUES = ("letter", "backwards", "reverse", "spell", "capital letters", "first letters", "occur", "alphabetical")
STEP_CUES = ("then", "after", "rest", "total", "each", "left over", "from", "to ")
COUNT_CUES = ("how many", "count", "number of")
NAMES = [
    "n_chars", "log_chars", "n_words", "n_lines", "n_sentences", "n_numbers", "max_digits", "sum_digits",
    "log_max_num", "has_decimal", "has_negative", "n_ops", "n_mul", "n_paren", "paren_depth",
    "code_block", "code_lines", "n_defs", "has_loop", "n_quoted", "quoted_chars", "quoted_words",
    "char_cue", "count_cue", "step_cue", "n_dates", "list_len", "n_capitalized", "long_word_frac",
    "ans_number", "ans_json", "ans_code", "ans_yesno", "ans_word", "ans_list", "n_commas", "complexity",
]


def features(prompt: str, complexity: float = 0.0) -> list[float]:
    p = prompt
    low = p.lower()
    nums = NUM.findall(p)
    digits = [len(n.replace("-", "").replace(".", "")) for n in nums]
    vals = []
    for n in nums:
        try:
            vals.append(abs(float(n)))
        except ValueError:
            pass
    code = re.findall(r"```(?:\w+)?\n(.*?)```", p, re.S)
    code_text = "\n".join(code)
    depth = cur = 0
    for ch in p:
        if ch in "([":
            cur += 1; depth = max(depth, cur)
        elif ch in ")]":
            cur = max(cur - 1, 0)
    quoted = QUOTED.findall(p)
    lists = re.findall(r"\[([^\]]*)\]", p)
    words = WORDS.findall(p)
    tail = low[-120:]
    return [
        len(p), math.log1p(len(p)), len(p.split()), p.count("\n") + 1, len(re.findall(r"[.?!](\s|$)", p)),
        len(nums), max(digits, default=0), sum(digits), math.log10(1 + max(vals, default=0)),
        float(any("." in n for n in nums)), float(any(n.startswith("-") for n in nums)),
        len(OPS.findall(p)), p.count("*"), p.count("("), depth,
        float(bool(code)), code_text.count("\n"), code_text.count("def "), float("for " in code_text or "while " in code_text),
        len(quoted), sum(len(q) for q in quoted), sum(len(q.split()) for q in quoted),
        float(sum(c in low for c in CHAR_CUES)), float(sum(c in low for c in COUNT_CUES)), float(sum(c in low for c in STEP_CUES)),
        len(re.findall(r"\d{4}-\d{2}-\d{2}", p)), max((s.count(",") + 1 for s in lists), default=0),
        sum(1 for w in words if w[0].isupper()), sum(1 for w in words if len(w) > 8) / max(len(words), 1),
        float("number" in tail or "answer: n" in tail), float("json" in tail), float("code" in tail or "```python" in tail),
        float("yes or no" in tail), float("name" in tail or "word" in tail), float("separated" in tail or "comma" in tail),
        p.count(","), complexity,
    ]
