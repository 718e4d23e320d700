"""Every Python block of README.md, docs/ and examples/*.md runs, as the doctest habit has it, at tiny size; and every
relative link of those pages and the other top-level ones reaches a file, and a heading where it names one.

A block may carry two comments this test reads: `# tiny: name=value, ...` replaces the literal value of each named
keyword argument (`hidden_size=256` becomes `hidden_size=32`; `vocab_size=len(tokenizer)` is left alone), and
`# needs: hf-encoders pretrain ...` runs that command first, at tiny size, in the block's working folder (once per
module for each distinct command, its output copied into each block's folder).
"""

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from hf_encoders.training.pretrain import main as pretrain_main

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "examples").glob("*.md"))]
# Pages whose links are checked besides DOCUMENTS (their code blocks are not Python to run).
LINKING_PAGES = [*DOCUMENTS, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md"]
TINY_PRETRAIN = ["--max_documents", "20", "--block_size", "32", "--max_steps", "2", "--report_to", "none"]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.DOTALL | re.MULTILINE)


def tiny(block: str) -> str:
    """The block with the literal values its `# tiny:` comment names replaced (the comment itself dropped)."""
    settings = re.findall(r"^# tiny: (.*)\n", block, flags=re.MULTILINE)
    code = re.sub(r"^# tiny: .*\n", "", block, flags=re.MULTILINE)
    for setting in ",".join(settings).split(",") if settings else []:
        name, value = (part.strip() for part in setting.split("="))
        code, count = re.subn(rf"\b{name}=[\d.e+-]+\b", f"{name}={value}", code)
        assert count, f"# tiny: {name} names no literal keyword argument of the block"
    return code


BLOCKS = [
    pytest.param(block, id=f"{path.relative_to(ROOT)}:{index}")
    for path in DOCUMENTS
    for index, block in enumerate(python_blocks(path))
]


def test_the_documents_have_python_blocks():
    with_blocks = {str(path.relative_to(ROOT)) for path in DOCUMENTS if python_blocks(path)}
    assert with_blocks >= {"README.md", "docs/pretraining.md", "docs/evaluation.md", "docs/lora.md"}


@pytest.fixture(scope="module")
def needed_runs(tmp_path_factory):
    """command -> the folder its tiny `hf-encoders pretrain` run wrote into, each command run once per module."""
    folders = {}

    def folder_for(command: str) -> Path:
        if command not in folders:
            folder, cwd = tmp_path_factory.mktemp("needs"), Path.cwd()
            os.chdir(folder)  # the command's paths are relative, as a reader types them
            try:
                assert pretrain_main([*shlex.split(command), *TINY_PRETRAIN]) == 0
            finally:
                os.chdir(cwd)
            folders[command] = folder
        return folders[command]

    return folder_for


@pytest.mark.parametrize("block", BLOCKS)
def test_block_runs(block, tmp_path, monkeypatch, needed_runs):
    for command in re.findall(r"^# needs: hf-encoders pretrain (.*)$", block, flags=re.MULTILINE):
        shutil.copytree(needed_runs(command), tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    exec(compile(tiny(block), "<block>", "exec"), {"__name__": "__block__"})


def test_tiny_replaces_literal_keywords_only():
    block = "# tiny: hidden_size=32\nConfig(vocab_size=len(tokenizer), hidden_size=256)\n"
    assert "hidden_size=32)" in tiny(block)
    with pytest.raises(AssertionError, match="names no literal"):
        tiny("# tiny: vocab_size=30\nConfig(vocab_size=len(tokenizer))\n")


def anchors(path: Path) -> set[str]:
    """The fragment GitHub gives each heading of `path`: lower case, punctuation dropped, spaces as hyphens, and
    -1, -2, ... after a repeated one."""
    seen, result = {}, set()
    for heading in re.findall(r"^#{1,6} (.*)$", without_code(path.read_text()), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        result.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return result


def without_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)


def broken_links(path: Path) -> list[str]:
    """The relative links of a Markdown page whose file does not exist, or whose #fragment names no heading."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", without_code(path.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {file or path.name}")
    return broken


@pytest.mark.parametrize("path", LINKING_PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(path):
    assert not broken_links(path)


def test_a_link_to_a_missing_heading_or_file_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Title\n\n## The `cache`, once\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[a](other.md#the-cache-once) [b](other.md#twice-1) [c](#top) [d](other.md#gone) [e](missing.md)\n"
        "[f](https://example.com/x.md)\n\n# Top\n\n```bash\n[g](not-a-link.md)\n```\n"
    )
    assert broken_links(page) == ["other.md#gone: no heading #gone in other.md", "missing.md: no such file"]
