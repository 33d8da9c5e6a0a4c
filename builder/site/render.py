"""`torchyard matrix html -o DIR`: DIR/index.html, one self-contained page (its data inline, no external
assets, nothing fetched at view time)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from builder.matrix.model import Matrix
from builder.site.data import page_data


def render_page(m: Matrix, repo: str) -> str:
    import jinja2
    import markupsafe

    template = resources.files("builder.site").joinpath("page.html.j2").read_text()
    env = jinja2.Environment(autoescape=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    data = page_data(m, repo)
    # JSON inside <script>: "</" and "<!--" must not end or open anything in the HTML parser
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\!--")
    return env.from_string(template).render(data=data, payload=markupsafe.Markup(payload))


def write_page(m: Matrix, repo: str, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    path.write_text(render_page(m, repo))
    return path
