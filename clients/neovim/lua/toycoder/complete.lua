--- Completion for :ToyCoder: command names from toycoder/commands/list, session ids for a command
--- whose usage says <id>, command names for [command], `@` mentions from toycoder/mentions/complete.
local daemon = require("toycoder.daemon")

local M = {}

local cache = { commands = nil } -- toycoder/commands/list, filled once the daemon is ready

--- Keep the command list the daemon sent (after initialize).
function M.set_commands(commands)
  cache.commands = commands
end

function M.has_commands()
  return cache.commands ~= nil
end

local function commands_list()
  if not cache.commands then
    local err, result = daemon.request_sync("toycoder/commands/list", vim.empty_dict(), 5000)
    if not err and result then
      cache.commands = result.commands
    end
  end
  return cache.commands or {}
end

local function filter(items, lead)
  local out = {}
  for _, item in ipairs(items) do
    if vim.startswith(item, lead) then
      table.insert(out, item)
    end
  end
  table.sort(out)
  return out
end

--- Completion for :ToyCoder: command names from toycoder/commands/list; the argument of a command
--- whose usage says <id> completes session ids, [command] completes command names.
function M.complete(arglead, cmdline, cursorpos)
  local before = cmdline:sub(1, cursorpos)
  local args = before:match("ToyCoder!?%s+(.*)$")
  if not args then
    return {}
  end
  if arglead:sub(1, 1) == "@" then -- a mention: files, folders, MCP resources, as the daemon lists them
    local err, result = daemon.request_sync("toycoder/mentions/complete", { prefix = arglead:sub(2), limit = 50 }, 2000)
    local out = {}
    for _, item in ipairs((not err and result and result.items) or {}) do
      table.insert(out, "@" .. item.label)
    end
    return out
  end
  local cmds = commands_list()
  if not args:find("%s") then
    if arglead ~= "" and arglead:sub(1, 1) ~= "/" then
      return {}
    end
    local names = {}
    for _, c in ipairs(cmds) do
      table.insert(names, "/" .. c.name)
      for _, a in ipairs(c.aliases or {}) do
        table.insert(names, "/" .. a)
      end
    end
    return filter(names, arglead)
  end
  local first = args:match("^/(%S+)")
  local cmd
  for _, c in ipairs(cmds) do
    if c.name == first or vim.tbl_contains(c.aliases or {}, first) then
      cmd = c
    end
  end
  if not cmd or select(2, args:gsub("%s+", " ")) > 1 then
    return {}
  end
  local usage = cmd.usage or ""
  if usage:find("<id", 1, true) then
    local err, result = daemon.request_sync("toycoder/session/list", vim.empty_dict(), 3000)
    local ids = {}
    for _, s in ipairs((not err and result and result.sessions) or {}) do
      table.insert(ids, s.sessionId)
    end
    return filter(ids, arglead)
  elseif usage:find("[command]", 1, true) then
    local names = {}
    for _, c in ipairs(cmds) do
      table.insert(names, c.name)
    end
    return filter(names, arglead)
  end
  return {}
end

return M
