--- Expected values for the bring-up tools (--expect FILE, docs/expect.md): a
-- JSON file, or a Lua file returning a table, of sections per host list, each
-- naming the ports that must be there and active and the values they must
-- have.  A bring-up engine module that both tools share: it reads and judges,
-- the tool prints and exits.
--
--   local expect = require "ibverbs.bringup.expect"
--   local spec, err = expect.load("golden.json")        -- err names the file and the line or key
--   local entries, herr = expect.for_host(spec, "node07") -- the sections naming node07's entries (nil, why: none)
--   local wrong = expect.compare(entry, found)          -- {"active_mtu: expected 4096, found 1024", ...}
--   local results = expect.survey(ibv, entries, gid_of) -- the named ports as fabric_check.lua's results
--   expect.judge(results, entries, "golden.json", pc.read) -- each port's check "expect"
--
--   {"hosts": {"node[01-16,20]": {"ports": [{"device": "mlx5_0", "port": 1, "link_layer": "infiniband",
--     "active_mtu": 4096, "rate": 200, "fw_ver": "20.39.1002", "gid_type": "ib",
--     "counters": {"symbol_error": 0}}]}, "*": {...}},
--    "pairs": {"max_lat_us": 2.5, "max_lat_p99_us": 4, "min_write_mbs": 23000, "min_send_mbs": 23000}}
--   expect.pair_limits(spec)                             -- fabric_matrix.lua's absolute limits, or nil
local launcher = require "ibverbs.fabric.launcher"
local counter_names = require "ibverbs.counter_names"

local expect = {}

local MTUS = { [256] = true, [512] = true, [1024] = true, [2048] = true, [4096] = true }

-- A port entry's keys: a check of the value (nil when right, else what is wrong).
local function integer(v) return (type(v) ~= "number" or v ~= math.floor(v)) and "an integer expected" or nil end
local function text(v) return type(v) ~= "string" and "a string expected" or nil end
local KEYS = {
  device = function(v) return text(v) or (not v:find("^[%w_.-]+$") and "a device name expected") or nil end,
  port = function(v) return integer(v) or ((v < 1 or v > 255) and "1 to 255 expected") or nil end,
  link_layer = function(v)
    return text(v) or ((v:lower() ~= "ethernet" and v:lower() ~= "infiniband") and "ethernet or infiniband expected")
      or nil
  end,
  active_mtu = function(v) return integer(v) or (not MTUS[v] and "256, 512, 1024, 2048 or 4096 expected") or nil end,
  rate = function(v) return (type(v) ~= "number" or v <= 0) and "a rate in Gb/s above 0 expected" or nil end,
  fw_ver = text,
  gid_type = function(v)
    return text(v) or ((v ~= "ib" and v ~= "roce_v1" and v ~= "roce_v2") and "ib, roce_v1 or roce_v2 expected") or nil
  end,
  counters = function(v)
    if type(v) ~= "table" then return "a table of counter name -> largest rise expected" end
    for k, n in pairs(v) do
      local known, unknown = counter_names.check(k)
      if not known then return unknown end
      if integer(n) or n < 0 then
        return "counter '" .. tostring(k) .. "': a count of 0 or more expected"
      end
    end
  end,
}
expect.KEYS = KEYS

local function sorted_keys(t)
  local l = {}
  for k in pairs(t) do l[#l + 1] = tostring(k) end
  table.sort(l)
  return l
end

-- Whether t is a list of one or more values, without holes or other keys.
local function non_empty_list(t)
  if type(t) ~= "table" then return false end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  for k in pairs(t) do -- n distinct whole keys from 1 to n: 1..n
    if type(k) ~= "number" or k ~= math.floor(k) or k < 1 or k > n then return false end
  end
  return n > 0
end

-- A port entry: nil when right, else the message naming the key.
local function check_entry(e, where)
  if type(e) ~= "table" then return where .. ": a table expected, got " .. type(e) end
  for _, k in ipairs({ "device", "port" }) do
    if e[k] == nil then return where .. ": '" .. k .. "' missing (a port entry names its device and port)" end
  end
  for k, v in pairs(e) do
    local check = KEYS[k]
    if not check then
      return string.format("%s.%s: unknown key (known: %s)", where, tostring(k), table.concat(sorted_keys(KEYS), ", "))
    end
    local bad = check(v)
    if bad then
      local got = type(v) == "string" and string.format("%q", v) or type(v) ~= "table" and tostring(v)
      return string.format("%s.%s: %s%s", where, k, bad, got and (", got " .. got) or "")
    end
  end
end

-- The whole table: nil when right, else the message naming the key.
--- The absolute limits of a pair (fabric_matrix.lua): key -> {the pair's
-- figure, whether it is a ceiling (max) or a floor (min), its name}.
expect.PAIR_KEYS = {
  max_lat_us = { key = "lat_us", max = true, name = "latency" },
  max_lat_p99_us = { key = "lat_p99_us", max = true, name = "latency p99" },
  min_write_mbs = { key = "write_mbs", max = false, name = "RDMA write bandwidth" },
  min_send_mbs = { key = "send_mbs", max = false, name = "send bandwidth" },
}

-- The pairs section: nil when right, else the message naming the key.
local function check_pairs(p)
  if type(p) ~= "table" then return "'pairs': a table of limit -> value expected" end
  for k, v in pairs(p) do
    if not expect.PAIR_KEYS[k] then
      return string.format("pairs.%s: unknown key (known: %s)", tostring(k),
        table.concat(sorted_keys(expect.PAIR_KEYS), ", "))
    end
    if type(v) ~= "number" or v ~= v or v <= 0 or v == math.huge then
      return string.format("pairs.%s: a number above 0 expected, got %s", k, tostring(v))
    end
  end
end

local function check_spec(t)
  if type(t) ~= "table" then return "a table expected at the top" end
  for k in pairs(t) do
    if k ~= "hosts" and k ~= "pairs" then
      return "'" .. tostring(k) .. "': unknown key at the top (known: hosts, pairs)"
    end
  end
  if t.pairs ~= nil then
    local perr = check_pairs(t.pairs)
    if perr then return perr end
  end
  if t.hosts == nil and t.pairs ~= nil then return nil end
  if type(t.hosts) ~= "table" then return "'hosts': a table of host list -> section expected" end
  for list, section in pairs(t.hosts) do
    local where = "hosts[\"" .. tostring(list) .. "\"]"
    if type(list) ~= "string" then return where .. ": a host list or * expected" end
    if list ~= "*" then
      local hosts, herr = launcher.hostlist(list)
      if not hosts then return where .. ": " .. herr end
    end
    if type(section) ~= "table" then return where .. ": a table expected" end
    for k in pairs(section) do
      if k ~= "ports" then return where .. "." .. tostring(k) .. ": unknown key (known: ports)" end
    end
    if not non_empty_list(section.ports) then return where .. ".ports: a non-empty list of port entries expected" end
    for i, e in ipairs(section.ports) do
      local err = check_entry(e, where .. ".ports[" .. i .. "]")
      if err then return err end
    end
  end
end

-- The line of byte pos in text.
local function line_of(text_, pos)
  local n = 1
  for _ in text_:sub(1, (pos or 1) - 1):gmatch("\n") do n = n + 1 end
  return n
end

-- The table a file holds (JSON, or Lua returning a table), or nil, message.
local function read_table(path)
  local fh, oerr = io.open(path)
  if not fh then return nil, tostring(oerr) end
  local body = fh:read("a")
  fh:close()
  if path:find("%.lua$") then
    local chunk, lerr = load(body, "@" .. path, "t", {})
    if not chunk then return nil, lerr end
    local ok, t = pcall(chunk)
    if not ok then return nil, tostring(t) end
    if type(t) ~= "table" then return nil, "a Lua expect file must return a table, got " .. type(t) end
    return t
  end
  local dkjson = require "dkjson"
  local t, pos, jerr = dkjson.decode(body, 1, nil)
  if jerr or t == nil then
    return nil, string.format("line %d: %s", line_of(body, pos), tostring(jerr or "no JSON value"))
  end
  local rest = body:find("%S", pos)
  if rest then return nil, string.format("line %d: more after the JSON value", line_of(body, rest)) end
  return t
end

--- The expectations of file path (JSON, or a Lua file returning a table), or
-- nil, one message naming the file and the line or key that is wrong.
function expect.load(path)
  local t, err = read_table(path)
  if t == nil then
    local msg = tostring(err)
    if msg:sub(1, #path + 1) == path .. ":" then return nil, msg end
    return nil, path .. ": " .. msg
  end
  err = check_spec(t)
  if err then return nil, path .. ": " .. err end
  return t
end

--- The absolute limits of every pair (spec.pairs: expect.PAIR_KEYS), as
-- ibverbs.bringup.matrix.diagnose reads them: a list of {key =, max =, name =, value =}, or nil.
function expect.pair_limits(spec)
  if not spec or not spec.pairs then return nil end
  local l = {}
  for _, k in ipairs(sorted_keys(spec.pairs)) do
    local d = expect.PAIR_KEYS[k]
    l[#l + 1] = { key = d.key, max = d.max, name = d.name, value = spec.pairs[k] }
  end
  return l
end

-- A host name's short form (up to its first dot), or nil: none, or an IPv4 address.
local function short(name)
  if name:find("^[%d.]+$") then return nil end
  return name:match("^([^.]+)%.")
end

--- Whether two host names are one host: the same in full or in short form
-- (up to the first dot) on either side, case ignored ("node1.cluster.local"
-- and "node1", "node1" and "node1.cluster.local").
function expect.same_host(a, b)
  a, b = tostring(a):lower(), tostring(b):lower()
  local sa, sb = short(a), short(b)
  return a == b or sa == b or a == sb or (sa ~= nil and sa == sb)
end

--- The port entries of every section whose host list names host ("*": every
-- host; a name in full or in short form: expect.same_host), in the file's
-- order of sections by name; a later entry for the same device and port adds
-- to (and overrides) an earlier one.  nil, "host h is in no host list (the
-- lists)" when no section names host (a file of pairs alone names none).
function expect.for_host(spec, host)
  local lists = sorted_keys(spec.hosts or {})
  local out, at, named = {}, {}, false
  for _, list in ipairs(lists) do
    local names = list == "*" and { host } or launcher.hostlist(list)
    local hit = false
    for _, n in ipairs(names) do hit = hit or expect.same_host(n, host) end
    named = named or hit
    if hit then
      for _, e in ipairs(spec.hosts[list].ports) do
        local key = e.device .. ":" .. e.port
        if not at[key] then
          at[key] = { device = e.device, port = e.port }
          out[#out + 1] = at[key]
        end
        for k, v in pairs(e) do at[key][k] = v end
      end
    end
  end
  if not named then
    local shown = #lists > 6 and string.format("%s, ... (%d lists)", table.concat(lists, ", ", 1, 5), #lists)
      or #lists > 0 and table.concat(lists, ", ") or (spec.hosts and "the file has none" or "the file has pairs only")
    return nil, string.format("host %s is in no host list (%s)", tostring(host), shown)
  end
  return out
end

--- The port's rate in Gb/s as the kernel computes it (active_speed x
-- active_width, the extended speeds included): /sys/class/infiniband/<dev>/
-- ports/<port>/rate ("100 Gb/sec (4X EDR)"), or nil.
function expect.rate(device, port, root)
  local fh = io.open(string.format("%s/%s/ports/%d/rate", root or "/sys/class/infiniband", device, port))
  if not fh then return nil end
  local line = fh:read("l")
  fh:close()
  return tonumber(line and line:match("^%s*([%d.]+)"))
end

--- What is wrong with a port against its entry: a list of "key: expected x,
-- found y" (empty when it matches).  found: state, link_layer, active_mtu,
-- rate, fw_ver, gid_type of the port, and counters: its counters as
-- ibverbs.port_counters.read gives them (false: none read; nil: not looked
-- at), where every counter the entry names must be ("counters: x, y not on
-- this port"; a hw_counters name also in counters/ as "hw_" .. name).
function expect.compare(entry, found)
  local wrong = {}
  if found.state ~= "active" then
    wrong[#wrong + 1] = "state: expected active, found " .. tostring(found.state)
  end
  for _, k in ipairs({ "link_layer", "active_mtu", "rate", "fw_ver", "gid_type" }) do
    local want, got = entry[k], found[k]
    if want ~= nil then
      local same = want == got
      if k == "link_layer" then same = type(got) == "string" and want:lower() == got:lower() end
      if not same then
        wrong[#wrong + 1] = string.format("%s: expected %s, found %s", k, tostring(want), tostring(got))
      end
    end
  end
  if entry.counters and found.counters ~= nil then
    local c, missing = found.counters or {}, {}
    for _, k in ipairs(sorted_keys(entry.counters)) do
      if c[k] == nil and c["hw_" .. k] == nil then missing[#missing + 1] = k end
    end
    if #missing > 0 then wrong[#wrong + 1] = "counters: " .. table.concat(missing, ", ") .. " not on this port" end
  end
  return wrong
end

--- fabric_check.lua's results judged against entries (expect.for_host's):
-- each entry's port gets a check "expect" that passes or names what differs;
-- an entry whose device or port is not there fails on its own.  A port's
-- found values are its record's (state, link_layer, active_mtu, the type of
-- the GID it ran on), its device's fw_ver and expect.rate's; with read
-- (ibverbs.port_counters.read), the counters an entry names must be among
-- the port's.
function expect.judge(results, entries, file, read)
  for _, e in ipairs(entries) do
    local dev, port
    for _, d in ipairs(results) do
      if d.name == e.device then dev = d end
    end
    for _, p in ipairs(dev and dev.ports or {}) do
      if p.port == e.port then port = p end
    end
    if not dev then
      dev = { name = e.device, ports = {} }
      results[#results + 1] = dev
    end
    if not port then
      port = { port = e.port, checks = {} }
      dev.ports[#dev.ports + 1] = port
    end
    local found = { state = port.state, link_layer = port.link_layer, active_mtu = port.active_mtu,
      fw_ver = dev.fw_ver, rate = port.state and expect.rate(e.device, e.port) }
    for _, g in ipairs(port.gids or {}) do
      if g.index == port.gid_index then found.gid_type = g.type end
    end
    if e.counters and read and port.state then found.counters = read(e.device, e.port) or false end
    local wrong = expect.compare(e, found)
    if not port.state then wrong = { "not present on this host" } end
    port.checks[#port.checks + 1] = { name = "expect", pass = #wrong == 0, ms = 0,
      detail = #wrong > 0 and (e.device .. " port " .. e.port .. " (" .. file .. "): " .. table.concat(wrong, "; "))
        or nil }
  end
end

--- The ports entries name, read now, as fabric_check.lua's results (the
-- input of expect.judge): a device that opens gives its fw_ver and, for
-- each named port that answers, state, link_layer, active_mtu, its GIDs and
-- gid_index = gid_of(ctx, port, link_layer), the GID its traffic uses.  A
-- device or port that does not is left out (judge: not present).
function expect.survey(ibv, entries, gid_of)
  local results, by = {}, {}
  for _, e in ipairs(entries) do
    if by[e.device] == nil then
      local ok, ctx = pcall(ibv.open, e.device)
      by[e.device] = ok and ctx and { name = e.device, ports = {}, ctx = ctx,
        fw_ver = (ctx:query_device() or {}).fw_ver } or false
      if by[e.device] then results[#results + 1] = by[e.device] end
    end
    local dev = by[e.device]
    local p = dev and dev.ctx:query_port(e.port)
    if p then
      local r = { port = e.port, checks = {}, state = p.state, link_layer = p.link_layer, active_mtu = p.active_mtu,
        gid_index = gid_of(dev.ctx, e.port, p.link_layer), gids = {} }
      for _, g in ipairs(dev.ctx:query_gid_table() or {}) do
        if g.port_num == e.port then r.gids[#r.gids + 1] = { index = g.gid_index, type = g.gid_type } end
      end
      dev.ports[#dev.ports + 1] = r
    end
  end
  for _, dev in ipairs(results) do
    dev.ctx:close()
    dev.ctx = nil
  end
  return results
end

return expect
