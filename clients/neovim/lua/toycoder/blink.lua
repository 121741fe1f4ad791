--- blink.cmp source of the prompt buffer (registered by input.lua when blink.cmp is there): a thin
--- adapter of complete.prompt_items to blink's source interface.
local complete = require("toycoder.complete")

local source = {}
source.__index = source

function source.new()
  return setmetatable({}, source)
end

function source:enabled()
  return require("toycoder.input").is_prompt(vim.api.nvim_get_current_buf())
end

function source:get_trigger_characters()
  return { "@", "/" }
end

function source:get_completions(ctx, callback)
  local row, col = ctx.cursor[1], ctx.cursor[2]
  local before = ctx.line:sub(1, col)
  complete.prompt_items(before, row, function(found)
    if not found then
      return callback({ items = {}, is_incomplete_forward = false, is_incomplete_backward = false })
    end
    local items = complete.lsp_items(found, row - 1, col)
    for _, item in ipairs(items) do
      item.filterText = item.label:sub(2) -- blink's keyword stops at `@` and `/`: match the name after them
    end
    callback({ is_incomplete_forward = true, is_incomplete_backward = true, items = items })
  end)
end

return source
