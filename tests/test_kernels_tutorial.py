"""The tutorial (``docs/kernels.md``) runs: its ``python`` code blocks in order in one
namespace; the blocks fenced ``python rtl`` (the RTL and board backends) when the fast
Verilator backend can be built here."""

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "kernels.md"


def blocks():
    """``(tag, code)`` of every fenced python block of the tutorial, in order."""
    text = DOC.read_text()
    return [(m.group(1).strip(), m.group(2))
            for m in re.finditer(r"```python([^\n]*)\n(.*?)```", text, re.S)]


def _fast():
    from kernels.backends import fast_backend
    return fast_backend() is not None


def test_tutorial_has_blocks():
    tags = [t for t, _ in blocks()]
    assert tags.count("") >= 4 and tags.count("rtl") >= 2


def test_tutorial_refsim_blocks():
    ns = {}
    for tag, code in blocks():
        if tag == "":
            exec(compile(code, str(DOC), "exec"), ns)


@pytest.mark.long
@pytest.mark.skipif(not _fast(), reason="fast RTL backend (fastsim) not available")
def test_tutorial_rtl_blocks():
    ns = {}
    for tag, code in blocks():
        exec(compile(code, str(DOC), "exec"), ns)
