"""Shared pytest set-up: the wrong-answer bank's size is reported at the end of every run."""

from __future__ import annotations

from tests import bank


def pytest_terminal_summary(terminalreporter) -> None:
    terminalreporter.section("wrong-answer bank")
    for module in bank.modules():
        cells = sorted({a.cell for a in module.WRONG})
        terminalreporter.write_line(
            f"{module.ASSIGNMENT}: {len(module.WRONG)} wrong and {len(module.RIGHT)} right answers "
            f"over {len(cells)} graded functions")
