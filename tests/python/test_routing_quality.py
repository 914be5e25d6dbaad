"""The routing-quality benchmark's task generator, grader and measures
(scripts/routing_tasks.py, scripts/routing_metrics.py): no model needed."""

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import routing_metrics as rm  # noqa: E402
import routing_tasks as rt  # noqa: E402


def right_reply(task):
    """A reply that solves `task`, as a model might write it."""
    if task.kind == "python":
        return f"Here you go:\n```python\n{task.reference}\n```"
    if task.kind == "extract":
        return "```json\n" + json.dumps(task.answer) + "\n```"
    if task.kind == "word":
        return f"First we add things up.\nAnswer: {task.answer}"
    return str(task.answer)


def wrong_reply(task):
    if task.kind == "python":
        return f"```python\ndef {task.answer}(*args):\n    return None\n```"
    if task.kind == "extract":
        ((name, value),) = task.answer.items()
        wrong = value + 1 if isinstance(value, int) else value + "x"
        return json.dumps({name: wrong})
    if task.kind == "word":
        return f"Answer: {task.answer + 1}"
    if isinstance(task.answer, (int, float)):
        return str(task.answer + 1)
    return "I do not know"


def test_the_same_seed_gives_the_same_tasks_and_covers_every_kind_and_level():
    a = [t.to_json() for t in rt.generate(11, 96)]
    assert a == [t.to_json() for t in rt.generate(11, 96)]
    assert a != [t.to_json() for t in rt.generate(12, 96)]
    cells = {(t["kind"], t["level"]) for t in a}
    assert cells == {(k, lv) for k in rt.CORE_KINDS for lv in rt.LEVELS}
    assert len({t["id"] for t in a}) == 96
    assert rt.Task.from_json(a[0]).to_json() == a[0]
    more = [t.to_json() for t in rt.generate(11, 48, rt.MIX_MORE)]
    assert {(t["kind"], t["level"]) for t in more} == {(k, lv) for k in rt.more.KINDS for lv in rt.LEVELS}
    assert not {t["id"] for t in a} & {t["id"] for t in more}
    wide = [t.to_json() for t in rt.generate(11, 96, rt.MIX_WIDE)]
    assert {(t["kind"], t["level"]) for t in wide} == {(k, lv) for k in rt.wide.KINDS for lv in rt.LEVELS}


def test_right_replies_pass_and_wrong_ones_fail():
    for task in rt.generate(5, 96) + rt.generate(5, 96, rt.MIX_MORE) + rt.generate(5, 192, rt.MIX_WIDE):
        assert rt.grade(task, right_reply(task)), task.id
        assert not rt.grade(task, wrong_reply(task)), task.id
        assert not rt.grade(task, ""), task.id


def test_the_more_families_are_graded_the_way_models_write():
    def task(kind, prompt, answer):
        return rt.Task("t", kind, 3, prompt, answer)

    logic = task("logic", "Ada is taller than Hugo. Hugo is taller than Esme. Who is the shortest?", "Esme")
    assert rt.grade(logic, "Esme is the shortest.")
    assert rt.grade(logic, "Ada is taller than Hugo. Hugo is taller than Esme. So the answer is Esme.")
    assert not rt.grade(logic, "Hugo")
    assert rt.grade(task("logic", "Is 97 a prime number?", "yes"), "Yes, 97 is prime.")
    assert not rt.grade(task("logic", "Is 97 a prime number?", "yes"), "No.")
    shout = task("strings", "Write the word 'river' in capital letters.", "RIVER")
    assert rt.grade(shout, "RIVER") and not rt.grade(shout, "river")
    assert rt.grade(task("strings", "", "atled"), "The reversed word is: atled.")
    assert not rt.grade(task("strings", "", "atled"), "atledx")
    when = task("dates", "What date is 10 days after 2024-02-25? Reply as YYYY-MM-DD.", "2024-03-06")
    assert rt.grade(when, "2024-02-25 plus 10 days is 2024-03-06")
    assert not rt.grade(when, "2024-03-05")
    month = task("dates", "Which month comes after March? Reply with only the month's name.", "April")
    assert rt.grade(month, "April") and not rt.grade(month, "March comes before May")
    assert rt.grade(task("code_output", "", 25), "The program prints 25.")


def test_the_wide_families_are_graded_the_way_models_write():
    def task(kind, prompt, answer):
        return rt.Task("t", kind, 3, prompt, answer)

    country = task("capitals", "Nairobi is the capital of which country? Reply with only the country's name.", "Kenya")
    assert rt.grade(country, "Nairobi is the capital of Kenya.")
    assert not rt.grade(country, "Nairobi") and not rt.grade(country, "Ghana, or Kenya")
    city = task("capitals", "What is the capital city of Peru? Reply with only the city's name.", "Lima")
    assert rt.grade(city, "The capital of Peru is Lima.") and not rt.grade(city, "Santiago")
    symbol = task("elements", "What is the chemical symbol of iron? Reply with only the symbol.", "Fe")
    assert rt.grade(symbol, "The symbol is Fe.") and not rt.grade(symbol, "FE")
    assert rt.grade(task("roman", "Write 34 as a Roman numeral.", "XXXIV"), "34 is XXXIV.")
    assert not rt.grade(task("roman", "Write 34 as a Roman numeral.", "XXXIV"), "XXXIII")
    hexa = task("bases", "Write the decimal number 1277 in hexadecimal.", "4FD")
    assert rt.grade(hexa, "0x4fd") and rt.grade(hexa, "4FD") and not rt.grade(hexa, "4FE")
    clock = task("clock", "What time is it 2 hours after 01:00? Reply as HH:MM.", "03:00")
    assert rt.grade(clock, "01:00 plus two hours is 3:00") and not rt.grade(clock, "01:00")
    letter = task("alphabet", "Which letter of the alphabet comes right after 'h'?", "i")
    assert rt.grade(letter, "The letter after 'h' is 'i'.") and rt.grade(letter, "I")
    assert not rt.grade(letter, "I do not know") and not rt.grade(letter, "h")
    larger = task("sets", "Which is larger, 266 or 804? Reply with only the number.", 804)
    assert rt.grade(larger, "804 is larger than 266") and not rt.grade(larger, "266")
    plural = task("wordforms", "What is the plural of the English word 'mouse'?", "mice")
    assert rt.grade(plural, "The plural of 'mouse' is 'mice'.") and not rt.grade(plural, "mouses")
    fall = task("percent", "A price went from 120 to 96. By what percent did it change?", -20)
    assert rt.grade(fall, "It changed by -20%.") and not rt.grade(fall, "20%")
    minutes = task("clock", "How many minutes are there from 10:15 to 13:40 on the same day?", 205)
    assert rt.grade(minutes, "There are 205 minutes from 10:15 to 13:40.")
    assert rt.grade(task("clock", "What time is it 3 hours after 09:00?", "12:00"), "12:00 is 3 hours after 09:00.")
    hex_in = task("bases", "What is the hexadecimal number 7B in decimal? Reply with only the number.", 123)
    assert rt.grade(hex_in, "123 is the decimal value of 7B") and not rt.grade(hex_in, "7B")
    binary = task("bases", "Write the decimal number 27 in binary.", "11011")
    assert rt.grade(binary, "00011011") and not rt.grade(binary, "11011 or 11101")
    word_like = task("bases", "Write the decimal number 2781 in hexadecimal.", "ADD")
    assert rt.grade(word_like, "ADD") and not rt.grade(word_like, "First add the digits: 2781 = 0xADE")
    assert not rt.grade(task("roman", "Write 34 as a Roman numeral.", "XXXIV"), "XXXIV or XXXIIII")
    after_i = task("alphabet", "Which letter of the alphabet comes right after 'i'?", "j")
    assert rt.grade(after_i, "J comes after I.")
    assert rt.grade(task("alphabet", "Which letter of the alphabet comes right after 'd'?", "e"), "E is a vowel")
    assert rt.grade(larger, "Between 266 and 804, 804 is larger.")
    assert rt.grade(task("shapes", "What is the volume of a box 4 cm by 5 cm by 6 cm?", 120), "120 cm³")
    assert not rt.grade(task("elements", "What is the chemical symbol of potassium?", "K"), "P (not K)")


def test_the_wide_families_answers_vary():
    """No level of a wide family has one answer that a fixed reply would
    get right most of the time."""
    import collections

    answers = collections.defaultdict(collections.Counter)
    for t in rt.generate(3, 48 * 30, rt.MIX_WIDE):
        answers[(t.kind, t.level)][json.dumps(t.answer)] += 1
    for cell, counts in answers.items():
        assert counts.most_common(1)[0][1] <= 0.6 * sum(counts.values()), (cell, counts)


def test_graders_read_answers_the_way_models_write_them():
    task = rt.Task("t", "arithmetic", 2, "", 1234)
    assert rt.grade(task, "The result is 1,234.")
    task = rt.Task("t", "units", 3, "", 98.6, tolerance=0.06)
    assert rt.grade(task, "98.6 °F")
    assert not rt.grade(task, "98.8")
    task = rt.Task("t", "extract", 1, "", {"age": 42})
    assert rt.grade(task, 'Sure: {"age": "42"} as asked')
    task = rt.Task("t", "question", 3, "", "Friday")
    assert rt.grade(task, "Friday.")
    assert not rt.grade(task, "It will be Thursday, not Friday.")


def test_python_replies_are_stopped_at_the_time_limit():
    started = time.monotonic()
    assert not rt.run_python("while True:\n    pass", ["assert True"], timeout_s=1.0)
    assert time.monotonic() - started < 5
    assert rt.run_python("def f():\n    return 1", ["assert f() == 1"])
    # No environment reaches the code.
    assert not rt.run_python("import os\nassert os.environ.get('HOME')", [])


def test_random_routing_recovers_half_the_gap():
    n = 4000
    rng = rt.random.Random(3)
    weak = [rng.random() < 0.4 for _ in range(n)]
    strong = [w or rng.random() < 0.5 for w in weak]
    weak_acc, strong_acc = sum(weak) / n, sum(strong) / n
    points = rm.sweep(rm.random_scores(n, 9), weak, strong)
    assert points[0] == (0.0, weak_acc) and points[-1][0] == 1.0
    assert abs(rm.apgr(points, weak_acc, strong_acc) - 0.5) < 0.05
    half = rm.cpt(points, 0.5, weak_acc, strong_acc)
    assert half is not None and abs(half - 0.5) < 0.07


def test_a_router_that_knows_the_gap_recovers_it_with_few_strong_calls():
    # 40% solved by both, 20% only by the strong tier, 40% by neither.
    weak = [True] * 40 + [False] * 20 + [False] * 40
    strong = [True] * 40 + [True] * 20 + [False] * 40
    perfect = [0.0] * 40 + [1.0] * 20 + [0.0] * 40
    points = rm.sweep(perfect, weak, strong)
    weak_acc, strong_acc = 0.4, 0.6
    # RouteLLM's ten bins cap even a perfect ranker near 1 - gap/2.
    assert rm.apgr(points, weak_acc, strong_acc) >= 0.89
    assert rm.cpt(points, 0.8, weak_acc, strong_acc) <= 0.2 + 1e-9
    assert rm.oracle_accuracy(0.2, weak, strong) == 0.6
    backwards = [1 - s for s in perfect]
    assert rm.apgr(rm.sweep(backwards, weak, strong), weak_acc, strong_acc) < 0.3
    assert rm.cpt(rm.sweep(backwards, weak, strong), 0.8, weak_acc, strong_acc) > 0.8


def test_thresholds_match_numpys_linear_quantiles():
    # numpy.quantile([1, 2, 3, 4], [0, .1, ..., 1]) by hand.
    assert rm.thresholds([4, 1, 3, 2], bins=10)[:3] == [1, 1.3, 1.6]
    assert rm.thresholds([4, 1, 3, 2], bins=10)[-1] == 4


def test_the_plot_is_an_svg_with_every_policy():

    weak = [True, False, False, True]
    strong = [True, True, False, True]
    curve = rm.sweep([0.1, 0.9, 0.5, 0.2], weak, strong)
    svg = rm.svg_plot({"target share <sweep>": curve}, {"cascade": (0.3, 0.7)}, 0.5, 0.75)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert "target share &lt;sweep&gt;" in svg and "cascade" in svg
    assert len(root.findall("{http://www.w3.org/2000/svg}polyline")) == 1


def test_collect_records_every_answer_with_its_receipts_and_resumes(tmp_path):
    """Against the gateway on its embedded default (simulated tiers, whose
    answers are not meant to be right): every task gets a line with the
    reply, times, usage and the backend that served it, and a second run
    asks nothing again."""
    import routing_collect as rc
    from conftest import Proc

    gateway = Proc(["serve", "--listen", "127.0.0.1:0"])
    try:
        tasks = rt.generate(21, 12)
        out = str(tmp_path / "results.jsonl")
        assert rc.collect(gateway.url, "small", tasks, out) == 12
        rows = [json.loads(line) for line in open(out)]
        assert [r["task"]["id"] for r in rows] == [t.id for t in tasks]
        for row in rows:
            assert row["status"] == 200, row
            assert row["receipts"]["backend"] == "small"
            assert row["reply"] and row["ttft_ms"] > 0 and row["total_ms"] >= row["ttft_ms"]
            assert row["usage"]["completion_tokens"] > 0
            assert row["correct"] in (True, False)
        assert rc.collect(gateway.url, "small", tasks, out) == 0, "resumed: nothing asked again"
        # The route: its receipts say where each task went.
        assert rc.collect(gateway.url, "auto", tasks[:4], out) == 4
        routed = [json.loads(line) for line in open(out)][-4:]
        assert all(r["receipts"]["route"] == "auto" for r in routed)
    finally:
        gateway.stop()


def test_the_report_reads_recorded_answers_and_regrades_them(tmp_path):
    """Recorded rows of three tiers (made up here: a reply is right when it
    is the reference answer) give the fixed policies, the oracle, random's
    APGR near 0.5 and a plot; a stored `correct` is ignored for the grade
    the reply earns now."""
    import routing_quality_report as rq

    tasks = [t for t in rt.generate(8, 120) if t.kind in ("arithmetic", "units", "question")]
    rng = rt.random.Random(1)
    out = tmp_path / "results.jsonl"
    with open(out, "w") as f:
        for task in tasks:
            small_right = rng.random() < 0.4
            large_right = small_right or rng.random() < 0.6
            for model, right in (("small", small_right), ("mid", small_right), ("large", large_right)):
                row = {
                    "model": model,
                    "task": task.to_json(),
                    "status": 200,
                    "reply": right_reply(task) if right else wrong_reply(task),
                    "correct": not right,  # stale: the report grades again
                    "ttft_ms": 10.0 if model == "small" else 50.0,
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10},
                    "receipts": {"backend": model},
                }
                f.write(json.dumps(row) + "\n")
    rows = rq.load([str(out)])
    summary = rq.report(rows, "small", "mid", "large", [], {"large": (1.0, 2.0, 0.0)})
    by_name = {p["policy"]: p for p in summary["policies"]}
    n = summary["tasks"]
    assert n == len(tasks)
    assert by_name["all small"]["accuracy"] == summary["accuracy"]["small"] < by_name["all large"]["accuracy"]
    assert abs(by_name["all large"]["cost_usd"] - n * (100 * 1.0 + 10 * 2.0) / 1e6) < 1e-12
    assert by_name["all small"]["cost_usd"] == 0
    assert by_name["oracle"]["accuracy"] == by_name["all large"]["accuracy"]
    assert by_name["oracle"]["large_share"] < 0.5
    assert abs(summary["random"]["apgr"] - 0.5) < 0.1
    assert summary["oracle_apgr"] > 0.8
    text = rq.markdown(summary)
    assert "| oracle |" in text and "APGR" in text
    svg = rm.svg_plot(summary["curves"], {"oracle": (0.2, 0.8)}, 0.4, 0.7)
    assert svg.startswith("<svg")


def drawn_reply(task, tier):
    """The simulator's answers are not meant to be right, so the pipeline
    test draws each tier's correctness instead, labelled as such: harder
    levels fail more, larger tiers fail less, and a smaller tier's right
    answer is right on the larger ones too."""
    skill = {"small": 0.35, "mid": 0.55, "large": 0.8}[tier]
    u = (int(hashlib.sha256(task.id.encode()).hexdigest(), 16) % 1000) / 1000
    difficulty = (task.level - 1) / 4 + 0.25 * u
    return right_reply(task) if difficulty < skill else wrong_reply(task)


def sim_config(tmp_path):
    """The benchmark's own routes and predictors (examples/routing-quality/
    local.yaml) over fast simulated tiers instead of llama-server."""
    local = (ROOT / "examples" / "routing-quality" / "local.yaml").read_text()
    fast = "base_ttft_ms: 2, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0"
    backends = (
        "backends:\n"
        f"  small: {{tier: small, sim: {{preset: small, {fast}}}, price: {{usd_per_hour: 0.10}}}}\n"
        f"  mid: {{tier: mid, sim: {{preset: mid, {fast}}}, price: {{usd_per_hour: 0.10}}}}\n"
        f"  large: {{tier: cloud, sim: {{preset: large, {fast}}}, price: {{input_per_mtok: 2.5, output_per_mtok: 10}}}}\n"
    )
    config = tmp_path / "sim.yaml"
    config.write_text(backends + local[local.index("\nroutes:") :])
    for weights in ("small-fails.json", "large-helps.json"):
        shutil.copy(ROOT / "examples" / "routing-quality" / weights, tmp_path / weights)
    return config


def test_the_pipeline_runs_on_the_simulator_and_replays_what_live_routing_does(tmp_path):
    """The benchmark's collection, training, replay and report, end to end
    on simulated tiers through the real gateway binary; correctness is
    drawn (see `drawn_reply`). The cascade route, asked live, escalates
    exactly the tasks the replay says it escalates."""
    import routing_collect as rc
    from conftest import BINARY, Proc

    config = sim_config(tmp_path)
    gateway = Proc(["serve", "--config", str(config), "--listen", "127.0.0.1:0"])
    tasks = rt.generate(31, 40) + rt.generate(32, 40)
    answers = tmp_path / "answers.jsonl"
    live = tmp_path / "live.jsonl"
    try:
        for tier in ("small", "mid", "large"):
            assert rc.collect(gateway.url, tier, tasks, str(answers)) == len(tasks)
        assert rc.collect(gateway.url, "careful", tasks, str(live)) == len(tasks)
    finally:
        gateway.stop()
    rows = [json.loads(line) for line in open(answers)]
    assert all(r["status"] == 200 and r["mean_logprob"] is not None for r in rows)
    for row in rows:
        row["reply"] = drawn_reply(rt.Task.from_json(row["task"]), row["model"])
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))

    env = dict(os.environ, SWITCHYARD_BIN=str(BINARY))
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "routing_quality_analyse.sh"), str(tmp_path), str(config)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Two fold seeds, two halves of the families each, two labels.
    assert done.stdout.count("held-out fifth") == 8, done.stdout

    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["tasks"] == len(tasks)
    policies = {p["policy"]: p for p in summary["policies"]}
    for name in ("all small", "all mid", "all large", "oracle", "route random", "route share",
                 "route smart", "route careful", "route learned", "route learned-gain", "route share-learned"):
        assert name in policies, sorted(policies)
    assert policies["all small"]["accuracy"] < policies["all large"]["accuracy"]
    assert policies["oracle"]["accuracy"] >= policies["all large"]["accuracy"]
    sweeps = {s["policy"]: s for s in summary["sweeps"]}
    for name in ("learned (predicted failure)", "baseline: complexity score", "baseline: prompt length",
                 "careful (small's mean logprob)"):
        assert name in sweeps, sorted(sweeps)
        assert 0.0 <= sweeps[name]["apgr"] <= summary["oracle_apgr"] + 1e-9
        assert len(sweeps[name]["folds"]) == 2
    table = (tmp_path / "report" / "report.md").read_text()
    header = "| policy | APGR | CPT(50%) | CPT(80%) |"
    assert header in table
    sweep_rows = table.split(header)[1].split("\n\n")[0].strip().splitlines()[1:]
    cells = {row.split("|")[1].strip(): [c.strip() for c in row.split("|")[2:5]] for row in sweep_rows}
    for name in ("oracle", "random", "baseline: prompt length", "baseline: complexity score",
                 "learned (predicted failure)"):
        assert all(float(c) >= 0 for c in cells[name]), (name, cells)
    svg = (tmp_path / "report" / "plot.svg").read_text()
    ET.fromstring(svg)
    assert "route learned" in svg and "learned (predicted failure)" in svg

    replayed = {}
    for path in (tmp_path / "replay").glob("replay-*.jsonl"):
        for line in open(path):
            row = json.loads(line)
            if row["route"] == "careful":
                replayed[row["id"]] = row
    live_rows = [json.loads(line) for line in open(live)]
    escalations = 0
    for row in live_rows:
        decided = replayed[row["task"]["id"]]
        assert row["receipts"]["backend"] == decided["served"], (row["task"]["id"], decided)
        assert (row["receipts"]["reason"] == "cascade-escalated") == decided["escalated"]
        escalations += decided["escalated"]
    assert 0 < escalations < len(live_rows), "the sample exercises both outcomes"


def test_the_folds_hold_families_out_or_split_by_seed():
    import routing_replay_inputs as ri

    kinds = list(rt.KINDS)
    for fold in (1, 2):
        half = ri.halves(kinds, fold)
        for group in (rt.CORE_KINDS, rt.more.KINDS, rt.wide.KINDS):
            n = len(group) // 2
            assert sorted(half[k] for k in group) == ["a"] * n + ["b"] * n, (fold, half)
    assert ri.halves(kinds, 1) != ri.halves(kinds, 2)
    assert ri.seed_of("s12-0003-dates-2") == "12"
