--- Options: the documented defaults (see `:help toycoder-config`) merged with what setup() got.
local M = {}

M.defaults = {
  -- The daemon command: a string (one executable) or a list (executable + arguments).
  cmd = { "toycoder-daemon" },
  -- Config file passed to the daemon (initializationOptions.configPath). nil: the daemon's own
  -- search order ($TOYCODER_CONFIG, then ~/.config/toycoder/config.yaml, then built-in defaults).
  config = nil,
  -- Extra environment for the daemon process (e.g. { TOYCODER_DATA_DIR = "/tmp/tc" }).
  env = nil,
  -- Where the daemon writes its log (--log-file); false: the daemon logs to stderr, which
  -- Neovim copies into the LSP log.
  log_file = vim.fn.stdpath("log") .. "/toycoder-daemon.log",
  -- How the chat opens: "vsplit" (right side), "float" (centered) or "tab".
  layout = "vsplit",
  -- vsplit width (columns, or a fraction of the editor); float size as fractions of the editor.
  width = 0.4,
  float = { width = 0.8, height = 0.8, border = "rounded" },
  keymaps = {
    -- Global mappings (normal mode; `ask` also in visual mode, sending the selection). false: none.
    toggle = false, -- e.g. "<leader>tc"
    ask = false, -- e.g. "<leader>ta"
    -- Mappings inside the chat buffer.
    chat = {
      prompt = "i", -- type a prompt (the prompt buffer, below the chat)
      cancel = "<C-c>", -- cancel the running turn
      close = "q", -- close the chat window
      changed_files = "<CR>", -- on a "N files changed" line: pick one of its files, see its diff
      undo_turn = "u", -- on a "N files changed" line: undo that turn (/restore <turn>)
    },
    -- Mappings inside the prompt buffer (`@` and `/` complete there: <C-x><C-o>, nvim-cmp, blink.cmp).
    prompt = {
      send = "<CR>", -- normal mode: send the prompt
      send_insert = "<C-s>", -- insert and normal mode: send the prompt
      close = "q", -- normal mode: close the prompt window
    },
  },
  -- The window of a permission request (the diff, or the command): "float" or "split" (below).
  -- Its keys: a allow once, A always, d or q deny, D a diff tab of the file vs the proposal; they
  -- work `arm_ms` after it opens, so keys typed for something else never answer it.
  permission = { layout = "float", arm_ms = 400 },
  -- The prompt buffer's height (lines).
  prompt = { height = 5 },
  -- Reload open buffers of files the agent changed (checktime). Modified buffers are never
  -- reloaded: you get a warning instead.
  auto_reload = true,
  -- Send textDocument/didOpen|didChange|didClose for file buffers inside the workspace, so the
  -- agent's read_file sees unsaved text. didChange is debounced by `debounce_ms`.
  sync = { enabled = true, debounce_ms = 300, max_bytes = 2 * 1024 * 1024 },
  -- The chat's Markdown: treesitter highlighting (fenced code through its language's parser when
  -- installed) and concealed markup. With render-markdown.nvim loaded, conceal is left to it.
  markdown = { treesitter = true, conceallevel = 2, concealcursor = "nc", render_markdown = true },
  -- Also show $/progress messages with vim.notify (the chat's winbar and
  -- require("toycoder").statusline() always show them).
  notify_progress = false,
}

M.options = vim.deepcopy(M.defaults)

function M.set(opts)
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  if type(M.options.cmd) == "string" then
    M.options.cmd = { M.options.cmd }
  end
  return M.options
end

--- The daemon command line (without arguments added by the plugin).
function M.cmd()
  local cmd = M.options.cmd
  if type(cmd) == "string" then
    cmd = { cmd }
  end
  return vim.deepcopy(cmd)
end

--- Workspace root: the git root of the current directory, else the current directory.
function M.root()
  local cwd = vim.fn.getcwd()
  local git = vim.fs.find(".git", { path = cwd, upward = true, limit = 1 })[1]
  local root = git and vim.fs.dirname(git) or cwd
  root = vim.fs.normalize(vim.fn.fnamemodify(root, ":p")):gsub("(.)/$", "%1")
  return root
end

return M
