"""The GitHub Pages workflow parses, builds the book with the README's own command, and deploys it."""

from __future__ import annotations

import re

import yaml

from course import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
# The current major version of each action in 2026, all on the Node 24 runtime (GitHub moved actions off
# Node 20 in 2026): checkout v6, configure-pages v6.0.0, upload-pages-artifact v5.0.0, deploy-pages v5.0.0.
ACTIONS = {"actions/checkout": "v6", "actions/setup-python": "v6", "actions/setup-node": "v6",
           "actions/configure-pages": "v6", "actions/upload-pages-artifact": "v5", "actions/deploy-pages": "v5"}


def _steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_the_pages_workflow_builds_with_the_readme_command_and_deploys() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    readme_commands = re.findall(r"^(make \w+)\s+# builds the site", (ROOT / "README.md").read_text(), re.M)
    assert readme_commands == ["make book"], f"the README's quick start names {readme_commands}, not `make book`"
    runs = [step["run"].strip() for step in _steps(workflow) if "run" in step]
    assert runs == ["make book"], f"the workflow runs {runs}; it must run the README's own `make book`"
    used = {step["uses"].split("@")[0]: step["uses"].split("@")[1] for step in _steps(workflow) if "uses" in step}
    for action, version in ACTIONS.items():
        assert used.get(action) == version, f"the workflow uses {action}@{used.get(action)}; want @{version}"
    upload = next(step for step in _steps(workflow) if step.get("uses", "").startswith("actions/upload-pages"))
    assert upload["with"]["path"] == "_build/html", "the artifact must be the built site, _build/html"
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    assert workflow["jobs"]["deploy"]["needs"] == "build"
