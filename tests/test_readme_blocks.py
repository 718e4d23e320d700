"""Every Python block of README.md and examples/*.md runs, as the doctest habit has it, at tiny size.

A block may carry two comments this test reads: `# tiny: name=value, ...` replaces the literal value of each named
keyword argument (`hidden_size=256` becomes `hidden_size=32`; `vocab_size=len(tokenizer)` is left alone), and
`# needs: hf-encoders pretrain ...` runs that command first, at tiny size, in the block's working folder.
"""

import re
import shlex
from pathlib import Path

import pytest

from hf_encoders.training.pretrain import main as pretrain_main

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "examples").glob("*.md"))]
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
    assert {path.name for path in DOCUMENTS if python_blocks(path)} >= {"README.md", "peft_lora.md"}


@pytest.mark.parametrize("block", BLOCKS)
def test_block_runs(block, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for command in re.findall(r"^# needs: hf-encoders pretrain (.*)$", block, flags=re.MULTILINE):
        assert pretrain_main([*shlex.split(command), *TINY_PRETRAIN]) == 0
    exec(compile(tiny(block), "<block>", "exec"), {"__name__": "__block__"})


def test_tiny_replaces_literal_keywords_only():
    block = "# tiny: hidden_size=32\nConfig(vocab_size=len(tokenizer), hidden_size=256)\n"
    assert "hidden_size=32)" in tiny(block)
    with pytest.raises(AssertionError, match="names no literal"):
        tiny("# tiny: vocab_size=30\nConfig(vocab_size=len(tokenizer))\n")
