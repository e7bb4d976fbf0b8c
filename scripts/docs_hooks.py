"""MkDocs hook (mkdocs.yml): the generated parts of the site, so that they cannot drift from the code.

``{{ parameters }}`` becomes the node's parameter table (``state_observer.io.params.PARAMETERS``), ``{{ messages }}``
the package's message and service definitions (``msg/``, ``srv/``)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cell(text) -> str:
    return str(text).replace("|", "\\|")


def parameters_table() -> str:
    from state_observer.io.params import PARAMETERS

    rows = ["| name | default | range or values | meaning |", "|---|---|---|---|"]
    for p in PARAMETERS:
        allowed = f"{p.low:g} .. {p.high:g}" if p.low is not None else (", ".join(p.choices) if p.choices else "")
        default = repr(p.default) if isinstance(p.default, str) else p.default
        rows.append(f"| `{p.name}` | `{_cell(default)}` | {_cell(allowed)} | {_cell(p.description)} |")
    return "\n".join(rows)


def messages_text() -> str:
    parts = []
    for folder in ("msg", "srv"):
        for path in sorted((ROOT / folder).glob(f"*.{folder}")):
            parts.append(f"## {path.stem} ({folder})\n\n```\n{path.read_text().rstrip()}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, **kwargs) -> str:
    if "{{ parameters }}" in markdown:
        markdown = markdown.replace("{{ parameters }}", parameters_table())
    if "{{ messages }}" in markdown:
        markdown = markdown.replace("{{ messages }}", messages_text())
    return markdown
