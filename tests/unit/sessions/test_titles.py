"""Session titles: the first prompt's line (fences skipped) until the fast model writes one after
the first turn; a bad or failed model title falls back; /title wins. Both faces push the change."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block
from acp_client import acp_face, new_session
from helpers import write_config
from inproc_app import InProc, eventually

from toycoder_daemon.sessions.titles import clean_title, prompt_title
from toycoder_daemon.testing.fake_llm import FakeLLM

TITLES = {"agent": {"max_steps": 16, "max_retries": 0, "retry_interval": 0.05, "auto_title": True}}


def test_prompt_title_skips_fences_and_cuts() -> None:
    assert prompt_title("```python\ndef f(): pass\n```\n\n  why   does this fail?\nmore") == "why does this fail?"
    assert prompt_title("```\nonly code\n```") == ""
    long = prompt_title("word " * 30)
    assert len(long) == 60 and long.endswith("…")


@pytest.mark.parametrize(("reply", "title"), [
    ("Fixing the add function", "Fixing the add function"),
    ('"Title: Sorting users by age."', "Sorting users by age"),
    ("x" * 61, None),
    ("Fix `add()` in calc.py", None),
    ("def add(a, b)", None),
    ("two\nlines", None),
    ("", None),
])
def test_clean_title_takes_plain_short_text_only(reply: str, title: str | None) -> None:
    assert clean_title(reply) == title


async def test_the_fast_model_titles_the_session_after_the_first_turn(inproc) -> None:
    p: InProc = inproc(TITLES)
    shown: list[str] = []
    p.app.on_session_info = lambda summary, turn_id: shown.append(summary.title)
    p.script.add({"text": "Use a + b."}, {"text": "Adding two numbers"})
    sid = p.new_session()
    await p.prompt(sid, "```py\nadd(1, 2)\n```\nhow do I add?")
    await eventually(lambda: p.app.session(sid).title == "Adding two numbers", "the model's title")
    assert shown == ["Adding two numbers"]  # the prompt's line is not news to the client
    meta, _, _ = p.app.store.read(sid)
    assert meta["titleBy"] == "model"
    assert [c["model"] for c in p.script.calls] == ["fake-model", "fake-fast"]
    assert "how do I add?" in p.script.calls[1]["messages"][-1]["content"]
    p.script.add({"text": "Again."})
    await p.prompt(sid, "and now?")  # only the first turn is titled
    assert [c["model"] for c in p.script.calls] == ["fake-model", "fake-fast", "fake-model"]
    assert p.app.session(sid).title == "Adding two numbers"


async def test_a_bad_model_title_keeps_the_prompts_line_and_title_wins(inproc) -> None:
    p: InProc = inproc(TITLES)
    p.script.add({"text": "ok"}, {"text": "```\nprint('a title')\n```"})
    sid = p.new_session()
    await p.prompt(sid, "print a title")
    await eventually(lambda: len(p.script.calls) == 2, "the title request")
    await p.prompt(sid, "/usage")  # whenever the title task ends, its bad title is never set
    assert (p.app.session(sid).title, p.app.session(sid).title_by) == ("print a title", "prompt")
    await p.prompt(sid, "/title Mine")
    assert p.app.session(sid).title == "Mine"
    other = p.new_session()
    await p.prompt(other, "/title Named first")
    p.script.add({"text": "ok"})
    await p.prompt(other, "hello")
    assert p.app.session(other).title == "Named first" and len(p.script.calls) == 3  # no title request


async def test_both_faces_push_the_title(start_daemon, tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    d = await start_daemon()
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "/title Named here"})
    infos = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "session_info"]
    assert [u["session"]["title"] for u in infos] == ["Named here"]

    config = write_config(tmp_path / "acp.yaml", llm)
    config.write_text(config.read_text().replace("auto_title: false", "auto_title: true"))
    llm.add({"text": "Sure."}, {"text": "Greeting the assistant"})
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, _):
        asid = await new_session(conn, workspace)
        await conn.prompt(session_id=asid, prompt=[text_block("hello there")])
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("title") == "Greeting the assistant")
        titles = [u["title"] for u in editor.updates("session_info_update")]
        assert titles == ["Greeting the assistant"]
