--- After the agent changes files: reload their open buffers (checktime), never clobbering a buffer
--- with unsaved changes (a warning instead).
local M = {}
local api = vim.api

local warned = {} -- path -> changedtick we warned about (one warning per edit state)

local function buffers_by_path()
  local out = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" then
      local name = api.nvim_buf_get_name(buf)
      if name ~= "" then
        out[vim.fs.normalize(vim.fn.fnamemodify(name, ":p"))] = buf
      end
    end
  end
  return out
end

local function checktime(buf)
  -- autoread just for this check, so an unmodified buffer reloads without a prompt.
  api.nvim_buf_call(buf, function()
    vim.cmd("setlocal autoread")
    pcall(vim.cmd, "silent checktime " .. buf)
    vim.cmd("set autoread<")
  end)
end

--- The agent wrote `path` (absolute): reload its buffer, or warn if it has unsaved changes.
function M.file(path, rel)
  path = vim.fs.normalize(path)
  local buf = buffers_by_path()[path]
  if not buf then
    return
  end
  if vim.bo[buf].modified then
    local tick = api.nvim_buf_get_changedtick(buf)
    if warned[path] ~= tick then
      warned[path] = tick
      vim.notify(
        ("ToyCoder changed %s on disk, but your buffer has unsaved changes: it was not reloaded. "
          .. ":e! takes the agent's version (dropping yours); :w keeps yours."):format(rel or path),
        vim.log.levels.WARN
      )
    end
    return
  end
  checktime(buf)
end

--- End of a turn: any unmodified buffer of a workspace file that changed on disk is reloaded.
function M.all(root)
  for path, buf in pairs(buffers_by_path()) do
    local inside = root == nil or path:sub(1, #root + 1) == root .. "/"
    if inside and not vim.bo[buf].modified and vim.uv.fs_stat(path) then
      checktime(buf)
    end
  end
end

return M
