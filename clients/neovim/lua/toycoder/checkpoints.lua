--- :ToyCoderCheckpoints: the session's checkpoints (toycoder/checkpoint/list) in vim.ui.select;
--- the one chosen is restored (that turn and every later one go back to before it). Conflicts (a
--- file changed outside the agent since) are listed with a choice to force; restored files'
--- buffers reload. The daemon does the restoring; this only asks and shows.
local config = require("toycoder.config")
local daemon = require("toycoder.daemon")
local reload = require("toycoder.reload")
local chat = require("toycoder.chat")
local style = require("toycoder.style")

local M = {}


--- `path` as the daemon sent it (workspace-relative or absolute) -> absolute.
local function absolute(path)
  if path:sub(1, 1) == "/" then
    return path
  end
  return (daemon.root or config.root()) .. "/" .. path
end

--- One line of the picker: when, the prompt's first line, the files.
function M.format(cp)
  local files = cp.files or {}
  local chunks = style.changes_chunks("", files)
  local summary = chunks[2][1] .. chunks[3][1] .. chunks[4][1]
  local when = tostring(cp.createdAt or "?"):sub(1, 16):gsub("T", " ") -- ISO 8601 UTC, to the minute
  local id = tostring(cp.turnId or "?")
  local n = id:match("%-(%d+)$") -- the daemon's ids are <session>-<turn number>
  return ("%s  %s  %s  %s"):format(when, n and ("turn " .. n) or id:sub(1, 8), summary,
    style.one_line(cp.prompt ~= "" and cp.prompt or "(no prompt)", 60))
end

local function after_restore(session_id, turn_id, result, force)
  local in_buffer = {} -- restored through applyEdit: the buffer has it, the disk did not change
  for _, path in ipairs(type(result.inEditor) == "table" and result.inEditor or {}) do
    in_buffer[path] = true
  end
  for _, path in ipairs(result.restored or {}) do
    if not in_buffer[path] then
      reload.file(absolute(path), path)
    end
  end
  local conflicts = result.conflicts or {}
  local lines = {}
  if #(result.restored or {}) > 0 then
    table.insert(lines, "restored " .. table.concat(result.restored, ", "))
  end
  if result.note and result.note ~= "" then
    table.insert(lines, result.note)
  end
  if #lines > 0 then
    chat.notice(table.concat(lines, " · "), "info")
  end
  if #conflicts == 0 or force then
    return
  end
  local items = { "Keep them (restore nothing more)" }
  local reasons = {}
  for _, c in ipairs(conflicts) do
    table.insert(reasons, ("%s: %s"):format(c.path, c.reason))
  end
  table.insert(items, 1, "Force: overwrite " .. #conflicts .. " file(s) changed since")
  vim.ui.select(items, {
    prompt = "ToyCoder: not restored, changed outside the agent — " .. table.concat(reasons, "; "),
    kind = "toycoder.restore_conflicts",
  }, function(_, idx)
    if idx == 1 then
      local paths = {}
      for _, c in ipairs(conflicts) do
        table.insert(paths, c.path)
      end
      M.restore(session_id, turn_id, { paths = paths, force = true })
    end
  end)
end

--- Restore `turn_id` (opts.paths: only those; opts.force: overwrite conflicts).
function M.restore(session_id, turn_id, opts)
  opts = opts or {}
  local params = { sessionId = session_id, turnId = turn_id, paths = opts.paths, force = opts.force or nil }
  daemon.request("toycoder/checkpoint/restore", params, function(err, result)
    if err then
      daemon.report_error(err)
      return
    end
    after_restore(session_id, turn_id, result or {}, opts.force)
  end)
end

--- The picker. `session_id` nil: there is nothing to list yet.
function M.pick(session_id, busy)
  if not session_id then
    vim.notify("ToyCoder: no session yet: nothing to restore", vim.log.levels.INFO)
    return
  end
  if busy then
    vim.notify("ToyCoder: a turn is still running (:ToyCoderCancel stops it)", vim.log.levels.WARN)
    return
  end
  daemon.request("toycoder/checkpoint/list", { sessionId = session_id }, function(err, result)
    if err then
      daemon.report_error(err)
      return
    end
    local list = result and result.checkpoints or {}
    if #list == 0 then
      vim.notify("ToyCoder: no checkpoints in this session (no turn changed files)", vim.log.levels.INFO)
      return
    end
    local newest_first = {}
    for i = #list, 1, -1 do
      table.insert(newest_first, list[i])
    end
    vim.ui.select(newest_first, {
      prompt = "ToyCoder: restore the files to before which turn?",
      kind = "toycoder.checkpoint",
      format_item = M.format,
    }, function(choice)
      if choice then
        M.restore(session_id, choice.turnId)
      end
    end)
  end)
end

return M
