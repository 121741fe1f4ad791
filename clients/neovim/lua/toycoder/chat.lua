--- The chat buffer: prompts, the streamed reply, tool lines updated in place, sub-agent activity
--- indented under its parent, notices and usage. Rendering only: what to show comes from the daemon.
local config = require("toycoder.config")

local M = {}

local ns = vim.api.nvim_create_namespace("toycoder_chat")
local api = vim.api
local NAME = "toycoder://chat"
local CHILD_INDENT = "    "

local state = {
  buf = nil, ---@type integer?
  status = "", -- short progress text for the winbar
  title = nil, -- session title shown in the winbar
}

local STATUS_WORD = { completed = "ok", failed = "failed", denied = "denied", cancelled = "cancelled" }
local STATUS_HL = {
  running = "ToyCoderToolRunning",
  ok = "ToyCoderToolOk",
  failed = "ToyCoderToolFailed",
  denied = "ToyCoderToolDenied",
  cancelled = "ToyCoderToolDenied",
  done = "ToyCoderToolOk",
}

local function set_highlights()
  local links = {
    ToyCoderToolRunning = "DiagnosticInfo",
    ToyCoderToolOk = "DiagnosticOk",
    ToyCoderToolFailed = "DiagnosticError",
    ToyCoderToolDenied = "DiagnosticWarn",
    ToyCoderNotice = "Comment",
  }
  for group, target in pairs(links) do
    api.nvim_set_hl(0, group, { link = target, default = true })
  end
end
set_highlights()
api.nvim_create_autocmd("ColorScheme", {
  group = api.nvim_create_augroup("toycoder_chat_hl", { clear = true }),
  callback = set_highlights,
})

local function valid()
  return state.buf ~= nil and api.nvim_buf_is_valid(state.buf)
end

local function set_keymaps(buf)
  local maps = (config.options.keymaps or {}).chat or {}
  local function map(lhs, fn, desc)
    if lhs and lhs ~= "" then
      vim.keymap.set("n", lhs, fn, { buffer = buf, nowait = true, silent = true, desc = desc })
    end
  end
  map(maps.prompt, function()
    require("toycoder").ask()
  end, "ToyCoder: type a prompt")
  map(maps.cancel, function()
    require("toycoder").cancel()
  end, "ToyCoder: cancel the running turn")
  map(maps.close, function()
    M.close()
  end, "ToyCoder: close the chat")
end

function M.buf()
  if valid() then
    return state.buf
  end
  local existing = vim.fn.bufnr("^" .. NAME .. "$")
  local buf = existing > 0 and existing or api.nvim_create_buf(false, true)
  if existing <= 0 then
    api.nvim_buf_set_name(buf, NAME)
  end
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].undolevels = -1
  vim.bo[buf].filetype = "markdown"
  vim.bo[buf].modifiable = false
  vim.b[buf].toycoder_chat = true
  set_keymaps(buf)
  state.buf = buf
  return buf
end

-- ---- windows ---------------------------------------------------------------------------------

--- The window showing the chat in the current tab page, if any.
function M.win()
  if not valid() then
    return nil
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == state.buf then
      return win
    end
  end
  return nil
end

local function winbar_text()
  local text = " ToyCoder"
  if state.title and state.title ~= "" then
    text = text .. ": " .. state.title
  end
  if state.status ~= "" then
    text = text .. "  ·  " .. state.status
  end
  return (text:gsub("%%", "%%%%"))
end

local function refresh_winbars()
  if not valid() then
    return
  end
  local text = winbar_text()
  for _, win in ipairs(vim.fn.win_findbuf(state.buf)) do
    vim.wo[win].winbar = text
  end
end

local function size(value, total)
  if value <= 1 then
    return math.max(10, math.floor(total * value))
  end
  return math.floor(value)
end

--- Open the chat window (layout from the options); focus it when `focus`.
function M.open(focus)
  local buf = M.buf()
  local win = M.win()
  if win then
    if focus then
      api.nvim_set_current_win(win)
    end
    return win
  end
  local opts = config.options
  local layout = opts.layout
  if layout == "tab" then
    -- one chat tab: go to it rather than opening another
    local elsewhere = vim.fn.win_findbuf(buf)[1]
    if elsewhere then
      if focus then
        api.nvim_set_current_win(elsewhere)
      end
      return elsewhere
    end
  end
  if layout == "float" then
    local f = opts.float or {}
    local width = size(f.width or 0.8, vim.o.columns)
    local height = size(f.height or 0.8, vim.o.lines - 2)
    win = api.nvim_open_win(buf, focus, {
      relative = "editor",
      width = width,
      height = height,
      row = math.floor((vim.o.lines - height) / 2) - 1,
      col = math.floor((vim.o.columns - width) / 2),
      border = f.border or "rounded",
      title = " ToyCoder ",
      title_pos = "center",
    })
  elseif layout == "tab" then
    local previous = api.nvim_get_current_tabpage()
    vim.cmd("tab sbuffer " .. buf)
    win = api.nvim_get_current_win()
    if not focus then
      api.nvim_set_current_tabpage(previous)
    end
  else
    win = api.nvim_open_win(buf, focus, { split = "right", win = -1, width = size(opts.width or 0.4, vim.o.columns) })
    vim.wo[win].winfixwidth = true
  end
  local wo = vim.wo[win]
  wo.wrap = true
  wo.linebreak = true
  wo.number = false
  wo.relativenumber = false
  wo.signcolumn = "no"
  wo.foldenable = false
  wo.spell = false
  wo.list = false
  wo.winbar = winbar_text()
  api.nvim_win_set_cursor(win, { api.nvim_buf_line_count(buf), 0 })
  return win
end

function M.close()
  local win = M.win()
  while win do
    if #api.nvim_list_wins() == 1 then
      -- The last window: show another buffer instead of quitting Neovim.
      vim.cmd("enew")
      return
    end
    api.nvim_win_close(win, true)
    win = M.win()
  end
end

function M.toggle()
  if M.win() then
    M.close()
  else
    M.open(true)
  end
end

function M.set_status(text)
  state.status = text or ""
  refresh_winbars()
end

function M.status()
  return state.status
end

function M.set_title(title)
  state.title = title
  refresh_winbars()
end

-- ---- low-level editing -----------------------------------------------------------------------

--- Change the buffer: modifiable only while we write; windows whose cursor was on the last line
--- follow the stream, the others stay where they are.
local function edit(fn)
  local buf = M.buf()
  local last = api.nvim_buf_line_count(buf)
  local follow = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if api.nvim_win_get_cursor(win)[1] >= last then
      table.insert(follow, win)
    end
  end
  vim.bo[buf].modifiable = true
  local ok, err = pcall(fn, buf)
  vim.bo[buf].modifiable = false
  local count = api.nvim_buf_line_count(buf)
  for _, win in ipairs(follow) do
    pcall(api.nvim_win_set_cursor, win, { count, 0 })
  end
  if not ok then
    error(err, 0)
  end
end

local function is_empty(buf)
  return api.nvim_buf_line_count(buf) == 1 and api.nvim_buf_get_lines(buf, 0, 1, true)[1] == ""
end

local function mark_row(id)
  local pos = api.nvim_buf_get_extmark_by_id(state.buf, ns, id, {})
  return pos[1]
end

local function new_mark(row, id)
  return api.nvim_buf_set_extmark(state.buf, ns, row, 0, { id = id })
end

local function highlight(row, col, end_col, group, id)
  return api.nvim_buf_set_extmark(state.buf, ns, row, col, { id = id, end_col = end_col, hl_group = group })
end

--- Append lines at the end of the buffer (replacing the empty first line of an empty buffer).
local function append(lines)
  edit(function(buf)
    if is_empty(buf) then
      api.nvim_buf_set_lines(buf, 0, 1, true, lines)
    else
      api.nvim_buf_set_lines(buf, -1, -1, true, lines)
    end
  end)
end

-- ---- containers: the turn itself, and one per tool call for its sub-agent's activity -----------

local function last_row(c)
  if c.root then
    return api.nvim_buf_line_count(state.buf) - 1
  end
  return mark_row(c.last)
end

--- Insert lines after the container's last line; returns the row of the first one.
local function insert(c, lines)
  local row = last_row(c) + 1
  api.nvim_buf_set_lines(state.buf, row, row, true, lines)
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
      table.insert(lines, c.prefix .. pieces[i])
    end
    if #lines > 0 then
      local row = insert(c, lines)
      if not c.open then
        c.reply = new_mark(row) -- where the text of this model reply starts (dropped on retry)
      end
    end
    c.open = true
  end)
end

local function add_item(c, line, group)
  local row
  edit(function()
    begin(c, "item")
    row = insert(c, { line })
    if group then
      highlight(row, #c.prefix, #line, group)
    end
  end)
  return row
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

local function one_line(s, max)
  s = tostring(s or ""):gsub("[\r\n]+", " ⏎ ")
  if vim.fn.strchars(s) > max then
    s = vim.fn.strcharpart(s, 0, max - 1) .. "…"
  end
  return s
end

-- ---- turns -----------------------------------------------------------------------------------

local current = nil -- the turn being rendered

function M.current_turn()
  return current
end

--- Show the prompt and get ready for the reply. Returns the turn (passed to update/finish).
function M.begin_turn(session_id, text)
  local buf = M.buf()
  local lines = {}
  if not is_empty(buf) then
    table.insert(lines, "")
  end
  vim.list_extend(lines, { "## You", "" })
  vim.list_extend(lines, vim.split(text, "\n", { plain = true }))
  vim.list_extend(lines, { "", "## ToyCoder", "" })
  append(lines)
  current = {
    session = session_id,
    buf = buf,
    root = { root = true, prefix = "", kind = nil },
    containers = {},
    tools = {},
    streamed = false,
  }
  return current
end

local function container(turn, parent)
  if not parent then
    return turn.root
  end
  return turn.containers[parent] or turn.root
end

--- A toycoder/update for this turn. Returns the tool entry on tool_result (for auto-reload).
function M.update(turn, params)
  if turn ~= current or turn.buf ~= state.buf or not valid() then
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
    local line = c.prefix .. "- [running] " .. title
    local row = add_item(c, line)
    local col = #c.prefix + 3
    local tool = {
      id = u.toolCallId,
      name = u.name,
      arguments = u.arguments,
      status = "running",
      mark = new_mark(row),
      col = col,
    }
    tool.hl = highlight(row, col, col + #"running", STATUS_HL.running)
    turn.tools[u.toolCallId or ""] = tool
    turn.containers[u.toolCallId or ""] = { prefix = c.prefix .. CHILD_INDENT, last = new_mark(row) }
  elseif kind == "tool_result" then
    local tool = turn.tools[u.toolCallId or ""]
    if not tool then
      return nil
    end
    local word = STATUS_WORD[u.status] or tostring(u.status)
    edit(function(buf)
      local row = mark_row(tool.mark)
      api.nvim_buf_set_text(buf, row, tool.col, row, tool.col + #tool.status, { word })
      highlight(row, tool.col, tool.col + #word, STATUS_HL[word] or "ToyCoderNotice", tool.hl)
      if u.status == "failed" and u.output and u.output ~= "" then
        local line = api.nvim_buf_get_lines(buf, row, row + 1, true)[1]
        local detail = " — " .. one_line(vim.split(u.output, "\n", { plain = true })[1], 100)
        api.nvim_buf_set_text(buf, row, #line, row, #line, { detail })
      end
    end)
    tool.status = word
    tool.result = u.status
    return tool
  elseif kind == "retry" then
    drop_reply(c)
    add_item(
      c,
      ("%s_retrying (attempt %s in %s): %s_"):format(
        c.prefix,
        u.attempt or "?",
        type(u.delaySeconds) == "number" and ("%.2fs"):format(u.delaySeconds) or "?",
        one_line(u.reason, 200)
      ),
      "ToyCoderNotice"
    )
  elseif kind == "compaction" then
    add_item(
      c,
      ("%s_context compacted (%s): %s -> %s messages_"):format(c.prefix, u.strategy or "?", u.before or "?", u.after or "?"),
      "ToyCoderNotice"
    )
  elseif kind == "usage" then
    turn.usage = u
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
  if turn.buf ~= state.buf or not valid() then
    return
  end
  local c = turn.root
  if err then
    if err.daemon_exited then
      add_item(c, "_the daemon stopped; this turn is lost_", "ToyCoderNotice")
    else
      add_item(c, ("**Error** (%s): %s"):format(tostring(err.code), one_line(err.message, 500)), "ErrorMsg")
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
    add_item(c, "_cancelled_", "ToyCoderNotice")
  elseif reason == "max_steps" then
    add_item(c, "_" .. one_line(text, 300) .. "_", "ToyCoderNotice")
  elseif not turn.streamed and text ~= "" then
    append_text(c, text)
  end
  local u = result.usage
  if type(u) == "table" and (u.totalTokens or 0) > 0 then
    add_item(
      c,
      ("_tokens: %d prompt, %d completion_"):format(u.promptTokens or 0, u.completionTokens or 0),
      "ToyCoderNotice"
    )
  end
end

--- A line of information outside any turn (errors, notices).
function M.notice(text)
  local buf = M.buf()
  local lines = is_empty(buf) and {} or { "" }
  vim.list_extend(lines, vim.split(text, "\n", { plain = true }))
  append(lines)
end

-- ---- whole sessions --------------------------------------------------------------------------

local function args_summary(text)
  local ok, args = pcall(vim.json.decode, text or "")
  if ok and type(args) == "table" then
    for _, key in ipairs({ "path", "command", "pattern", "query", "question" }) do
      if type(args[key]) == "string" then
        return args[key]
      end
    end
  end
  return text or ""
end

--- Replace the buffer with a loaded session ({session, transcript}); `note` is appended.
function M.render_session(loaded, note)
  current = nil
  local info = loaded.session or {}
  local lines = { "# " .. ((info.title and info.title ~= "") and info.title or "(untitled session)"), "" }
  table.insert(lines, ("_session %s, %s messages_"):format(info.sessionId or "?", info.messageCount or 0))
  local in_reply = false
  local last_kind = nil
  for _, e in ipairs(loaded.transcript or {}) do
    if e.role == "user" then
      vim.list_extend(lines, { "", "## You", "" })
      vim.list_extend(lines, vim.split(e.text or "", "\n", { plain = true }))
      in_reply, last_kind = false, nil
    elseif e.role == "assistant" or e.role == "tool_call" then
      if not in_reply then
        vim.list_extend(lines, { "", "## ToyCoder" })
        in_reply = true
      end
      local kind = e.role == "assistant" and "text" or "item"
      if kind ~= last_kind or kind == "text" then
        table.insert(lines, "")
      end
      if e.role == "assistant" then
        vim.list_extend(lines, vim.split(e.text or "", "\n", { plain = true }))
      else
        table.insert(lines, ("- [done] %s %s"):format(e.name or "tool", one_line(args_summary(e.text), 100)))
      end
      last_kind = kind
    end
  end
  if note and note ~= "" then
    table.insert(lines, "")
    vim.list_extend(lines, vim.split("_" .. note .. "_", "\n", { plain = true }))
  end
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    api.nvim_buf_set_lines(buf, 0, -1, true, lines)
  end)
  M.set_title(info.title ~= "" and info.title or nil)
  for _, win in ipairs(vim.fn.win_findbuf(state.buf)) do
    api.nvim_win_set_cursor(win, { api.nvim_buf_line_count(state.buf), 0 })
  end
end

function M.clear()
  current = nil
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    api.nvim_buf_set_lines(buf, 0, -1, true, {})
  end)
end

M.namespace = ns

return M
