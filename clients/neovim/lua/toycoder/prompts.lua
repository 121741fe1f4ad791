--- Questions from the daemon: toycoder/requestPermission (diff preview + vim.ui.select) and
--- toycoder/askUser (vim.ui.select / vim.ui.input). They wait inside the RPC coroutine without
--- freezing the editor; $/cancelRequest (or the end of their turn) closes them.
local M = {}

local open = {} -- pending prompts: { id, session, turn, cancel = fn }

--- Run start(resolve) and wait for resolve(value): yields the RPC coroutine when possible, else
--- waits with vim.wait (the editor keeps processing events). A value that comes synchronously is
--- returned at once.
function M.await(start)
  local co = coroutine.running()
  local can_yield = co ~= nil and coroutine.isyieldable()
  local done, value, waiting = false, nil, false
  local function resolve(v)
    if done then
      return
    end
    done, value = true, v
    if waiting then
      waiting = false
      local ok, err = coroutine.resume(co, v)
      if not ok then
        vim.notify("ToyCoder: " .. tostring(err), vim.log.levels.ERROR)
      end
    end
  end
  start(resolve)
  if done then
    return value
  end
  if can_yield then
    waiting = true
    return coroutine.yield()
  end
  vim.wait(1e9, function()
    return done
  end, 20)
  return value
end

local function floating_windows()
  local set = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= "" then
      set[win] = true
    end
  end
  return set
end

--- Ask with vim.ui.select / vim.ui.input, registered so that a cancel can close it.
--- kind: "select" (items) or "input". Returns the choice, or nil when dismissed or cancelled.
local function ask(ctx, params, kind, items, opts, on_close)
  local entry = { id = ctx.id, session = params.sessionId, turn = params.turnId }
  table.insert(open, entry)
  local before = floating_windows()
  local choice = M.await(function(resolve)
    entry.cancel = function()
      -- Close whatever the vim.ui implementation opened (telescope, dressing, snacks...).
      for win in pairs(floating_windows()) do
        local buf = vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win)
        if not before[win] and buf and not vim.b[buf].toycoder_chat then
          pcall(vim.api.nvim_win_close, win, true)
        end
      end
      if vim.fn.mode() == "i" then
        vim.cmd.stopinsert()
      end
      resolve(nil)
    end
    local ok, err = pcall(function()
      if kind == "select" then
        vim.ui.select(items, opts, function(item)
          resolve(item)
        end)
      else
        vim.ui.input(opts, function(text)
          resolve(text)
        end)
      end
    end)
    if not ok then
      vim.notify("ToyCoder: " .. tostring(err), vim.log.levels.ERROR)
      resolve(nil)
    end
  end)
  for i, e in ipairs(open) do
    if e == entry then
      table.remove(open, i)
      break
    end
  end
  if on_close then
    on_close()
  end
  return choice
end

local function split_lines(s)
  return vim.split((s or ""):gsub("\n$", ""), "\n", { plain = true })
end

--- The preview float: the diff with diff highlighting, or the command and its cwd.
local function open_preview(params)
  local preview = params.preview or {}
  local lines, ft
  if preview.kind == "diff" then
    lines, ft = split_lines(preview.diff), "diff"
  elseif preview.kind == "command" then
    -- a command may span lines (and carries its sandbox policy on a comment line below it)
    lines, ft = split_lines("$ " .. tostring(preview.command)), "sh"
    vim.list_extend(lines, { "", "cwd: " .. tostring(preview.cwd) })
  else
    local args = params.arguments
    lines = split_lines(type(args) == "table" and vim.json.encode(args) or tostring(args or ""))
    ft = "json"
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = ft
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  local title = (" ToyCoder wants to: %s "):format(params.title or params.tool or "?")
  width = math.min(math.max(width + 1, #title + 2), math.floor(vim.o.columns * 0.9))
  local height = math.max(1, math.min(#lines, math.floor((vim.o.lines - 6) * 0.7)))
  local win = vim.api.nvim_open_win(buf, false, {
    relative = "editor",
    row = 1,
    col = math.max(0, math.floor((vim.o.columns - width) / 2) - 1),
    width = width,
    height = height,
    border = "rounded",
    title = title,
    title_pos = "center",
    style = "minimal",
    focusable = true,
    zindex = 60,
  })
  vim.wo[win].wrap = false
  vim.api.nvim_exec_autocmds("User", { pattern = "ToyCoderPermission", modeline = false, data = { buf = buf, win = win } })
  return win
end

M.CHOICES = { "Allow once", "Always allow", "Deny" }
local DECISIONS = { ["Allow once"] = "allow_once", ["Always allow"] = "allow_always", ["Deny"] = "reject" }

function M.request_permission(params, ctx)
  local win = open_preview(params)
  vim.cmd.redraw() -- the default vim.ui.select (inputlist) blocks: show the diff first
  local level = params.level and (" (" .. params.level .. ")") or ""
  local choice = ask(ctx, params, "select", M.CHOICES, {
    prompt = ("ToyCoder wants to %s%s:"):format(params.title or params.tool or "?", level),
    kind = "toycoder.permission",
  }, function()
    if vim.api.nvim_win_is_valid(win) then
      pcall(vim.api.nvim_win_close, win, true)
    end
  end)
  return { decision = DECISIONS[choice] or "reject" }
end

function M.ask_user(params, ctx)
  local options = params.options
  if type(options) == "table" and #options > 0 then
    local choice = ask(ctx, params, "select", options, { prompt = params.question, kind = "toycoder.ask" })
    if choice == nil then
      return { cancelled = true }
    end
    return { answer = choice }
  end
  local text = ask(ctx, params, "input", nil, { prompt = (params.question or "?") .. " " })
  if text == nil then
    return { cancelled = true }
  end
  return { answer = text }
end

--- The standard LSP fallback (we declare our capabilities, but answer it properly anyway).
function M.show_message_request(params, ctx)
  local titles = {}
  for _, a in ipairs(params.actions or {}) do
    table.insert(titles, a.title)
  end
  if #titles == 0 then
    vim.notify("ToyCoder: " .. tostring(params.message), vim.log.levels.INFO)
    return vim.NIL
  end
  local choice = ask(ctx, params, "select", titles, { prompt = params.message, kind = "toycoder.message" })
  return choice and { title = choice } or vim.NIL
end

--- $/cancelRequest from the daemon: close that prompt (its answer would be ignored anyway).
function M.cancel_request(id)
  for _, e in ipairs(open) do
    if e.id ~= nil and e.id == id then
      e.cancel()
      return true
    end
  end
  -- The id could not be read from the frame: the oldest prompt without a known id is the one.
  for _, e in ipairs(open) do
    if e.id == nil then
      e.cancel()
      return true
    end
  end
  return false
end

--- A turn ended: any prompt it still has open is moot.
function M.close_turn(session, turn)
  for _, e in ipairs(vim.list_slice(open)) do
    if e.session == session and (turn == nil or e.turn == turn) then
      e.cancel()
    end
  end
end

function M.close_all()
  for _, e in ipairs(vim.list_slice(open)) do
    e.cancel()
  end
end

function M.pending()
  return #open
end

return M
