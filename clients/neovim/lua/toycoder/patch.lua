--- Unified diffs as the daemon's permission preview carries them, read back into text: the proposed
--- file (the current lines + the diff, for a real :diffthis) or, when the diff does not apply to the
--- current lines, the two sides the hunks themselves show.
local M = {}

local function strip_cr(s)
  return (s:gsub("\r$", ""))
end

--- The hunks of `diff`: { old_start, old_count, lines = { {op, text}, ... } }, and whether the diff
--- creates the file (`--- /dev/null`). Header lines are only read outside hunks, so a removed line
--- that starts with "-- " is never taken for a header.
function M.parse(diff)
  local hunks, creates = {}, false
  local hunk, old_left, new_left = nil, 0, 0
  for line in ((diff or ""):gsub("\n$", "") .. "\n"):gmatch("([^\n]*)\n") do
    if hunk and (old_left > 0 or new_left > 0) then
      local op, text = line:sub(1, 1), strip_cr(line:sub(2))
      if op == " " or op == "" then
        table.insert(hunk.lines, { " ", text })
        old_left, new_left = old_left - 1, new_left - 1
      elseif op == "-" then
        table.insert(hunk.lines, { "-", text })
        old_left = old_left - 1
      elseif op == "+" then
        table.insert(hunk.lines, { "+", text })
        new_left = new_left - 1
      elseif op ~= "\\" then -- "\ No newline at end of file" changes no line
        return nil, "malformed hunk line: " .. line
      end
    elseif line:sub(1, 2) == "@@" then
      local ostart, ocount, _, ncount = line:match("^@@ %-(%d+),?(%d*) %+(%d+),?(%d*) @@")
      if not ostart then
        return nil, "malformed hunk header: " .. line
      end
      hunk = { old_start = tonumber(ostart), old_count = ocount == "" and 1 or tonumber(ocount), lines = {} }
      old_left, new_left = hunk.old_count, (ncount == "" and 1 or tonumber(ncount))
      table.insert(hunks, hunk)
    elseif line:match("^%-%-%- /dev/null") then
      creates = true
    end
  end
  return { hunks = hunks, creates = creates }
end

--- `lines` (the current file) with `diff` applied, or nil and why when a context or removed line
--- does not match (the file is not the text the diff was made from).
function M.apply(lines, diff)
  local parsed, err = M.parse(diff)
  if not parsed then
    return nil, err
  end
  local out, pos = {}, 1 -- pos: the next line of `lines` not yet copied or consumed
  for _, h in ipairs(parsed.hunks) do
    -- a hunk that removes nothing starts *after* line old_start
    local first = h.old_count == 0 and h.old_start + 1 or h.old_start
    if first < pos then
      return nil, "overlapping hunks"
    end
    for i = pos, first - 1 do
      if lines[i] == nil then
        return nil, ("hunk at line %d is past the end of the file"):format(h.old_start)
      end
      table.insert(out, lines[i])
    end
    pos = first
    for _, l in ipairs(h.lines) do
      local op, text = l[1], l[2]
      if op ~= "+" then
        if lines[pos] == nil or strip_cr(lines[pos]) ~= text then
          return nil, ("line %d differs from the diff's base"):format(pos)
        end
        pos = pos + 1
      end
      if op ~= "-" then
        table.insert(out, text)
      end
    end
  end
  for i = pos, #lines do
    table.insert(out, lines[i])
  end
  return out
end

--- The old and new text the hunks show (context included), hunks separated by an empty line.
function M.sides(diff)
  local parsed = M.parse(diff) or { hunks = {} }
  local old, new = {}, {}
  for i, h in ipairs(parsed.hunks) do
    if i > 1 then
      table.insert(old, "")
      table.insert(new, "")
    end
    for _, l in ipairs(h.lines) do
      if l[1] ~= "+" then
        table.insert(old, l[2])
      end
      if l[1] ~= "-" then
        table.insert(new, l[2])
      end
    end
  end
  return old, new
end

return M
