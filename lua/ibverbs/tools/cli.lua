--- The tools' argument layer: their command lines, on lua-argparse, and the
-- agreement text every rank of a run must give alike.
--
--   local cli = require "ibverbs.tools.cli"
--   local opts, args = cli.run(arg, {
--     name = "rc_pingpong.lua",
--     usage = { "            start a server and wait for connection",
--               "<host>     connect to server at <host>" },
--     { "p", "port", arg = "port", type = "int", default = 18515, min = 1, max = 65535,
--       help = "listen on/connect to port <port> (default 18515)" },
--     cli.ib_dev(), cli.ib_port(), cli.gid_idx(),          -- the options every tool shares
--     { "e", "events", help = "sleep on CQ events (default poll)" },   -- a flag
--   })
--   opts.port, opts.ib_dev, opts.events, args[1]
--
-- An option is { short letter or nil, long name, arg = name of its value
-- (none: a flag, false unless given), type = "int" | "number", default, min,
-- max, help }; its key in opts is the long name with "_" for "-".
-- argparse accepts -p 1, -p1, --port 1, --port=1 and grouped flags (-ev); a
-- negative number is taken as a value (-g -1, as getopt_long does).  -h and
-- --help print the help and exit 0; a wrong option prints the usage and the
-- error to stderr and exits 1.
local argparse = require "argparse"

local cli = {}

-- The options the tools share, defined once; each tool may change the default
-- and the help text (their C counterparts word them differently).
local shared = {
  ["ib-dev"] = { "d", "ib-dev", arg = "dev", help = "use IB device <dev> (default first device found)" },
  ["ib-port"] = { "i", "ib-port", arg = "port", type = "int", default = 1, min = 1, max = 255,
                  help = "use port <port> of IB device (default 1)" },
  ["gid-idx"] = { "g", "gid-idx", arg = "gid index", type = "int", default = -1, help = "local port gid index" },
}

local function shared_option(name, changes)
  local o = {}
  for k, v in pairs(shared[name]) do o[k] = v end
  for k, v in pairs(changes or {}) do o[k] = v end
  if changes and changes.default == false then o.default = nil end -- no default: nil unless given
  return o
end

--- -d, --ib-dev <dev>; changes: fields to override (help = ...).
function cli.ib_dev(changes) return shared_option("ib-dev", changes) end
--- -i, --ib-port <port> (1 to 255, default 1; default = false: none).
function cli.ib_port(changes) return shared_option("ib-port", changes) end
--- -g, --gid-idx <gid index> (default -1: no GRH).
function cli.gid_idx(changes) return shared_option("gid-idx", changes) end

local function converter(o)
  if o.type ~= "int" and o.type ~= "number" then return nil end
  return function(text)
    local n = tonumber(text)
    if n == nil or (o.type == "int" and n ~= math.floor(n)) then
      return nil, "option '--" .. o[2] .. "': " .. (o.type == "int" and "an integer" or "a number") ..
        " expected, got '" .. text .. "'"
    end
    local name = "option '--" .. o[2] .. "': "
    if o.min and n < o.min then return nil, name .. "at least " .. o.min .. " expected, got " .. text end
    if o.max and n > o.max then return nil, name .. "at most " .. o.max .. " expected, got " .. text end
    return o.type == "int" and math.tointeger and math.tointeger(n) or n
  end
end

--- The program name usage and errors show: nil, spec.name ("fabric_check.lua");
-- ibverbs.tools.run sets "ibvlua fabric_check" for the host's subcommand.
cli.program = nil

--- The usage lines of a tool.
function cli.usage(spec)
  local lines = { "Usage:" }
  for _, u in ipairs(spec.usage or { "" }) do lines[#lines + 1] = "  " .. (cli.program or spec.name) .. " " .. u end
  return table.concat(lines, "\n")
end

--- The argparse parser of a tool's spec.
function cli.parser(spec)
  local p = argparse(cli.program or spec.name):usage(cli.usage(spec)):help_max_width(120):help_description_margin(40)
  p:argument("args"):args("*"):hidden(true)
  for _, o in ipairs(spec) do
    local names = (o[1] and ("-" .. o[1] .. " ") or "") .. "--" .. o[2]
    if o.arg then
      local opt = p:option(names, o.help):argname("<" .. o.arg .. ">")
      local conv = converter(o)
      if conv then opt:convert(conv) end
      if o.default ~= nil then opt:default(o.default):show_default(false) end
    else
      p:flag(names, o.help)
    end
  end
  return p
end

-- getopt_long takes "-g -1": argparse would read -1 as an option.
local function join_negative(argv, spec)
  local takes = {}
  for _, o in ipairs(spec) do
    if o.arg then
      if o[1] then takes["-" .. o[1]] = true end
      takes["--" .. o[2]] = true
    end
  end
  local out, i = {}, 1
  while i <= #argv do
    local a, v = argv[i], argv[i + 1]
    if takes[a] and v and v:match("^%-%d") then
      out[#out + 1] = (a:sub(1, 2) == "--" and a .. "=" or a) .. v
      i = i + 2
    else
      out[#out + 1] = a
      i = i + 1
    end
  end
  return out
end

--- Parses argv: returns opts, positional args; or prints and exits (0 for
-- --help; for a mistake spec.error_status, default 1 as the C tools).
function cli.run(argv, spec)
  local argv_list = {}
  for i = 1, #argv do argv_list[i] = argv[i] end
  local parser = cli.parser(spec)
  local ok, r = parser:pparse(join_negative(argv_list, spec))
  if not ok then
    io.stderr:write(("%s\n\nError: %s\n"):format(parser:get_usage(), r))
    os.exit(spec.error_status or 1)
  end
  local opts = {}
  for _, o in ipairs(spec) do
    local key = o[2]:gsub("-", "_")
    local v = r[key]
    if not o.arg then v = v or false end
    opts[key] = v
  end
  return opts, r.args
end

--- The text every rank of one run must give alike (fabric.init's agree):
-- version, then every option of opts but those of skip (a set of keys: the
-- rank's own, the output files), "key=value" sorted by key.
function cli.agreement(version, opts, skip)
  local keys = {}
  for k in pairs(opts) do
    if not skip[k] then keys[#keys + 1] = k end
  end
  table.sort(keys)
  local parts = { version }
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(opts[k]) end
  return table.concat(parts, " ")
end

return cli
