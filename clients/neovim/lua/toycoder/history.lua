--- A loaded session (toycoder/session/load) as chat rows: Markdown text rows for what people and the
--- model wrote, virtual-text rows (tool lines, answers, notes) drawn exactly as the live ones.
local style = require("toycoder.style")
local titles = require("toycoder.titles")
local markdown = require("toycoder.markdown")

local M = {}

M.CHILD_INDENT = "    "

-- The arguments a tool's title shows (the daemon titles most tools "<name> <this argument>").
local TITLE_KEYS = { "path", "command", "pattern", "query", "question" }

local function args_summary(text)
  local ok, args = pcall(vim.json.decode, text or "")
  if not ok or type(args) ~= "table" then
    return text or ""
  end
  for _, key in ipairs(TITLE_KEYS) do
    if type(args[key]) == "string" then
      return args[key]
    end
  end
  return ""
end

--- The title of a stored call: the daemon's when the transcript has one, else rebuilt like it.
function M.tool_title(call)
  if type(call.title) == "string" and call.title ~= "" then
    return call.title
  end
  local name = call.name or "tool"
  local summary = style.one_line(args_summary(call.text), 100)
  return summary ~= "" and (name .. " " .. summary) or name
end

--- The detail a failed call shows after its title: the first line of its output.
function M.failure_detail(output)
  return style.one_line(vim.split(tostring(output or ""), "\n", { plain = true })[1], 100)
end

function M.count(n, word)
  n = tonumber(n) or 0
  return ("%d %s%s"):format(n, word, n == 1 and "" or "s")
end

--- Rows for the chat: { text = "..." } or { chunks = virt_text } (an empty line showing them); a
--- changes line's row also has `changes = { turnId, files, restoreOf }`.
function M.rows(loaded, note)
  local info = loaded.session or {}
  local rows = {}
  local function text(s)
    table.insert(rows, { text = s })
  end
  local function lines(s) -- Markdown of one message, its open code block closed
    local list = vim.split(s or "", "\n", { plain = true })
    local fence = markdown.closing_fence(list)
    if fence then
      table.insert(list, fence)
    end
    for _, l in ipairs(list) do
      text(l)
    end
  end
  local function virt(chunks)
    table.insert(rows, { chunks = chunks })
  end
  local title = titles.short(info.title)
  text("# " .. (title ~= "" and title or "(untitled session)"))
  text("")
  virt({ { ("session %s, %s"):format(info.sessionId or "?", M.count(info.messageCount, "message")), "ToyCoderNotice" } })
  local results = {}
  for _, e in ipairs(loaded.transcript or {}) do
    if e.role == "tool" and e.toolCallId then
      results[e.toolCallId] = e
    end
  end
  local in_reply, last_kind = false, nil
  local turn = nil -- the user entry of the turn being shown, with what its end shows
  -- The end of a turn as a live one ends: "cancelled" (an interrupted reply), then its tokens.
  local function footer()
    if not turn then
      return
    end
    local notes = {}
    if turn.stopReason == "cancelled" or turn.interrupted then
      table.insert(notes, "cancelled")
    end
    table.insert(notes, style.tokens_text(turn.usage))
    for _, n in ipairs(notes) do
      if last_kind ~= "item" then
        text("")
      end
      virt({ { n, "ToyCoderNotice" } })
      last_kind = "item"
    end
    turn = nil
  end
  for _, e in ipairs(loaded.transcript or {}) do
    if e.role == "user" then
      footer()
      vim.list_extend(rows, { { text = "" }, { text = "## You" }, { text = "" } })
      lines(e.text)
      in_reply, last_kind = false, nil
      turn = { stopReason = e.stopReason, usage = e.usage }
    elseif e.role == "assistant" or e.role == "tool_call" then
      if not in_reply then
        vim.list_extend(rows, { { text = "" }, { text = "## ToyCoder" } })
        in_reply = true
      end
      local kind = e.role == "assistant" and "text" or "item"
      if kind ~= last_kind or kind == "text" then
        text("")
      end
      if e.role == "assistant" then
        lines(e.text)
        if e.interrupted and turn then
          turn.interrupted = true
        end
      else
        local result = results[e.toolCallId or ""] or {}
        local status = result.status
        local detail = status == "failed" and M.failure_detail(result.text) or nil
        virt(style.tool_chunks("", status, M.tool_title(e), detail))
        if e.name == "ask_user" and status == "completed" then
          virt({ { M.CHILD_INDENT .. style.answer_text(result.text), "ToyCoderAnswer" } })
        end
      end
      last_kind = kind
    elseif e.role == "changes" and type(e.files) == "table" and #e.files > 0 then
      if last_kind ~= "item" then -- after the reply's text, like the live line
        text("")
      end
      virt(style.changes_chunks("", e.files, e.restoreOf))
      rows[#rows].changes = { turnId = e.turnId, files = e.files, restoreOf = e.restoreOf } -- for <CR> and u
      last_kind = "item"
    elseif e.role == "compaction" then -- the turns above stay whole; the model got a summary of them
      footer()
      text("")
      virt({ { "── earlier turns summarised for the model ──", "ToyCoderNotice" } })
      in_reply, last_kind = false, "item"
    elseif e.role == "plan" and type(e.entries) == "table" and #e.entries > 0 then
      -- the session's plan as the history ends (last): the block a live turn shows
      if last_kind ~= "item" then
        text("")
      end
      for _, chunks in ipairs(style.plan_lines("", e.entries)) do
        virt(chunks)
      end
      last_kind = "item"
    end
  end
  footer()
  if note and note ~= "" then
    text("")
    for _, l in ipairs(vim.split(note, "\n", { plain = true })) do
      virt({ { l, "ToyCoderNotice" } })
    end
  end
  return rows
end

return M
