"""Twelve further task families for the routing-quality benchmark (issue
#45), wider in kind than the first twelve: facts a model knows or does not
(capitals, chemical elements, English word forms), notations (Roman
numerals, number bases, clock times, JSON), and counting, percentages,
shapes, letters and sets. They test whether what a router can carry to a
family it never saw was limited by how few families it trained on (six per
half with the first twelve): these double them.

Each family has levels 1 (easy) to 4 (hard), generated from a seed and
graded by a program, as in `routing_families.py`; a generator returns
`(prompt, answer)`. Stdlib only, besides the words, the number reading
and the number reply's wording it shares with `routing_families.py`.
"""

from __future__ import annotations

import json
import random
import re

from routing_families import NUMBER, ONLY_NUMBER, WORDS as FIRST_WORDS, _last_number

KINDS = ("capitals", "elements", "roman", "bases", "clock", "percent",
         "counting", "wordforms", "shapes", "json_read", "alphabet", "sets")

# Output tokens a right answer needs, with room to spare: at 24, a third of
# the small tier's replies were cut off mid-sentence.
MAX_TOKENS = {kind: 48 for kind in KINDS}

# (country, capital, continent): level 1 draws from the first eight.
COUNTRIES = [
    ("France", "Paris", "Europe"), ("Japan", "Tokyo", "Asia"), ("Italy", "Rome", "Europe"),
    ("Egypt", "Cairo", "Africa"), ("Spain", "Madrid", "Europe"), ("Russia", "Moscow", "Europe"),
    ("Germany", "Berlin", "Europe"), ("China", "Beijing", "Asia"),
    ("Kenya", "Nairobi", "Africa"), ("Peru", "Lima", "South America"), ("Norway", "Oslo", "Europe"),
    ("Chile", "Santiago", "South America"), ("Vietnam", "Hanoi", "Asia"), ("Ghana", "Accra", "Africa"),
    ("Poland", "Warsaw", "Europe"), ("Cuba", "Havana", "North America"), ("Iran", "Tehran", "Asia"),
    ("Canada", "Ottawa", "North America"), ("Portugal", "Lisbon", "Europe"),
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
           ("woman", "women"), ("foot", "feet"), ("man", "men"), ("ox", "oxen")]
PAST = [("go", "went"), ("eat", "ate"), ("swim", "swam"), ("write", "wrote"), ("bring", "brought"),
        ("think", "thought"), ("fly", "flew"), ("begin", "began"), ("teach", "taught"), ("drink", "drank")]
# Pairs with one answer each ("far" has two comparatives, "narrow" two opposites).
OPPOSITES = [("hot", "cold"), ("early", "late"), ("heavy", "light"), ("full", "empty"),
             ("alive", "dead"), ("shallow", "deep"), ("rough", "smooth"), ("asleep", "awake")]
COMPARATIVES = [("good", "better"), ("bad", "worse"), ("young", "younger"), ("wet", "wetter"),
                ("happy", "happier"), ("big", "bigger"), ("simple", "simpler"), ("thin", "thinner")]

# The first twelve families' words and six more.
WORDS = FIRST_WORDS + ["banana", "paper", "kettle", "marble", "lantern", "meadow"]
FRUITS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "grape"]
# Words by first letter, for counting those that start with one (five each,
# so any count from 0 to 4 can be asked).
BY_LETTER = {
    "b": ["banjo", "banana", "bridge", "bottle", "butter"],
    "c": ["candle", "cloud", "copper", "castle", "cactus"],
    "m": ["mango", "marble", "meadow", "mirror", "monkey"],
    "p": ["pearl", "paper", "pencil", "pillow", "pepper"],
    "r": ["river", "rocket", "rabbit", "ribbon", "ruler"],
    "s": ["silver", "saddle", "spoon", "sugar", "summer"],
}
# (word, letter): how often the letter appears varies from 2 to 4.
LETTER_COUNTS = [("banana", "a"), ("committee", "t"), ("mississippi", "i"), ("bookkeeper", "o"),
                 ("assessment", "s"), ("parallel", "l"), ("balloon", "l"), ("occurrence", "c"),
                 ("engineer", "e"), ("pepper", "p"), ("level", "e"), ("success", "s"),
                 ("tennessee", "e"), ("hippopotamus", "p"), ("calendar", "a"), ("rhythm", "h")]


def roman(n: int) -> str:
    out = []
    for value, numeral in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                           (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out.append(numeral)
            n -= value
    return "".join(out)


def _ask_fact(rng: random.Random, level: int, facts: tuple, well_known: int,
              questions: tuple[str, str, str]) -> tuple[str, object]:
    """A question on one of `facts` (rows of three: a thing, a fact of it,
    a third fact): level 1 draws from the first `well_known` rows, the
    others from the rest. Levels 1 and 2 ask the fact from the thing
    (`questions[0]`), level 3 the thing from the fact, level 4 the third
    fact from the thing; `{0}`, `{1}` in a question are the thing and the
    fact."""
    row = rng.choice(facts[:well_known] if level == 1 else facts[well_known:])
    asked, answer = {1: (0, 1), 2: (0, 1), 3: (1, 0), 4: (2, 2)}[level]
    return questions[asked].format(*row), row[answer]


def gen_capitals(rng: random.Random, level: int) -> tuple[str, object]:
    return _ask_fact(rng, level, COUNTRIES, 8, (
        "What is the capital city of {0}? Reply with only the city's name.",
        "{1} is the capital of which country? Reply with only the country's name.",
        "On which continent is {0}? Reply with only the continent's name."))


def gen_elements(rng: random.Random, level: int) -> tuple[str, object]:
    return _ask_fact(rng, level, ELEMENTS, 6, (
        "What is the chemical symbol of {0}? Reply with only the symbol.",
        "Which chemical element has the symbol {1}? Reply with only the element's name.",
        "What is the atomic number of {0}? " + ONLY_NUMBER))


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
        word, letter = rng.choice(LETTER_COUNTS)
        return f"How many times does the letter '{letter}' appear in '{word}'? {ONLY_NUMBER}", word.count(letter)
    if level == 3:
        words = rng.sample(WORDS, rng.randint(2, 5))
        text = " ".join(words)
        return (f"How many vowels (a, e, i, o, u) are in the text '{text}'? {ONLY_NUMBER}",
                sum(c in "aeiou" for c in text))
    # The count is drawn first, so every count from 0 to 4 is as likely.
    letter, count = rng.choice(sorted(BY_LETTER)), rng.randint(0, 4)
    others = [w for first, group in sorted(BY_LETTER.items()) if first != letter for w in group]
    words = rng.sample(BY_LETTER[letter], count) + rng.sample(others, 8 - count)
    rng.shuffle(words)
    return (f"How many of these words start with the letter '{letter}': {', '.join(words)}? {ONLY_NUMBER}",
            count)


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
        # The overlap is drawn first, so every size from 0 to 5 is as likely.
        shared = r(0, 5)
        pool = rng.sample(range(1, 40), 12 - shared)
        left = sorted(pool[:6])
        right = sorted(pool[:shared] + pool[6:12 - shared])
        return (f"How many numbers are in both {left} and {right}? {ONLY_NUMBER}", shared)
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

TIME = re.compile(r"\b(\d{1,2}):(\d{2})\b")
# A numeral written with its base's prefix (0x1F, 0b101).
PREFIXED = re.compile(r"\b0[xXbB][0-9A-Fa-f]+\b")
# A unit's power (m^2, cm³, cm3), which is no part of the number before it.
POWER = re.compile(r"(?<=[A-Za-z])(?:\^?[23]|[²³])")
SYMBOLS = sorted({symbol for _, symbol, _ in ELEMENTS}
                 | {"P", "B", "F", "Si", "Al", "Li", "Ar", "U", "Pt", "Ni", "Co", "Mn", "Cr", "Ti", "Br"})


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


def _first_of(names: list[str], text: str, flags: int = re.I) -> str | None:
    """The name of `names` that `text` mentions first, as a whole word."""
    hits = []
    for name in names:
        hit = re.search(rf"(?<![A-Za-z]){re.escape(name)}(?![A-Za-z])", text, flags)
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


def _prompt_numeral(prompt: str) -> str | None:
    """The binary or hexadecimal numeral a bases prompt asks about."""
    found = re.search(r"(?:binary|hexadecimal) number ([0-9A-F]+) in decimal", prompt)
    return found.group(1) if found else None


def _grade_number(kind: str, prompt: str, answer: int, reply: str) -> bool:
    """The reply's last number, once what it restates of the prompt is out:
    the clock times it counts between, the numeral it converts, the pair
    it compares, a unit's power."""
    text = reply
    if kind == "clock":
        text = TIME.sub(" ", text)
    if kind == "bases":
        numeral = _prompt_numeral(prompt)
        text = PREFIXED.sub(" ", text)
        if numeral:
            text = re.sub(rf"(?<![0-9A-Za-z]){numeral}(?![0-9A-Za-z])", " ", text, flags=re.I)
    if kind == "sets" and prompt.startswith("Which is larger"):
        # "Between 266 and 804, 804 is larger.": the pair is not the answer.
        a, b = re.findall(r"\d+", prompt)[:2]
        text = re.sub(rf"\b(?:{a}\s*(?:or|and)\s*{b}|{b}\s*(?:or|and)\s*{a})\b", " ", text)
        # "804 is larger than 266": the first number named.
        numbers = NUMBER.findall(text)
        return bool(numbers) and float(numbers[0].replace(",", "")) == answer
    if kind == "shapes":
        text = POWER.sub(" ", text)
    value = _last_number(text)
    return value is not None and value == answer


def _grade_numeral(kind: str, prompt: str, answer: str, text: str) -> bool:
    """The last numeral of the answer's notation in the reply, by value:
    binary or hexadecimal digits (a hexadecimal one with a digit or in
    capitals, so "add" or "a" is a word), or a Roman numeral in capitals."""
    if kind == "roman":
        # "I" before a word is the pronoun ("I think it is XXXIV").
        found = [m.group(0) for m in re.finditer(r"(?<![A-Za-z])[IVXLCDM]+(?![A-Za-z])", text)
                 if not re.match(r"I\s+[a-z]", text[m.start():m.start() + 3])]
        return bool(found) and found[-1] == answer
    base = 2 if re.fullmatch(r"[01]+", answer) else 16
    decimal = re.search(r"decimal number (\d+)", prompt)
    text = re.sub(r"\b0[xXbB](?=[0-9A-Fa-f])", "", text)
    found = []
    for token in re.findall(r"(?<![0-9A-Za-z])[0-9A-Fa-f]+(?![0-9A-Za-z])", text):
        if decimal and token == decimal.group(1):
            continue
        if base == 2 and not re.fullmatch(r"[01]+", token):
            continue
        if base == 16 and not (re.search(r"\d", token) or token.isupper()):
            continue
        found.append(token)
    return bool(found) and int(found[-1], base) == int(answer, base)


def _grade_letter(prompt: str, answer: str, text: str) -> bool:
    """The first letter standing alone, quoted or not, that is neither the
    prompt's letter ("J comes after I."), the article "a", the pronoun "I"
    before a word, nor the "t" of "don't"."""
    asked = re.search(r"after '([a-z])'", prompt)
    for m in re.finditer(r"(?<![A-Za-z])(?<![A-Za-z]')([A-Za-z])(?![A-Za-z])(?!'[A-Za-z])", text):
        letter, after = m.group(1), text[m.end():m.end() + 2]
        if asked and letter.lower() == asked.group(1):
            continue
        if letter in "aI" and re.match(r"\s[a-z]", after):
            continue
        return letter.lower() == answer
    return False


def grade(kind: str, prompt: str, answer: object, reply: str) -> bool:
    """Whether `reply` answers a task of `kind` whose answer is `answer`."""
    if isinstance(answer, int):
        return _grade_number(kind, prompt, answer, reply)
    answer = str(answer)
    if kind == "clock":
        def hhmm(text: str) -> list[str]:
            return [f"{int(h):02d}:{m}" for h, m in TIME.findall(text)]

        asked = set(hhmm(prompt))
        times = [t for t in hhmm(reply) if t not in asked]
        return bool(times) and times[-1] == answer
    text = _without_prompt(prompt, reply)
    if kind in ("bases", "roman"):
        return _grade_numeral(kind, prompt, answer, text)
    if kind == "alphabet" and len(answer) == 1:
        return _grade_letter(prompt, answer, text)
    if kind == "elements" and answer in SYMBOLS:
        # A symbol, in its own case ("Fe", not "fe"); the first one named.
        return _first_of(SYMBOLS, text, 0) == answer
    names = next((names for names in NAME_KINDS if answer in names), None)
    if names is not None:
        return (_first_of(names, text) or "").lower() == answer.lower()
    # A word: the answer as a whole word, not counting what the reply
    # repeats of the prompt.
    return re.search(rf"(?<![A-Za-z]){re.escape(answer)}(?![A-Za-z])", text, re.I) is not None
