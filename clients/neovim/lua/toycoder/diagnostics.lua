--- toycoder/diagnostics (issue 29): the editor's diagnostics of the files the daemon asks about, as
--- LSP Diagnostics. A buffer whose diagnostics were reported since its last change answers at once;
--- for the others it waits up to waitMs for DiagnosticChanged (after an edit the language servers
--- report the file again). Thin: vim.diagnostic holds what the servers said.
local prompts = require("toycoder.prompts")

local M = {}

local api = vim.api

-- buffer -> its b:changedtick when its diagnostics were last reported (a write, which changes no
-- text, moves the tick on with it)
local reported = {}
local before_write = {} -- buffer -> its tick as a write began
local group = api.nvim_create_augroup("toycoder_diagnostics", { clear = true })
api.nvim_create_autocmd("DiagnosticChanged", { group = group, callback = function(ev)
  reported[ev.buf] = api.nvim_buf_is_valid(ev.buf) and vim.b[ev.buf].changedtick or nil
end })
api.nvim_create_autocmd("BufWritePre", { group = group, callback = function(ev)
  before_write[ev.buf] = vim.b[ev.buf].changedtick
end })
api.nvim_create_autocmd("BufWritePost", { group = group, callback = function(ev)
  if reported[ev.buf] ~= nil and reported[ev.buf] == before_write[ev.buf] then
    reported[ev.buf] = vim.b[ev.buf].changedtick
  end
  before_write[ev.buf] = nil
end })
api.nvim_create_autocmd("BufWipeout", { group = group, callback = function(ev)
  reported[ev.buf], before_write[ev.buf] = nil, nil
end })

--- Reported since the buffer's last change (nothing to wait for).
local function current(buf)
  return reported[buf] == vim.b[buf].changedtick
end

--- Worth waiting for: reported before, or a language server is attached (a buffer nothing reports
--- on would only cost waitMs).
local function awaited(buf)
  return not current(buf) and (reported[buf] ~= nil or #vim.lsp.get_clients({ bufnr = buf }) > 0)
end

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

--- The buffer of a file URI, if one is loaded (never made: a file not open has no diagnostics). By
--- exact full name: bufnr() would read the path as a pattern (`a[1].py`, `x*.py`).
local function buffer_of(uri)
  local ok, name = pcall(vim.uri_to_fname, uri)
  if not ok then
    return nil
  end
  name = vim.fs.normalize(name)
  local real = vim.uv.fs_realpath(name)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local bname = api.nvim_buf_get_name(buf)
    if bname ~= "" and api.nvim_buf_is_loaded(buf)
      and (vim.fs.normalize(bname) == name or (real ~= nil and vim.uv.fs_realpath(bname) == real)) then
      return buf
    end
  end
  return nil
end

--- Wait up to `ms` until each of `bufs` has had its diagnostics reported since its last change.
local function wait_until_current(bufs, ms)
  prompts.await(function(resolve)
    local id
    local function done()
      if id then
        pcall(api.nvim_del_autocmd, id)
        id = nil
      end
      resolve(true)
    end
    -- runs after the tracking autocmd above (same group, defined later), which has noted the tick
    id = api.nvim_create_autocmd("DiagnosticChanged", { group = group, callback = function()
      if vim.tbl_isempty(vim.tbl_filter(function(b)
        return api.nvim_buf_is_valid(b) and not current(b)
      end, bufs)) then
        done()
      end
    end })
    vim.defer_fn(done, ms)
  end)
end

function M.handle(params)
  local uris = params.uris or {}
  local items = {}
  if #uris == 0 then
    for _, buf in ipairs(api.nvim_list_bufs()) do
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
  local stale = vim.tbl_filter(awaited, vim.tbl_values(bufs))
  if (params.waitMs or 0) > 0 and #stale > 0 then
    wait_until_current(stale, params.waitMs)
  end
  for _, uri in ipairs(uris) do
    local buf = bufs[uri]
    table.insert(items, { uri = uri, diagnostics = buf and vim.tbl_map(to_lsp, vim.diagnostic.get(buf)) or {} })
  end
  return { items = items }
end

return M
