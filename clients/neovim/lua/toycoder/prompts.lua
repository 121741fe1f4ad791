--- Questions from the daemon: toycoder/requestPermission (the review window, see review.lua),
--- toycoder/askUser (vim.ui.select / vim.ui.input) and toycoder/workspace/trust (vim.ui.select). They wait inside the RPC coroutine without
--- freezing the editor; $/cancelRequest (or the end of their turn) closes them, and so does
--- permission_resolved (another editor that has the session open answered first).
local review = require("toycoder.review")

local M = {}

local open = {} -- pending prompts: { id, session, turn, call, question, cancel = fn }

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

--- Wait for start(resolve), registered so that $/cancelRequest or the end of its turn can close
--- it: start returns the function that closes what it opened. nil when cancelled.
local function track(ctx, params, start, question)
  local entry = { id = ctx.id, session = params.sessionId, turn = params.turnId, call = params.toolCallId,
    question = question, cancel = function() end }
  table.insert(open, entry)
  local value = M.await(function(resolve)
    local ok, close = pcall(start, resolve)
    if not ok then -- a bug of ours: say so, and the request is answered as dismissed
      vim.notify("ToyCoder: " .. tostring(close), vim.log.levels.ERROR)
      resolve(nil)
      return
    end
    entry.cancel = function()
      close()
      resolve(nil)
    end
  end)
  for i, e in ipairs(open) do
    if e == entry then
      table.remove(open, i)
      break
    end
  end
  return value
end

--- Ask with vim.ui.select / vim.ui.input, registered so that a cancel can close it.
--- kind: "select" (items) or "input". Returns the choice, or nil when dismissed or cancelled.
local function ask(ctx, params, kind, items, opts, question)
  local before = floating_windows()
  return track(ctx, params, function(resolve)
    local function close()
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
    return close
  end, question)
end

--- The review window answers; closing it any other way, a cancel or the end of the turn denies.
--- With the chat hidden, a notification says a request is waiting.
function M.request_permission(params, ctx)
  if not require("toycoder.chat").win() then
    vim.notify(("ToyCoder wants to %s: a allow once, A always, d deny (in its window)"):format(
      params.title or params.tool or "?"), vim.log.levels.WARN)
  end
  local view
  local decision = track(ctx, params, function(resolve)
    view = review.open(params, resolve)
    return view.close
  end)
  if view then
    view.close()
  end
  return { decision = decision or "reject" }
end

function M.ask_user(params, ctx)
  local options = params.options
  if type(options) == "table" and #options > 0 then
    local choice = ask(ctx, params, "select", options, { prompt = params.question, kind = "toycoder.ask" }, true)
    if choice == nil then
      return { cancelled = true }
    end
    return { answer = choice }
  end
  local text = ask(ctx, params, "input", nil, { prompt = (params.question or "?") .. " " }, true)
  if text == nil then
    return { cancelled = true }
  end
  return { answer = text }
end

--- toycoder/workspace/trust: what the workspace's settings file would add, then Trust / Once / Deny
--- (vim.ui.select); dismissing it is "deny".
local TRUST = { Trust = "trust", Once = "once", Deny = "deny" }

function M.workspace_trust(params, ctx)
  local adds = type(params.adds) == "table" and params.adds or {}
  local lines = { ("%s would add:"):format(params.settingsPath or "the workspace's settings") }
  for _, row in ipairs({ { "hook", adds.hooks }, { "MCP server", adds.mcpServers }, { "allow rule", adds.allow }, { "agent", adds.agents } }) do
    for _, item in ipairs(type(row[2]) == "table" and row[2] or {}) do
      table.insert(lines, ("  %s: %s"):format(row[1], item))
    end
  end
  table.insert(lines, "Trust this workspace's settings?")
  local choice = ask(ctx, params, "select", { "Trust", "Once", "Deny" },
    { prompt = table.concat(lines, "\n"), kind = "toycoder.trust" })
  return { decision = TRUST[choice] or "deny" }
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

--- permission_resolved: the call's permission (or the turn's question) was answered in another
--- editor first; its prompt here, if still open, closes (the daemon withdraws the request too).
function M.resolved(session, turn, u)
  local question = u.decision == "answered" or u.decision == "dismissed"
  for _, e in ipairs(vim.list_slice(open)) do
    if e.session == session and ((not question and e.call ~= nil and e.call == u.toolCallId)
        or (question and e.question and e.turn == turn)) then
      e.cancel()
    end
  end
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
