--- The chat's Markdown: treesitter (`markdown` + `markdown_inline` ship with Neovim) instead of
--- Vim's regex syntax, concealed markup, and fenced code highlighted through the parser of its
--- language when that parser is installed. render-markdown.nvim, when loaded, draws on top of it.
local config = require("toycoder.config")

local M = {}

local function render_markdown_loaded()
  return package.loaded["render-markdown"] ~= nil
end

--- Start the treesitter highlighter on the chat buffer (it also turns the regex syntax off).
--- Returns false when it cannot (no markdown parser): the regex syntax stays as a fallback.
function M.attach(buf)
  local opts = config.options.markdown or {}
  if opts.treesitter == false then
    return false
  end
  local ok = pcall(vim.treesitter.start, buf, "markdown")
  return ok
end

--- Window options for reading the chat: concealed markup, unless render-markdown.nvim manages
--- conceal itself.
function M.window(win)
  local opts = config.options.markdown or {}
  if opts.render_markdown ~= false and render_markdown_loaded() then
    return
  end
  vim.wo[win].conceallevel = opts.conceallevel or 2
  vim.wo[win].concealcursor = opts.concealcursor or ""
end

return M
