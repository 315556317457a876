"""The class report's two charts as inline SVG: each assignment's score histogram and its pass rate per test.

Drawn as text, with no plotting library: a run writes its report after its last verdict, when nothing else is left
to do, and drawing them as PNGs with matplotlib took most of that tail (0.6-1.0 s for the 18-notebook class,
0.03-0.06 s without, 14 runs each). Every text in a chart (assignment and test names) is escaped; each bar carries
a ``<title>`` with its figures, and the tables beside the charts in the report hold the same numbers.

Runs in the grader.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil, floor

from markupsafe import Markup, escape

GRADED, NOT_GRADED, PASSED = "#4c72b0", "#bbbbbb", "#55a868"
FONT = 'font-family="system-ui, sans-serif" font-size="11"'
MOST_TICKS = 6  # labels on an axis at most


def _step(top: float) -> int:
    """A whole step between axis labels from 0 to ``top`` that gives at most `MOST_TICKS` labels."""
    return max(1, ceil(top / (MOST_TICKS - 1)))


def _svg(width: int, height: int, label: str, body: list[str]) -> Markup:
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
                  f'role="img" aria-label="{escape(label)}" style="max-width: 100%; height: auto" {FONT}>'
                  + "".join(body) + "</svg>")


def score_bins(graded: Sequence[float], not_graded: Sequence[float], top: float) -> list[tuple[int, int]]:
    """(graded, not graded) submissions per whole score 0 ... ``top``: a score counts in the bin of the whole
    number nearest to it (halves up), as a histogram with bins centred on whole scores draws it."""
    bins = [[0, 0] for _ in range(int(top) + 1)]
    for column, scores in enumerate((graded, not_graded)):
        for score in scores:
            bins[min(max(floor(score + 0.5), 0), len(bins) - 1)][column] += 1
    return [(a, b) for a, b in bins]


def score_histogram(assignment: str, graded: Sequence[float], not_graded: Sequence[float], top: float) -> Markup:
    """The histogram of ``assignment``'s scores (of ``top``): graded submissions stacked under those not graded."""
    bins = score_bins(graded, not_graded, top)
    left, right, upper, lower, width, height = 34, 8, 34, 34, 300, 200
    plot_w, plot_h = width - left - right, height - upper - lower
    most = max([a + b for a, b in bins] + [1])
    bar, step = plot_w / len(bins), _step(most)
    highest = step * ceil(most / step)  # the y axis' top label

    def y(count: int) -> float:
        return upper + plot_h - plot_h * count / highest

    body = [f'<text x="{width / 2}" y="14" text-anchor="middle" font-weight="bold">{escape(assignment)}</text>',
            f'<rect x="{left}" y="20" width="9" height="9" fill="{GRADED}"/><text x="{left + 12}" y="28">graded'
            f'</text><rect x="{left + 62}" y="20" width="9" height="9" fill="{NOT_GRADED}"/>'
            f'<text x="{left + 74}" y="28">not graded</text>']
    for tick in range(0, highest + 1, step):
        line = f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#e4e4e4"/>'
        body.append(f'{line}<text x="{left - 4}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>')
    every = _step(len(bins) - 1)
    for score, (done, failed) in enumerate(bins):
        x = left + score * bar
        tip = f"<title>score {score}: {done} graded, {failed} not graded</title>"
        for count, base, colour in ((done, 0, GRADED), (failed, done, NOT_GRADED)):
            if count:
                body.append(f'<rect x="{x + 1:.1f}" y="{y(base + count):.1f}" width="{bar - 2:.1f}" '
                            f'height="{y(base) - y(base + count):.1f}" fill="{colour}">{tip}</rect>')
        if score % every == 0:
            body.append(f'<text x="{x + bar / 2:.1f}" y="{upper + plot_h + 14}" text-anchor="middle">{score}</text>')
    body.append(f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle">score (of {top:g})</text>'
                f'<text transform="translate(10 {upper + plot_h / 2}) rotate(-90)" text-anchor="middle">students'
                '</text>')
    return _svg(width, height, f"Histogram of the scores of {assignment}: graded submissions in blue, not graded in "
                               "grey", body)


def pass_rate_chart(assignment: str, rates: Sequence[tuple[str, int, int, int]], graded: int) -> Markup:
    """``assignment``'s pass rate per test: one bar per (grade_id, passed, graded, not attempted) of ``rates``."""
    label = 7 * max([len(grade_id) for grade_id, _, _, _ in rates] + [4]) + 8
    left, bar_w, row, upper = label, 300, 18, 24
    width, height = left + bar_w + 44, upper + row * len(rates) + 30
    body = [f'<text x="{width / 2}" y="14" text-anchor="middle" font-weight="bold">{escape(assignment)}: pass rate '
            f'per test ({graded} graded)</text>']
    for tick in range(0, 101, 20):
        x = left + bar_w * tick / 100
        body.append(f'<line x1="{x}" x2="{x}" y1="{upper}" y2="{upper + row * len(rates)}" stroke="#e4e4e4"/>'
                    f'<text x="{x}" y="{upper + row * len(rates) + 14}" text-anchor="middle">{tick}</text>')
    for index, (grade_id, passed, total, skipped) in enumerate(rates):
        top, rate = upper + index * row, 100 * passed / total if total else 0.0
        body.append(f'<text x="{left - 6}" y="{top + 13}" text-anchor="end">{escape(grade_id)}</text>'
                    f'<rect x="{left}" y="{top + 3}" width="{bar_w * rate / 100:.1f}" height="{row - 6}" '
                    f'fill="{PASSED}"><title>{escape(grade_id)}: {passed} of {total} passed, {skipped} not attempted'
                    f'</title></rect><text x="{left + bar_w * rate / 100 + 4:.1f}" y="{top + 13}">'
                    f'{f"{rate:.0f}%" if total else "-"}</text>')
    body.append(f'<text x="{left + bar_w / 2}" y="{height - 2}" text-anchor="middle">students who passed (%)</text>')
    return _svg(width, height, f"Bar chart: percentage of graded students who passed each test of {assignment}", body)
