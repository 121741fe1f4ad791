--- workspace/applyEdit from the daemon: its edit to a file open here goes into the buffer (so the
--- buffer's undo history has it, unsaved work included) instead of being written behind our back.
--- A buffer that had no unsaved changes is saved afterwards; a modified one stays modified.
local documents = require("toycoder.documents")

local M = {}

local api = vim.api

--- The URIs a WorkspaceEdit touches (both of its forms) -> how many text edits each gets.
local function uris_of(edit)
  local out = {}
  for uri, edits in pairs(edit.changes or {}) do
    out[uri] = (out[uri] or 0) + #edits
  end
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.textDocument and change.textDocument.uri then
      local uri = change.textDocument.uri
      out[uri] = (out[uri] or 0) + #(change.edits or {})
    elseif change.kind then -- create/rename/delete: the daemon sends none; refuse rather than guess
      return nil, "file operations (" .. tostring(change.kind) .. ") are not supported"
    end
  end
  return out
end

local loaded_buffer = documents.loaded_buffer

local function refuse(reason)
  return { applied = false, failureReason = reason }
end

local function changed(uri)
  return vim.fn.fnamemodify(vim.uri_to_fname(uri), ":~:.") .. " changed in the editor; the edit was not applied"
end

--- `edit` with each TextDocumentEdit's version checked against the one documents.lua last sent in
--- didChange, and then dropped: apply_workspace_edit would compare it with vim.lsp.util.buf_versions
--- (another numbering, a language server's) and skip the edit. nil and a reason on a mismatch.
local function check_versions(edit)
  if not edit.documentChanges then
    return edit
  end
  local out = {}
  for i, change in ipairs(edit.documentChanges) do
    local doc = change.textDocument
    local version = doc and doc.version
    if version ~= nil and version ~= vim.NIL then
      local buf = loaded_buffer(doc.uri)
      if not buf or documents.version(buf) ~= version then
        documents.flush() -- the daemon gets the newer text before our answer, and so knows why
        return nil, changed(doc.uri)
      end
      change = vim.tbl_extend("force", change, { textDocument = { uri = doc.uri } })
    end
    out[i] = change
  end
  return vim.tbl_extend("force", edit, { documentChanges = out })
end

--- The request handler: returns ApplyWorkspaceEditResult.
function M.handle(params)
  local edit = params and params.edit
  if type(edit) ~= "table" then
    return refuse("no edit")
  end
  local uris, err = uris_of(edit)
  if not uris then
    return refuse(err)
  end
  edit, err = check_versions(edit)
  if not edit then
    return refuse(err)
  end
  local before = {} -- uri -> { buf, modified, tick } of the buffers loaded before the edit
  for uri in pairs(uris) do
    local buf = loaded_buffer(uri)
    if buf then
      before[uri] = { buf = buf, modified = vim.bo[buf].modified, tick = api.nvim_buf_get_changedtick(buf) }
    end
  end
  local ok, apply_err = pcall(vim.lsp.util.apply_workspace_edit, edit, "utf-16")
  if not ok then
    return refuse("Neovim could not apply the edit: " .. tostring(apply_err))
  end
  for uri, count in pairs(uris) do
    local buf = loaded_buffer(uri)
    local was = before[uri]
    if not buf then
      return refuse("no buffer for " .. vim.uri_to_fname(uri))
    end
    -- apply_text_document_edit skips (with a message only) an edit made for an older version of
    -- the buffer: an unchanged changedtick tells us, and the daemon must not think it landed.
    if was and count > 0 and api.nvim_buf_get_changedtick(buf) == was.tick then
      return refuse(changed(uri))
    end
    if not (was and was.modified) then
      local saved, save_err = pcall(api.nvim_buf_call, buf, function()
        vim.cmd("silent write")
      end)
      if not saved then -- the edit is in the buffer all the same: say so, keep "applied"
        vim.notify("ToyCoder: the agent's edit is in the buffer but saving it failed: " .. tostring(save_err),
          vim.log.levels.WARN)
      end
    end
  end
  return { applied = true }
end

return M
