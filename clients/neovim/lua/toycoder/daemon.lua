--- The one daemon of this Neovim: started lazily with vim.lsp.rpc.start (Content-Length JSON-RPC),
--- initialized, asked things, stopped on VimLeavePre; a crash gives one message and the next use
--- starts a new one.
local config = require("toycoder.config")

local M = {}

local ErrorCodes = vim.lsp.protocol.ErrorCodes
-- Our own code for "the daemon went away while this request was in flight".
M.DAEMON_EXITED = -32099

---@type vim.lsp.rpc.PublicClient?
local rpc = nil
local status = "stopped" -- stopped | starting | ready | dead
local generation = 0 -- bumps on every start: callbacks of an older process are ignored
local queue = {} -- functions to run once ready
local pending = {} -- in-flight requests: id -> callback
local notification_handlers = {} -- method -> fn(params)
local request_handlers = {} -- method -> fn(params, ctx) -> result, err
local listeners = { start = {}, ready = {}, failed = {}, exit = {} }
local stopping = false
M.server_info = nil
M.root = nil
-- The wire protocol this plugin speaks (toycoder_daemon/wire/protocol.py PROTOCOL_VERSION).
M.PROTOCOL_VERSION = 1
M.INSTALL = "pipx install toycoder-daemon   (or: uv tool install toycoder-daemon)"

--- What the person reads when the daemon speaks another protocol version (nil when they match).
function M.protocol_mismatch(theirs)
  if theirs == M.PROTOCOL_VERSION then
    return nil
  end
  return ("the daemon speaks protocol version %s, this plugin %d: they do not match, so some features may fail;"
    .. " update the older one (pipx upgrade toycoder-daemon, or the plugin)"):format(tostring(theirs), M.PROTOCOL_VERSION)
end

function M.status()
  return status
end

function M.is_ready()
  return status == "ready" and rpc ~= nil and not rpc.is_closing()
end

--- Register a handler for a daemon -> client notification.
function M.on_notification(method, fn)
  notification_handlers[method] = fn
end

--- Register a handler for a daemon -> client request. It runs inside the RPC coroutine and may
--- wait (see prompts.await); it returns the result (nil means JSON null).
function M.on_request(method, fn)
  request_handlers[method] = fn
end

--- Events: "start" fn() when a daemon process starts; "ready" fn() after every successful
--- initialize; "failed" fn(message) when a daemon could not start or stopped before it was ready
--- (the message is ours, already notified once); "exit" fn(code, signal, expected) after every exit.
function M.on(event, fn)
  table.insert(listeners[event], fn)
end

local function emit(event, ...)
  for _, fn in ipairs(listeners[event]) do
    local ok, err = pcall(fn, ...)
    if not ok then
      vim.notify("ToyCoder: " .. tostring(err), vim.log.levels.ERROR)
    end
  end
end

--- The JSON-RPC id of the daemon request being served, read from the message vim.lsp.rpc decoded
--- (the dispatcher only gets method and params; the message is an upvalue of the function that
--- called it, whatever its name). Needed to match $/cancelRequest; nil if it cannot be found.
local function current_request_id(method, params)
  for level = 2, 12 do
    local info = debug.getinfo(level, "f")
    if not info then
      break
    end
    for i = 1, 60 do
      local name, value = debug.getupvalue(info.func, i)
      if not name then
        break
      end
      if
        type(value) == "table"
        and value.method == method
        and value.params == params
        and value.id ~= nil
      then
        return value.id
      end
    end
  end
  return nil
end

--- A start that did not work: one notification and the "failed" event, in our own words.
local function fail(message)
  vim.notify("ToyCoder: " .. message, vim.log.levels.ERROR)
  emit("failed", message)
end

--- Why `cmd` could not be spawned, in our words (Neovim's own error names its internal files and
--- speaks of a "language server"; it goes to the LSP log instead).
local function spawn_failure(cmd, raw)
  require("vim.lsp.log").warn("toycoder: spawning the daemon failed", raw)
  local exe = cmd[1] or ""
  local why
  if exe == "" then
    why = "the command is empty"
  elseif vim.fn.executable(exe) ~= 1 then
    why = exe:find("/", 1, true) and "no executable file at that path" or "no such executable on $PATH"
  else
    why = "the system refused to run it"
  end
  return ("cannot start the daemon `%s`: %s. Set `cmd` in require('toycoder').setup(), or see :checkhealth toycoder."):format(
    table.concat(cmd, " "),
    why
  )
end

local function dispatchers(gen)
  return {
    notification = function(method, params)
      if gen ~= generation then
        return
      end
      local fn = notification_handlers[method]
      if fn then
        fn(params or {})
      end
    end,
    server_request = function(method, params)
      if gen ~= generation then
        return vim.NIL
      end
      local fn = request_handlers[method]
      if not fn then
        return nil, vim.lsp.rpc.rpc_response_error(ErrorCodes.MethodNotFound, "toycoder.nvim: no handler for " .. method)
      end
      local ctx = { id = current_request_id(method, params), method = method }
      local result = fn(params or {}, ctx)
      if result == nil then
        return vim.NIL
      end
      return result
    end,
    on_error = function(code, err)
      local name = vim.lsp.rpc.client_errors[code] or tostring(code)
      require("vim.lsp.log").warn("toycoder", name, err)
      if name:find("HANDLER_ERROR", 1, true) or name:find("CALLBACK_ERROR", 1, true) then
        -- A bug on our side: say so rather than leaving the chat silently stuck.
        vim.notify(("ToyCoder: internal error (%s): %s"):format(name, tostring(err)), vim.log.levels.ERROR)
      end
    end,
    on_exit = function(code, signal)
      vim.schedule(function()
        if gen ~= generation then
          return
        end
        local expected = stopping
        local was_starting = status == "starting"
        stopping = false
        status = expected and "stopped" or "dead"
        rpc = nil
        local queued = queue
        queue = {}
        local waiting = pending
        pending = {}
        if not expected then
          local how = (signal and signal ~= 0) and ("signal " .. signal) or ("exit code " .. tostring(code))
          local log = config.options.log_file and ("; its log: " .. config.options.log_file) or ""
          if was_starting then
            fail(("the daemon `%s` stopped before it was ready (%s)%s."):format(table.concat(config.cmd(), " "), how, log))
          else
            vim.notify(
              ("ToyCoder: the daemon stopped unexpectedly (%s)%s. The next :ToyCoder starts a new one."):format(how, log),
              vim.log.levels.ERROR
            )
          end
        end
        local gone = { code = M.DAEMON_EXITED, message = "the daemon stopped", daemon_exited = true }
        for _, cb in pairs(waiting) do
          pcall(cb, gone, nil)
        end
        for _, entry in ipairs(queued) do
          if entry.fail then
            pcall(entry.fail, gone)
          end
        end
        emit("exit", code, signal, expected)
      end)
    end,
  }
end

local function send(method, params, cb)
  local gen = generation
  local id
  local ok, sent, msg_id = pcall(rpc.request, method, params, function(err, result)
    if gen ~= generation then
      return
    end
    if id then
      pending[id] = nil
    end
    cb(err, result)
  end)
  if not ok or not sent then
    cb({ code = M.DAEMON_EXITED, message = "the daemon is not running", daemon_exited = true }, nil)
    return
  end
  id = msg_id
  pending[id] = cb
end

--- Start the daemon if it is not running. Returns false (after one message) if it cannot start.
function M.start()
  if status == "starting" or status == "ready" then
    return true
  end
  local opts = config.options
  local cmd = config.cmd()
  if opts.log_file then
    vim.list_extend(cmd, { "--log-file", opts.log_file })
  end
  local root = config.root()
  generation = generation + 1
  local gen = generation
  local ok, client = pcall(vim.lsp.rpc.start, cmd, dispatchers(gen), { cwd = root, env = opts.env })
  if not ok then
    status = "dead"
    fail(spawn_failure(config.cmd(), client))
    return false
  end
  rpc = client
  status = "starting"
  emit("start")
  stopping = false
  M.root = root
  M.server_info = nil
  local init_options = vim.empty_dict()
  if opts.config then
    init_options = { configPath = vim.fn.expand(opts.config) }
  end
  local params = {
    processId = vim.fn.getpid(),
    clientInfo = { name = "toycoder.nvim", version = require("toycoder").version },
    rootUri = vim.uri_from_fname(root),
    rootPath = root,
    workspaceFolders = { { uri = vim.uri_from_fname(root), name = vim.fs.basename(root) } },
    initializationOptions = init_options,
    capabilities = {
      experimental = { toycoder = { permissionRequest = true, askUser = true, workspaceTrust = true, diagnostics = true } },
      window = { workDoneProgress = true, showMessage = vim.empty_dict() },
      -- edits to open buffers (apply_edit.lua), versioned as documents.lua numbers them
      workspace = { applyEdit = true, workspaceEdit = { documentChanges = true } },
    },
  }
  send("initialize", params, function(err, result)
    if gen ~= generation then
      return
    end
    if err then
      if not err.daemon_exited then
        fail("the daemon did not initialize: " .. tostring(err.message))
        M.stop()
      end
      return
    end
    M.server_info = result and result.serverInfo or nil
    local ours = vim.tbl_get(result or {}, "capabilities", "experimental", "toycoder") or {}
    M.available_modes = ours.availableModes or {} -- the modes :ToyCoderMode offers
    M.protocol_version = ours.protocolVersion
    local mismatch = M.protocol_mismatch(ours.protocolVersion)
    if mismatch then
      vim.notify("ToyCoder: " .. mismatch, vim.log.levels.WARN)
    end
    rpc.notify("initialized", vim.empty_dict())
    status = "ready"
    emit("ready")
    local waiting = queue
    queue = {}
    for _, entry in ipairs(waiting) do
      entry.run()
    end
  end)
  return true
end

--- Run fn once the daemon is ready (starting it if needed); fail(err) if it stops first.
--- Returns false when it cannot run at all (the daemon could not start).
function M.when_ready(fn, fail)
  if M.is_ready() then
    fn()
    return true
  end
  if status == "ready" then -- the pipe closed but on_exit did not run yet
    return false
  end
  if not M.start() then
    return false
  end
  table.insert(queue, { run = fn, fail = fail })
  return true
end

--- Send a request, starting the daemon if needed. cb(err, result); err.daemon_exited when the
--- daemon is gone (the user already got the message about that).
function M.request(method, params, cb)
  cb = cb or function() end
  local queued = M.when_ready(function()
    send(method, params == nil and vim.empty_dict() or params, cb)
  end, function(err)
    cb(err, nil)
  end)
  if not queued then
    cb({ code = M.DAEMON_EXITED, message = "the daemon is not running", daemon_exited = true }, nil)
  end
end

--- The same, waiting (with the editor responsive) up to timeout_ms. Returns err, result.
function M.request_sync(method, params, timeout_ms)
  local done, e, r = false, nil, nil
  M.request(method, params, function(err, result)
    done, e, r = true, err, result
  end)
  if not vim.wait(timeout_ms or 5000, function()
    return done
  end, 10) then
    return { code = ErrorCodes.RequestCancelled, message = "timed out" }, nil
  end
  return e, r
end

--- Send a notification if the daemon is running (never starts it).
function M.notify(method, params)
  if M.is_ready() then
    rpc.notify(method, params == nil and vim.empty_dict() or params)
  end
end

--- A failed request's error as a notification; none when the daemon exited (that is said once, elsewhere).
function M.report_error(err)
  if not err.daemon_exited then
    vim.notify("ToyCoder: " .. tostring(err.message), vim.log.levels.ERROR)
  end
end

--- Stop the daemon: shutdown + exit, then SIGTERM if it lingers. Waits at most ~wait_ms.
function M.stop(wait_ms)
  if not rpc then
    status = "stopped"
    return
  end
  local client = rpc
  stopping = true
  wait_ms = wait_ms or 500
  if status == "ready" and not client.is_closing() then
    local done = false
    pcall(client.request, "shutdown", nil, function()
      done = true
    end)
    vim.wait(wait_ms, function()
      return done
    end, 10)
    pcall(client.notify, "exit", nil)
    vim.wait(wait_ms, function()
      return client.is_closing() or rpc ~= client
    end, 10)
  end
  if not client.is_closing() then
    pcall(client.terminate)
  end
end

--- Bumps with every daemon started.
function M.generation()
  return generation
end

local group = vim.api.nvim_create_augroup("toycoder_daemon", { clear = true })
vim.api.nvim_create_autocmd("VimLeavePre", {
  group = group,
  callback = function()
    M.stop(300)
  end,
})

return M
