--- ToyCoder for Neovim: a thin client of the toycoder daemon. It renders what the daemon sends and
--- answers what the daemon asks; agent logic, slash commands and permission decisions stay in the
--- daemon. See :help toycoder.
local config = require("toycoder.config")
local daemon = require("toycoder.daemon")
local chat = require("toycoder.chat")
local prompts = require("toycoder.prompts")
local diagnostics = require("toycoder.diagnostics") -- loaded now: it notes when buffers' diagnostics change
local documents = require("toycoder.documents")
local reload = require("toycoder.reload")
local titles = require("toycoder.titles")
local history = require("toycoder.history")

local M = {}
M.version = "0.1.0"

local state = {
  session_id = nil, -- the plugin's current session
  turn = nil, -- the running turn (chat's turn object)
  busy = false, -- a prompt is on its way (session creation included)
  elsewhere = false, -- state.turn is another editor's turn (turn_elsewhere), shown live
  elsewhere_client = nil, -- that editor's name
  context = {}, -- context items for the next prompt (:ToyCoderAdd, :ToyCoderAttach)
}


-- ---- setup -----------------------------------------------------------------------------------

function M.setup(opts)
  config.set(opts)
  local maps = config.options.keymaps or {}
  if maps.toggle then
    vim.keymap.set("n", maps.toggle, M.toggle, { desc = "ToyCoder: toggle the chat" })
  end
  if maps.ask then
    vim.keymap.set("n", maps.ask, M.ask, { desc = "ToyCoder: ask" })
    vim.keymap.set("x", maps.ask, ":ToyCoder<CR>", { desc = "ToyCoder: ask about the selection" })
  end
  return M
end

function M.session_id()
  return state.session_id
end

function M.is_busy()
  return state.busy
end

--- A statusline component: "ToyCoder: <progress>" while a turn runs, else "".
function M.statusline()
  local s = chat.status()
  return s ~= "" and ("ToyCoder: " .. s) or ""
end

-- ---- daemon events ---------------------------------------------------------------------------

local function set_status(text)
  chat.set_status(text)
  pcall(vim.api.nvim_exec_autocmds, "User", { pattern = "ToyCoderStatus", modeline = false })
end

--- Turns another daemon made in the current session: show the whole transcript again (the
--- daemon sends what was added; reloading keeps one way of showing a session). Not during our turn.
local function session_changed(params)
  if params.sessionId ~= state.session_id or state.busy then
    return
  end
  M.switch(params.sessionId)
end

--- turn_elsewhere: a turn of the current session runs in another editor (another daemon). Its prompt
--- starts a turn here and its updates (same session) render into it, "running in <client>" in the
--- winbar until `running: false`; then clean buffers whose files changed on disk are reloaded.
local function turn_elsewhere(params)
  local u = params.update
  if params.sessionId ~= state.session_id or state.busy then
    return
  end
  if u.running == true then
    if state.turn then
      chat.finish(state.turn, nil, {})
    end
    state.turn = chat.begin_turn(params.sessionId, tostring(u.prompt or ""))
    state.elsewhere = true
    state.elsewhere_client = type(u.client) == "string" and u.client ~= "" and u.client or "another editor"
    set_status("running in " .. state.elsewhere_client)
  elseif state.elsewhere then
    local t = state.turn
    state.turn, state.elsewhere = nil, false
    if t then
      chat.finish(t, nil, {})
    end
    set_status("")
    -- as at the end of our own turns: an edit that went into the other editor's buffer (its
    -- `changes` say inEditor) was saved there when that buffer was clean, and named by no changedPaths
    if config.options.auto_reload then
      reload.all(daemon.root)
    end
  end
end

daemon.on_notification("toycoder/update", function(params)
  local kind = (params.update or {}).kind
  if kind == "session_info" and params.sessionId == state.session_id then
    chat.session_info(params.update.session or {})
    return
  elseif kind == "session_changed" then
    session_changed(params)
    return
  elseif kind == "turn_elsewhere" then
    turn_elsewhere(params)
    return
  elseif kind == "permission_resolved" then -- answered first somewhere: this editor's prompt closes
    prompts.resolved(params.sessionId, params.turnId, params.update)
    if state.elsewhere and params.sessionId == state.session_id then
      set_status("running in " .. state.elsewhere_client)
    end
    return
  elseif kind == "session_deleted" then -- another editor deleted it: the daemon's one line, as sent
    if params.sessionId == state.session_id then
      chat.notice(tostring(params.update.message or ""), "error")
    end
    return
  end
  local turn = state.turn
  if not turn or params.sessionId ~= turn.session then
    return
  end
  chat.update(turn, params)
  -- The daemon says which files a call wrote; the plugin does not need to know which tools write.
  local paths = params.update.kind == "tool_result" and params.update.changedPaths
  if type(paths) == "table" and config.options.auto_reload then
    local root = daemon.root and (daemon.root .. "/") or nil
    for _, abs in ipairs(paths) do
      local rel = (root and abs:sub(1, #root) == root) and abs:sub(#root + 1) or abs
      reload.file(abs, rel)
    end
  end
  local files = params.update.kind == "changes" and params.update.files -- a turn's or a restore's (/undo)
  if type(files) == "table" and config.options.auto_reload then
    for _, f in ipairs(files) do
      if type(f.uri) == "string" and f.inEditor ~= true then -- inEditor: in the buffer already, disk unchanged
        reload.file(vim.uri_to_fname(f.uri), f.path)
      end
    end
  end
end)

-- the command list changed (a custom command's file, an MCP server's prompts): completion follows
daemon.on_notification("toycoder/commands/changed", function(params)
  require("toycoder.complete").set_commands(params.commands)
end)

daemon.on_notification("$/progress", function(params)
  local value = params.value or {}
  if value.kind == "end" then
    set_status("")
    return
  end
  local text = value.message or value.title or ""
  set_status(text)
  if config.options.notify_progress and text ~= "" then
    vim.notify("ToyCoder: " .. text, vim.log.levels.INFO)
  end
end)

local MESSAGE_LEVELS = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }

daemon.on_notification("window/showMessage", function(params)
  vim.notify("ToyCoder: " .. tostring(params.message), MESSAGE_LEVELS[params.type] or vim.log.levels.INFO)
end)

daemon.on_notification("window/logMessage", function() end)

daemon.on_notification("$/cancelRequest", function(params)
  prompts.cancel_request(params.id)
end)

daemon.on_request("toycoder/requestPermission", function(params, ctx)
  -- another editor's call: asked here as there, the first answer decides
  if state.elsewhere and params.sessionId == state.session_id then
    set_status("waiting for approval in " .. state.elsewhere_client)
  end
  return prompts.request_permission(params, ctx)
end)
daemon.on_request("toycoder/askUser", prompts.ask_user)
daemon.on_request("toycoder/workspace/trust", prompts.workspace_trust)
daemon.on_request("window/showMessageRequest", prompts.show_message_request)
daemon.on_request("workspace/applyEdit", function(params)
  return require("toycoder.apply_edit").handle(params)
end)
daemon.on_request("toycoder/diagnostics", diagnostics.handle)
daemon.on_request("window/workDoneProgress/create", function()
  return vim.NIL
end)

-- The chat says what happens while the daemon starts, and why it could not.
daemon.on("start", function()
  chat.starting(true)
end)

daemon.on("failed", function(message)
  chat.starting(false)
  chat.notice(message, "error")
end)

daemon.on("ready", function()
  chat.starting(false)
  documents.start()
  local complete = require("toycoder.complete")
  if not complete.has_commands() then
    daemon.request("toycoder/commands/list", vim.empty_dict(), function(err, result)
      if not err and result then
        complete.set_commands(result.commands)
      end
    end)
  end
end)

daemon.on("exit", function()
  chat.starting(false)
  documents.stop()
  prompts.close_all()
  set_status("")
end)

-- ---- sessions --------------------------------------------------------------------------------

local function with_session(cb)
  if state.session_id then
    cb(nil, state.session_id)
    return
  end
  daemon.request("toycoder/session/new", vim.empty_dict(), function(err, result)
    if err then
      cb(err, nil)
      return
    end
    state.session_id = result.sessionId
    chat.set_title(nil)
    chat.set_mode(result.mode)
    cb(nil, state.session_id)
  end)
end

--- Make `session_id` the current session and render its transcript (a `switch` action).
function M.switch(session_id, note, done)
  done = done or function() end
  daemon.request("toycoder/session/load", { sessionId = session_id }, function(err, loaded)
    if err then
      if not err.daemon_exited then
        chat.notice(("Error (%s): %s"):format(tostring(err.code), tostring(err.message)), "error")
      end
      done()
      return
    end
    state.session_id = session_id
    chat.render_session(loaded, note)
    done()
  end)
end

--- Follow a command's action; done() once it is followed.
local function follow_action(action, text, done)
  if type(action) == "table" and action.kind == "switch" and action.sessionId then
    M.switch(action.sessionId, text, done)
    return
  end
  if type(action) == "table" and action.kind == "quit" then
    chat.close()
  end
  done()
end

-- ---- prompts ---------------------------------------------------------------------------------

--- Send `text` as a prompt of the current session (slash commands included: the daemon runs them).
--- False when it was refused at once (a turn is still running, the daemon could not start), so the
--- caller can keep the text.
function M.prompt(text)
  if state.busy then
    vim.notify("ToyCoder: a turn is still running (:ToyCoderCancel stops it)", vim.log.levels.WARN)
    return false
  end
  state.busy = true
  local opened, open_err = pcall(chat.open, false)
  if not opened then -- e.g. no room for a split: the turn still runs, :ToyCoder shows it
    vim.notify("ToyCoder: cannot open the chat window: " .. tostring(open_err), vim.log.levels.WARN)
  end
  local taken = true
  with_session(function(err, sid)
    if err then
      state.busy, taken = false, false
      if not err.daemon_exited then
        chat.notice(("Error (%s): %s"):format(tostring(err.code), tostring(err.message)), "error")
      end
      return
    end
    documents.flush()
    local turn = chat.begin_turn(sid, text)
    state.turn, state.elsewhere = turn, false
    local params = { sessionId = sid, text = text }
    if #state.context > 0 then
      params.context, state.context = state.context, {}
    end
    daemon.request("toycoder/prompt", params, function(perr, result)
      state.turn = nil
      local ok, e = pcall(function()
        prompts.close_turn(sid, turn.id)
        set_status("")
        chat.finish(turn, perr, result)
        if perr and perr.code == -32010 and state.session_id == sid then
          state.session_id = nil -- gone: the next prompt starts a new session
        end
        if config.options.auto_reload then
          reload.all(daemon.root)
        end
        -- busy until the action is followed, so nothing goes to the old session meanwhile
        follow_action(result and result.action, result and result.text, function()
          state.busy = false
        end)
      end)
      if not ok then
        state.busy = false
        vim.notify("ToyCoder: internal error: " .. tostring(e), vim.log.levels.ERROR)
      end
    end)
  end)
  return taken -- false only when the session could not be had at once (a later failure has its message)
end

--- Cancel the running turn of the current session.
function M.cancel()
  if not state.session_id or not daemon.is_ready() then
    vim.notify("ToyCoder: nothing to cancel", vim.log.levels.INFO)
    return
  end
  daemon.request("toycoder/cancel", { sessionId = state.session_id }, function(err, result)
    if err then
      if not err.daemon_exited then
        vim.notify("ToyCoder: cancel failed: " .. tostring(err.message), vim.log.levels.ERROR)
      end
    elseif result and not result.cancelled then
      vim.notify("ToyCoder: no turn is running", vim.log.levels.INFO)
    end
  end)
end

--- Open the prompt buffer below the chat (input.lua) to type a prompt, with completion.
function M.ask()
  daemon.start() -- warm up while the person types
  require("toycoder.input").open()
end

function M.toggle()
  chat.toggle()
  if chat.win() then
    daemon.start() -- warm up while the person types
  end
end

--- The lines line1..line2 of the current buffer, fenced, with the file path and line numbers.
local function selection_context(line1, line2)
  local buf = vim.api.nvim_get_current_buf()
  local lines = vim.api.nvim_buf_get_lines(buf, line1 - 1, line2, false)
  local name = vim.api.nvim_buf_get_name(buf)
  local path = name ~= "" and vim.fs.normalize(vim.fn.fnamemodify(name, ":p")) or "[No Name]"
  local root = daemon.root or config.root()
  if path:sub(1, #root + 1) == root .. "/" then
    path = path:sub(#root + 2)
  end
  local fence = "```"
  for _, l in ipairs(lines) do
    while l:find(fence, 1, true) do
      fence = fence .. "`"
    end
  end
  local where = line1 == line2 and ("line %d"):format(line1) or ("lines %d-%d"):format(line1, line2)
  local out = { ("From `%s`, %s:"):format(path, where), fence .. (vim.bo[buf].filetype or "") }
  vim.list_extend(out, lines)
  table.insert(out, fence)
  return table.concat(out, "\n")
end

--- :ToyCoder [text]: toggle, prompt, slash command, or (with a range) ask about the selection.
function M.command(o)
  local text = vim.trim(o.args or "")
  if o.range and o.range > 0 and text:sub(1, 1) ~= "/" then
    local context = selection_context(o.line1, o.line2)
    if text == "" then
      vim.ui.input({ prompt = "ToyCoder (about the selection)> " }, function(q)
        if q and q ~= "" then
          M.prompt(q .. "\n\n" .. context)
        end
      end)
      return
    end
    M.prompt(text .. "\n\n" .. context)
    return
  end
  if text == "" then
    M.toggle()
  else
    M.prompt(text)
  end
end

--- :ToyCoderAdd (with a range): the selection becomes a context item of the next prompt.
function M.add_selection(line1, line2)
  local buf = vim.api.nvim_get_current_buf()
  local lines = vim.api.nvim_buf_get_lines(buf, line1 - 1, line2, false)
  table.insert(state.context, {
    type = "selection",
    uri = vim.uri_from_bufnr(buf),
    text = table.concat(lines, "\n"),
    range = { start = { line = line1 - 1, character = 0 }, ["end"] = { line = line2, character = 0 } },
  })
  vim.notify(("ToyCoder: lines %d-%d added to the next prompt (%d item(s))"):format(line1, line2, #state.context))
end

local IMAGE_TYPES = { png = "image/png", jpg = "image/jpeg", jpeg = "image/jpeg", gif = "image/gif", webp = "image/webp" }

--- :ToyCoderAttach <image>: the image becomes a context item of the next prompt (the daemon checks it).
function M.attach(path)
  local file = vim.fn.fnamemodify(vim.fn.expand(path), ":p")
  local mime = IMAGE_TYPES[(file:match("%.([^.]+)$") or ""):lower()]
  if not mime then
    vim.notify("ToyCoder: attach a png, jpeg, gif or webp image", vim.log.levels.WARN)
    return
  end
  local f = io.open(file, "rb")
  if not f then
    vim.notify("ToyCoder: cannot read " .. file, vim.log.levels.ERROR)
    return
  end
  local data = f:read("*a")
  f:close()
  table.insert(state.context, { type = "image", mimeType = mime, data = vim.base64.encode(data) })
  vim.notify(("ToyCoder: %s attached to the next prompt"):format(vim.fs.basename(file)))
end

--- :ToyCoderSessions: pick a session (toycoder/session/list) and switch to it (/switch, so the
--- daemon decides).
function M.pick_session()
  daemon.request("toycoder/session/list", vim.empty_dict(), function(err, result)
    if err then
      daemon.report_error(err)
      return
    end
    local sessions = result.sessions or {}
    if #sessions == 0 then
      vim.notify("ToyCoder: no sessions yet", vim.log.levels.INFO)
      return
    end
    vim.ui.select(sessions, {
      prompt = "ToyCoder sessions",
      kind = "toycoder.session",
      format_item = function(s)
        local mark = s.sessionId == state.session_id and "* " or "  "
        local title = titles.short(s.title)
        title = title ~= "" and title or "(untitled)"
        local count = history.count(s.messageCount, "msg")
        return ("%s%s  %s  %s  %s"):format(mark, s.sessionId:sub(1, 8), (s.updatedAt or ""):sub(1, 16), count, title)
      end,
    }, function(choice)
      if choice then
        M.prompt("/switch " .. choice.sessionId)
      end
    end)
  end)
end

--- :ToyCoderMode: pick the session's mode (modes.lua).
function M.pick_mode()
  require("toycoder.modes").pick(with_session)
end

--- :ToyCoderCheckpoints: pick a checkpoint of the current session and restore it.
function M.pick_checkpoint()
  require("toycoder.checkpoints").pick(state.session_id, state.busy)
end

--- Completion for :ToyCoder (see complete.lua).
function M.complete(arglead, cmdline, cursorpos)
  return require("toycoder.complete").complete(arglead, cmdline, cursorpos)
end

return M
