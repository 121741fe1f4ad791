--- toycoder/diagnostics (issue 29): the editor's diagnostics of the files the daemon asks about, as
--- LSP Diagnostics, after waiting up to waitMs for DiagnosticChanged on those buffers (after an edit
--- the language servers report the file again). Thin: vim.diagnostic holds what the servers said.
local prompts = require("toycoder.prompts")

local M = {}

local function to_lsp(d)
  return {
    range = {
      start = { line = d.lnum, character = d.col },
      ["end"] = { line = d.end_lnum or d.lnum, character = d.end_col or d.col },
    },
    severity = d.severity, -- vim.diagnostic.severity: ERROR 1 .. HINT 4, as LSP
    message = d.message,
    source = d.source,
    code = d.code,
  }
end

--- The buffer of a file URI, if one is loaded (never made: a file not open has no diagnostics).
local function buffer_of(uri)
  local ok, name = pcall(vim.uri_to_fname, uri)
  local buf = ok and vim.fn.bufnr(name) or -1
  return buf > 0 and vim.api.nvim_buf_is_loaded(buf) and buf or nil
end

local function wait_for_change(bufs, ms)
  prompts.await(function(resolve)
    local group = vim.api.nvim_create_augroup("toycoder_diagnostics_wait", { clear = false })
    local ids = {}
    local function done()
      for _, id in ipairs(ids) do
        pcall(vim.api.nvim_del_autocmd, id)
      end
      resolve(true)
    end
    for _, buf in ipairs(bufs) do
      table.insert(ids, vim.api.nvim_create_autocmd("DiagnosticChanged", { group = group, buffer = buf, once = true,
                                                                          callback = done }))
    end
    vim.defer_fn(done, ms)
  end)
end

function M.handle(params)
  local uris = params.uris or {}
  local items = {}
  if #uris == 0 then
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      local found = vim.diagnostic.get(buf)
      if #found > 0 then
        table.insert(items, { uri = vim.uri_from_bufnr(buf), diagnostics = vim.tbl_map(to_lsp, found) })
      end
    end
    return { items = items }
  end
  local bufs = {}
  for _, uri in ipairs(uris) do
    bufs[uri] = buffer_of(uri)
  end
  local waiting = vim.tbl_values(bufs)
  if (params.waitMs or 0) > 0 and #waiting > 0 then
    wait_for_change(waiting, params.waitMs)
  end
  for _, uri in ipairs(uris) do
    local buf = bufs[uri]
    table.insert(items, { uri = uri, diagnostics = buf and vim.tbl_map(to_lsp, vim.diagnostic.get(buf)) or {} })
  end
  return { items = items }
end

return M
