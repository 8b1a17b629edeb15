--- The statements of a Slurm topology.conf (topology/tree plugin), read as
-- Slurm reads them, with the line each starts on; and the statements of the
-- lines Slurm takes for comments that begin "#ibverbs" (this project's own:
-- switch addresses, rails).  Text in, tables out: no graph, no check across
-- statements (ibverbs.bringup.topology.graph does those).
--
--   local conf = require "ibverbs.bringup.topology.conf"
--   local stmts, err = conf.parse(text, "topology.conf")    -- err "topology.conf:7: ..."
--   -- stmts[i] = { line = 7, ext = false, SwitchName = "leaf1", Nodes = "node[01-04]",
--   --              Switches = nil, LinkSpeed = nil, Addresses = nil, Rail = nil }
--
-- What Slurm's parser does and this one too: a "#" not escaped as "\#" starts
-- a comment to the end of the line; a line ending in an odd number of "\"
-- goes on on the next line; "\x" stands for x; keys are case-insensitive;
-- a value is "quoted" (blanks allowed) or runs to the next blank; a statement
-- starts with SwitchName= and takes LinkSpeed=, Nodes=, Switches=; another
-- key is an error.  A "#ibverbs" line is one statement, not continued,
-- which may also take Addresses= and Rail=.
local conf = {}

-- The keys a statement takes, by lower-case spelling: their spelling in messages, and whether only
-- "#ibverbs" lines take them.
local KEYS = {
  switchname = { "SwitchName" }, linkspeed = { "LinkSpeed" }, nodes = { "Nodes" }, switches = { "Switches" },
  addresses = { "Addresses", true }, rail = { "Rail", true },
}
conf.KEYS = KEYS

-- line without its comment: cut at the first "#" after an even number of backslashes.
local function strip_comment(line)
  local bs = 0
  for i = 1, #line do
    local c = line:sub(i, i)
    if c == "#" and bs % 2 == 0 then return line:sub(1, i - 1) end
    bs = c == "\\" and bs + 1 or 0
  end
  return line
end

-- line without a continuation mark, and whether it had one (an odd run of "\" at its end, blanks after it
-- allowed).
local function strip_continuation(line)
  local body, run = line:match("^(.-)(\\*)%s*$")
  if #run % 2 == 1 then return body .. run:sub(2), true end
  return line, false
end

-- The key=value pairs of a statement's text, in order, or nil, msg.
local function pairs_of(text, ext)
  local out, pos = {}, 1
  while true do
    pos = text:find("%S", pos)
    if not pos then break end
    local key, value, after = text:match('^([%w_.]+)%s*=%s*"([^"]*)"()', pos)
    if not key then key, value, after = text:match("^([%w_.]+)%s*=%s*([^%s\"]*)()", pos) end
    if not key or (after <= #text and not text:sub(after, after):find("%s")) then
      local bad = text:match("^%S+", pos)
      return nil, string.format("cannot read '%s' (key=value expected)", bad)
    end
    local k = KEYS[key:lower()]
    if not k then
      return nil, string.format("unknown key '%s' (SwitchName, Nodes, Switches, LinkSpeed%s)", key,
        ext and ", Addresses, Rail" or "")
    end
    if k[2] and not ext then
      return nil, string.format("'%s' is for '#ibverbs' lines only (Slurm does not know it)", key)
    end
    if #out == 0 and k[1] ~= "SwitchName" then
      return nil, string.format("a statement starts with SwitchName=, got '%s='", key)
    end
    out[#out + 1] = { k[1], value }
    pos = after
  end
  return out
end

-- The statement of one logical line (its text without comments), or nil (a blank line), or nil, msg.
local function statement(text, line, ext)
  local kv, err = pairs_of(text, ext)
  if not kv then return nil, err end
  if #kv == 0 then return nil end
  local s = { line = line, ext = ext }
  for _, p in ipairs(kv) do
    if s[p[1]] ~= nil then return nil, string.format("%s= given twice", p[1]) end
    s[p[1]] = p[2]
  end
  return s
end

-- The text of a "#ibverbs" line after its mark, or nil for any other line.
local function extension(line)
  local rest = line:match("^%s*#ibverbs(.*)$")
  if rest and (rest == "" or rest:find("^%s")) then return rest end
  return nil
end
conf.extension = extension

--- The statements of text (the file's contents; file names it in messages): a list of
-- { line =, ext =, SwitchName =, Nodes =, Switches =, LinkSpeed =, Addresses =, Rail = } (values as
-- written, unexpanded), or nil, "FILE:LINE: msg".  opts.all_ext: every line is read as an "#ibverbs"
-- line's text (a file of addresses), the mark optional.
function conf.parse(text, file, opts)
  local all_ext = opts and opts.all_ext
  local out, n, pending, first = {}, 0, nil, nil
  for raw in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    n = n + 1
    raw = raw:gsub("\r$", "")
    local ext = not pending and (extension(raw) or (all_ext and raw))
    local body, more
    if ext then
      body, more = strip_comment(ext), false
    else
      body, more = strip_continuation(strip_comment(raw))
    end
    pending, first = (pending or "") .. body, first or n
    if not more then
      local s, err = statement(pending:gsub("\\(.)", "%1"), first, ext and true or false)
      if err then return nil, string.format("%s:%d: %s", file, first, err) end
      out[#out + 1] = s
      pending, first = nil, nil
    end
  end
  if pending then return nil, string.format("%s:%d: the file ends inside a continued line", file, first) end
  return out
end

return conf
