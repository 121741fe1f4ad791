"""`toycoder`, the Rich + prompt_toolkit terminal client: driven in a real pseudo-terminal (pexpect)
against the real daemon and the scripted model, and as a one-shot command in a subprocess. What it
imports and ships: unit/cli/test_cli_package.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from helpers import write_config
from waiting import scaled, wait_until

from toycoder_daemon.testing.dialects import Dialect
from toycoder_daemon.testing.fake_llm import FakeLLM

TOYCODER = [sys.executable, "-m", "toycoder_daemon.cli"]
ANSI = re.compile(r"\x1b\[[0-9;?<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()#][0-9A-Za-z]?|\r")


class Term:
    """A pseudo-terminal of fixed size running toycoder; `expect` matches the text without escapes."""

    def __init__(self, args: list[str], cwd: Path):
        env = {**os.environ, "TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1", "COLUMNS": "120",
               "LINES": "40"}
        env.pop("NO_COLOR", None)
        self.child = pexpect.spawn(TOYCODER[0], TOYCODER[1:] + args, cwd=str(cwd), env=env, dimensions=(40, 120),
                                   encoding="utf-8", codec_errors="replace", timeout=15)
        self.raw = ""
        self.pos = 0  # expect() searches the text after the previous match

    def _read(self, wait: float) -> None:
        try:
            self.raw += self.child.read_nonblocking(1 << 16, timeout=wait)
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            time.sleep(wait)

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw)

    def expect(self, pattern: str, timeout: float = 15) -> re.Match:
        regex = re.compile(pattern)

        def found() -> re.Match | None:
            m = regex.search(self.text, self.pos)
            if m is None:
                self._read(0.05)  # the poll's pause is the wait for more output
            return m

        m = wait_until(found, timeout, f"{pattern!r} on the terminal", interval=0,
                       describe=lambda: f"it shows:\n{self.text[-3000:]}")
        self.pos = m.end()
        return m

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def prompt(self, text: str) -> None:
        """Type a prompt at the idle prompt (waiting for it first) and press Enter."""
        self.expect("❯ ")
        self.send(text + "\r")

    def exit_status(self, timeout: float = 15) -> int | None:
        def exited() -> bool:
            self._read(0.05)
            return not self.child.isalive()

        wait_until(exited, timeout, "toycoder to exit", interval=0, describe=lambda: self.text[-2000:])
        self.child.close()
        return self.child.exitstatus

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


@pytest.fixture
def term(tmp_path: Path, llm: FakeLLM, workspace: Path):
    terms: list[Term] = []
    cfg = write_config(tmp_path / "c.yaml", llm)

    def start(*args: str) -> Term:
        t = Term(["--config", str(cfg), *args], workspace)
        terms.append(t)
        t.expect("Ctrl-D or /quit exits")
        return t

    yield start
    for t in terms:
        t.close()


def toycoder(args: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(TOYCODER + args, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          cwd=str(cwd), **kw)


# ---- in a terminal ---------------------------------------------------------------------------------

def test_streams_markdown_while_it_arrives_then_shows_usage(term, llm: FakeLLM) -> None:
    pieces = ["# Plan\n\n", "First **bold** step ", "and more ", "words still ", "arriving here.\n\n",
              "- item one\n", "- item two\n", "LAST-PIECE"]
    llm.add({"text": pieces, "chunk_delay": 0.25, "usage": {"prompt_tokens": 1234, "completion_tokens": 56}})
    t = term()
    t.prompt("hello")
    t.expect("First")
    assert "LAST-PIECE" not in t.text  # shown while the reply still streams
    t.expect("item two")
    t.expect("LAST-PIECE")
    assert "# Plan" not in t.text and "**" not in t.text  # rendered as Markdown, not shown raw
    assert "•" in t.text  # the list got bullets
    t.expect(r"1,234 tokens in · 56 out")
    t.expect("❯ ")
    t.send("\x04")  # Ctrl-D exits
    assert t.exit_status() == 0


def test_permission_prompt_shows_the_diff_n_denies_y_writes_and_ask_user_takes_a_number(
        term, llm: FakeLLM, workspace: Path) -> None:
    edit = {"name": "edit_file", "arguments": {"path": "README.md", "old_string": "# Demo", "new_string": "# Changed"}}
    llm.add({"text": "Changing it.", "tool_calls": [edit]}, {"text": "Left alone."},
            {"text": "Again.", "tool_calls": [edit]}, {"text": "Changed now."},
            {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which colour?", "options": ["red", "blue"]}}]},
            {"text": "Blue it is."})
    t = term()
    t.prompt("change the title")
    t.expect("edit_file README.md")
    t.expect("-# Demo")
    t.expect(r"\+# Changed")
    t.expect(r"Allow\? y yes, once · a always \(this session\) · n no")
    t.send("n")
    t.expect("→ denied")
    t.expect(r"⊘ edit_file README\.md +denied")
    t.expect("Left alone.")
    t.expect("tokens in")
    assert (workspace / "README.md").read_text() == "# Demo\nA tiny project.\n"

    t.prompt("change it after all")
    t.expect(r"\+# Changed")
    t.expect(r"Allow\?")
    t.send("y")
    t.expect("→ allowed once")
    t.expect(r"✓ edit_file README\.md +ok")
    t.expect("Changed now.")
    assert (workspace / "README.md").read_text() == "# Changed\nA tiny project.\n"

    t.prompt("pick a colour")
    t.expect(r"\? Which colour\?\s+1\. red\s+2\. blue")
    t.expect("answer")
    t.send("2\r")
    t.expect("→ blue")
    t.expect("Blue it is.")
    assert llm.requests[-1]["body"]["messages"][-1]["content"] == "The user answered: blue"


def test_ctrl_c_cancels_a_long_turn_the_prompt_comes_back_and_twice_at_idle_exits(term, llm: FakeLLM) -> None:
    llm.add({"text": "word " * 60, "chunk_size": 5, "chunk_delay": 0.2},  # 12 s if nobody stops it
            {"text": "Still here."})
    t = term()
    t.prompt("go on and on")
    t.expect("word word")
    started = time.monotonic()
    t.child.sendintr()
    t.expect("cancelled")
    assert time.monotonic() - started < scaled(5)
    t.prompt("are you there?")
    t.expect("Still here.")
    # the cancelled turn left a usable conversation: the model got the partial reply and the new prompt
    messages = llm.requests[-1]["body"]["messages"]
    assert messages[-1]["content"] == "are you there?" and messages[-2]["role"] == "assistant"
    t.expect("tokens in")
    t.expect("❯ ")
    t.child.sendintr()
    t.expect("press Ctrl-C again")
    t.child.sendintr()
    assert t.exit_status() == 0


def test_sessions_completion_and_resume_with_history(term, llm: FakeLLM, tmp_path: Path) -> None:
    llm.add({"text": "Noted: **pineapple**."}, {"text": "It was pineapple."})
    t = term()
    t.prompt("remember the word pineapple")
    t.expect("Noted: ")
    t.expect("tokens in")
    t.expect("❯ ")
    t.send("/sess")
    t.expect("List the sessions of this workspace")  # the completion menu, from toycoder/commands/list
    t.send("\t")  # completes to /sessions
    t.expect(r"ions\n+ */sessions ")  # the rest of the word typed in, then the menu redrawn with it selected
    t.send("\r")
    m = t.expect(r"\* ([0-9a-f]{12}) .* remember the word pineapple")
    session_id = m.group(1)
    t.prompt("/quit")
    t.expect("bye")
    assert t.exit_status() == 0
    history = (tmp_path / "data" / "history").read_text()
    assert "remember the word pineapple" in history and "/sessions" in history

    t = term("--session", session_id[:6])  # a unique prefix is enough
    t.pos = 0  # the history comes before the banner's last line
    t.expect(f"session {session_id[:8]} · remember the word pineapple")
    t.expect("❯ remember the word pineapple")
    t.expect("Noted: ")
    t.prompt("what was the word?")
    t.expect("It was pineapple.")
    contents = [m.get("content") for m in llm.requests[-1]["body"]["messages"]]
    assert contents[-3:] == ["remember the word pineapple", "Noted: **pineapple**.", "what was the word?"]
    t.expect("❯ ")
    t.send("\x04")
    assert t.exit_status() == 0


def test_new_command_switches_to_the_new_session(term, llm: FakeLLM) -> None:
    llm.add({"text": "First."}, {"text": "Fresh start."})
    t = term()
    t.prompt("one")
    t.expect("First.")
    t.prompt("/new second chat")
    t.expect(r"new session ([0-9a-f]{12}): second chat")
    t.expect("session [0-9a-f]{8} · second chat · 0 messages")
    t.prompt("two")
    t.expect("Fresh start.")
    assert [m["role"] for m in llm.requests[-1]["body"]["messages"]] == ["system", "user"]  # not the old history


# ---- one-shot ----------------------------------------------------------------------------------------

def test_one_shot_against_a_server_without_tools_says_so_on_stderr(tmp_path: Path, llm: FakeLLM,
                                                                 workspace: Path) -> None:
    """The daemon tells it as the session opens (window/showMessage, a warning): -p prints it on stderr, and
    stdout is the answer alone."""
    llm.dialect = Dialect(server="llama.cpp", n_ctx=32768, supports_tools=False)
    llm.add({"text": "I cannot look."})
    p = toycoder(["--config", str(write_config(tmp_path / "c.yaml", llm)), "-p", "read src/app.py"], workspace)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "I cannot look.\n"
    assert "toycoder-daemon: [tools ignored:" in p.stderr and "--chat-template-file" in p.stderr
    assert "tools" not in llm.requests[-1]["body"]


def test_one_shot_prints_the_final_answer_and_allow_writes(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"text": "Writing.", "tool_calls": [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "hi\n"}}]},
            {"text": "Wrote NOTES.md."})
    p = toycoder(["--config", str(cfg), "-p", "write notes", "--approve", "allow", "--model", "other-model"], workspace)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "Wrote NOTES.md.\n"
    assert p.stderr == ""  # not --verbose: nothing streams
    assert (workspace / "NOTES.md").read_text() == "hi\n"
    assert llm.requests[0]["body"]["model"] == "other-model"  # --model went through toycoder/models/set


def test_one_shot_denial_only_turn_exits_3_and_verbose_streams_to_stderr(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"text": "Writing.", "tool_calls": [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "hi\n"}}]},
            {"text": "You said no."})
    p = toycoder(["--config", str(cfg), "-p", "write notes", "--approve", "deny", "--verbose"], workspace)
    assert p.returncode == 3, p.stderr
    assert p.stdout == "You said no.\n"
    assert "Writing." in p.stderr and "+hi" in p.stderr and "→ denied (--approve deny)" in p.stderr
    assert "every tool call of this turn was denied" in p.stderr
    assert not (workspace / "NOTES.md").exists()


def test_one_shot_never_trusts_the_workspace_unless_told(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm, extra="hooks_workspace_sandbox: false\n")
    (workspace / ".toycoder").mkdir()
    (workspace / ".toycoder" / "settings.yaml").write_text(
        "hooks:\n  UserPromptSubmit:\n    - hooks: [{type: command, command: 'echo ran >> hook.log'}]\n")
    llm.add({"text": "One."}, {"text": "Two."})
    p = toycoder(["--config", str(cfg), "-p", "hi"], workspace)
    assert p.returncode == 0, p.stderr
    assert not (workspace / "hook.log").exists() and "--trust-workspace" in p.stderr
    p = toycoder(["--config", str(cfg), "-p", "hi", "--trust-workspace"], workspace)
    assert p.returncode == 0, p.stderr
    assert (workspace / "hook.log").read_text() == "ran\n" and p.stdout == "Two.\n"


def test_one_shot_json_lines(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"text": "Looking.", "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
            {"text": "A tiny project."})
    p = toycoder(["--config", str(cfg), "-p", "what is this?", "--json"], workspace)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    updates, result = lines[:-1], lines[-1]
    assert all(u["sessionId"] and u["turnId"] == result["turnId"] for u in updates)
    kinds = [u["update"]["kind"] for u in updates]
    assert kinds.index("tool_call") < kinds.index("tool_result") and "usage" in kinds
    assert "".join(u["update"]["text"] for u in updates if u["update"]["kind"] == "text_delta") == "Looking.A tiny project."
    assert result["stopReason"] == "end_turn" and result["text"] == "A tiny project."


def test_one_shot_errors_exit_1(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"status": 401, "error": "bad key"}, {"status": 401, "error": "bad key"})
    p = toycoder(["--config", str(cfg), "-p", "hello"], workspace)
    assert p.returncode == 1
    assert p.stdout == ""
    assert "provider 'openai' failed: authentication failed" in p.stderr
    p = toycoder(["--config", str(cfg), "-p", "hello", "--json"], workspace)
    assert p.returncode == 1
    assert json.loads(p.stdout.splitlines()[-1])["error"]["code"] == -32012
    p = toycoder(["--config", str(cfg), "-p", "hello", "--session", "nosuchsession"], workspace)
    assert p.returncode == 1 and "no session 'nosuchsession'" in p.stderr


def test_without_a_key_it_says_how_to_configure_a_provider(workspace: Path) -> None:
    p = toycoder([], workspace)
    assert p.returncode == 1
    assert "OPENAI_API_KEY" in p.stderr and "OPENAI_BASE_URL=http://127.0.0.1:11434/v1" in p.stderr
    assert "Ollama" in p.stderr and "vLLM" in p.stderr and "llama.cpp" in p.stderr
    assert "toycoder --demo" in p.stderr


# ---- packaging and layering --------------------------------------------------------------------------


# ---- long diffs are paged ------------------------------------------------------------------------------

def big_write(n: int = 120) -> dict:
    content = "".join(f"line {i:03d}\n" for i in range(1, n + 1))
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": content}}]}


def test_a_diff_longer_than_the_screen_is_paged_in_less_before_the_question(
        term, llm: FakeLLM, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAGER", raising=False)
    monkeypatch.delenv("LESS", raising=False)
    llm.add(big_write(), {"text": "Big file written."})
    t = term()
    t.prompt("write a big file")
    t.expect(r"\+line 001")
    t.expect(r"\+line 030")  # the first screen of 40 rows...
    assert "+line 120" not in t.text and "Allow?" not in t.text  # ...and the pager waits on it
    t.send("G")  # scroll to the end
    t.expect(r"\+line 120")
    t.expect(r"\(END\)")
    assert "Allow?" not in t.text
    t.send("q")
    t.expect(r"write_file big\.txt: \d+ lines shown in the pager")
    t.expect(r"Allow\? y yes, once")
    t.send("y")
    t.expect("→ allowed once")
    t.expect("Big file written.")
    assert (workspace / "big.txt").read_text().endswith("line 120\n")


def test_pager_honours_PAGER_and_a_short_diff_stays_inline(
        term, llm: FakeLLM, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("PAGER", f"cat > {paged}")
    edit = {"name": "edit_file", "arguments": {"path": "README.md", "old_string": "# Demo", "new_string": "# Short"}}
    llm.add({"tool_calls": [edit]}, {"text": "Not then."}, big_write(), {"text": "Big file written."})
    t = term()
    t.prompt("a small change")
    t.expect(r"\+# Short")
    t.expect(r"Allow\?")
    assert not paged.exists()  # a short diff prints inline, as before
    t.send("n")
    t.expect("Not then.")
    t.prompt("now a big one")
    t.expect(r"write_file big\.txt: \d+ lines shown in the pager")
    t.expect(r"Allow\?")
    shown = ANSI.sub("", paged.read_text())
    assert "+line 001" in shown and "+line 120" in shown and "more lines" not in shown
    assert "+line 060" not in t.text  # the whole diff went to the pager, not the screen
    t.send("n")
    t.expect("→ denied")
    assert not (workspace / "big.txt").exists()


# ---- scripts (issue 31) ----------------------------------------------------------------------------------

def test_one_shot_on_a_terminal_prints_a_header_and_tool_lines_and_quiet_turns_them_off(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    script = ({"text": "Looking.", "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
              {"text": "A tiny project."})
    llm.add(*script)
    t = Term(["--config", str(cfg), "-p", "what is this?"], workspace)  # stderr (and stdout) a terminal
    try:
        t.expect(r"toycoder \S+ · openai:fake-model · \S+ · session \w{8} · approve ask")
        t.expect(r"✓ read_file README.md  ok")
        t.expect("A tiny project.")
        assert t.exit_status() == 0
        assert "Looking." not in t.text  # the reply itself is the answer, not streamed twice
    finally:
        t.close()
    llm.add(*script)
    q = Term(["--config", str(cfg), "-p", "what is this?", "--quiet"], workspace)
    try:
        q.expect("A tiny project.")
        assert q.exit_status() == 0
        assert "session" not in q.text and "read_file" not in q.text
    finally:
        q.close()


def test_one_shot_without_anyone_to_ask_denies_with_one_line_and_exit_5(
        tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    cfg = write_config(tmp_path / "c.yaml", llm)
    llm.add({"text": "Writing.", "tool_calls": [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "hi\n"}}]},
            {"text": "Done."})
    p = toycoder(["--config", str(cfg), "-p", "write notes"], workspace)  # stdin is /dev/null: nobody to ask
    assert p.returncode == 5, p.stderr
    assert p.stdout == "Done.\n"
    assert p.stderr.count("\n") == 1 and "nobody could be asked" in p.stderr and "--approve allow" in p.stderr
    assert not (workspace / "NOTES.md").exists()


def hanging_daemon(marker: str) -> str:
    """A daemon command that never answers initialize (as a slow start looks)."""
    return f"{sys.executable} -c 'import sys, time; time.sleep(120)' {marker}"


def hanging_daemons(marker: str) -> list[int]:
    """That daemon's processes: its argv, unquoted (the client's own command line quotes it)."""
    from helpers import processes_with

    argv = f"time.sleep(120) {marker}"  # the marker is this test's own (unique_marker)
    return processes_with(argv)


def test_ctrl_c_while_the_daemon_starts_exits_130_with_one_line_and_no_process_left(workspace: Path) -> None:
    from helpers import unique_marker

    marker = unique_marker()
    t = Term(["--daemon", hanging_daemon(marker)], workspace)  # no key here: --daemon is never refused for it
    try:
        t.expect("starting toycoder-daemon")
        wait_until(lambda: hanging_daemons(marker), 15, "the daemon to start")
        t.send("\x03")
        assert t.exit_status() == 130
        assert "toycoder: cancelled" in t.text and "Traceback" not in t.text
        assert hanging_daemons(marker) == []
    finally:
        t.close()


def test_ctrl_c_in_a_one_shot_at_any_moment_exits_130_and_no_process_left(workspace: Path) -> None:
    import signal

    from helpers import unique_marker

    marker = unique_marker()
    p = subprocess.Popen(TOYCODER + ["--daemon", hanging_daemon(marker), "-p", "hi"], cwd=str(workspace),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: hanging_daemons(marker), 15, "the daemon to start")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=scaled(15))
        assert p.returncode == 130, err
        assert err == "toycoder: cancelled\n" and out == ""
        assert hanging_daemons(marker) == []
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_daemon_command_runs_without_a_local_key(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    """The key and config live with that daemon (as over `ssh -T host toycoder-daemon`, docs/remote.md):
    an ssh-like wrapper gives it another HOME, its user config and key, and its own data; the client has
    none and asks for none."""
    remote = tmp_path / "remote-home"
    (remote / ".config" / "toycoder").mkdir(parents=True)
    write_config(remote / ".config" / "toycoder" / "config.yaml", llm, keys=["remote-key"])
    llm.add({"text": "Hello from there."})
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TOYCODER_CONFIG")}
    daemon = (f"env -u TOYCODER_DATA_DIR HOME={remote} XDG_CONFIG_HOME={remote}/.config "
              f"XDG_DATA_HOME={remote}/.local/share {sys.executable} -m toycoder_daemon")
    p = toycoder(["--daemon", daemon, "-p", "hi"], workspace, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "Hello from there.\n"
    assert llm.requests[-1]["headers"]["authorization"] == "Bearer remote-key"
    assert list((remote / ".local" / "share" / "toycoder").rglob("*.jsonl"))  # the session is kept over there
