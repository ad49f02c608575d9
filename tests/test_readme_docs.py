"""The README's document table lists every file in docs/, every path the README names exists in
the repository, and nothing points outside it (the spec it implements is docs/architecture.md)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end >= 0 else None]


def test_document_table_lists_every_file_in_docs():
    table = _section("Documents")
    missing = [p.name for p in sorted((ROOT / "docs").iterdir())
               if p.is_file() and f"docs/{p.name}" not in table]
    assert not missing, f"docs/ files not in the README's document table: {missing}"


def test_every_docs_path_the_readme_names_exists():
    named = set(re.findall(r"`(docs/[\w./-]+)`", README))
    assert named
    absent = sorted(p for p in named if not (ROOT / p).exists())
    assert not absent, absent


def test_the_readme_points_nowhere_outside_the_repository():
    assert "../" not in README
    assert "docs/architecture.md" in README.split("## ", 2)[0] + _section("The two commands")


def test_the_first_screen_says_what_it_is_and_what_it_needs():
    first = README[:README.index("## The two commands")]
    assert "What this is" in first and "Prerequisites" in first
    commands = _section("The two commands")
    for command in ("make test", "make eval"):
        assert f"`{command}`" in commands
