"""Six more task families for the routing-quality benchmark (issue #45),
so that a router can be measured on families it never trained on:
number sequences, string edits, calendar dates, yes/no and ordering logic,
list statistics, and the output of short Python programs. Each at levels 1
(easy) to 4 (hard), generated from a seed and graded by a program, as the
six families of `routing_tasks.py` are.

`routing_tasks.py` wraps these in its `Task` and dispatches to `grade` here
for their kinds; this module needs nothing from it. A generator returns
`(prompt, answer)`. Stdlib only.
"""

from __future__ import annotations

import datetime
import random
import re

KINDS = ("sequence", "strings", "dates", "logic", "lists", "code_output")

ONLY_NUMBER = "Reply with only the number."

# Output tokens a right answer needs, with room to spare.
MAX_TOKENS = {"sequence": 24, "strings": 32, "dates": 32, "logic": 32, "lists": 24, "code_output": 32}

WORDS = ["river", "apple", "zebra", "mango", "cloud", "delta", "orbit", "pearl", "quartz", "lemon",
         "tiger", "banjo", "candle", "forest", "window", "silver", "garden", "rocket"]
NAMES = ["Ada", "Bruno", "Clara", "Dmitri", "Esme", "Felix", "Greta", "Hugo"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
# A common year's month lengths.
MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def gen_sequence(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        start, step = r(1, 20), r(2, 9)
        terms = [start + step * i for i in range(5)]
    elif level == 2:
        start, step = r(200, 900), -r(11, 49)
        terms = [start + step * i for i in range(5)]
    elif level == 3:
        start, ratio = r(2, 9), rng.choice([2, 3])
        terms = [start * ratio**i for i in range(5)]
    else:
        a, b = r(1, 9), r(1, 9)
        terms = [a, b]
        while len(terms) < 6:
            terms.append(terms[-1] + terms[-2])
    shown, value = terms[:-1], terms[-1]
    return f"What is the next number in the sequence {', '.join(map(str, shown))}, ...? {ONLY_NUMBER}", value


def gen_strings(rng: random.Random, level: int) -> tuple[str, object]:
    if level == 1:
        word = rng.choice(WORDS)
        return f"Write the word '{word}' in capital letters. Reply with only the word.", word.upper()
    if level == 2:
        word = rng.choice(WORDS)
        return f"Write the word '{word}' backwards, letter by letter. Reply with only the reversed word.", word[::-1]
    if level == 3:
        words = rng.sample(WORDS, 4)
        return (
            f"Join the first letters of the words '{' '.join(words)}' into one word. Reply with only that word.",
            "".join(w[0] for w in words),
        )
    words = rng.sample(WORDS, 3)
    return (
        f"Take the words '{' '.join(words)}', put them in reverse order and spell each one backwards. "
        "Reply with only the resulting words, separated by spaces.",
        " ".join(w[::-1] for w in reversed(words)),
    )


def gen_dates(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        month = r(0, 11)
        return f"Which month comes after {MONTHS[month]}? Reply with only the month's name.", MONTHS[(month + 1) % 12]
    if level == 2:
        month = rng.choice([m for m in range(12) if m != 1])
        return f"How many days are there in {MONTHS[month]}? {ONLY_NUMBER}", MONTH_DAYS[month]
    start = datetime.date(r(2001, 2029), r(1, 12), r(1, 28))
    if level == 3:
        days = r(5, 60)
        end = start + datetime.timedelta(days=days)
        return (
            f"What date is {days} days after {start.isoformat()}? Reply with only the date, as YYYY-MM-DD.",
            end.isoformat(),
        )
    end = start + datetime.timedelta(days=r(20, 400))
    return (
        f"How many days are there from {start.isoformat()} to {end.isoformat()}? {ONLY_NUMBER}",
        (end - start).days,
    )


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n**0.5) + 1))


def gen_logic(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        n = r(10, 999)
        return f"Is {n} an even number? Reply with only yes or no.", "yes" if n % 2 == 0 else "no"
    if level == 2:
        # Odd numbers only, half of them prime, so neither answer is a safe guess.
        want_prime = rng.random() < 0.5
        while True:
            n = r(21, 199) | 1
            if _is_prime(n) == want_prime and n % 5:
                break
        return f"Is {n} a prime number? Reply with only yes or no.", "yes" if want_prime else "no"
    people = rng.sample(NAMES, 3 if level == 3 else 4)
    # people[0] is the tallest; each statement compares neighbours.
    facts = [f"{a} is taller than {b}." for a, b in zip(people, people[1:])]
    rng.shuffle(facts)
    if level == 3:
        asked, answer = ("shortest", people[-1]) if rng.random() < 0.5 else ("tallest", people[0])
    else:
        asked, answer = ("second tallest", people[1]) if rng.random() < 0.5 else ("second shortest", people[2])
    return f"{' '.join(facts)} Who is the {asked}? Reply with only the name.", answer


def gen_lists(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        values = [r(1, 99) for _ in range(5)]
        return f"What is the largest number in the list {values}? {ONLY_NUMBER}", max(values)
    if level == 2:
        values = [r(10, 99) for _ in range(4)]
        return f"What is the sum of the numbers in the list {values}? {ONLY_NUMBER}", sum(values)
    if level == 3:
        values = [r(1, 99) for _ in range(8)]
        return f"How many even numbers are in the list {values}? {ONLY_NUMBER}", sum(v % 2 == 0 for v in values)
    values = rng.sample(range(1, 200), 7)
    return f"What is the median of the numbers in the list {values}? {ONLY_NUMBER}", sorted(values)[3]


def gen_code_output(rng: random.Random, level: int) -> tuple[str, object]:
    r = rng.randint
    if level == 1:
        a, b, c = r(2, 9), r(2, 9), r(2, 9)
        code, value = f"print({a} + {b} * {c})", a + b * c
    elif level == 2:
        n = r(4, 12)
        code, value = f"total = 0\nfor i in range({n}):\n    total += i\nprint(total)", sum(range(n))
    elif level == 3:
        n, k = r(20, 90), r(3, 7)
        code = f"print(len([n for n in range({n}) if n % {k} == 0]))"
        value = len([i for i in range(n) if i % k == 0])
    else:
        n = r(6, 14)
        code = f"def f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)\n\nprint(f({n}))"
        a, b = 0, 1
        for _ in range(n):
            a, b = b, a + b
        value = a
    return f"What does this Python program print?\n\n```python\n{code}\n```\n\n{ONLY_NUMBER}", value


GENERATORS = {
    "sequence": gen_sequence,
    "strings": gen_strings,
    "dates": gen_dates,
    "logic": gen_logic,
    "lists": gen_lists,
    "code_output": gen_code_output,
}

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def _last_number(text: str) -> float | None:
    numbers = [float(m.replace(",", "")) for m in NUMBER.findall(text)]
    return numbers[-1] if numbers else None


def _without_prompt(prompt: str, reply: str) -> str:
    """The reply without the sentences it repeats from the prompt (\"Ada is
    taller than Bruno.\" is not an answer), lower case."""
    text = reply.lower()
    for sentence in re.split(r"(?<=[.?!])\s+", prompt):
        sentence = sentence.strip().lower()
        if len(sentence) > 3:
            text = text.replace(sentence, " ")
    return text


def _first_of(names: list[str], text: str) -> str | None:
    """The name of `names` that `text` mentions first, as a whole word."""
    hits = []
    for name in names:
        hit = re.search(rf"\b{re.escape(name.lower())}\b", text)
        if hit:
            hits.append((hit.start(), name))
    return min(hits)[1] if hits else None


def grade(kind: str, prompt: str, answer: object, reply: str) -> bool:
    """Whether `reply` answers a task of `kind` whose answer is `answer`."""
    if isinstance(answer, int):
        value = _last_number(reply)
        return value is not None and value == answer
    answer = str(answer)
    if kind == "strings":
        # The answer as a whole word (words, for level 4); capitals are the
        # task at level 1, so only there must the case match.
        flags = 0 if answer.isupper() else re.I
        return re.search(rf"(?<![A-Za-z]){re.escape(answer)}(?![A-Za-z])", reply, flags) is not None
    if kind == "dates" and DATE.fullmatch(answer):
        dates = DATE.findall(_without_prompt(prompt, reply))
        return bool(dates) and dates[-1] == answer
    if kind == "dates":
        return _first_of(MONTHS, _without_prompt(prompt, reply)) == answer
    if kind == "logic" and answer in ("yes", "no"):
        return _first_of(["yes", "no"], reply.lower()) == answer
    if kind == "logic":
        return _first_of(NAMES, _without_prompt(prompt, reply)) == answer
    raise ValueError(f"unknown kind {kind}")
