-- ToyCoder: commands only; everything else loads on first use (require("toycoder")).
if vim.g.loaded_toycoder then
  return
end
vim.g.loaded_toycoder = 1

if vim.fn.has("nvim-0.10") ~= 1 then
  vim.api.nvim_create_user_command("ToyCoder", function()
    vim.notify("toycoder.nvim needs Neovim 0.10 or newer", vim.log.levels.ERROR)
  end, { nargs = "*", range = true })
  return
end

vim.api.nvim_create_user_command("ToyCoder", function(o)
  require("toycoder").command(o)
end, {
  nargs = "*",
  range = true,
  desc = "ToyCoder: toggle the chat, send a prompt or a /command (with a range: about the selection)",
  complete = function(arglead, cmdline, cursorpos)
    return require("toycoder").complete(arglead, cmdline, cursorpos)
  end,
})

vim.api.nvim_create_user_command("ToyCoderAdd", function(o)
  require("toycoder").add_selection(o.line1, o.line2)
end, { range = true, desc = "ToyCoder: add the selection (or the range's lines) to the next prompt" })

vim.api.nvim_create_user_command("ToyCoderAttach", function(o)
  require("toycoder").attach(o.args)
end, { nargs = 1, complete = "file", desc = "ToyCoder: attach an image (png, jpeg, gif, webp) to the next prompt" })

vim.api.nvim_create_user_command("ToyCoderCancel", function()
  require("toycoder").cancel()
end, { desc = "ToyCoder: cancel the running turn" })

vim.api.nvim_create_user_command("ToyCoderSessions", function()
  require("toycoder").pick_session()
end, { desc = "ToyCoder: pick a session and switch to it" })

vim.api.nvim_create_user_command("ToyCoderCheckpoints", function()
  require("toycoder").pick_checkpoint()
end, { desc = "ToyCoder: pick a turn's checkpoint and restore the files it changed" })

vim.api.nvim_create_user_command("ToyCoderMode", function()
  require("toycoder").pick_mode()
end, { desc = "ToyCoder: pick the session's permission mode (ask, accept-edits, read-only)" })

vim.api.nvim_create_user_command("ToyCoderDiskDiff", function(o)
  require("toycoder.reload").diff_disk(o.args)
end, { nargs = "?", complete = "buffer", desc = "ToyCoder: diff a buffer with unsaved changes against its file on disk" })
