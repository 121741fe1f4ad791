--- The "N files changed" lines of the chat, made actionable: <CR> on one picks a file of that turn
--- (vim.ui.select) and shows what the turn did to it (the daemon's toycoder/checkpoint/diff, in a
--- read-only diff buffer); `u` on one undoes that turn (`/restore <turn>`, the daemon's command,
--- through the prompt path like any slash command). The lines are drawn by turn.lua (live) and
--- history.lua (a loaded session); this remembers which turn and files each line stands for.
local cb = require("toycoder.chatbuf")
local config = require("toycoder.config")
local history = require("toycoder.history")

local M = {}

local api = vim.api

-- extmark id of a changes line -> { turnId, files, restoreOf }
local lines = {}

--- The line with extmark `mark` is the changes line of `turn_id` (its `files` as the daemon sent them).
function M.remember(mark, turn_id, files, restore_of)
  if mark and type(turn_id) == "string" and turn_id ~= "" then
    lines[mark] = { turnId = turn_id, files = files, restoreOf = restore_of }
  end
end

--- The buffer was cleared or replaced: its marks are gone.
function M.reset()
  lines = {}
end

--- The changes line under the cursor of the chat window, if it is one.
function M.at_cursor()
  if not cb.valid() or api.nvim_get_current_buf() ~= cb.current() then
    return nil
  end
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local marks = api.nvim_buf_get_extmarks(cb.current(), cb.namespace, { row, 0 }, { row, -1 }, { details = true })
  for _, m in ipairs(marks) do
    if lines[m[1]] and not m[4].invalid then
      return lines[m[1]]
    end
  end
  return nil
end

local STATUS = { created = "A", modified = "M", deleted = "D" }

--- One row of the file picker: status, path, +added −removed.
function M.format_file(f)
  local counts = ""
  if type(f.added) == "number" or type(f.removed) == "number" then
    counts = (" +%d −%d"):format(tonumber(f.added) or 0, tonumber(f.removed) or 0)
  end
  return ("%s %s%s"):format(STATUS[f.status] or "?", tostring(f.path or "?"), counts)
end

local function file_name(f)
  if type(f.uri) == "string" and f.uri:match("^file:") then
    return vim.uri_to_fname(f.uri)
  end
  local path = tostring(f.path or "")
  return path:sub(1, 1) == "/" and path or ((require("toycoder.daemon").root or config.root()) .. "/" .. path)
end

--- Go to a window other than the chat's (the previous one, else a new split beside it).
local function other_window()
  local chat_buf = cb.current()
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if api.nvim_win_get_buf(win) ~= chat_buf and api.nvim_win_get_config(win).relative == "" then
      api.nvim_set_current_win(win)
      return
    end
  end
  vim.cmd("leftabove vsplit")
end

--- The scratch buffer named `name` (the one shown before, else a new one).
local function scratch(name)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_get_name(buf) == name then
      return buf
    end
  end
  local buf = api.nvim_create_buf(true, true)
  api.nvim_buf_set_name(buf, name)
  return buf
end

--- Show `d` (toycoder/checkpoint/diff's answer) in a read-only diff buffer beside the chat. A side
--- that is not text has no diff: the file opens instead (unless the turn deleted it).
local function show_diff(turn_id, d)
  if type(d.diff) ~= "string" then
    vim.notify(("ToyCoder: %s is not text: no diff to show"):format(tostring(d.path)), vim.log.levels.INFO)
    if d.status ~= "deleted" then
      other_window()
      vim.cmd.edit(vim.fn.fnameescape(file_name(d)))
    end
    return
  end
  local buf = scratch(("toycoder://diff/%s/%s"):format(turn_id, d.path))
  local lines = vim.split(d.diff, "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "diff"
  other_window()
  api.nvim_win_set_buf(0, buf)
end

--- <CR>: the files of the changes line under the cursor, in a picker; the chosen one's diff in
--- that turn shows. Returns false when the cursor is not on a changes line.
function M.pick_file()
  local line = M.at_cursor()
  if not line then
    return false
  end
  local files = type(line.files) == "table" and line.files or {}
  vim.ui.select(files, {
    prompt = ("ToyCoder: %s of %s"):format(history.count(#files, "file"), line.turnId),
    kind = "toycoder.changed_file",
    format_item = M.format_file,
  }, function(choice)
    if not choice then
      return
    end
    local params = { sessionId = require("toycoder").session_id(), turnId = line.turnId, path = choice.path }
    require("toycoder.daemon").request("toycoder/checkpoint/diff", params, function(err, d)
      if err then
        require("toycoder.daemon").report_error(err)
        return
      end
      show_diff(line.turnId, d)
    end)
  end)
  return true
end

--- `u`: undo the turn of the changes line under the cursor (`/restore <turn>`: that turn and every
--- later one go back, as the daemon's command does). A restore's own line says how to redo instead.
--- Returns false when the cursor is not on a changes line.
function M.undo_turn()
  local line = M.at_cursor()
  if not line then
    return false
  end
  if type(line.restoreOf) == "string" and line.restoreOf ~= "" then
    vim.notify("ToyCoder: this line is a restore; /redo re-applies what it undid", vim.log.levels.INFO)
    return true
  end
  require("toycoder").prompt("/restore " .. line.turnId)
  return true
end

return M
