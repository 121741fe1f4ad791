--- textDocument/didOpen|didChange|didClose (full sync) for file buffers inside the workspace, so the
--- agent's read_file sees unsaved text. Active only while the daemon runs; didChange is debounced.
local config = require("toycoder.config")
local daemon = require("toycoder.daemon")

local M = {}
local api = vim.api

local opened = {} -- buf -> { uri, version, timer, generation }
local group = nil

--- The loaded buffer of a file URI, or nil (never made). By exact full name, or the same file
--- through a symlink: bufnr() would read the path as a pattern (`[id].py`, `x*.py`).
function M.loaded_buffer(uri)
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

local function full_text(buf)
  local lines = api.nvim_buf_get_lines(buf, 0, -1, true)
  local text = table.concat(lines, "\n")
  if vim.bo[buf].eol or vim.bo[buf].fixeol then
    text = text .. "\n"
  end
  return text
end

local function path_of(buf)
  if not api.nvim_buf_is_valid(buf) or not api.nvim_buf_is_loaded(buf) then
    return nil
  end
  if vim.bo[buf].buftype ~= "" then
    return nil
  end
  local name = api.nvim_buf_get_name(buf)
  if name == "" or name:match("^%a[%w+.-]*://") then
    return nil
  end
  local path = vim.fs.normalize(vim.fn.fnamemodify(name, ":p"))
  local root = daemon.root
  if not root or (path ~= root and path:sub(1, #root + 1) ~= root .. "/") then
    return nil
  end
  return path
end

local function too_big(buf)
  local max = (config.options.sync or {}).max_bytes or math.huge
  local bytes = api.nvim_buf_get_offset(buf, api.nvim_buf_line_count(buf))
  return bytes > max
end

local function send_change(buf)
  local doc = opened[buf]
  if not doc or not api.nvim_buf_is_valid(buf) then
    return
  end
  if doc.timer then
    doc.timer:stop()
  end
  if not doc.dirty then
    return
  end
  doc.dirty = false
  doc.version = doc.version + 1
  daemon.notify("textDocument/didChange", {
    textDocument = { uri = doc.uri, version = doc.version },
    contentChanges = { { text = full_text(buf) } },
  })
end

local function schedule_change(buf)
  local doc = opened[buf]
  if not doc then
    return true -- detach
  end
  doc.dirty = true
  if not doc.timer then
    doc.timer = vim.uv.new_timer()
  end
  doc.timer:stop()
  doc.timer:start(
    (config.options.sync or {}).debounce_ms or 300,
    0,
    vim.schedule_wrap(function()
      send_change(buf)
    end)
  )
end

local function close(buf)
  local doc = opened[buf]
  if not doc then
    return
  end
  opened[buf] = nil
  if doc.timer then
    doc.timer:stop()
    doc.timer:close()
  end
  daemon.notify("textDocument/didClose", { textDocument = { uri = doc.uri } })
end

local function open(buf)
  if opened[buf] or not daemon.is_ready() then
    return
  end
  local path = path_of(buf)
  if not path or too_big(buf) then
    return
  end
  local doc = { uri = vim.uri_from_fname(path), version = 0, generation = daemon.generation() }
  opened[buf] = doc
  daemon.notify("textDocument/didOpen", {
    textDocument = { uri = doc.uri, languageId = vim.bo[buf].filetype, version = 0, text = full_text(buf) },
  })
  api.nvim_buf_attach(buf, false, {
    on_lines = function()
      if opened[buf] ~= doc then
        return true
      end
      schedule_change(buf)
    end,
    on_reload = function()
      if opened[buf] == doc then
        schedule_change(buf)
      end
    end,
    on_detach = function()
      if opened[buf] == doc then
        vim.schedule(function()
          close(buf)
        end)
      end
    end,
  })
end

--- The version the daemon last got for `buf` (didOpen/didChange), or nil: not synced, or changed
--- since (a debounced didChange not sent yet), so the daemon's version is behind the buffer.
function M.version(buf)
  local doc = opened[buf]
  if not doc or doc.dirty then
    return nil
  end
  return doc.version
end

--- Send pending changes now (before a prompt, so the turn sees the latest text).
function M.flush()
  for buf, doc in pairs(opened) do
    if doc.dirty then
      send_change(buf)
    end
  end
end

--- The daemon is ready: open every loaded file buffer and follow new ones.
function M.start()
  if not (config.options.sync or {}).enabled then
    return
  end
  opened = {}
  group = api.nvim_create_augroup("toycoder_documents", { clear = true })
  api.nvim_create_autocmd({ "BufReadPost", "BufNewFile", "BufFilePost", "BufWritePost" }, {
    group = group,
    callback = function(ev)
      local doc = opened[ev.buf]
      if doc and doc.uri ~= (path_of(ev.buf) and vim.uri_from_fname(path_of(ev.buf))) then
        close(ev.buf) -- renamed
      end
      open(ev.buf)
    end,
  })
  api.nvim_create_autocmd({ "BufUnload", "BufDelete" }, {
    group = group,
    callback = function(ev)
      close(ev.buf)
    end,
  })
  for _, buf in ipairs(api.nvim_list_bufs()) do
    open(buf)
  end
end

--- The daemon stopped: forget what was open (a new daemon gets didOpen again).
function M.stop()
  if group then
    pcall(api.nvim_del_augroup_by_id, group)
    group = nil
  end
  for _, doc in pairs(opened) do
    if doc.timer then
      doc.timer:stop()
      doc.timer:close()
    end
  end
  opened = {}
end

function M.opened()
  local out = {}
  for buf, doc in pairs(opened) do
    out[buf] = doc.uri
  end
  return out
end

return M
