--- :ToyCoderMode: the daemon's permission modes (initialize's availableModes) in vim.ui.select;
--- the choice goes to toycoder/session/setMode. The daemon decides what a mode means.
local daemon = require("toycoder.daemon")
local chat = require("toycoder.chat")

local M = {}

local function set_mode(sid, id)
  daemon.request("toycoder/session/setMode", { sessionId = sid, mode = id }, function(err, info)
    if err then
      daemon.report_error(err)
      return
    end
    chat.set_mode(info.mode)
  end)
end

--- Pick a mode for the current session (`with_session` starts the daemon and a session if needed).
function M.pick(with_session)
  with_session(function(err, sid)
    if err then
      return
    end
    local modes = daemon.available_modes or {}
    if #modes == 0 then
      vim.notify("ToyCoder: the daemon offers no modes", vim.log.levels.INFO)
      return
    end
    vim.ui.select(modes, {
      prompt = "ToyCoder mode",
      kind = "toycoder.mode",
      format_item = function(m)
        local mark = m.id == chat.mode() and "* " or "  "
        return ("%s%s  %s"):format(mark, m.name or m.id, m.description or "")
      end,
    }, function(choice)
      if choice then
        set_mode(sid, choice.id)
      end
    end)
  end)
end

return M
