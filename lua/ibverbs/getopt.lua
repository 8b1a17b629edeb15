--- Command-line options for the example tools, in the style of getopt_long.
--
--   local getopt = require "ibverbs.getopt"
--   local opts, args = getopt.run(arg, {
--     name = "rc_pingpong.lua",
--     usage = { "            start a server and wait for connection",
--               "<host>     connect to server at <host>" },
--     { "p", "port", arg = "port", type = "int", default = 18515,
--       help = "listen on/connect to port <port> (default 18515)" },
--     { "e", "events", help = "sleep on CQ events (default poll)" },   -- a flag
--   })
--   opts.port, opts.events, args[1]
--
-- Accepted forms: -p 1, -p1, --port 1, --port=1, grouped flags (-ev).
-- -h and --help print the usage and exit 0; a wrong option prints the error
-- and the usage to stderr and exits 1.  getopt.parse does the same work but
-- returns nil, message (or "help") instead of exiting.
local getopt = {}

local function convert(o, text)
  if o.type == "int" then
    local n = tonumber(text)
    if n == nil or n ~= math.floor(n) then return nil, "an integer expected, got '" .. text .. "'" end
    if o.min and n < o.min then return nil, "at least " .. o.min .. " expected, got " .. text end
    if o.max and n > o.max then return nil, "at most " .. o.max .. " expected, got " .. text end
    return math.tointeger and math.tointeger(n) or n
  elseif o.type == "number" then
    local n = tonumber(text)
    if n == nil then return nil, "a number expected, got '" .. text .. "'" end
    return n
  end
  return text
end

local function index(spec)
  local by_short, by_long = {}, {}
  for _, o in ipairs(spec) do
    if o[1] then by_short[o[1]] = o end
    by_long[o[2]] = o
  end
  return by_short, by_long
end

local function key(o) return (o[2]:gsub("-", "_")) end

--- Parses argv; returns opts, positional args or nil, msg ("help" for -h/--help).
function getopt.parse(argv, spec)
  local by_short, by_long = index(spec)
  local opts, args = {}, {}
  for _, o in ipairs(spec) do
    if o.default ~= nil then opts[key(o)] = o.default
    elseif not o.arg then opts[key(o)] = false end
  end
  local function set(o, name, value)
    if not o.arg then opts[key(o)] = true; return true end
    if value == nil then return nil, "option '" .. name .. "' requires an argument" end
    local v, err = convert(o, value)
    if v == nil then return nil, "option '" .. name .. "': " .. err end
    opts[key(o)] = v
    return true
  end
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--" then
      for j = i + 1, #argv do args[#args + 1] = argv[j] end
      break
    elseif a == "-h" or a == "--help" then
      return nil, "help"
    elseif a:sub(1, 2) == "--" then
      local name, value = a:match("^%-%-([^=]+)=(.*)$")
      name = name or a:sub(3)
      local o = by_long[name]
      if not o then return nil, "unrecognized option '--" .. name .. "'" end
      if o.arg and value == nil then i = i + 1; value = argv[i] end
      local ok, err = set(o, "--" .. name, value)
      if not ok then return nil, err end
    elseif a:sub(1, 1) == "-" and #a > 1 then
      local j = 2
      while j <= #a do
        local c = a:sub(j, j)
        local o = by_short[c]
        if not o then return nil, "invalid option -- '" .. c .. "'" end
        if o.arg then
          local value = a:sub(j + 1)
          if value == "" then i = i + 1; value = argv[i] end
          local ok, err = set(o, "-" .. c, value)
          if not ok then return nil, err end
          break
        end
        set(o, "-" .. c)
        j = j + 1
      end
    else
      args[#args + 1] = a
    end
    i = i + 1
  end
  return opts, args
end

--- The usage text.
function getopt.usage(spec)
  local lines = { "Usage:" }
  for _, u in ipairs(spec.usage or { "" }) do lines[#lines + 1] = "  " .. spec.name .. " " .. u end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Options:"
  for _, o in ipairs(spec) do
    local left = (o[1] and ("-" .. o[1] .. ", ") or "    ") .. "--" .. o[2] .. (o.arg and ("=<" .. o.arg .. ">") or "")
    lines[#lines + 1] = string.format("  %-26s %s", left, o.help or "")
  end
  lines[#lines + 1] = string.format("  %-26s %s", "-h, --help", "show this help")
  return table.concat(lines, "\n") .. "\n"
end

--- Parses argv, or prints the usage and exits (0 for --help, 1 for a mistake).
function getopt.run(argv, spec)
  local opts, args = getopt.parse(argv, spec)
  if opts then return opts, args end
  if args == "help" then
    io.stdout:write(getopt.usage(spec))
    os.exit(0)
  end
  io.stderr:write(spec.name, ": ", args, "\n", getopt.usage(spec))
  os.exit(1)
end

return getopt
