"""The class report's charts (`autograder.reports.charts`): what each bar says and how long it is, escaped names,
and well-formed SVG."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from autograder.reports.charts import GRADED, NOT_GRADED, PASSED, pass_rate_chart, score_bins, score_histogram

SVG = "{http://www.w3.org/2000/svg}"


def _bars(chart: str, colour: str) -> dict[str, float]:
    """Each bar of ``colour``: its title -> its height (a histogram) or width (a pass-rate chart)."""
    root = ElementTree.fromstring(str(chart))  # not well-formed XML (an unescaped name) raises here
    return {rect.find(f"{SVG}title").text: float(rect.get("height") if colour != PASSED else rect.get("width"))
            for rect in root.iter(f"{SVG}rect") if rect.get("fill") == colour and rect.find(f"{SVG}title") is not None}


def test_scores_fall_in_the_bin_of_the_nearest_whole_score() -> None:
    bins = score_bins([8, 8, 3.5, 2.49, 0, -1], [0, 9], 8)
    assert len(bins) == 9, "one bin per whole score from 0 to the maximum"
    assert bins[0] == (2, 1) and bins[4] == (1, 0) and bins[2] == (1, 0) and bins[8] == (2, 1), (
        f"3.5 goes up to 4, 2.49 down to 2, what lies outside 0 ... 8 in the end bins: {bins}")
    assert sum(a + b for a, b in bins) == 8, "every submission is counted once"


def test_each_histogram_bar_is_as_tall_as_its_count() -> None:
    chart = score_histogram("toy", [8, 8, 8, 0], [0], 8)
    graded, not_graded = _bars(chart, GRADED), _bars(chart, NOT_GRADED)
    assert set(graded) == {"score 8: 3 graded, 0 not graded", "score 0: 1 graded, 1 not graded"}, graded
    assert abs(graded["score 8: 3 graded, 0 not graded"] - 3 * graded["score 0: 1 graded, 1 not graded"]) < 0.2
    assert abs(not_graded["score 0: 1 graded, 1 not graded"] - graded["score 0: 1 graded, 1 not graded"]) < 0.2, (
        "a submission not graded is stacked on the graded ones, as tall")
    assert "score (of 8)" in chart and 'role="img"' in chart and "aria-label=" in chart


def test_each_pass_rate_bar_is_as_long_as_its_rate() -> None:
    chart = pass_rate_chart("toy", [("test_add", 3, 4, 1), ("test_mean_hidden", 0, 4, 4), ("test_none", 0, 0, 0)], 4)
    widths = _bars(chart, PASSED)
    assert widths["test_add: 3 of 4 passed, 1 not attempted"] == 225.0, "75% of the 300-pixel axis"
    assert widths["test_mean_hidden: 0 of 4 passed, 4 not attempted"] == 0.0
    assert ">75%<" in chart and ">-<" in chart, "a test no graded submission reached shows no rate"
    assert "toy: pass rate per test (4 graded)" in chart


def test_names_in_a_chart_are_escaped() -> None:
    for chart in (score_histogram("<b>a&b</b>", [1], [], 2), pass_rate_chart("<b>", [("<i>t</i>", 1, 1, 0)], 1)):
        ElementTree.fromstring(str(chart))
        assert "<b>" not in chart and "<i>" not in chart and "&lt;b&gt;" in chart
