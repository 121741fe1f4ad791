"""CodeCompanion.nvim, a real ACP client, against the daemon's ACP face (issue 33's end-to-end run).

CodeCompanion and plenary (its dependency) are not installed: a git snapshot of each is checked out
into the test's tmp dir at test time (`git archive HEAD`), from the bare repositories named by
TOYCODER_CODECOMPANION_GIT and TOYCODER_PLENARY_GIT (.ci/run sets them when the machine has them);
without them the test is skipped, never counted as passing.

Headless Neovim (pynvim) runs CodeCompanion with README.md's adapter config, its command replaced
by `python -P -m toycoder_daemon --acp` on the scripted model server. The chat is driven through
CodeCompanion's own entry points: text typed into the chat buffer and `Chat:submit()` (what <CR>
does), `/resume` run as its completion item is (`slash_commands.run`, what CompleteDone calls), and
the model picker through the `ga` keymap. Only vim.notify and vim.ui.select are replaced (to record
messages and answer the pickers), and `render.restore_session` is wrapped to record the updates
CodeCompanion collected from `session/load` before it renders them.

What CodeCompanion does not do (this snapshot): its `restore_session` renders only
`user_message_chunk` and `agent_message_chunk`; the compaction divider, an `agent_thought_chunk`
on our face (docs/protocol.md), reaches it but is not drawn in the buffer. The test checks the
divider arrived in the replay, between the earlier turns and the later ones.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, write_config
from nvim_process import PICK, Nvim, checkout
from waiting import DEFAULT_TIMEOUT, wait_until

from toycoder_daemon.testing.fake_llm import FakeLLM

CODECOMPANION_GIT = os.environ.get("TOYCODER_CODECOMPANION_GIT", "")
PLENARY_GIT = os.environ.get("TOYCODER_PLENARY_GIT", "")
DIVIDER = "[earlier turns summarised for the model]"
MODEL_VALUES = """
local models = T.chats[...].acp_connection:get_models()
return vim.tbl_map(function(m) return m.modelId end, models and models.availableModels or {})
"""

pytestmark = pytest.mark.skipif(
    not (CODECOMPANION_GIT and PLENARY_GIT),
    reason="TOYCODER_CODECOMPANION_GIT and TOYCODER_PLENARY_GIT (bare git repositories of CodeCompanion.nvim "
           "and plenary.nvim) are not set")

# Test-side harness: records vim.notify, answers vim.ui.select from a queue (by substring of the shown
# item), records what session/load replayed, and types into / submits CodeCompanion's chat buffer.
HARNESS = r"""
local T = { notes = {}, selects = {}, answers = {}, restored = {}, chats = {} }
_G.T = T
vim.notify = function(msg, level)
  table.insert(T.notes, { msg = tostring(msg), level = level or vim.log.levels.INFO })
end
vim.ui.select = function(items, opts, cb)
  local shown = {}
  for _, it in ipairs(items) do table.insert(shown, opts.format_item and opts.format_item(it) or tostring(it)) end
  table.insert(T.selects, { items = shown, prompt = opts.prompt })
  local a = table.remove(T.answers, 1)
  T.pick(a, items, shown, cb)
end
local render = require("codecompanion.interactions.chat.acp.render")
local restore = render.restore_session
render.restore_session = function(chat, updates)
  T.restored = vim.deepcopy(updates)
  return restore(chat, updates)
end
function T.open()
  table.insert(T.chats, require("codecompanion").chat())
  return #T.chats
end
function T.session(i)
  local c = T.chats[i].acp_connection
  return c and c:is_connected() and c.session_id or nil
end
function T.text(i)
  return table.concat(vim.api.nvim_buf_get_lines(T.chats[i].bufnr, 0, -1, false), "\n")
end
function T.busy(i) return T.chats[i].current_request ~= nil end
-- what a person does: type the prompt under the last user header, then send it (<CR>'s Chat:submit)
function T.send(i, text)
  local chat = T.chats[i]
  local n = vim.api.nvim_buf_line_count(chat.bufnr)
  vim.api.nvim_buf_set_lines(chat.bufnr, n, n, false, { text })
  chat:submit()
end
-- the /resume item of the completion menu, run as CompleteDone runs it
function T.slash(i, name)
  vim.api.nvim_set_current_buf(T.chats[i].bufnr)
  for _, item in ipairs(require("codecompanion.providers.completion").slash_commands()) do
    if item.label == "/" .. name then
      return require("codecompanion.interactions.chat.slash_commands").run(item, T.chats[i])
    end
  end
  error("no slash command /" .. name)
end
function T.model(i)
  local models = T.chats[i].acp_connection:get_models()
  return models and models.currentModelId
end
""" + PICK

README_COMMAND = '{ "toycoder-daemon", "--acp" }'


def readme_adapters() -> str:
    """README.md's CodeCompanion config (the `adapters = {...},` block after its heading line), with
    the daemon's command given by the test: the documented config is the one that runs."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("CodeCompanion.nvim (an ACP adapter"):].split("\n\n")[1]
    assert block.lstrip().startswith("adapters = {") and README_COMMAND in block, block
    return block.replace(README_COMMAND, "cmd")


def setup_lua() -> str:
    return ("local cmd = ...\nrequire('codecompanion').setup({\n" + readme_adapters() +
            "\n  interactions = { chat = { adapter = 'toycoder' } },\n  opts = { log_level = 'DEBUG' },\n})\n")


class CodeCompanion(Nvim):
    def __init__(self, rtp: list[Path], llm: FakeLLM, log: Path, state: Path):
        super().__init__(rtp, watchdog_seconds=150)
        self.llm = llm
        self.log = log
        self.state = state

    def text(self, chat: int) -> str:
        return self.lua("return T.text(...)", chat)

    def notes(self) -> list[str]:
        return [n["msg"] for n in self.lua("return T.notes")]

    def describe(self) -> str:
        daemon = self.log.read_text()[-3000:] if self.log.exists() else "(no daemon log)"
        cc = next(iter(self.state.rglob("codecompanion.log")), None)
        cc_log = cc.read_text()[-3000:] if cc else "(no CodeCompanion log)"
        chats = "\n".join(f"--- chat {i}:\n{self.text(i)}" for i in range(1, self.lua("return #T.chats") + 1))
        return f"{chats}\n--- notes: {self.notes()}\n--- daemon log:\n{daemon}\n--- CodeCompanion log:\n{cc_log}"

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        return wait_until(predicate, timeout, what, describe=self.describe)

    def open_chat(self) -> int:
        """A new chat; waits for its ACP session (CodeCompanion connects as the chat opens)."""
        chat = self.lua("return T.open()")
        self.wait(lambda: self.lua("return T.session(...)", chat), f"chat {chat}'s ACP session", 30)
        self.daemons()
        return chat

    def prompt(self, chat: int, text: str, answer: str) -> str:
        self.lua("T.send(...)", chat, text)
        self.wait(lambda: not self.lua("return T.busy(...)", chat) and answer in self.text(chat),
                  f"{answer!r} in chat {chat}", 30)
        return self.text(chat)

    def answer(self, *choices: str) -> None:
        self.lua("for _, a in ipairs(...) do table.insert(T.answers, a) end", list(choices))


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """The scripted model server, which also serves `fake-large` (its /v1/models lists it): a model
    outside the config's roles that the picker offers once the daemon has asked the server."""
    with FakeLLM(model="fake-large") as server:
        yield server


@pytest.fixture
def codecompanion(tmp_path: Path, workspace: Path, llm: FakeLLM) -> Iterator[Callable[..., CodeCompanion]]:
    started: list[CodeCompanion] = []

    def start(extra: str = "") -> CodeCompanion:
        cc = checkout(CODECOMPANION_GIT, tmp_path / "codecompanion.nvim")
        plenary = checkout(PLENARY_GIT, tmp_path / "plenary.nvim")
        cfg = write_config(tmp_path / "cc-config.yaml", llm, extra=extra)
        log = tmp_path / "daemon.log"
        ed = CodeCompanion([plenary, cc], llm, log, Path(os.environ["XDG_STATE_HOME"]))
        started.append(ed)
        ed.nv.command(f"cd {workspace}")
        ed.lua(setup_lua(), [sys.executable, "-P", "-m", "toycoder_daemon", "--acp", "--config", str(cfg),
                             "--log-file", str(log)])
        ed.lua(HARNESS)
        return ed

    yield start

    for ed in started:
        assert not ed.quit(), "the daemon outlived Neovim"


def test_resume_after_compaction_shows_the_earlier_turns_and_the_model_picker_switches(codecompanion,
                                                                                       llm: FakeLLM) -> None:
    ed = codecompanion(extra="session: {max_messages: 4, compress_keep_recent: 2}\n")
    first = ed.open_chat()
    for i in range(3):
        llm.add({"text": f"answer {i} from the model"})
        ed.prompt(first, f"question {i} from the person", f"answer {i} from the model")
    # 6 messages > 4: the next turn compacts first (a summary on the fast model), then answers
    llm.add({"text": "The person asked questions 0-2."}, {"text": "answer 3 from the model"})
    live = ed.prompt(first, "question 3 from the person", "answer 3 from the model")
    assert "[context summarised: 6 -> 3 messages]" in live  # the compaction notice, as reasoning
    summary_req, turn_req = llm.requests[-2]["body"], llm.requests[-1]["body"]
    assert "Summarise the conversation" in summary_req["messages"][0]["content"]
    assert "question 0 from the person" not in str(turn_req["messages"]), "no compaction happened"
    assert turn_req["model"] == "fake-model"

    # a fresh chat: /resume lists the session (the fresh chat's own empty one is not listed) and loads it
    second = ed.open_chat()
    resumed_id = ed.lua("return T.session(...)", first)
    assert ed.lua("return T.session(...)", second) != resumed_id
    ed.answer("question 0 from the person")  # the session's title: its first prompt (auto_title is off)
    ed.lua("T.slash(...)", second, "resume")
    ed.wait(lambda: any(n.startswith("Resumed session") for n in ed.notes()), "the session to be resumed", 30)
    picker = ed.lua("return T.selects[1]")
    assert picker["prompt"] == "Resume Session" and len(picker["items"]) == 1, picker
    assert ed.lua("return T.session(...)", second) == resumed_id
    shown = ed.text(second)
    positions = [shown.find(f"question {i} from the person") for i in range(4)]
    positions += [shown.find(f"answer {i} from the model") for i in range(4)]
    assert all(p >= 0 for p in positions), f"the earlier turns are not all shown:\n{shown}"
    assert shown.find("question 0 from the person") < shown.find("answer 0 from the model") \
        < shown.find("question 3 from the person") < shown.find("answer 3 from the model"), shown
    assert "The person asked questions 0-2." not in shown  # the person sees the turns, not the model's summary
    # the divider came in the replay, between the summarised turns and the kept ones (CodeCompanion's
    # restore_session draws message chunks only: a thought chunk is not rendered in its buffer)
    replay = ed.lua("return T.restored")
    kinds = [(u["sessionUpdate"], (u.get("content") or {}).get("text", "")) for u in replay]
    divider = [i for i, (k, t) in enumerate(kinds) if k == "agent_thought_chunk" and DIVIDER in t]
    assert len(divider) == 1, kinds
    before = "".join(t for _, t in kinds[:divider[0]])
    after = "".join(t for _, t in kinds[divider[0] + 1:])
    assert "question 0 from the person" in before and "answer 1 from the model" in before, kinds
    assert "answer 3 from the model" in after, kinds

    # the model picker: `ga` (change adapter and model), the same adapter, then the server's other model
    # (offered once the daemon has asked the server: a config_option_update after the load)
    assert ed.lua("return T.model(...)", second) == "openai:fake-model"
    ed.wait(lambda: "openai:fake-large" in ed.lua(MODEL_VALUES, second), "fake-large among the models", 15)
    ed.answer("toycoder", "fake-large")
    ed.lua("vim.api.nvim_set_current_buf(T.chats[...].bufnr)", second)
    ed.nv.input("ga")
    ed.wait(lambda: ed.lua("return T.model(...)", second) == "openai:fake-large", "the model to switch", 30)
    adapters, models = ed.lua("return T.selects")[-2:]
    assert adapters["prompt"] == "Select Adapter" and "* toycoder" in adapters["items"], adapters
    assert models["prompt"] == "Select Model", models
    assert [s for s in models["items"] if s.startswith("* ")] == ["* fake-model (default)"], models
    # session/set_config_option reached the daemon: the resumed session's next turn goes to the other
    # model (after a second compaction, whose summary is still the fast role's)
    llm.add({"text": "The person asked questions 0-3."}, {"text": "answer 4 from the large model"})
    ed.prompt(second, "question 4 from the person", "answer 4 from the large model")
    assert [r["body"]["model"] for r in llm.requests[-2:]] == ["fake-fast", "fake-large"]
    assert "question 4 from the person" in str(llm.requests[-1]["body"]["messages"])
    assert "question 3 from the person" in str(llm.requests[-1]["body"]["messages"])  # the same session, continued
    assert llm.violations == []
    errors = [n["msg"] for n in ed.lua("return T.notes") if n["level"] >= 4]  # vim.log.levels.ERROR
    assert errors == [], errors
