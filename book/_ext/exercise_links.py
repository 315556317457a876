"""The `{exercise}` directive: download and launch links for a chapter's exercise notebook.

    ```{exercise} 01_similarity
    ```

renders a box with a download link to exercises/01_similarity/<notebook>.ipynb (copied into the
built site) and launch links (Binder, Colab, JupyterHub) built from `repository.url`,
`repository.branch`, the launch-button settings of _config.yml and `exercise_colab_url` (Colab opens
the .ipynb notebooks only, so the pages themselves offer no Colab button), so one setting moves them all.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


class ExerciseDirective(SphinxDirective):
    required_arguments = 1

    def _notebook(self, assignment: str) -> str:
        folder = Path(self.env.srcdir) / "exercises" / assignment
        notebooks = sorted(p.name for p in folder.glob("*.ipynb"))
        if len(notebooks) != 1:
            raise self.error(f"expected one exercise notebook in {folder}, found {notebooks}")
        return notebooks[0]

    def run(self) -> list[nodes.Node]:
        assignment = self.arguments[0]
        path = f"exercises/{assignment}/{self._notebook(assignment)}"
        options = self.config.html_theme_options
        repo = options.get("repository_url", "").rstrip("/")
        branch = options.get("repository_branch", "main")
        launch = options.get("launch_buttons", {})
        github = repo.removeprefix("https://github.com/")

        box = nodes.admonition(classes=["tip", "exercise-links"])
        box += nodes.title(text=f"Exercise notebook · {assignment}")
        line = nodes.paragraph()
        download = addnodes.download_reference("", "", reftarget=f"/{path}", refexplicit=True,
                                               refdomain="", reftype="download", refdoc=self.env.docname)
        download += nodes.literal(text="Download the notebook")
        line += download
        links = {
            "Launch on Binder": f"{launch.get('binderhub_url', 'https://mybinder.org').rstrip('/')}"
                                f"/v2/gh/{github}/{branch}?labpath={quote(path)}",
            "Open in Colab": f"{self.config.exercise_colab_url.rstrip('/')}"
                             f"/github/{github}/blob/{branch}/{path}",
        }
        if launch.get("jupyterhub_url"):
            pull = f"repo={quote(repo)}&branch={branch}&urlpath={quote('lab/tree/' + github.split('/')[-1] + '/' + path)}"
            links["Open on JupyterHub"] = f"{launch['jupyterhub_url'].rstrip('/')}/hub/user-redirect/git-pull?{pull}"
        for label, url in links.items():
            line += nodes.Text(" · ")
            line += nodes.reference(text=label, refuri=url)
        box += line
        advice = nodes.paragraph(text="Fill in the solution cells, run the visible tests, then validate and hand in. "
                                      "Hidden tests check edge cases when the notebook is graded. What to install, and how "
                                      "to validate: ")
        setup = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget="/book/setup", refexplicit=True,
                                      refdoc=self.env.docname)
        setup += nodes.inline(text="Set up")
        advice += setup
        advice += nodes.Text(".")
        box += advice
        return [box]


def setup(app: Sphinx) -> dict:
    app.add_config_value("exercise_colab_url", "https://colab.research.google.com", "env")
    app.add_directive("exercise", ExerciseDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
