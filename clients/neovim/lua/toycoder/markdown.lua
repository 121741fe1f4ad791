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

--- The fence that closes a code block `lines` leave open, or nil. An unclosed fence (a cancelled
--- reply, a pasted half block) would turn everything after it into code.
function M.closing_fence(lines)
  local open = nil
  for _, line in ipairs(lines) do
    local indent, fence, rest = line:match("^( *)([`~][`~][`~]+)(.*)$")
    local char = fence and fence:sub(1, 1)
    if fence and #indent <= 3 and fence:match("^" .. char .. "+$") then
      if not open then
        if not (char == "`" and rest:find("`", 1, true)) then
          open = { char = char, len = #fence }
        end
      elseif char == open.char and #fence >= open.len and vim.trim(rest) == "" then
        open = nil
      end
    end
  end
  return open and open.char:rep(open.len) or nil
end

--- :checkhealth: the parsers the chat uses, and render-markdown.nvim when present.
function M.health(health)
  for _, lang in ipairs({ "markdown", "markdown_inline" }) do
    if pcall(vim.treesitter.language.add, lang) and pcall(vim.treesitter.language.inspect, lang) then
      health.ok("treesitter parser " .. lang .. " (the chat's highlighting)")
    else
      health.warn("no treesitter parser " .. lang .. ": the chat falls back to the regex syntax")
    end
  end
  if render_markdown_loaded() then
    health.info("render-markdown.nvim is loaded: it renders the chat too")
  end
end

return M
