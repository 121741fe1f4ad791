"""A process's keys are blanked in its initial environment block (/proc/<pid>/environ), which a
same-uid process (a root daemon's sandboxed command) can read; the process itself keeps them. The real
daemon doing it: e2e/test_environ_scrub_e2e.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import proc_dir

from toycoder_daemon.core.util import environ_scrub, secrets

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the environment block is Linux's")

CHILD = """
import json, os, sys
from toycoder_daemon.core.util import environ_scrub, secrets
secrets.register(["held-by-value-0123"])
blanked = environ_scrub.scrub()
print(json.dumps({"blanked": blanked, "key": os.environ.get("FAKE_API_KEY"), "plain": os.environ.get("PLAIN_VAR")}), flush=True)
sys.stdin.read()
"""


def test_secret_values_are_gone_from_proc_environ_and_kept_in_os_environ() -> None:
    env = {**os.environ, "FAKE_API_KEY": "sk-fake-by-name-987", "SOME_URL": "held-by-value-0123",
           "PLAIN_VAR": "plain-value"}
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None and child.stdin is not None
        seen = json.loads(child.stdout.readline())
        block = (Path(proc_dir(child.pid)) / "environ").read_bytes()  # read from outside, as a command would
        assert seen["blanked"] >= 2
        assert seen["key"] == "sk-fake-by-name-987" and seen["plain"] == "plain-value"  # the process keeps them
        assert b"sk-fake-by-name-987" not in block and b"held-by-value-0123" not in block
        assert b"PLAIN_VAR=plain-value\0" in block and b"FAKE_API_KEY=\0" in block
        child.stdin.close()
        assert child.wait(30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_secret_spans_cover_values_by_name_and_by_registered_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_values", {"value-of-a-key"})
    block = b"A=1\0MY_TOKEN=abc\0URL=value-of-a-key\0EMPTY_SECRET=\0B==x\0"
    spans = environ_scrub.secret_spans(block)
    assert [block[o:o + n] for o, n in spans] == [b"abc", b"value-of-a-key"]
