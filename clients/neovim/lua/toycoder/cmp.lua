--- nvim-cmp source of the prompt buffer (registered by input.lua when nvim-cmp is there): a thin
--- adapter of complete.prompt_items to cmp's source interface.
local complete = require("toycoder.complete")

local source = {}
source.__index = source

function source.new()
  return setmetatable({}, source)
end

function source:is_available()
  return require("toycoder.input").is_prompt(vim.api.nvim_get_current_buf())
end

function source:get_debug_name()
  return "toycoder"
end

function source:get_trigger_characters()
  return { "@", "/" }
end

function source:get_keyword_pattern()
  return [[[@/]\S*]]
end

function source:get_position_encoding_kind()
  return "utf-8" -- prompt_items' columns are bytes
end

function source:complete(params, callback)
  local ctx = params.context
  local before = ctx.cursor_before_line
  complete.prompt_items(before, ctx.cursor.row, function(found)
    if not found then
      return callback({ items = {}, isIncomplete = false })
    end
    callback({ isIncomplete = true, items = complete.lsp_items(found, ctx.cursor.row - 1, #before) })
  end)
end

return source
