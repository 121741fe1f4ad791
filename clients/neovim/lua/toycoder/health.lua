--- :checkhealth toycoder: Neovim version, the daemon and its version, the config (found and valid,
--- as the daemon itself reads it), run_command's sandbox support, a provider key present (never printed).
local config = require("toycoder.config")

local M = {}
local health = vim.health

--- Where the daemon will look for its config (same order as the daemon), or nil for built-in defaults.
local function config_path()
  if config.options.config then
    return vim.fn.expand(config.options.config), "setup({config = ...})"
  end
  if vim.env.TOYCODER_CONFIG and vim.env.TOYCODER_CONFIG ~= "" then
    return vim.fn.expand(vim.env.TOYCODER_CONFIG), "$TOYCODER_CONFIG"
  end
  local base = (vim.env.XDG_CONFIG_HOME and vim.env.XDG_CONFIG_HOME ~= "") and vim.env.XDG_CONFIG_HOME
    or vim.fn.expand("~/.config")
  local user = base .. "/toycoder/config.yaml"
  if vim.fn.filereadable(user) == 1 then
    return user, "the user config"
  end
  return nil, nil
end

--- Start a short-lived daemon, initialize it and ask for toycoder/models/list: the daemon itself
--- validates the config and counts the provider keys. Returns {messages, err, result}.
local function probe(cmd)
  local out = { messages = {} }
  local done = false
  local init_done = false
  local ok, client = pcall(vim.lsp.rpc.start, cmd, {
    notification = function(method, params)
      if method == "window/showMessage" then
        table.insert(out.messages, params)
      end
    end,
    server_request = function()
      return vim.NIL
    end,
    on_exit = function()
      done = true
      init_done = true
    end,
  }, { cwd = config.root(), env = config.options.env })
  if not ok then
    out.err = { message = tostring(client) }
    return out
  end
  local root = config.root()
  local init_options = config.options.config and { configPath = vim.fn.expand(config.options.config) }
    or vim.empty_dict()
  client.request("initialize", {
    processId = vim.fn.getpid(),
    rootUri = vim.uri_from_fname(root),
    capabilities = { experimental = { toycoder = { permissionRequest = true, askUser = true, workspaceTrust = true } } },
    initializationOptions = init_options,
  }, function(err, result)
    init_done = true
    if err then
      out.err, done = err, true
      return
    end
    out.protocol = vim.tbl_get(result or {}, "capabilities", "experimental", "toycoder", "protocolVersion")
    client.notify("initialized", vim.empty_dict())
    client.request("toycoder/models/list", vim.empty_dict(), function(e, result)
      out.err, out.result, done = e, result, true
    end)
  end)
  local finished = vim.wait(15000, function()
    return done
  end, 20)
  if not finished then
    out.err = { message = init_done and "no answer to toycoder/models/list" or "no answer to initialize" }
  end
  -- let a window/showMessage sent after `initialized` arrive
  vim.wait(100, function()
    return #out.messages > 0
  end, 10)
  pcall(client.notify, "exit", nil)
  vim.defer_fn(function()
    if not client.is_closing() then
      pcall(client.terminate)
    end
  end, 1000)
  return out
end

function M.check()
  health.start("toycoder: Neovim")
  local v = vim.version()
  local version = ("%d.%d.%d"):format(v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. version)
  else
    health.error("Neovim " .. version .. " is too old: toycoder.nvim needs 0.10 or newer")
  end
  require("toycoder.markdown").health(health)

  health.start("toycoder: daemon")
  local cmd = config.cmd()
  local exe = cmd[1]
  if vim.fn.executable(exe) ~= 1 then
    health.error(
      ("daemon executable `%s` not found"):format(exe),
      {
        "install it: " .. require("toycoder.daemon").INSTALL,
        "then check the set-up: toycoder setup, toycoder doctor",
        "or set `cmd` in require('toycoder').setup() to the toycoder-daemon you have (a clone: .venv/bin/toycoder-daemon)",
      }
    )
    return
  end
  health.ok(("executable: %s (%s)"):format(exe, vim.fn.exepath(exe)))
  local run = vim.list_extend(vim.deepcopy(cmd), { "--version" })
  local ok, res = pcall(function()
    return vim.system(run, { text = true, env = config.options.env }):wait(15000)
  end)
  if ok and res.code == 0 and (res.stdout or ""):match("%S") then
    health.ok("version: " .. vim.trim(res.stdout))
  else
    health.error(("`%s` failed: %s"):format(table.concat(run, " "), ok and vim.trim((res.stderr or "") .. " exit " .. tostring(res.code)) or tostring(res)))
    return
  end
  local d = require("toycoder.daemon")
  local status = d.status()
  local running = status == "ready" and (" (" .. ((d.server_info or {}).name or "?") .. " " .. ((d.server_info or {}).version or "") .. ")") or ""
  health.info(("this Neovim's daemon: %s%s; workspace: %s"):format(status, running, d.root or config.root()))

  health.start("toycoder: config")
  local path, source = config_path()
  if path then
    if vim.fn.filereadable(path) == 1 then
      health.ok(("config file: %s (from %s)"):format(path, source))
    else
      health.error(("config file %s (from %s) does not exist or cannot be read"):format(path, source))
    end
  else
    health.info("no config file: the daemon uses its built-in defaults (OPENAI_API_KEY, OPENAI_BASE_URL)")
  end
  local probe_cmd = vim.deepcopy(cmd)
  if config.options.log_file then
    vim.list_extend(probe_cmd, { "--log-file", config.options.log_file })
  end
  local probed = probe(probe_cmd)
  local config_errors = {}
  for _, m in ipairs(probed.messages) do
    if m.type == 1 then
      table.insert(config_errors, m.message)
    end
  end
  if #config_errors > 0 then
    for _, m in ipairs(config_errors) do
      health.error("invalid config: " .. tostring(m))
    end
    return
  end
  if probed.err then
    local code = probed.err.code
    if code == -32013 then
      health.error("invalid config: " .. tostring(probed.err.message))
    else
      health.error("the daemon did not answer: " .. tostring(probed.err.message))
    end
    return
  end
  health.ok("config is valid (checked by the daemon)")
  local mismatch = require("toycoder.daemon").protocol_mismatch(probed.protocol)
  if mismatch then
    health.error(mismatch)
  else
    health.ok(("protocol version %d, as this plugin's"):format(probed.protocol))
  end

  health.start("toycoder: sandbox")
  local check = vim.list_extend(vim.deepcopy(cmd), { "--check-config" })
  if config.options.config then
    vim.list_extend(check, { "--config", vim.fn.expand(config.options.config) })
  end
  local sok, sres = pcall(function()
    return vim.system(check, { text = true, env = config.options.env, cwd = config.root() }):wait(15000)
  end)
  local dok, report = pcall(vim.json.decode, sok and sres.stdout or "")
  local sandbox = dok and type(report) == "table" and report.sandbox or nil
  if type(sandbox) ~= "table" then
    health.warn("the daemon did not report its sandbox (`--check-config`)")
  elseif sandbox.mode == "off" then
    health.warn("run_command sandbox is off (tools.run_command.sandbox); commands run unconfined")
  elseif sandbox.available then
    health.ok(("%s (mode: %s)"):format(sandbox.summary, sandbox.mode))
  elseif sandbox.mode == "required" then
    health.error(("run_command refuses every command: %s"):format(sandbox.problem))
  else
    health.warn(("run_command runs unsandboxed: %s"):format(sandbox.problem))
  end

  health.start("toycoder: provider")
  local result = probed.result or {}
  local current = result.current or {}
  local provider
  for _, p in ipairs(result.providers or {}) do
    if p.name == current.provider then
      provider = p
    end
  end
  if not provider then
    health.error(("provider %s is not configured"):format(tostring(current.provider)))
    return
  end
  local where = provider.baseUrl and (" at " .. provider.baseUrl) or ""
  if (provider.keyCount or 0) > 0 then
    health.ok(
      ("provider %s%s, model %s: %d API key(s) configured (not shown)"):format(
        provider.name,
        where,
        tostring(current.model),
        provider.keyCount
      )
    )
  else
    health.error(
      ("provider %s%s has no API key"):format(provider.name, where),
      { "set OPENAI_API_KEY (or the variable your config.yaml reads) before starting Neovim" }
    )
  end
end

return M
