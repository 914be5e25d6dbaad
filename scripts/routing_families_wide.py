"""Twelve further task families for the routing-quality benchmark (issue
#45), wider in kind than the first twelve: facts a model knows or does not
(capitals, chemical elements, English word forms), notations (Roman
numerals, number bases, clock times, JSON), and counting, percentages,
shapes, letters and sets. The held-out figures on the first twelve showed
that what a router can carry to a family it never saw is limited by how few
families it trained on; these double them.

Each family has levels 1 (easy) to 4 (hard), generated from a seed and
graded by a program, as in `routing_families.py`; a generator returns
`(prompt, answer)`. Stdlib only.
"""

from __future__ import annotations

import json
import random
import re

KINDS = ("capitals", "elements", "roman", "bases", "clock", "percent",
         "counting", "wordforms", "shapes", "json_read", "alphabet", "sets")

ONLY_NUMBER = "Reply with only the number."

# Output tokens a right answer needs, with room to spare.
MAX_TOKENS = {kind: 24 for kind in KINDS}

# (country, capital, continent): level 1 draws from the first eight.
COUNTRIES = [
    ("France", "Paris", "Europe"), ("Japan", "Tokyo", "Asia"), ("Italy", "Rome", "Europe"),
    ("Egypt", "Cairo", "Africa"), ("Spain", "Madrid", "Europe"), ("Russia", "Moscow", "Europe"),
    ("Germany", "Berlin", "Europe"), ("China", "Beijing", "Asia"),
    ("Kenya", "Nairobi", "Africa"), ("Peru", "Lima", "South America"), ("Norway", "Oslo", "Europe"),
    ("Chile", "Santiago", "South America"), ("Vietnam", "Hanoi", "Asia"), ("Ghana", "Accra", "Africa"),
    ("Poland", "Warsaw", "Europe"), ("Cuba", "Havana", "North America"), ("Iran", "Tehran", "Asia"),
    ("Canada", "Ottawa", "North America"), ("Australia", "Canberra", "Oceania"),
    ("Mongolia", "Ulaanbaatar", "Asia"), ("Uruguay", "Montevideo", "South America"),
    ("Senegal", "Dakar", "Africa"), ("Finland", "Helsinki", "Europe"), ("Nepal", "Kathmandu", "Asia"),
]
CONTINENTS = ["Europe", "Asia", "Africa", "North America", "South America", "Oceania"]

# (element, symbol, atomic number): level 1 draws from the first six.
ELEMENTS = [
    ("hydrogen", "H", 1), ("helium", "He", 2), ("carbon", "C", 6), ("nitrogen", "N", 7),
    ("oxygen", "O", 8), ("neon", "Ne", 10), ("sodium", "Na", 11), ("iron", "Fe", 26),
    ("potassium", "K", 19), ("silver", "Ag", 47), ("gold", "Au", 79), ("lead", "Pb", 82),
    ("copper", "Cu", 29), ("tin", "Sn", 50), ("mercury", "Hg", 80), ("calcium", "Ca", 20),
    ("chlorine", "Cl", 17), ("zinc", "Zn", 30), ("sulfur", "S", 16), ("magnesium", "Mg", 12),
]

# (word, plural), (verb, past tense), (adjective, opposite).
PLURALS = [("child", "children"), ("mouse", "mice"), ("tooth", "teeth"), ("goose", "geese"),
           ("woman", "women"), ("foot", "feet"), ("person", "people"), ("ox", "oxen")]
PAST = [("go", "went"), ("eat", "ate"), ("swim", "swam"), ("write", "wrote"), ("bring", "brought"),
        ("think", "thought"), ("fly", "flew"), ("begin", "began"), ("teach", "taught"), ("drink", "drank")]
# Pairs with one answer each ("far" has two comparatives, "narrow" two opposites).
OPPOSITES = [("hot", "cold"), ("early", "late"), ("heavy", "light"), ("full", "empty"),
             ("ancient", "modern"), ("shallow", "deep"), ("rough", "smooth"), ("asleep", "awake")]
COMPARATIVES = [("good", "better"), ("bad", "worse"), ("young", "younger"), ("wet", "wetter"),
                ("happy", "happier"), ("big", "bigger"), ("simple", "simpler"), ("thin", "thinner")]

WORDS = ["river", "apple", "zebra", "mango", "cloud", "delta", "orbit", "pearl", "quartz", "lemon",
         "tiger", "banjo", "candle", "forest", "window", "silver", "garden", "rocket", "banana",
         "paper", "kettle", "marble", "lantern", "meadow"]
FRUITS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "grape"]


def roman(n: int) -> str:
    out = []
    for value, numeral in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                           (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out.append(numeral)
            n -= value
    return "".join(out)


def gen_capitals(rng: random.Random, level: int) -> tuple[str, object]:
    country, capital, continent = rng.choice(COUNTRIES[:8] if level == 1 else COUNTRIES[8:])
    if level in (1, 2):
        return f"What is the capital city of {country}? Reply with only the city's name.", capital
    if level == 3:
        return f"{capital} is the capital of which country? Reply with only the country's name.", country
    return f"On which continent is {country}? Reply with only the continent's name.", continent


def gen_elements(rng: random.Random, level: int) -> tuple[str, object]:
    name, symbol, number = rng.choice(ELEMENTS[:6] if level == 1 else ELEMENTS[6:])
    if level in (1, 2):
        return f"What is the chemical symbol of {name}? Reply with only the symbol.", symbol
    if level == 3:
        return f"Which chemical element has the symbol {symbol}? Reply with only the element's name.", name
    return f"What is the atomic number of {name}? {ONLY_NUMBER}", number


def gen_roman(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        n = r(2, 20)
        return f"What number is the Roman numeral {roman(n)}? {ONLY_NUMBER}", n
    if level == 2:
        n = r(11, 49)
        return f"Write {n} as a Roman numeral. Reply with only the numeral.", roman(n)
    if level == 3:
        n = r(1100, 2900)
        return f"What number is the Roman numeral {roman(n)}? {ONLY_NUMBER}", n
    a, b = r(12, 60), r(12, 60)
    return f"What is {roman(a)} plus {roman(b)}, as an ordinary number? {ONLY_NUMBER}", a + b


def gen_bases(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        n = r(2, 15)
        return f"What is the binary number {n:b} in decimal? {ONLY_NUMBER}", n
    if level == 2:
        n = r(5, 31)
        return f"Write the decimal number {n} in binary. Reply with only the binary digits.", f"{n:b}"
    if level == 3:
        n = r(16, 255)
        return f"What is the hexadecimal number {n:X} in decimal? {ONLY_NUMBER}", n
    n = r(256, 4095)
    return f"Write the decimal number {n} in hexadecimal. Reply with only the hexadecimal digits.", f"{n:X}"


def gen_clock(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    fmt = "Reply with only the time, as HH:MM in 24-hour form."
    if level == 1:
        h, add = r(1, 18), r(1, 5)
        return f"What time is it {add} hours after {h:02d}:00? {fmt}", f"{h + add:02d}:00"
    start = r(0, 23) * 60 + rng.choice([0, 10, 15, 20, 30, 40, 45, 50])
    if level == 2:
        add = rng.choice([15, 20, 30, 40, 45])
        end = (start + add) % 1440
        return f"What time is it {add} minutes after {start // 60:02d}:{start % 60:02d}? {fmt}", \
            f"{end // 60:02d}:{end % 60:02d}"
    if level == 3:
        start = r(20, 23) * 60 + rng.choice([0, 15, 30, 45])
        add = r(2, 6) * 60 + rng.choice([15, 30, 45])
        end = (start + add) % 1440
        return (f"A train leaves at {start // 60:02d}:{start % 60:02d} and the trip takes {add // 60} hours "
                f"and {add % 60} minutes. At what time does it arrive? {fmt}", f"{end // 60:02d}:{end % 60:02d}")
    end = start + r(35, 400)
    end = min(end, 1439)
    return (f"How many minutes are there from {start // 60:02d}:{start % 60:02d} to "
            f"{end // 60:02d}:{end % 60:02d} on the same day? {ONLY_NUMBER}", end - start)


def gen_percent(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        p, n = rng.choice([10, 50]), r(2, 30) * 20
        return f"What is {p}% of {n}? {ONLY_NUMBER}", n * p // 100
    if level == 2:
        p, n = rng.choice([5, 20, 25, 75]), r(2, 40) * 20
        return f"What is {p}% of {n}? {ONLY_NUMBER}", n * p // 100
    if level == 3:
        p, n = rng.choice([10, 15, 20, 30]), r(3, 40) * 20
        return (f"A coat costs {n} dollars. It is sold at {p}% off. What does it cost now, in dollars? "
                f"{ONLY_NUMBER}", n - n * p // 100)
    old = r(2, 40) * 10
    change = rng.choice([-50, -30, -20, -10, 10, 20, 30, 40, 50, 60])
    new = old + old * change // 100
    return (f"A price went from {old} to {new}. By what percent did it change? Reply with only the number, "
            "negative for a fall.", change)


def gen_counting(rng: random.Random, level: int) -> tuple[str, object]:
    if level == 1:
        words = rng.sample(WORDS, rng.randint(3, 7))
        return f"How many words are in this list: {', '.join(words)}? {ONLY_NUMBER}", len(words)
    if level == 2:
        word, letter = rng.choice([("banana", "a"), ("committee", "m"), ("mississippi", "s"),
                                   ("bookkeeper", "e"), ("assessment", "s"), ("parallel", "l"),
                                   ("successful", "s"), ("occurrence", "c")])
        return f"How many times does the letter '{letter}' appear in '{word}'? {ONLY_NUMBER}", word.count(letter)
    if level == 3:
        words = rng.sample(WORDS, 4)
        text = " ".join(words)
        return (f"How many vowels (a, e, i, o, u) are in the text '{text}'? {ONLY_NUMBER}",
                sum(c in "aeiou" for c in text))
    words = rng.sample(WORDS, 8)
    letter = rng.choice(sorted({w[0] for w in words}))
    return (f"How many of these words start with the letter '{letter}': {', '.join(words)}? {ONLY_NUMBER}",
            sum(w.startswith(letter) for w in words))


def gen_wordforms(rng: random.Random, level: int) -> tuple[str, object]:
    if level == 1:
        word, plural = rng.choice(PLURALS)
        return f"What is the plural of the English word '{word}'? Reply with only the word.", plural
    if level == 2:
        verb, past = rng.choice(PAST)
        return f"What is the simple past tense of the English verb '{verb}'? Reply with only the word.", past
    if level == 3:
        word, opposite = rng.choice(OPPOSITES)
        return f"What is the opposite of the English adjective '{word}'? Reply with only one word.", opposite
    word, comparative = rng.choice(COMPARATIVES)
    return f"What is the comparative form of the English adjective '{word}'? Reply with only the word.", comparative


def gen_shapes(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        a = r(2, 30)
        return f"What is the perimeter of a square with sides of {a} cm, in cm? {ONLY_NUMBER}", 4 * a
    if level == 2:
        a, b = r(3, 25), r(3, 25)
        return f"What is the area of a rectangle {a} m long and {b} m wide, in square metres? {ONLY_NUMBER}", a * b
    if level == 3:
        base, height = r(2, 20) * 2, r(3, 25)
        return (f"What is the area of a triangle with a base of {base} cm and a height of {height} cm, in square cm? "
                f"{ONLY_NUMBER}", base * height // 2)
    a, b, c = r(2, 12), r(2, 12), r(2, 12)
    return (f"What is the volume of a box {a} cm by {b} cm by {c} cm, in cubic cm? {ONLY_NUMBER}", a * b * c)


def gen_json_read(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        doc = {"name": rng.choice(WORDS), "count": r(1, 99), "price": r(1, 500)}
        field = rng.choice(["count", "price"])
        return f"In the JSON {json.dumps(doc)}, what is the value of \"{field}\"? {ONLY_NUMBER}", doc[field]
    if level == 2:
        items = rng.sample(FRUITS, r(2, 7))
        return (f"In the JSON {json.dumps({'items': items})}, how many items does the list \"items\" hold? "
                f"{ONLY_NUMBER}", len(items))
    if level == 3:
        value = r(100, 999)
        doc = {"order": {"id": r(1000, 9999), "shipping": {"zip": value, "days": r(1, 9)}}}
        return f"In the JSON {json.dumps(doc)}, what is order.shipping.zip? {ONLY_NUMBER}", value
    rows = [{"fruit": f, "qty": r(1, 20)} for f in rng.sample(FRUITS, 4)]
    return (f"In the JSON {json.dumps(rows)}, what is the sum of every \"qty\"? {ONLY_NUMBER}",
            sum(row["qty"] for row in rows))


def gen_alphabet(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    letters = "abcdefghijklmnopqrstuvwxyz"
    if level == 1:
        i = r(0, 24)
        return f"Which letter of the alphabet comes right after '{letters[i]}'? Reply with only the letter.", \
            letters[i + 1]
    if level == 2:
        i = r(0, 25)
        return f"What is the position of the letter '{letters[i]}' in the English alphabet? {ONLY_NUMBER}", i + 1
    if level == 3:
        i = r(0, 25)
        return f"Which letter is number {i + 1} in the English alphabet? Reply with only the letter.", letters[i]
    word = rng.choice([w for w in WORDS if "z" not in w])
    shifted = "".join(letters[letters.index(c) + 1] for c in word)
    return (f"Replace each letter of '{word}' with the letter after it in the alphabet. "
            "Reply with only the new word.", shifted)


def gen_sets(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        a, b = rng.sample(range(10, 999), 2)
        return f"Which is larger, {a} or {b}? {ONLY_NUMBER}", max(a, b)
    if level == 2:
        values, k = [r(1, 50) for _ in range(7)], r(15, 35)
        return (f"How many numbers in {values} are greater than {k}? {ONLY_NUMBER}",
                sum(v > k for v in values))
    if level == 3:
        pool = rng.sample(range(1, 30), 9)
        left, right = sorted(pool[:6]), sorted(pool[3:])
        return (f"How many numbers are in both {left} and {right}? {ONLY_NUMBER}", len(set(left) & set(right)))
    values = rng.sample(range(1, 100), 6)
    return f"What is the second smallest number in {values}? {ONLY_NUMBER}", sorted(values)[1]


GENERATORS = {
    "capitals": gen_capitals,
    "elements": gen_elements,
    "roman": gen_roman,
    "bases": gen_bases,
    "clock": gen_clock,
    "percent": gen_percent,
    "counting": gen_counting,
    "wordforms": gen_wordforms,
    "shapes": gen_shapes,
    "json_read": gen_json_read,
    "alphabet": gen_alphabet,
    "sets": gen_sets,
}

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
TIME = re.compile(r"\b(\d{1,2}):(\d{2})\b")


def _last_number(text: str) -> float | None:
    numbers = [float(m.replace(",", "")) for m in NUMBER.findall(text)]
    return numbers[-1] if numbers else None


def _without_prompt(prompt: str, reply: str) -> str:
    """The reply without the quoted items and sentences it repeats from the
    prompt ("Paris is the capital of France." does not answer which country
    Paris is the capital of with Paris)."""
    text = reply
    for sentence in re.split(r"(?<=[.?!])\s+", prompt):
        if len(sentence.strip()) > 3:
            text = text.replace(sentence.strip(), " ")
    for quoted in re.findall(r"'([^']+)'", prompt):
        text = re.sub(rf"'{re.escape(quoted)}'", " ", text)
    return text


def _first_of(names: list[str], text: str) -> str | None:
    """The name of `names` that `text` mentions first, as a whole word."""
    hits = []
    for name in names:
        hit = re.search(rf"(?<![A-Za-z]){re.escape(name)}(?![A-Za-z])", text, re.I)
        if hit:
            hits.append((hit.start(), name))
    return min(hits)[1] if hits else None


# The names a reply might give instead of the answer, by the kind of name
# asked for: the first of its kind it gives must be the answer ("Oslo, or
# maybe Helsinki" answers Oslo; "Nairobi is the capital of Kenya" answers
# with a country, Kenya).
NAME_KINDS = [
    [capital for _, capital, _ in COUNTRIES],
    [country for country, _, _ in COUNTRIES],
    CONTINENTS,
    [name for name, _, _ in ELEMENTS],
]


def grade(kind: str, prompt: str, answer: object, reply: str) -> bool:
    """Whether `reply` answers a task of `kind` whose answer is `answer`."""
    if kind == "sets" and prompt.startswith("Which is larger"):
        # "45 is larger than 12": the first number named.
        numbers = NUMBER.findall(reply)
        return bool(numbers) and float(numbers[0].replace(",", "")) == answer
    if isinstance(answer, int):
        value = _last_number(reply)
        return value is not None and value == answer
    answer = str(answer)
    if kind == "clock":
        times = TIME.findall(reply)
        return bool(times) and f"{int(times[-1][0]):02d}:{times[-1][1]}" == answer
    text = _without_prompt(prompt, reply)
    if kind in ("bases", "roman"):
        # Digits or numerals as a token of their own: hexadecimal in either
        # case, a numeral in capitals, as numerals are written.
        flags = re.I if kind == "bases" else 0
        tokens = re.findall(r"[0-9A-Za-z]+", re.sub(r"\b0[xXbB](?=[0-9A-Fa-f])", "", text))
        return any(re.fullmatch(re.escape(answer), t, flags) for t in tokens)
    if kind == "alphabet" and len(answer) == 1:
        # The last letter standing alone, quoted or not ("The letter after
        # 'c' is 'd'.", once the prompt's 'c' is taken out).
        # "I" before a word ("I do not know") is the pronoun, and the "t" of
        # "don't" no letter.
        letters = [m.group(1) for m in re.finditer(r"(?<![A-Za-z])(?<![A-Za-z]')([A-Za-z])(?![A-Za-z])(?!'[A-Za-z])", text)
                   if not re.match(r"I\s+[a-z]", text[m.start():m.start() + 3])]
        return bool(letters) and letters[-1].lower() == answer
    if kind == "elements" and len(answer) <= 2 and answer[0].isupper():
        # A symbol, in its own case: "Fe", not "fe".
        return re.search(rf"(?<![A-Za-z]){re.escape(answer)}(?![A-Za-z])", text) is not None
    names = next((names for names in NAME_KINDS if answer in names), None)
    if names is not None:
        return (_first_of(names, text) or "").lower() == answer.lower()
    # A word: the answer as a whole word, not counting what the reply
    # repeats of the prompt.
    return re.search(rf"(?<![A-Za-z]){re.escape(answer)}(?![A-Za-z])", text, re.I) is not None
