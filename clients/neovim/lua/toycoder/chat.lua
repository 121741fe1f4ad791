--- The chat buffer: prompts and replies as Markdown (treesitter, see markdown.lua); tool lines,
--- answers and notices as virtual text on empty lines, so no Markdown parser can misread them;
--- sub-agent activity indented under its tool line. Rendering only: what to show comes from the daemon.
local config = require("toycoder.config")
local style = require("toycoder.style")
local titles = require("toycoder.titles")
local history = require("toycoder.history")
local markdown = require("toycoder.markdown")
local cb = require("toycoder.chatbuf")
local turn = require("toycoder.turn")

local M = {}

local api = vim.api
local ns = cb.namespace

local state = {
  status = "", -- short progress text for the winbar
  title = nil, -- short session title shown in the winbar
  mode = nil, -- the session's permission mode; the winbar shows one that is not the default (ask)
  starting = nil, -- extmark of the "starting ToyCoder…" line
  plan = nil, -- the plan pinned in the winbar: { done, total, active } (nil: none, or all done after its turn)
}

style.set_highlights()
local augroup = api.nvim_create_augroup("toycoder_chat", { clear = true })
api.nvim_create_autocmd("ColorScheme", { group = augroup, callback = style.set_highlights })

local valid, edit, is_empty, append, append_virt, put_virt = cb.valid, cb.edit, cb.is_empty, cb.append, cb.append_virt, cb.put_virt
M.buf = cb.buf

-- ---- windows ---------------------------------------------------------------------------------

--- The window showing the chat in the current tab page, if any.
function M.win()
  if not valid() then
    return nil
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) == cb.buf() then
      return win
    end
  end
  return nil
end

--- The winbar of a window `width` cells wide: the title is cut on its right to fit, never on its left.
local function winbar_text(width)
  local head = " ToyCoder"
  if state.mode and state.mode ~= "ask" then -- part of the head: never dropped for the title
    head = head .. " [" .. state.mode .. "]"
  end
  local status = state.status ~= "" and ("  ·  " .. state.status) or ""
  local plan, short = "", ""
  local p = state.plan
  if p then -- pinned: a long turn scrolls the plan block away, the winbar stays
    short = ("  ·  plan %d/%d"):format(p.done, p.total)
    plan = short .. (p.active and (" ▸ " .. p.active) or "")
  end
  local tail = plan .. status
  local title = state.title or ""
  if title ~= "" then
    -- too narrow for all: the status goes first, then the plan's step (its count stays)
    for _, t in ipairs({ plan .. status, plan, short }) do
      tail = t
      if width - vim.fn.strdisplaywidth(head .. ": " .. tail) >= 8 then
        break
      end
    end
    head = head .. ": " .. titles.fit(title, width - vim.fn.strdisplaywidth(head .. ": " .. tail))
  end
  return ((head .. tail):gsub("%%", "%%%%"))
end

local function refresh_winbars()
  if not valid() then
    return
  end
  for _, win in ipairs(vim.fn.win_findbuf(cb.buf())) do
    vim.wo[win].winbar = winbar_text(api.nvim_win_get_width(win))
  end
end
api.nvim_create_autocmd({ "WinResized", "VimResized" }, { group = augroup, callback = refresh_winbars })

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
  wo.winbar = winbar_text(api.nvim_win_get_width(win))
  markdown.window(win)
  api.nvim_win_set_cursor(win, { api.nvim_buf_line_count(buf), 0 })
  return win
end

function M.close()
  require("toycoder.input").close() -- the prompt window goes with the chat (a float of it cannot stay)
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

--- The session title (the daemon's, or a prompt): shown short, see titles.lua.
function M.set_title(title)
  local short = titles.short(title)
  state.title = short ~= "" and short or nil
  refresh_winbars()
end

function M.title()
  return state.title
end

--- The session's mode (SessionInfo.mode), shown in the winbar.
function M.set_mode(mode)
  state.mode = type(mode) == "string" and mode or nil
  refresh_winbars()
end

function M.mode()
  return state.mode
end

--- A session_info update: the daemon's new title or mode.
function M.session_info(info)
  if type(info.title) == "string" and info.title ~= "" then
    M.set_title(info.title)
  end
  if info.mode then
    M.set_mode(info.mode)
  end
end

--- Pin the session's plan (the `plan` update's entries) in the winbar; {} unpins it.
function M.pin_plan(entries)
  local done, active = 0, nil
  for _, e in ipairs(entries) do
    done = done + (e.status == "completed" and 1 or 0)
    if e.status == "in_progress" and not active then
      active = style.one_line(e.content, 60)
    end
  end
  state.plan = #entries > 0 and { done = done, total = #entries, active = active } or nil
  refresh_winbars()
end

--- A plan whose steps are all done is unpinned once its turn is over (its block stays in the chat).
local function unpin_done_plan()
  if state.plan and state.plan.done == state.plan.total then
    state.plan = nil
    refresh_winbars()
  end
end

-- ---- the daemon starting ---------------------------------------------------------------------

--- Show (true) or remove (false) the "starting ToyCoder…" line at the end of the chat.
function M.starting(on)
  if on then
    if not state.starting then
      state.starting = append_virt({ { { "starting ToyCoder…", "ToyCoderStarting" } } })[1]
    end
    return
  end
  local mark = state.starting
  state.starting = nil
  if not mark or not valid() then
    return
  end
  local pos = api.nvim_buf_get_extmark_by_id(cb.buf(), ns, mark, { details = true })
  if pos[1] and not (pos[3] and pos[3].invalid) then
    edit(function(buf)
      api.nvim_buf_set_lines(buf, pos[1], pos[1] + 1, true, {})
      if is_empty(buf) then -- an empty chat stays empty rather than a blank line
        api.nvim_buf_set_lines(buf, 0, -1, true, {})
      end
    end)
  end
  pcall(api.nvim_buf_del_extmark, cb.buf(), ns, mark)
end

-- ---- turns (turn.lua) ---------------------------------------------------------------------------

M.current_turn = turn.current_turn

function M.update(t, params)
  local u = params.update or {}
  if u.kind == "plan" and type(u.entries) == "table" and not params.parentToolCallId and t == turn.current_turn() then
    M.pin_plan(u.entries)
  end
  return turn.update(t, params)
end

function M.finish(t, err, result)
  turn.finish(t, err, result)
  unpin_done_plan()
end

--- Show the prompt and get ready for the reply; the first prompt names the session until the
--- daemon's title is loaded.
function M.begin_turn(session_id, text)
  if not state.title and text:sub(1, 1) ~= "/" then
    M.set_title(text)
  end
  return turn.begin_turn(session_id, text)
end

--- Lines of information outside any turn; kind "error" shows them as an error.
function M.notice(text, kind)
  local buf = M.buf()
  if not is_empty(buf) then
    append({ "" })
  elseif not cb.is_blank(buf) then -- a notice alone on the first line: keep it (append would replace it)
    edit(function(b)
      api.nvim_buf_set_lines(b, -1, -1, true, { "" })
    end)
  end
  local group = kind == "error" and "ToyCoderError" or "ToyCoderNotice"
  local list = {}
  for _, line in ipairs(vim.split(text, "\n", { plain = true })) do
    table.insert(list, { { line, group } })
  end
  append_virt(list)
end

-- ---- whole sessions --------------------------------------------------------------------------

--- Replace the buffer with a loaded session ({session, transcript}); `note` is appended.
function M.render_session(loaded, note)
  turn.reset()
  state.starting = nil
  local rows = history.rows(loaded, note)
  local lines = {}
  for _, r in ipairs(rows) do
    table.insert(lines, r.text or "")
  end
  local changes = require("toycoder.changes")
  changes.reset()
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    api.nvim_buf_set_lines(buf, 0, -1, true, lines)
    for i, r in ipairs(rows) do
      if r.chunks then
        local mark = put_virt(i - 1, r.chunks)
        if r.changes then
          changes.remember(mark, r.changes.turnId, r.changes.files, r.changes.restoreOf)
        end
      end
    end
  end)
  local plan = {}
  for _, e in ipairs(loaded.transcript or {}) do
    if e.role == "plan" and type(e.entries) == "table" then
      plan = e.entries
    end
  end
  M.pin_plan(plan)
  unpin_done_plan()
  local info = loaded.session or {}
  M.set_title(info.title)
  M.set_mode(info.mode)
  for _, win in ipairs(vim.fn.win_findbuf(cb.buf())) do
    api.nvim_win_set_cursor(win, { api.nvim_buf_line_count(cb.buf()), 0 })
  end
end

function M.clear()
  turn.reset()
  require("toycoder.changes").reset()
  state.starting = nil
  state.plan = nil
  refresh_winbars()
  edit(function(buf)
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    api.nvim_buf_set_lines(buf, 0, -1, true, {})
  end)
end

M.display_lines = cb.display_lines
M.namespace = ns

return M
