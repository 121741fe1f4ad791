--- Short session titles: the daemon's title is the whole first prompt (selection context and code
--- fences included, joined into one line); the chat shows its first sentence-ish line only.
local M = {}

M.MAX = 60

--- The short form of a title or prompt: its first line that is not a code fence, cut before any
--- fence or the "From `path`, lines a-b:" context our selection prompts add, at most MAX chars.
function M.short(text)
  if type(text) ~= "string" then
    return ""
  end
  local first = ""
  for line in (text .. "\n"):gmatch("(.-)\r?\n") do
    local trimmed = vim.trim(line)
    if trimmed ~= "" and not trimmed:match("^```") and not trimmed:match("^~~~") then
      first = trimmed
      break
    end
  end
  first = first:gsub("```.*$", "")
  first = first:gsub("%s*From `[^`]*`, lines? [%d%-]+:.*$", "")
  first = vim.trim(first:gsub("%s+", " "))
  if vim.fn.strchars(first) > M.MAX then
    first = vim.fn.strcharpart(first, 0, M.MAX - 1) .. "…"
  end
  return first
end

--- `text` fitted into `width` display cells, cut on the right with "…".
function M.fit(text, width)
  if width <= 0 then
    return ""
  end
  if vim.fn.strdisplaywidth(text) <= width then
    return text
  end
  local out = text
  while vim.fn.strdisplaywidth(out .. "…") > width and out ~= "" do
    out = vim.fn.strcharpart(out, 0, vim.fn.strchars(out) - 1)
  end
  return out .. "…"
end

return M
