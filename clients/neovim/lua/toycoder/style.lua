--- Our highlight groups (linked to standard ones, so colorschemes apply) and the one set of tool
--- states the chat shows, for live tool results and restored transcripts alike.
local M = {}

local api = vim.api

M.links = {
  ToyCoderToolRunning = "DiagnosticInfo",
  ToyCoderToolOk = "DiagnosticOk",
  ToyCoderToolFailed = "DiagnosticError",
  ToyCoderToolDenied = "DiagnosticWarn",
  ToyCoderToolName = "Identifier",
  ToyCoderToolDetail = "Comment",
  ToyCoderAnswer = "String",
  ToyCoderNotice = "Comment",
  ToyCoderError = "DiagnosticError",
  ToyCoderStarting = "DiagnosticInfo",
  ToyCoderAdded = "Added",
  ToyCoderRemoved = "Removed",
  ToyCoderPlanDone = "DiagnosticOk",
  ToyCoderPlanActive = "DiagnosticInfo",
  ToyCoderPlanPending = "Comment",
}

function M.set_highlights()
  for group, target in pairs(M.links) do
    api.nvim_set_hl(0, group, { link = target, default = true })
  end
end

-- The protocol's statuses (tool_result.status, transcript `status`) -> the word shown, its group.
-- "running" is ours: a call that has not ended yet.
M.STATES = {
  running = { word = "running", hl = "ToyCoderToolRunning" },
  completed = { word = "ok", hl = "ToyCoderToolOk" },
  failed = { word = "failed", hl = "ToyCoderToolFailed" },
  denied = { word = "denied", hl = "ToyCoderToolDenied" },
  cancelled = { word = "cancelled", hl = "ToyCoderToolDenied" },
}

--- The word and highlight group of a status; an unknown one is shown as it came.
function M.state(status)
  local s = M.STATES[status or ""]
  if s then
    return s.word, s.hl
  end
  return tostring(status or "?"), "ToyCoderNotice"
end

--- One line of at most `max` characters (newlines shown as ⏎, the cut marked with …).
function M.one_line(s, max)
  s = tostring(s or ""):gsub("[\r\n]+", " ⏎ ")
  if max and vim.fn.strchars(s) > max then
    s = vim.fn.strcharpart(s, 0, max - 1) .. "…"
  end
  return s
end

--- The virtual-text chunks of a tool line: `- [state] title — detail`; `prefix` indents it.
function M.tool_chunks(prefix, status, title, detail)
  local chunks = { { prefix .. "- ", "ToyCoderNotice" } }
  if status ~= nil then -- a session stored before statuses were kept shows none
    local word, hl = M.state(status)
    vim.list_extend(chunks, { { "[", "ToyCoderNotice" }, { word, hl }, { "] ", "ToyCoderNotice" } })
  end
  local name, rest = title:match("^(%S+)(.*)$")
  table.insert(chunks, { name or title, "ToyCoderToolName" })
  if rest and rest ~= "" then
    table.insert(chunks, { rest, "Normal" })
  end
  if detail and detail ~= "" then
    table.insert(chunks, { " — " .. detail, "ToyCoderToolDetail" })
  end
  return chunks
end

--- The virtual-text chunks of a turn's `changes` line: `- N files changed +a −r: a.py, b.py`.
--- Counts are summed over the files that have them (a binary file's are null). `restore_of`: the
--- line is a restore's (the daemon's restoreOf): "Restored …", and what takes it back is /redo.
function M.changes_chunks(prefix, files, restore_of)
  local added, removed, names = 0, 0, {}
  for _, f in ipairs(files) do
    added = added + (type(f.added) == "number" and f.added or 0)
    removed = removed + (type(f.removed) == "number" and f.removed or 0)
    table.insert(names, tostring(f.path or "?"))
  end
  local count = ("%d %s changed"):format(#files, #files == 1 and "file" or "files")
  local restore = type(restore_of) == "string" and restore_of ~= ""
  local chunks = {
    { prefix .. "- ", "ToyCoderNotice" },
    { (restore and "Restored " or "") .. count, "ToyCoderToolName" },
    { " +" .. added, "ToyCoderAdded" },
    { " −" .. removed, "ToyCoderRemoved" },
    { ": " .. M.one_line(table.concat(names, ", "), 200), "ToyCoderToolDetail" },
  }
  if restore then
    table.insert(chunks, { " · Redo: /redo", "ToyCoderNotice" })
  end
  return chunks
end

-- A plan entry's status -> its mark and group (the terminal client uses the same marks).
local PLAN = {
  completed = { "✓", "ToyCoderPlanDone" },
  in_progress = { "▸", "ToyCoderPlanActive" },
  pending = { "○", "ToyCoderPlanPending" },
}

--- The virtual-text lines of a plan block: `- plan 1/3`, then one line per entry.
function M.plan_lines(prefix, entries)
  local done = 0
  for _, e in ipairs(entries) do
    done = done + (e.status == "completed" and 1 or 0)
  end
  local list = { { { prefix .. "- ", "ToyCoderNotice" }, { ("plan %d/%d"):format(done, #entries), "ToyCoderToolName" } } }
  for _, e in ipairs(entries) do
    local mark = PLAN[e.status] or PLAN.pending
    local line = { { prefix .. "  " .. mark[1] .. " ", mark[2] }, { M.one_line(e.content, 200), e.status == "completed" and "ToyCoderNotice" or "Normal" } }
    if e.priority == "high" and e.status ~= "completed" then
      table.insert(line, { " !", "ToyCoderToolDenied" })
    end
    table.insert(list, line)
  end
  return list
end

--- The footer of a turn: its tokens, as live turns end and as restored ones show them.
function M.tokens_text(u)
  if type(u) ~= "table" or (u.totalTokens or 0) <= 0 then
    return nil
  end
  return ("tokens: %d prompt, %d completion"):format(u.promptTokens or 0, u.completionTokens or 0)
end

-- What ask_user's observation starts with when the person answered (toycoder_daemon/tools/ask.py).
local ANSWERED = "The user answered: "

--- The line under an ask_user call: the answer the person picked or typed, from the call's output.
function M.answer_text(output)
  output = tostring(output or "")
  if output:sub(1, #ANSWERED) == ANSWERED then
    return "→ " .. M.one_line(output:sub(#ANSWERED + 1), 200)
  end
  return "→ (no answer)"
end

return M
