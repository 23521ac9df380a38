"""llama_tools.run: an exit after the asked lines counts, a clean exit short of them is run again.

llama.cpp's tools log from a worker thread nothing joins at exit, so a busy machine loses a run's last
lines now and then (CI lost llama-fit-params' KV line once); the tools here are small scripts that print
the asked line from a given run on, so each case is deterministic.
"""
from __future__ import annotations

import stat

import pytest

from fitprobe.llama_tools import ToolError, run


def tool(tmp_path, *, prints_from: int, exit_code: int = 0):
    """A tool that counts its runs and prints `asked` from run number `prints_from` on."""
    script = tmp_path / "tool"
    script.write_text(f"""#!/bin/sh
n=$(( $(cat {tmp_path}/runs 2>/dev/null || echo 0) + 1 )); echo $n > {tmp_path}/runs
echo "loading" >&2
[ $n -ge {prints_from} ] && echo "asked" >&2
exit {exit_code}
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def asked(out, err):
    return "asked" in err


def runs(tmp_path):
    return int((tmp_path / "runs").read_text())


def test_a_run_cut_short_is_run_again(tmp_path):
    _, err = run([tool(tmp_path, prints_from=3)], timeout_s=10, done=asked)
    assert "asked" in err and runs(tmp_path) == 3


def test_a_tool_that_never_prints_what_was_asked_fails_in_one_line(tmp_path):
    with pytest.raises(ToolError, match=r"^tool exited 0 without printing what was asked, 3 times$"):
        run([tool(tmp_path, prints_from=4)], timeout_s=10, done=asked)
    assert runs(tmp_path) == 3


def test_an_abort_after_the_asked_lines_counts_and_one_before_them_fails_at_once(tmp_path):
    _, err = run([tool(tmp_path, prints_from=1, exit_code=134)], timeout_s=10, done=asked)
    assert "asked" in err and runs(tmp_path) == 1
    early = tmp_path / "early"
    early.mkdir()
    with pytest.raises(ToolError, match=r"^tool exited 134: loading$"):
        run([tool(early, prints_from=9, exit_code=134)], timeout_s=10, done=asked)
    assert runs(early) == 1


def test_without_a_predicate_a_clean_exit_is_complete(tmp_path):
    run([tool(tmp_path, prints_from=9)], timeout_s=10)
    assert runs(tmp_path) == 1
