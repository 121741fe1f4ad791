--- After the agent changes files: reload their open buffers (checktime), never clobbering a buffer
--- with unsaved changes: a notice instead, which offers :ToyCoderDiskDiff (the buffer beside the file
--- on disk) and never a command that would drop the unsaved text.
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

--- The agent wrote `path` (absolute): reload its buffer, or tell that an unsaved one was kept.
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
      local name = rel or path
      vim.notify(
        ("ToyCoder: %s changed on disk; your buffer has unsaved changes and was kept as it is. "
          .. ":ToyCoderDiskDiff %s shows it beside the file on disk."):format(name, vim.fn.fnameescape(name)),
        vim.log.levels.INFO
      )
    end
    return
  end
  checktime(buf)
end

--- :ToyCoderDiskDiff [file]: a new tab with the buffer of `file` (default: the current one), unsaved
--- text included, and the file as it is on disk (a read-only scratch buffer) under :diffthis. Nothing
--- is written or reloaded.
function M.diff_disk(file)
  local buf = file and file ~= "" and vim.fn.bufnr(file) or api.nvim_get_current_buf()
  if buf <= 0 or not api.nvim_buf_is_loaded(buf) or api.nvim_buf_get_name(buf) == "" then
    vim.notify("ToyCoder: no buffer of " .. tostring(file), vim.log.levels.WARN)
    return
  end
  local path = api.nvim_buf_get_name(buf)
  local ok, disk = pcall(vim.fn.readfile, path)
  if not ok or vim.fn.filereadable(path) ~= 1 then
    vim.notify("ToyCoder: " .. vim.fn.fnamemodify(path, ":~:.") .. " is not on disk", vim.log.levels.WARN)
    return
  end
  vim.cmd("tab sbuffer " .. buf)
  local left = api.nvim_get_current_win()
  local scratch = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(scratch, 0, -1, false, disk)
  vim.bo[scratch].filetype = vim.bo[buf].filetype
  vim.bo[scratch].modifiable = false
  vim.bo[scratch].bufhidden = "wipe"
  local right = api.nvim_open_win(scratch, false, { split = "right", win = left })
  vim.wo[left].winbar = "your buffer (unsaved)"
  vim.wo[right].winbar = ("on disk: " .. vim.fn.fnamemodify(path, ":~:.")):gsub("%%", "%%%%")
  for _, win in ipairs({ left, right }) do
    api.nvim_win_call(win, function()
      vim.cmd.diffthis()
    end)
  end
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
