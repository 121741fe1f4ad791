--- The prompt buffer: a small window at the bottom of the chat where a prompt is typed, with
--- completion of `@` mentions and `/` commands (the omnifunc, and nvim-cmp's or blink.cmp's source
--- when that plugin is there). Sending hands the text to require("toycoder").prompt.
local config = require("toycoder.config")

local M = {}

local api = vim.api
local NAME = "toycoder://prompt"
M.filetype = "toycoder_prompt"

local state = { buf = nil, registered = {} } ---@type { buf: integer?, registered: table<string, boolean> }

--- nvim-cmp's and blink.cmp's sources, registered once each for the prompt's filetype when the
--- plugin can be loaded (a lazy-loaded one loads here, as it would on InsertEnter).
local function register_sources()
  if not state.registered.cmp then
    local ok, cmp = pcall(require, "cmp")
    if ok and type(cmp) == "table" and cmp.register_source then
      state.registered.cmp = true
      cmp.register_source("toycoder", require("toycoder.cmp").new())
      cmp.setup.filetype(M.filetype, { sources = { { name = "toycoder" } } })
    end
  end
  if not state.registered.blink then
    local ok, blink = pcall(require, "blink.cmp")
    if ok and type(blink) == "table" and blink.add_filetype_source then
      state.registered.blink = true
      if not require("blink.cmp.config").sources.providers.toycoder then -- the person's own entry wins
        blink.add_source_provider("toycoder", { name = "ToyCoder", module = "toycoder.blink" })
      end
      blink.add_filetype_source(M.filetype, "toycoder")
    end
  end
end

local function lines_text(buf)
  return vim.trim(table.concat(api.nvim_buf_get_lines(buf, 0, -1, true), "\n"))
end

--- Send what the buffer holds (nothing when it is blank) and empty it.
function M.send()
  local buf = state.buf
  if not buf or not api.nvim_buf_is_valid(buf) then
    return
  end
  local text = lines_text(buf)
  if text == "" then
    return
  end
  api.nvim_buf_set_lines(buf, 0, -1, true, {})
  require("toycoder").prompt(text)
end

function M.close()
  for _, win in ipairs(vim.fn.win_findbuf(state.buf or -1)) do
    pcall(api.nvim_win_close, win, true)
  end
end

local function set_keymaps(buf)
  local maps = (config.options.keymaps or {}).prompt or {}
  local function map(modes, lhs, fn, desc)
    if lhs and lhs ~= "" then
      vim.keymap.set(modes, lhs, fn, { buffer = buf, nowait = true, silent = true, desc = desc })
    end
  end
  map("n", maps.send, M.send, "ToyCoder: send the prompt")
  map({ "n", "i" }, maps.send_insert, M.send, "ToyCoder: send the prompt")
  map("n", maps.close, M.close, "ToyCoder: close the prompt")
end

function M.buf()
  if state.buf and api.nvim_buf_is_valid(state.buf) then
    return state.buf
  end
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_name(buf, NAME)
  vim.bo[buf].buftype = "nofile" -- not "prompt": nvim-cmp and blink.cmp turn themselves off there
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].omnifunc = "v:lua.require'toycoder.complete'.omnifunc"
  vim.bo[buf].filetype = M.filetype
  vim.b[buf].toycoder_prompt = true
  set_keymaps(buf)
  state.buf = buf
  return buf
end

--- True in the prompt buffer (the completion sources offer nothing elsewhere).
function M.is_prompt(buf)
  return buf ~= nil and buf == state.buf
end

--- Open the prompt window below the chat (inside it when the chat is a float) and start typing.
function M.open()
  register_sources()
  local buf = M.buf()
  local chat_win = require("toycoder.chat").open(true)
  local win = vim.fn.win_findbuf(buf)[1]
  if not win then
    local height = (config.options.prompt or {}).height or 5
    if api.nvim_win_get_config(chat_win).relative ~= "" then
      local width, chat_height = api.nvim_win_get_width(chat_win), api.nvim_win_get_height(chat_win)
      height = math.min(height, math.max(1, chat_height - 2))
      win = api.nvim_open_win(buf, true, { relative = "win", win = chat_win, row = chat_height - height - 2, col = 0,
                                           width = width - 2, height = height, border = "rounded",
                                           title = " Prompt ", title_pos = "left" })
    else
      win = api.nvim_open_win(buf, true, { split = "below", win = chat_win, height = height })
    end
    vim.wo[win].winfixheight = true
    vim.wo[win].wrap = true
  end
  api.nvim_set_current_win(win)
  vim.cmd("startinsert!")
  return win
end

return M
