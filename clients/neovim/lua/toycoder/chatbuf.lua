--- The chat buffer itself and the primitives that write to it: read-only except while we write,
--- windows at the end follow the stream, virtual-text lines (tool lines, notices) that no
--- Markdown parser can misread. chat.lua (windows) and turn.lua (what a turn shows) use them.
local config = require("toycoder.config")
local markdown = require("toycoder.markdown")

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace("toycoder_chat")
local NAME = "toycoder://chat"
M.namespace = ns

local state = { buf = nil } ---@type { buf: integer? }

--- The chat buffer if it exists (never creates it).
function M.current()
  return state.buf
end

function M.valid()
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
    require("toycoder.chat").close()
  end, "ToyCoder: close the chat")
  -- on a "N files changed" line: pick a file of the turn, undo the turn; elsewhere the key's own meaning
  map(maps.changed_files, function()
    if not require("toycoder.changes").pick_file() then
      pcall(vim.cmd, "normal! " .. vim.v.count1 .. "+") -- fails on the last line, as <CR> would beep
    end
  end, "ToyCoder: the files of this changes line")
  map(maps.undo_turn, function()
    if not require("toycoder.changes").undo_turn() then
      vim.notify("ToyCoder: u undoes a turn from its \"files changed\" line", vim.log.levels.INFO)
    end
  end, "ToyCoder: undo the turn of this changes line")
end

function M.buf()
  if M.valid() then
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
  markdown.attach(buf)
  set_keymaps(buf)
  state.buf = buf
  return buf
end

--- Change the buffer: modifiable only while we write; windows whose cursor was on the last line
--- follow the stream, the others stay where they are.
function M.edit(fn)
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

function M.is_empty(buf)
  return api.nvim_buf_line_count(buf) == 1 and api.nvim_buf_get_lines(buf, 0, 1, true)[1] == ""
end

--- Empty and showing nothing: not even a virtual-text line (a notice) on its one empty line.
function M.is_blank(buf)
  return M.is_empty(buf) and #api.nvim_buf_get_extmarks(buf, ns, 0, 0, { limit = 1 }) == 0
end

function M.mark_row(id)
  local pos = api.nvim_buf_get_extmark_by_id(state.buf, ns, id, {})
  return pos[1]
end

function M.new_mark(row, id)
  return api.nvim_buf_set_extmark(state.buf, ns, row, 0, { id = id })
end

--- Show `chunks` on the (empty) line `row`: inline virtual text, which no syntax can misread.
function M.put_virt(row, chunks, id)
  return api.nvim_buf_set_extmark(state.buf, ns, row, 0, {
    id = id,
    virt_text = chunks,
    virt_text_pos = "inline",
    right_gravity = false, -- text typed at column 0 (a streamed line) goes after an indent
    invalidate = true, -- gone with its line (a retried reply)
    undo_restore = false,
  })
end

--- Append lines at the end of the buffer (replacing the empty first line of an empty buffer).
function M.append(lines)
  local row = 0
  M.edit(function(buf)
    if M.is_empty(buf) then
      api.nvim_buf_set_lines(buf, 0, 1, true, lines)
    else
      row = api.nvim_buf_line_count(buf)
      api.nvim_buf_set_lines(buf, -1, -1, true, lines)
    end
  end)
  return row
end

--- Append one virtual-text line per entry of `list` ({chunks}...); returns their marks.
function M.append_virt(list)
  local blank = {}
  for _ = 1, #list do
    table.insert(blank, "")
  end
  local row = M.append(blank)
  local marks = {}
  for i, chunks in ipairs(list) do
    table.insert(marks, M.put_virt(row + i - 1, chunks))
  end
  return marks
end

--- What the chat shows, line by line: the buffer's text with the inline virtual text in place
--- (for tests and for anyone who wants the chat as plain text).
function M.display_lines()
  if not M.valid() then
    return {}
  end
  local lines = api.nvim_buf_get_lines(state.buf, 0, -1, true)
  local marks = api.nvim_buf_get_extmarks(state.buf, ns, 0, -1, { details = true })
  table.sort(marks, function(a, b)
    return a[2] == b[2] and a[3] > b[3] or a[2] < b[2]
  end)
  for _, m in ipairs(marks) do
    local d = m[4]
    if d.virt_text and d.virt_text_pos == "inline" and not d.invalid then
      local parts = {}
      for _, chunk in ipairs(d.virt_text) do
        table.insert(parts, chunk[1])
      end
      local line = lines[m[2] + 1]
      lines[m[2] + 1] = line:sub(1, m[3]) .. table.concat(parts) .. line:sub(m[3] + 1)
    end
  end
  return lines
end

return M
