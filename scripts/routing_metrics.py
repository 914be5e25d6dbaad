"""Routing-quality measures as RouteLLM defines them (issue #27).

A router gives each task a score; sweeping a threshold over the scores
sends more or fewer tasks to the strong (large) tier. Each threshold is a
point (share of strong calls, accuracy). From the curve:

- APGR, the average performance gap recovered: the area under the
  accuracy curve, between the weak tier's (0) and the strong tier's (1).
  Random routing gets 0.5 in expectation.
- CPT(x%), the call-performance threshold: the smallest share of strong
  calls at which the router recovers x% of the gap between the weak and the
  strong tier's accuracy.

As in RouteLLM (routellm/evals/evaluate.py and benchmarks.py): the
thresholds are the 11 edges of 10 equal-count bins of the scores (linear
interpolation between order statistics); a task goes to the strong tier
when its score is at least the threshold (above it, for the top edge);
areas are trapezoids over the points sorted by strong share. One change:
CPT takes the first crossing along the curve rather than interpolating as
if accuracy only rose, and says `None` when the target is never reached.
Stdlib only.
"""

from __future__ import annotations

import random


def quantile(sorted_values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation (numpy's default)."""
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def thresholds(scores: list[float], bins: int = 10) -> list[float]:
    ordered = sorted(scores)
    return [quantile(ordered, i / bins) for i in range(bins + 1)]


def sweep(
    scores: list[float], weak: list[bool], strong: list[bool], bins: int = 10
) -> list[tuple[float, float]]:
    """(strong share, accuracy) per threshold, sorted by strong share.
    `weak` and `strong` say whether each tier solved each task."""
    n = len(scores)
    edges = thresholds(scores, bins)
    points = []
    for i, edge in enumerate(edges):
        last = i == len(edges) - 1
        to_strong = [s > edge if last else s >= edge for s in scores]
        correct = sum(st if up else wk for up, wk, st in zip(to_strong, weak, strong))
        points.append((sum(to_strong) / n, correct / n))
    return sorted(points)


def area(points: list[tuple[float, float]]) -> float:
    return sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(points, points[1:]))


def apgr(points: list[tuple[float, float]], weak_accuracy: float, strong_accuracy: float) -> float:
    """The area between the weak tier's constant accuracy (0) and the
    strong tier's (1), over the points' span of strong shares."""
    span = points[-1][0] - points[0][0]
    weak_area, strong_area = weak_accuracy * span, strong_accuracy * span
    if strong_area == weak_area:
        raise ValueError("the tiers are equally accurate: there is no gap to recover")
    return (area(points) - weak_area) / (strong_area - weak_area)


def cpt(
    points: list[tuple[float, float]], fraction: float, weak_accuracy: float, strong_accuracy: float
) -> float | None:
    """The least strong share at which accuracy reaches `fraction` of the
    way from the weak tier's to the strong tier's (linear between points);
    None if it never does."""
    target = weak_accuracy + fraction * (strong_accuracy - weak_accuracy)
    if points[0][1] >= target:
        return points[0][0]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if y1 >= target > y0:
            return x0 + (x1 - x0) * (target - y0) / (y1 - y0)
    return None


def random_scores(n: int, seed: int) -> list[float]:
    """RouteLLM's random router: a uniform score per task."""
    rng = random.Random(seed)
    return [rng.random() for _ in range(n)]


def oracle_accuracy(share: float, weak: list[bool], strong: list[bool]) -> float:
    """The best accuracy any router reaches with `share` strong calls: the
    weak tier's right answers, plus the tasks only the strong tier gets
    right, as many as the calls allow."""
    n = len(weak)
    gap = sum(1 for w, s in zip(weak, strong) if s and not w)
    return (sum(weak) + min(share * n, gap)) / n


COLOURS = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
    "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#ad494a",
]


def _marker(shape: int, x: float, y: float, colour: str, name: str = "") -> str:
    """A marker of one of four shapes (so a shape and a colour tell more
    policies apart than the colours alone)."""
    title = f"<title>{_escape(name)}</title>" if name else ""
    if shape == 0:
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colour}">{title}</circle>'
    if shape == 1:
        return f'<rect x="{x - 4.5:.1f}" y="{y - 4.5:.1f}" width="9" height="9" fill="{colour}">{title}</rect>'
    if shape == 2:
        d = f"M{x:.1f},{y - 6:.1f} L{x + 6:.1f},{y + 4.5:.1f} L{x - 6:.1f},{y + 4.5:.1f} Z"
    else:
        d = f"M{x:.1f},{y - 6:.1f} L{x + 6:.1f},{y:.1f} L{x:.1f},{y + 6:.1f} L{x - 6:.1f},{y:.1f} Z"
    return f'<path d="{d}" fill="{colour}">{title}</path>'


def svg_plot(
    curves: dict[str, list[tuple[float, float]]],
    markers: dict[str, tuple[float, float]],
    weak_accuracy: float,
    strong_accuracy: float,
    title: str = "Accuracy against the share of large-tier calls",
) -> str:
    """An SVG of accuracy (y) against the strong tier's share of calls (x):
    a line per swept policy, a marker per fixed one, and dashed lines at the
    weak and strong tiers' accuracy, as RouteLLM plots them."""
    width, height, left, right, top, bottom = 1000, 480, 60, 400, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    ys = [y for pts in curves.values() for _, y in pts] + [y for _, y in markers.values()]
    ys += [weak_accuracy, strong_accuracy]
    y_low = max(0.0, min(ys) - 0.05)
    y_high = min(1.0, max(ys) + 0.05)
    if y_high <= y_low:
        y_high = y_low + 0.1

    def at(x: float, y: float) -> tuple[float, float]:
        return left + x * plot_w, top + (1 - (y - y_low) / (y_high - y_low)) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="14">{_escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>',
    ]
    for i in range(6):
        x = i / 5
        px, _ = at(x, y_low)
        out.append(f'<text x="{px:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{x * 100:.0f}%</text>')
        y = y_low + (y_high - y_low) * i / 5
        _, py = at(0, y)
        out.append(f'<text x="{left - 6}" y="{py + 4:.1f}" text-anchor="end">{y * 100:.0f}%</text>')
    out.append(
        f'<text x="{left + plot_w / 2}" y="{height - 12}" text-anchor="middle">large-tier calls</text>'
    )
    for name, y in (("all small", weak_accuracy), ("all large", strong_accuracy)):
        x0, py = at(0, y)
        x1, _ = at(1, y)
        out.append(f'<line x1="{x0}" y1="{py:.1f}" x2="{x1}" y2="{py:.1f}" stroke="#999" stroke-dasharray="5,4"/>')
        out.append(f'<text x="{x1 + 4}" y="{py + 4:.1f}" fill="#666">{_escape(name)}</text>')
    legend_y = top
    for i, (name, points) in enumerate(curves.items()):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in (at(x, y) for x, y in points))
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        legend_y += 18
        out.append(f'<line x1="{width - right + 50}" y1="{legend_y - 4}" x2="{width - right + 70}" y2="{legend_y - 4}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{width - right + 76}" y="{legend_y}">{_escape(name)}</text>')
    for i, (name, (x, y)) in enumerate(markers.items()):
        colour = COLOURS[(len(curves) + i) % len(COLOURS)]
        shape = i % 4
        px, py = at(x, y)
        out.append(_marker(shape, px, py, colour, name))
        legend_y += 18
        out.append(_marker(shape, width - right + 60, legend_y - 4, colour))
        out.append(f'<text x="{width - right + 76}" y="{legend_y}">{_escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
