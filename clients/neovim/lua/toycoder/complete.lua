--- Completion for :ToyCoder (command names from toycoder/commands/list, session ids for a command
--- whose usage says <id>, command names for [command], `@` mentions from toycoder/mentions/complete)
--- and for the prompt buffer: `@` mentions anywhere, `/` commands at its start. The omnifunc, the
--- nvim-cmp source (cmp.lua) and the blink.cmp source (blink.lua) all take M.prompt_items.
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

--- What `@prefix` may name, as the daemon lists it: cb(items) with {label, kind, uri} (none on error).
local function mentions(prefix, cb)
  local params = { prefix = prefix, limit = 50 }
  local sid = require("toycoder").session_id() -- its MCP servers' resources too
  if sid then
    params.sessionId = sid
  end
  daemon.request("toycoder/mentions/complete", params, function(err, result)
    cb((not err and result and result.items) or {})
  end)
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
    local items
    mentions(arglead:sub(2), function(found)
      items = found
    end)
    vim.wait(2000, function()
      return items ~= nil
    end, 10)
    return vim.tbl_map(function(item)
      return "@" .. item.label
    end, items or {})
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

--- What completes at the end of `before` (the text before the cursor on line `row` of the prompt):
--- an `@` mention after a space or at the line's start, or a command name when the prompt starts with
--- `/`. start: the 0-based byte column where the completed word begins.
local function prompt_context(before, row)
  local at = before:match("()@[^%s@]*$")
  if at and (at == 1 or before:sub(at - 1, at - 1):match("%s")) then
    return { mention = true, start = at - 1, prefix = before:sub(at + 1) }
  end
  if row == 1 and before:match("^/%S*$") then
    return { mention = false, start = 0, prefix = before:sub(2) }
  end
  return nil
end

--- The prompt buffer's completion at the end of `before` on line `row` (1-based): cb(nil) when
--- nothing completes there, else cb({start = 0-based byte column, items = {{word, kind, detail}}}),
--- word being what replaces the text from start to the cursor; kind: file, folder, resource, command.
function M.prompt_items(before, row, cb)
  local ctx = prompt_context(before, row)
  if not ctx then
    cb(nil)
  elseif ctx.mention then
    mentions(ctx.prefix, function(found)
      cb({ start = ctx.start, items = vim.tbl_map(function(item)
        return { word = "@" .. item.label, kind = item.kind, detail = item.uri }
      end, found) })
    end)
  else
    local items = {}
    for _, c in ipairs(commands_list()) do
      for _, name in ipairs(vim.list_extend({ c.name }, c.aliases or {})) do
        if vim.startswith(name, ctx.prefix) then
          table.insert(items, { word = "/" .. name, kind = "command", detail = c.help or c.usage })
        end
      end
    end
    table.sort(items, function(a, b)
      return a.word < b.word
    end)
    cb({ start = ctx.start, items = items })
  end
end

local LSP_KIND = { file = 17, folder = 19, resource = 18, command = 14 } -- CompletionItemKind: File, Folder, Reference, Keyword

--- prompt_items' answer as LSP CompletionItems whose textEdit replaces from its start to `col` (a byte
--- column) on the 0-based `line`: what nvim-cmp's and blink.cmp's sources hand back.
function M.lsp_items(found, line, col)
  local range = { start = { line = line, character = found.start }, ["end"] = { line = line, character = col } }
  return vim.tbl_map(function(item)
    return { label = item.word, kind = LSP_KIND[item.kind], detail = item.detail, textEdit = { newText = item.word, range = range } }
  end, found.items)
end

--- The prompt buffer's 'omnifunc' (i_CTRL-X_CTRL-O). Asynchronous as vim.lsp.omnifunc is: the first
--- call asks and returns -2, the answer opens the menu with complete() if the line is still the same
--- (waiting here would hold the text lock while the chat streams).
function M.omnifunc(findstart, _)
  if findstart ~= 1 then
    return {}
  end
  local buf, win = vim.api.nvim_get_current_buf(), vim.api.nvim_get_current_win()
  local row, col = unpack(vim.api.nvim_win_get_cursor(win))
  local line = vim.api.nvim_get_current_line()
  M.prompt_items(line:sub(1, col), row, function(found)
    vim.schedule(function()
      if not found or vim.api.nvim_get_current_buf() ~= buf or vim.fn.mode():sub(1, 1) ~= "i"
        or vim.api.nvim_get_current_line() ~= line then
        return
      end
      vim.fn.complete(found.start + 1, vim.tbl_map(function(item)
        return { word = item.word, menu = "[" .. item.kind .. "]", info = item.detail or "", icase = 1 }
      end, found.items))
    end)
  end)
  return -2
end

return M
