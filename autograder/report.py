"""The class report (`report.html`): one self-contained page with figures embedded as base64 PNGs.

It shows the score distribution of each assignment, the pass rate of each test, the failure
messages that came back most often (which misconception hit the class) and who could not be graded
and why.
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

MISTAKE = re.compile(r"This is what you get with this mistake: (.+?)\.?$", re.MULTILINE)
ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; } td, th { border: 1px solid #ccc; padding: .3rem .6rem; }
th { background: #f3f3f3; text-align: left; } td.n { text-align: right; } img { max-width: 100%; }
code, pre { background: #f6f6f6; } pre { padding: .5rem; white-space: pre-wrap; }
"""


def _png(figure) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(figure)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def failure_summary(message: str) -> str:
    """The part of a failure message that names the mistake: the misconception line, else the first line
    (an untouched solution stub counts as not attempted)."""
    mistake = MISTAKE.search(message)
    if mistake:
        return f"mistake: {mistake.group(1)}"
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if lines and lines[0].startswith("NotImplementedError"):
        return "not attempted: the solution cell still raises NotImplementedError"
    # Object addresses differ between students: without them the same failure counts once per class.
    return ADDRESS.sub("0x...", lines[0][:200]) if lines else "(no message)"


def _distribution(rows: list[dict], assignments: list[str], templates: dict) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.ticker import MaxNLocator

    figure, axes = plt.subplots(1, len(assignments), figsize=(4 * len(assignments), 3), squeeze=False,
                                layout="constrained")
    for axis, assignment in zip(axes[0], assignments):
        mine = [r for r in rows if r["assignment"] == assignment]
        graded = [r["score"] for r in mine if r["result"]["status"] == "graded"]
        not_graded = [r["score"] for r in mine if r["result"]["status"] != "graded"]
        top = templates[assignment].max_score
        axis.hist([graded, not_graded], bins=[x - 0.5 for x in range(int(top) + 2)], stacked=True,
                  color=["#4c72b0", "#bbbbbb"], edgecolor="white", label=["graded", "not graded"])
        axis.set_title(assignment)
        axis.set_xlabel(f"score (of {top:g})")
        axis.set_ylabel("students")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].legend(loc="upper center")
    return _png(figure)


def _pass_rates(rows: list[dict], assignment: str, template) -> tuple[str, list[tuple[str, int, int]]]:
    import matplotlib.pyplot as plt

    graded = [r["result"] for r in rows if r["assignment"] == assignment and r["result"]["status"] == "graded"]
    rates = []
    for notebook, grade_id, _ in template.cells:
        outcomes = [c["passed"] for result in graded for c in result["cells"]
                    if c["grade_id"] == grade_id and c["notebook"] == notebook]
        rates.append((grade_id, sum(outcomes), len(outcomes)))
    figure, axis = plt.subplots(figsize=(7, 0.3 * len(rates) + 1), layout="constrained")
    names = [name for name, _, _ in rates][::-1]
    values = [100 * passed / total if total else 0 for _, passed, total in rates][::-1]
    axis.barh(names, values, color="#55a868")
    axis.set_xlim(0, 100)
    axis.set_xlabel("students who passed (%)")
    axis.set_title(f"{assignment}: pass rate per test ({len(graded)} graded)")
    return _png(figure), rates


def write_report(path: Path, rows: list[dict], templates: dict) -> None:
    """Write the class report for ``rows`` (one per student and assignment, as `autograder.grade` builds them)."""
    assignments = [a for a in sorted({r["assignment"] for r in rows}) if a in templates]
    students = sorted({r["student_id"] for r in rows})
    failed = [r for r in rows if r["result"]["status"] != "graded"]
    parts = [f"<h1>Class report</h1><p>{len(students)} students, {len(rows)} submissions, "
             f"{len(rows) - len(failed)} graded, {len(failed)} not graded. Generated "
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.</p>"]
    if assignments:
        parts.append("<h2>Score distribution</h2>" + _distribution(rows, assignments, templates))
        parts.append("<table><tr><th>assignment</th><th>graded</th><th>mean</th><th>median</th><th>max</th></tr>")
        for assignment in assignments:
            scores = sorted(r["score"] for r in rows if r["assignment"] == assignment
                            and r["result"]["status"] == "graded")
            mean = sum(scores) / len(scores) if scores else 0.0
            median = scores[len(scores) // 2] if scores else 0.0
            parts.append(f"<tr><td>{html.escape(assignment)}</td><td class=n>{len(scores)}</td>"
                         f"<td class=n>{mean:.2f}</td><td class=n>{median:g}</td>"
                         f"<td class=n>{templates[assignment].max_score:g}</td></tr>")
        parts.append("</table><h2>Pass rate per test</h2>")
        for assignment in assignments:
            figure, rates = _pass_rates(rows, assignment, templates[assignment])
            parts.append(f"<h3>{html.escape(assignment)}</h3>{figure}<table><tr><th>test</th><th>passed</th>"
                         "<th>graded</th><th>pass rate</th></tr>")
            for grade_id, passed, total in rates:
                rate = f"{100 * passed / total:.0f}%" if total else "-"
                parts.append(f"<tr><td>{html.escape(grade_id)}</td><td class=n>{passed}</td>"
                             f"<td class=n>{total}</td><td class=n>{rate}</td></tr>")
            parts.append("</table>")
    parts.append(_failures(rows))
    parts.append("<h2>Not graded</h2>")
    if failed:
        parts.append("<table><tr><th>student</th><th>assignment</th><th>reason</th></tr>")
        for row in failed:
            parts.append(f"<tr><td>{html.escape(row['student_id'])}</td><td>{html.escape(row['assignment'])}</td>"
                         f"<td>{html.escape(row['result']['reason'])}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>Every submission was graded.</p>")
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Class report</title>"
                    f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>")


def _failures(rows: list[dict], top: int = 20) -> str:
    counts: Counter[tuple[str, str, str]] = Counter()
    for row in rows:
        for cell in row["result"].get("cells", []):
            if not cell["passed"]:
                counts[(row["assignment"], cell["grade_id"], failure_summary(cell["message"]))] += 1
    if not counts:
        return "<h2>Most frequent failures</h2><p>No test failed.</p>"
    lines = ["<h2>Most frequent failures</h2><p>The misconception a failing test named, or the first line of its "
             "message, counted over the class.</p><table><tr><th>students</th><th>assignment</th><th>test</th>"
             "<th>message</th></tr>"]
    for (assignment, grade_id, message), count in counts.most_common(top):
        lines.append(f"<tr><td class=n>{count}</td><td>{html.escape(assignment)}</td><td>{html.escape(grade_id)}</td>"
                     f"<td><code>{html.escape(message)}</code></td></tr>")
    return "".join(lines) + "</table>"
