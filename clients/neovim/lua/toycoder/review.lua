--- The permission proposal window: the whole diff (or the command and its cwd) in a focused,
--- scrollable float or split whose buffer-local keys answer it (a allow once, A always, d/q deny,
--- D a :diffthis tab of the current file vs the proposed one). A key maps to a decision string and
--- nothing more: what a decision means is the daemon's business.
local config = require("toycoder.config")
local patch = require("toycoder.patch")

local M = {}
local api = vim.api

M.KEYS = { a = "allow_once", A = "allow_always", d = "reject", q = "reject" }
local HINT = "a allow once · A always · d/q deny"

local function split_lines(s)
  return vim.split((s or ""):gsub("\n$", ""), "\n", { plain = true })
end

--- What the window shows, and its filetype.
local function content(params)
  local preview = params.preview or {}
  if preview.kind == "diff" then
    return split_lines(preview.diff), "diff"
  elseif preview.kind == "command" then
    -- a command may span lines (and carries its sandbox policy on a comment line below it)
    local lines = split_lines("$ " .. tostring(preview.command))
    vim.list_extend(lines, { "", "cwd: " .. tostring(preview.cwd) })
    return lines, "sh"
  end
  local args = params.arguments
  return split_lines(type(args) == "table" and vim.json.encode(args) or tostring(args or "")), "json"
end

local function scratch(lines, ft)
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = ft
  return buf
end

local function escape_bar(s)
  return (s:gsub("%%", "%%%%"))
end

local function map_keys(buf, view, keys)
  for lhs, decision in pairs(keys) do
    vim.keymap.set("n", lhs, function()
      if not view.armed then -- typed for what was there before the window: not an answer
        vim.notify("ToyCoder: read the proposal first; its keys work in a moment", vim.log.levels.INFO)
        return
      end
      view.decide(decision)
    end, { buffer = buf, nowait = true, silent = true, desc = "ToyCoder: " .. decision })
  end
end

-- ---- the diff tab ----------------------------------------------------------------------------

local function close_tab(view)
  local tab, loaded = view.tab, view.loaded
  view.tab, view.loaded = nil, nil
  if tab and api.nvim_tabpage_is_valid(tab) and #api.nvim_list_tabpages() > 1 then
    pcall(vim.cmd.tabclose, api.nvim_tabpage_get_number(tab))
  end
  -- a file buffer loaded only for the diff goes again, unless it is shown or edited meanwhile
  if loaded and api.nvim_buf_is_valid(loaded) and not vim.bo[loaded].modified and #vim.fn.win_findbuf(loaded) == 0 then
    pcall(api.nvim_buf_delete, loaded, {})
  end
end

--- D: a new tab with the current file (its buffer, unsaved text included) and the proposed text
--- side by side under :diffthis. When the diff does not apply to the current text (it changed
--- meanwhile), both sides come from the hunks instead, and a warning says so.
local function open_diff_tab(view)
  if view.tab and api.nvim_tabpage_is_valid(view.tab) then
    api.nvim_set_current_tabpage(view.tab)
    return
  end
  local preview = view.params.preview or {}
  if preview.kind ~= "diff" or type(preview.uri) ~= "string" then
    vim.notify("ToyCoder: this request has no diff to open", vim.log.levels.INFO)
    return
  end
  local fname = vim.uri_to_fname(preview.uri)
  local parsed = patch.parse(preview.diff) or {}
  local ft = vim.filetype.match({ filename = fname }) or ""
  local current_buf
  if not parsed.creates and (vim.fn.bufloaded(fname) == 1 or vim.fn.filereadable(fname) == 1) then
    local was_loaded = vim.fn.bufloaded(fname) == 1
    -- noswapfile: a swap file of another editor must not stop the review with its question
    vim.cmd((was_loaded and "" or "noswapfile ") .. "tabedit " .. vim.fn.fnameescape(fname))
    current_buf = api.nvim_get_current_buf()
    view.loaded = not was_loaded and current_buf or nil
    ft = vim.bo[current_buf].filetype
  else
    vim.cmd("tabnew")
    current_buf = api.nvim_get_current_buf()
    vim.bo[current_buf].buftype = "nofile"
    vim.bo[current_buf].bufhidden = "wipe"
  end
  view.tab = api.nvim_get_current_tabpage()
  local current_win = api.nvim_get_current_win()
  local current = api.nvim_buf_get_lines(current_buf, 0, -1, false)
  if parsed.creates then
    current = {}
  end
  local proposed, why = patch.apply(current, preview.diff)
  if not proposed then
    vim.notify(("ToyCoder: the diff does not apply to the current %s (%s); showing its hunks only"):format(
      preview.path or fname, why), vim.log.levels.WARN)
    local old
    old, proposed = patch.sides(preview.diff)
    current_buf = scratch(old, ft)
    api.nvim_win_set_buf(current_win, current_buf)
  end
  local label = parsed.creates and " (a new file)" or ""
  vim.wo[current_win].winbar = escape_bar(" current: " .. (preview.path or fname) .. label)
  local proposed_buf = scratch(proposed, ft)
  local proposed_win = api.nvim_open_win(proposed_buf, true, { split = "right", win = current_win })
  vim.wo[proposed_win].winbar = escape_bar((" proposed by ToyCoder · %s · q back"):format((HINT:gsub("d/q", "d"))))
  map_keys(proposed_buf, view, { a = "allow_once", A = "allow_always", d = "reject" })
  vim.keymap.set("n", "q", function()
    close_tab(view)
    if view.win and api.nvim_win_is_valid(view.win) then
      api.nvim_set_current_win(view.win)
    end
  end, { buffer = proposed_buf, nowait = true, silent = true, desc = "ToyCoder: back to the request" })
  for _, win in ipairs({ current_win, proposed_win }) do
    api.nvim_win_call(win, function()
      vim.cmd.diffthis()
    end)
  end
end

-- ---- the request window ----------------------------------------------------------------------

local function open_window(buf, params, nlines, width, enter)
  local title = (" ToyCoder wants to: %s "):format(params.title or params.tool or "?")
  local footer = (" %s · D diff tab · %d lines "):format(HINT, nlines)
  if (params.preview or {}).kind ~= "diff" then
    footer = (" %s · %d lines "):format(HINT, nlines)
  end
  local layout = (config.options.permission or {}).layout
  if layout == "split" then
    local height = math.max(3, math.min(nlines, math.floor(vim.o.lines * 0.4)))
    local win = api.nvim_open_win(buf, enter, { split = "below", win = -1, height = height })
    vim.wo[win].winbar = escape_bar(title .. "·" .. footer)
    return win
  end
  width = math.max(width + 2, #title + 2, vim.fn.strdisplaywidth(footer) + 2)
  width = math.min(width, math.floor(vim.o.columns * 0.9))
  local height = math.max(1, math.min(nlines, math.floor((vim.o.lines - 4) * 0.7)))
  return api.nvim_open_win(buf, enter, {
    relative = "editor",
    row = 1,
    col = math.max(0, math.floor((vim.o.columns - width) / 2) - 1),
    width = width,
    height = height,
    border = "rounded",
    title = title,
    title_pos = "center",
    footer = footer,
    footer_pos = "center",
    zindex = 60,
  })
end

--- Open the window for a toycoder/requestPermission. `decide(decision)` is called on a key, or
--- with "reject" when the window is closed any other way. Returns the view; view.close() closes
--- its windows (and the diff tab) without deciding.
function M.open(params, decide)
  local lines, ft = content(params)
  local buf = scratch(lines, ft)
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  local view = { params = params, buf = buf, prev = api.nvim_get_current_win(), closed = false }
  view.decide = function(decision)
    if not view.closed then
      decide(decision)
    end
  end
  if vim.fn.mode() ~= "n" then
    vim.cmd.stopinsert()
  end
  -- The window takes the focus while the person may be typing: keys already typed are dropped,
  -- and the decision keys work only after `arm_ms` (as the terminal client flushes its input).
  while vim.fn.getchar(1) ~= 0 do
    vim.fn.getchar(0)
  end
  local entered, win = pcall(open_window, buf, params, #lines, width, true)
  -- e.g. in the command-line window, which cannot be left: shown, focused later by the person
  view.win = entered and win or open_window(buf, params, #lines, width, false)
  vim.defer_fn(function()
    view.armed = true
    if api.nvim_buf_is_valid(buf) then
      vim.b[buf].toycoder_armed = true
    end
  end, (config.options.permission or {}).arm_ms or 0)
  vim.wo[view.win].wrap = false
  vim.wo[view.win].cursorline = true
  vim.wo[view.win].winfixbuf = true
  map_keys(buf, view, M.KEYS)
  vim.keymap.set("n", "D", function()
    open_diff_tab(view)
  end, { buffer = buf, nowait = true, silent = true, desc = "ToyCoder: open a diff tab" })
  view.augroup = api.nvim_create_augroup("toycoder_review_" .. buf, { clear = true })
  api.nvim_create_autocmd("WinClosed", {
    group = view.augroup,
    pattern = tostring(view.win),
    callback = function()
      view.decide("reject")
    end,
  })
  api.nvim_create_autocmd("BufWipeout", {
    group = view.augroup,
    buffer = buf,
    callback = function()
      view.decide("reject")
    end,
  })
  view.close = function()
    if view.closed then
      return
    end
    view.closed = true
    pcall(api.nvim_del_augroup_by_id, view.augroup)
    close_tab(view)
    local was_current = api.nvim_get_current_win() == view.win
    if api.nvim_win_is_valid(view.win) then
      pcall(api.nvim_win_close, view.win, true)
    end
    if was_current and api.nvim_win_is_valid(view.prev) then
      api.nvim_set_current_win(view.prev)
    end
  end
  api.nvim_exec_autocmds("User", { pattern = "ToyCoderPermission", modeline = false, data = { buf = buf, win = view.win } })
  return view
end

return M
