"""Custom slash commands from Markdown and MCP prompts/resources (issue 29) on both faces, in-process:
the LSP wire (toycoder/commands/list with sources, /help, expansion into the model's prompt, lists
that follow file changes without a restart, toycoder/mentions/complete, toycoder/resources/list,
`@server:uri`) and the ACP face (available_commands_update, the same expansions, image and resource
blocks)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from acp import image_block, resource_link_block, text_block
from acp.schema import EmbeddedResourceContentBlock, TextResourceContents
from acp_client import acp_face, new_session
from helpers import TOY_MCP_SERVER, GatedRg, write_config
from helpers import new_session as lsp_session
from rpc import Daemon, RpcError
from waiting import DEFAULT_TIMEOUT, wait_until_async

from toycoder_daemon.testing.fake_llm import FakeLLM

MCP = f"mcp_servers:\n  toy:\n    command: {sys.executable}\n    args: [{TOY_MCP_SERVER}]\n"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def _commands(workspace: Path, home: Path) -> None:
    own = workspace / ".toycoder" / "commands"
    (own / "git").mkdir(parents=True)
    (own / "review.md").write_text("---\ndescription: Review a file\nargument-hint: <file> [focus]\n---\n"
                                   "Review $1 for $2. All: $ARGUMENTS\n")
    (own / "git" / "commit.md").write_text("Write a commit message.\n")
    (own / "help.md").write_text("A custom help that the built-in hides.\n")
    user = home / ".config" / "toycoder" / "commands"
    user.mkdir(parents=True)
    (user / "review.md").write_text("The user's review (the workspace's wins).\n")
    (user / "standup.md").write_text("---\ndescription: Daily notes\n---\nSummarise yesterday: $ARGUMENTS\n")


def _user_text(llm: FakeLLM) -> object:
    return [m for m in llm.requests[-1]["body"]["messages"] if m["role"] == "user"][-1]["content"]


async def test_custom_commands_listed_expanded_and_reloaded_on_lsp(daemon: Daemon, llm: FakeLLM, workspace: Path,
                                                                   isolated_env: Path) -> None:
    _commands(workspace, isolated_env)
    listed = {c["name"]: c for c in (await daemon.call("toycoder/commands/list", {}))["commands"]}
    assert listed["review"]["source"] == "workspace" and listed["review"]["usage"] == "/review <file> [focus]"
    assert listed["review"]["help"] == "Review a file"
    assert listed["git:commit"]["source"] == "workspace"
    assert listed["standup"]["source"] == "user"
    assert listed["help"]["source"] == "builtin"  # the built-in wins
    sid = await lsp_session(daemon)
    help_text = (await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/help"}))["text"]
    assert "/review <file> [focus]" in help_text and "[workspace]" in help_text
    assert "warning: the built-in /help wins over the custom command in" in help_text

    llm.add({"text": "reviewed"})
    result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/review calc.py 'naming things'"})
    assert result["stopReason"] == "end_turn" and result["text"] == "reviewed"
    assert _user_text(llm) == "Review calc.py for naming things. All: calc.py 'naming things'"
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    users = [e["text"] for e in loaded["transcript"] if e["role"] == "user"]
    assert users[-1] == "/review calc.py 'naming things'"  # as typed

    (workspace / ".toycoder" / "commands" / "fresh.md").write_text("Brand new: $ARGUMENTS\n")
    names = {c["name"] for c in (await daemon.call("toycoder/commands/list", {}))["commands"]}
    assert "fresh" in names  # no restart
    llm.add({"text": "ok"})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/fresh idea"})
    assert _user_text(llm) == "Brand new: idea"
    # nothing runs from a command's text: "!rm" stays words in the prompt
    (workspace / ".toycoder" / "commands" / "danger.md").write_text("!`touch pwned` $ARGUMENTS\n")
    llm.add({"text": "ok"})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/danger now"})
    assert _user_text(llm) == "!`touch pwned` now" and not (workspace / "pwned").exists()


async def test_a_new_command_file_is_told_to_the_lsp_client_without_being_asked(daemon: Daemon, workspace: Path) -> None:
    def told() -> list[list[dict[str, object]]]:
        return [n["params"]["commands"] for n in daemon.notifications if n["method"] == "toycoder/commands/changed"]

    assert "fresh" not in {c["name"] for c in (await daemon.call("toycoder/commands/list", {}))["commands"]}
    folder = workspace / ".toycoder" / "commands"
    folder.mkdir(parents=True)
    (folder / "fresh.md").write_text("---\ndescription: Something new\n---\nBrand new: $ARGUMENTS\n")
    await daemon.wait_for(lambda: any(c["name"] == "fresh" for rows in told() for c in rows))
    rows = {c["name"]: c for c in told()[-1]}
    assert rows["fresh"] == {"name": "fresh", "usage": "/fresh", "help": "Something new", "aliases": [],
                             "source": "workspace"}
    assert "help" in rows and rows["help"]["source"] == "builtin"  # the whole list, not the change
    (folder / "fresh.md").unlink()
    await daemon.wait_for(lambda: "fresh" not in {c["name"] for c in told()[-1]})


async def test_mcp_prompts_resources_and_mentions_on_lsp(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    daemon = await start_daemon(extra=MCP)
    sid = await lsp_session(daemon)
    resources = (await daemon.call("toycoder/resources/list", {"sessionId": sid}))["resources"]
    assert resources == [{"server": "toy", "uri": "toy://notes/today", "name": "today", "mimeType": "text/plain"}]
    listed = {c["name"]: c for c in (await daemon.call("toycoder/commands/list", {"sessionId": sid}))["commands"]}
    assert listed["mcp:toy:review"]["source"] == "mcp:toy"
    assert listed["mcp:toy:review"]["usage"] == "/mcp:toy:review <path> [focus]"

    llm.add({"text": "ok"})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/mcp:toy:review src/app.py focus=speed"})
    assert _user_text(llm) == "Review src/app.py, looking for speed."
    llm.add({"text": "ok"})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/mcp:toy:review src/app.py style"})
    assert _user_text(llm) == "Review src/app.py, looking for style."
    with pytest.raises(RpcError) as e:
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "/mcp:toy:review"})
    assert e.value.code == -32602 and "missing path" in e.value.message

    llm.add({"text": "ok"})
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what is in @toy:toy://notes/today ?"})
    assert "MCP resource toy:toy://notes/today:\nbuy milk" in _user_text(llm)

    items = (await daemon.call("toycoder/mentions/complete", {"sessionId": sid, "prefix": "toy:"}))["items"]
    assert items == [{"label": "toy:toy://notes/today", "kind": "resource", "uri": "toy://notes/today"},
                     {"label": "toy:toy://notes/day/{day}", "kind": "resource", "uri": "toy://notes/day/{day}"}]
    llm.add({"text": "ok"})  # a template filled in reads the resource it names
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "and @toy:toy://notes/day/monday"})
    assert "MCP resource toy:toy://notes/day/monday:\nnotes of monday" in _user_text(llm)
    items = (await daemon.call("toycoder/mentions/complete", {"sessionId": sid, "prefix": "src/a"}))["items"]
    assert items[0] == {"label": "src/app.py", "kind": "file", "uri": (workspace / "src" / "app.py").as_uri()}


async def test_mention_completion_lists_files_and_folders_and_respects_ignore_rules(daemon: Daemon,
                                                                                     workspace: Path) -> None:
    (workspace / ".gitignore").write_text("build/\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "calc_gen.py").write_text("x\n")
    (workspace / "calc.py").write_text("x\n")
    items = (await daemon.call("toycoder/mentions/complete", {"prefix": "cal", "limit": 10}))["items"]
    assert [i["label"] for i in items] == ["calc.py"]
    items = (await daemon.call("toycoder/mentions/complete", {"prefix": "sr"}))["items"]
    assert items[0]["label"] == "src/" and items[0]["kind"] == "folder"
    labels = [i["label"] for i in (await daemon.call("toycoder/mentions/complete", {"prefix": ""}))["items"]]
    assert "build/calc_gen.py" not in labels and ".gitignore" in labels


async def test_a_second_daemon_answers_its_first_completion_from_the_kept_listing(
        start_daemon, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (workspace / ".gitignore").write_text("build/\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "calc_gen.py").write_text("x\n")
    (workspace / "calc.py").write_text("x\n")
    first = await start_daemon()
    await first.call("toycoder/mentions/complete", {"prefix": "cal"})  # the listing is under way
    kept = tmp_path / "data" / "files"  # conftest's TOYCODER_DATA_DIR
    await wait_until_async(lambda: kept.is_dir() and any(kept.iterdir()), DEFAULT_TIMEOUT, "the kept listing")
    assert await first.close() == 0
    gate = GatedRg(monkeypatch)
    second = await start_daemon()
    items = (await second.call("toycoder/mentions/complete", {"prefix": "cal"}))["items"]
    assert items == [{"label": "calc.py", "kind": "file", "uri": (workspace / "calc.py").as_uri()}]
    gate.open.set()


async def test_custom_commands_and_mcp_prompts_on_acp(tmp_path: Path, llm: FakeLLM, workspace: Path,
                                                      isolated_env: Path) -> None:
    _commands(workspace, isolated_env)
    config = write_config(tmp_path / "acp.yaml", llm, extra=MCP)
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate")
                              == "available_commands_update")
        announced = {c["name"]: c for c in editor.updates("available_commands_update")[-1]["availableCommands"]}
        assert announced["review"]["input"] == {"hint": "<file> [focus]"} and "git:commit" in announced
        llm.add({"text": "ok"})
        await conn.prompt(session_id=sid, prompt=[text_block("/review calc.py speed")])
        assert _user_text(llm) == "Review calc.py for speed. All: calc.py speed"
        llm.add({"text": "ok"})
        await conn.prompt(session_id=sid, prompt=[text_block("/mcp:toy:review calc.py")])
        assert _user_text(llm) == "Review calc.py, looking for bugs."
        # a new command file: announced again after the next prompt
        (workspace / ".toycoder" / "commands" / "later.md").write_text("Later: $ARGUMENTS\n")
        llm.add({"text": "ok"})
        await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        await editor.wait_for(lambda f: "later" in [c["name"] for c in f.get("params", {}).get("update", {})
                                                    .get("availableCommands", [])])
        assert any(c["name"] == "mcp:toy:review" for c in editor.updates("available_commands_update")[-1]
                   ["availableCommands"])


async def test_acp_image_and_resource_blocks_become_context(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        init = editor.frames[0]["result"]
        assert init["agentCapabilities"]["promptCapabilities"] == {"image": True,
                                                                   "embeddedContext": True}
        sid = await new_session(conn, workspace)
        app_uri = (workspace / "src" / "app.py").as_uri()
        embedded = EmbeddedResourceContentBlock(type="resource", resource=TextResourceContents(
            uri=app_uri, text="def add(a, b):\n    return a - b  # unsaved\n", mime_type="text/x-python"))
        llm.add({"text": "ok"})
        await conn.prompt(session_id=sid, prompt=[text_block("compare"), embedded, text_block("and"),
                                                  resource_link_block("README.md", (workspace / "README.md").as_uri())])
        content = _user_text(llm)
        assert isinstance(content, str) and content.startswith("compare src/app.py and @README.md")
        assert "Selected in src/app.py (lines 1-2):\n     1\tdef add(a, b):\n     2\t    return a - b  # unsaved" in content
        assert "Attached file README.md: lines 1-2 of 2" in content
        with pytest.raises(Exception) as e:  # the test config's model takes no images
            await conn.prompt(session_id=sid, prompt=[text_block("what?"), image_block(PNG, "image/png")])
        assert "does not take images" in str(e.value)
