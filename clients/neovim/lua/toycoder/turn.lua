--- What a turn shows in the chat: the prompt, the streamed reply, tool lines updated in place (one
--- set of states, see style.lua), the ask_user answer under its question, sub-agent activity
--- indented under the tool line that runs it, retries, compaction, the wait for MCP servers (one
--- line, updated in place when it ends), the result's notices.
local style = require("toycoder.style")
local history = require("toycoder.history")
local cb = require("toycoder.chatbuf")
local markdown = require("toycoder.markdown")

local M = {}

local api = vim.api
local ns = cb.namespace
local CHILD_INDENT = history.CHILD_INDENT
local edit, is_empty, mark_row, new_mark, put_virt, append = cb.edit, cb.is_empty, cb.mark_row, cb.new_mark, cb.put_virt, cb.append

-- ---- containers: the turn itself, and one per tool call for its sub-agent's activity -----------

local function last_row(c)
  if c.root then
    return api.nvim_buf_line_count(cb.buf()) - 1
  end
  return mark_row(c.last)
end

--- Insert lines after the container's last line; returns the row of the first one.
local function insert(c, lines)
  local row = last_row(c) + 1
  api.nvim_buf_set_lines(cb.buf(), row, row, true, lines)
  if not c.root then
    new_mark(row + #lines - 1, c.last)
  end
  return row
end

--- Start an item (tool line, notice) or text: closes open text and adds a blank line between
--- text and items at the top level.
local function begin(c, kind)
  if c.root and c.kind ~= nil and c.kind ~= kind then
    insert(c, { "" })
  end
  c.kind = kind
  c.open = false
  if kind ~= "text" then
    c.reply = nil
  end
end

local function append_text(c, text)
  if text == "" then
    return
  end
  local pieces = vim.split(text, "\n", { plain = true })
  edit(function(buf)
    local first = 1
    if c.open then
      local row = last_row(c)
      local line = api.nvim_buf_get_lines(buf, row, row + 1, true)[1]
      api.nvim_buf_set_text(buf, row, #line, row, #line, { pieces[1] })
      first = 2
    else
      begin(c, "text")
    end
    local lines = {}
    for i = first, #pieces do
      table.insert(lines, pieces[i])
    end
    if #lines > 0 then
      local row = insert(c, lines)
      if c.prefix ~= "" then -- a sub-agent's text: indented by virtual text, still Markdown
        for r = row, row + #lines - 1 do
          put_virt(r, { { c.prefix, "Normal" } })
        end
      end
      if not c.open then
        c.reply = new_mark(row) -- where the text of this model reply starts (dropped on retry)
      end
    end
    c.open = true
  end)
end

--- An item line in container `c`: `chunks` as virtual text. Returns the mark of its line.
local function add_item(c, chunks)
  local mark
  edit(function()
    begin(c, "item")
    local row = insert(c, { "" })
    mark = put_virt(row, chunks)
  end)
  return mark
end

local function notice_chunks(c, text, group)
  return { { c.prefix .. text, group or "ToyCoderNotice" } }
end

--- retry: drop the partial text of the reply being retried.
local function drop_reply(c)
  if not c.reply then
    return
  end
  edit(function(buf)
    local from = mark_row(c.reply)
    local to = last_row(c)
    if from <= to then
      api.nvim_buf_set_lines(buf, from, to + 1, true, {})
    end
    api.nvim_buf_del_extmark(buf, ns, c.reply)
    if not c.root then
      new_mark(math.max(from - 1, 0), c.last)
    end
  end)
  c.reply, c.open = nil, false
  if c.root then
    c.kind = nil -- the blank line before the dropped text stays
  end
end

local one_line = style.one_line
local plan -- defined below, used by M.update

--- mcp_wait: "starting MCP servers: a, b…" while the turn waits, then the same line says how it ended.
local function mcp_wait(turn, c, u)
  local servers = type(u.servers) == "table" and u.servers or {}
  local names = one_line(table.concat(servers, ", "), 200)
  if u.state == "waiting" then
    turn.mcp_wait = add_item(c, notice_chunks(c, ("starting MCP servers: %s…"):format(names)))
    return
  end
  local mark = turn.mcp_wait
  if not mark then
    return
  end
  turn.mcp_wait = nil
  local failed = type(u.failed) == "table" and u.failed or {}
  local ready = vim.tbl_filter(function(name)
    return not vim.tbl_contains(failed, name)
  end, servers)
  local said = {}
  if #ready > 0 then
    table.insert(said, "ready: " .. one_line(table.concat(ready, ", "), 200))
  end
  if #failed > 0 then
    table.insert(said, "failed: " .. one_line(table.concat(failed, ", "), 200))
  end
  local text = "MCP servers " .. table.concat(said, "; ")
  edit(function()
    put_virt(mark_row(mark), notice_chunks(c, text), mark)
  end)
end

-- ---- turns -----------------------------------------------------------------------------------

local current = nil -- the turn being rendered

function M.current_turn()
  return current
end

--- Show the prompt and get ready for the reply. Returns the turn (passed to update/finish).
function M.begin_turn(session_id, text)
  local buf = cb.buf()
  local lines = {}
  if not is_empty(buf) then
    table.insert(lines, "")
  end
  vim.list_extend(lines, { "## You", "" })
  local prompt = vim.split(text, "\n", { plain = true })
  vim.list_extend(lines, prompt)
  local fence = markdown.closing_fence(prompt)
  if fence then -- an open block in the prompt would swallow the reply
    table.insert(lines, fence)
  end
  vim.list_extend(lines, { "", "## ToyCoder", "" })
  local first = append(lines)
  current = {
    session = session_id,
    buf = buf,
    root = { root = true, prefix = "", kind = nil },
    containers = {},
    tools = {},
    streamed = false,
    reply = new_mark(first + #lines - 1), -- the reply starts after this line
  }
  return current
end

local function container(turn, parent)
  if not parent then
    return turn.root
  end
  return turn.containers[parent] or turn.root
end

local function tool_result(turn, u)
  local tool = turn.tools[u.toolCallId or ""]
  if not tool then
    return nil
  end
  tool.status = u.status
  local detail = u.status == "failed" and history.failure_detail(u.output) or nil
  edit(function()
    put_virt(mark_row(tool.mark), style.tool_chunks(tool.prefix, u.status, tool.title, detail), tool.mark)
  end)
  if tool.name == "ask_user" and u.status == "completed" then
    local child = turn.containers[u.toolCallId or ""]
    add_item(child, notice_chunks(child, style.answer_text(u.output), "ToyCoderAnswer"))
  end
  tool.result = u.status
  return tool
end

--- The plan block: shown where the first plan arrived, updated in place by each later one (the
--- daemon sends the whole plan every time). Lines are added or removed inside the block, never at
--- its edges, so the marks of the lines around it stay where they are.
plan = function(turn, c, entries)
  local list = style.plan_lines(c.prefix, entries)
  edit(function(buf)
    local p = turn.plan
    if not p then
      begin(c, "item")
      local row = insert(c, vim.split(string.rep("\n", #list - 1), "\n", { plain = true }))
      p = { marks = {} }
      for i = 1, #list do
        p.marks[i] = new_mark(row + i - 1)
      end
      turn.plan = p
    end
    local row = mark_row(p.marks[1])
    local have = #p.marks
    for i = 2, have do -- the entry lines' marks are made afresh below
      api.nvim_buf_del_extmark(buf, ns, p.marks[i])
    end
    if #list > have then -- new lines after the header
      local blank = vim.split(string.rep("\n", #list - have - 1), "\n", { plain = true })
      api.nvim_buf_set_lines(buf, row + 1, row + 1, true, blank)
    elseif #list < have then
      api.nvim_buf_set_lines(buf, row + 1, row + 1 + have - #list, true, {})
    end
    local marks = {}
    for i, chunks in ipairs(list) do
      marks[i] = put_virt(row + i - 1, chunks, i == 1 and p.marks[1] or nil)
    end
    p.marks = marks
  end)
end

--- A toycoder/update for this turn. Returns the tool entry on tool_result (for auto-reload).
function M.update(turn, params)
  if turn ~= current or turn.buf ~= cb.current() or not cb.valid() then
    return nil
  end
  local u = params.update or {}
  turn.id = turn.id or params.turnId
  local c = container(turn, params.parentToolCallId)
  local kind = u.kind
  if kind == "text_delta" then
    if c.root then
      turn.streamed = true
    end
    append_text(c, u.text or "")
  elseif kind == "tool_call" then
    local title = one_line(u.title or u.name, 120)
    local mark = add_item(c, style.tool_chunks(c.prefix, "running", title))
    turn.tools[u.toolCallId or ""] = {
      id = u.toolCallId,
      name = u.name,
      arguments = u.arguments,
      status = "running",
      title = title,
      prefix = c.prefix,
      mark = mark,
    }
    turn.containers[u.toolCallId or ""] = { prefix = c.prefix .. CHILD_INDENT, last = new_mark(mark_row(mark)) }
  elseif kind == "tool_result" then
    return tool_result(turn, u)
  elseif kind == "retry" then
    drop_reply(c)
    local delay = type(u.delaySeconds) == "number" and ("%.2fs"):format(u.delaySeconds) or "?"
    local text = ("retrying (attempt %s in %s): %s"):format(u.attempt or "?", delay, one_line(u.reason, 200))
    add_item(c, notice_chunks(c, text))
  elseif kind == "mcp_wait" then
    mcp_wait(turn, c, u)
  elseif kind == "hook" then
    local why = type(u.reason) == "string" and u.reason ~= "" and (": " .. one_line(u.reason, 200)) or ""
    local text = ("hook %s `%s` %s (%s ms)%s"):format(u.event or "?", one_line(u.command or "", 80),
      u.outcome or "?", u.durationMs or "?", why)
    add_item(c, notice_chunks(c, text))
  elseif kind == "compaction" then
    local text = ("context compacted (%s): %s -> %s messages"):format(u.strategy or "?", u.before or "?", u.after or "?")
    add_item(c, notice_chunks(c, text))
  elseif kind == "changes" and type(u.files) == "table" and #u.files > 0 then
    local mark = add_item(c, style.changes_chunks(c.prefix, u.files, u.restoreOf))
    if c.root then -- the turn's own line (<CR> and u act on it), not a sub-agent's
      require("toycoder.changes").remember(mark, params.turnId, u.files, u.restoreOf)
    end
  elseif kind == "usage" then
    turn.usage = u
  elseif kind == "plan" and type(u.entries) == "table" then
    plan(turn, c, u.entries)
  end
  return nil
end

local function fenced(text)
  local fence = "```"
  while text:find(fence, 1, true) do
    fence = fence .. "`"
  end
  local lines = { fence .. "text" }
  vim.list_extend(lines, vim.split((text:gsub("\n$", "")), "\n", { plain = true }))
  table.insert(lines, fence)
  return lines
end

--- The turn ended: its result (or an error). Renders what the result adds to the stream.
function M.finish(turn, err, result)
  if turn ~= current then
    return
  end
  current = nil
  if turn.buf ~= cb.current() or not cb.valid() then
    return
  end
  local c = turn.root
  local reply = api.nvim_buf_get_lines(cb.current(), mark_row(turn.reply) + 1, -1, true)
  local fence = markdown.closing_fence(reply)
  if fence then -- a reply cut inside a code block: close it, or the next turn would be code
    edit(function()
      begin(c, "text")
      insert(c, { fence })
    end)
  end
  if err then
    if err.daemon_exited then
      add_item(c, notice_chunks(c, "the daemon stopped; this turn is lost", "ToyCoderError"))
    else
      add_item(c, notice_chunks(c, ("Error (%s): %s"):format(tostring(err.code), one_line(err.message, 500)), "ToyCoderError"))
    end
    return
  end
  result = result or {}
  local reason = result.stopReason
  local text = type(result.text) == "string" and result.text or ""
  if reason == "command" then
    if text ~= "" then
      edit(function()
        begin(c, "item")
        insert(c, fenced(text))
      end)
    end
    return
  elseif reason == "cancelled" then
    add_item(c, notice_chunks(c, "cancelled"))
  elseif reason == "max_steps" then
    add_item(c, notice_chunks(c, one_line(text, 300)))
  elseif not turn.streamed and text ~= "" then
    append_text(c, text)
  end
  local tokens = style.tokens_text(result.usage)
  if tokens then
    add_item(c, notice_chunks(c, tokens))
  end
end

--- Forget the turn being rendered (the buffer was replaced).
function M.reset()
  current = nil
end

return M
