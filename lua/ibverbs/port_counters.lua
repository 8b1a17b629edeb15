--- A port's counters from sysfs, as deltas: the hardware's own evidence.
--
--   local pc = require "ibverbs.port_counters"
--   local before = assert(pc.read(ctx, 1))      -- a context or a device name: pc.read("mlx5_0", 1)
--   ... traffic ...
--   local d, unknown = pc.deltas(before, assert(pc.read(ctx, 1)))
--   for _, x in ipairs(pc.exceeded(d, pc.THRESHOLDS)) do print(x.name, x.delta, x.threshold) end
--
-- read: every file of /sys/class/infiniband/<dev>/ports/<port>/counters (the
-- InfiniBand PortCounters: symbol_error, link_downed, port_rcv_errors, ...)
-- and .../hw_counters (the provider's own: rxe's retry_exceeded_err,
-- out_of_seq_request, ...; mlx5's out_of_sequence, local_ack_timeout_err, ...)
-- as name -> integer.  Nothing is ever reset: a tool compares two readings.
-- A counter at its maximum (InfiniBand counters stop there: 2^4-1 to 2^32-1 by
-- counter, 2^64-1 for 64-bit ones) or lower in the second reading than in the
-- first (reset by someone, or wrapped) has no delta: it is "unknown", never 0.
-- Directory listings go through lua-luv or LuaFileSystem when one is there,
-- else the counters named in this file are read one by one; no program runs.
local pc = {}

pc.ROOT = "/sys/class/infiniband"

-- The InfiniBand PortCounters' widths in bits (IBA 16.1.3.5); PortCountersExtended
-- makes the data and packet counters 64-bit, so both maxima stand for them.
local WIDTH = {
  symbol_error = 16, link_error_recovery = 8, link_downed = 8, port_rcv_errors = 16,
  port_rcv_remote_physical_errors = 16, port_rcv_switch_relay_errors = 16, port_xmit_discards = 16,
  port_xmit_constraint_errors = 8, port_rcv_constraint_errors = 8, local_link_integrity_errors = 4,
  excessive_buffer_overrun_errors = 4, VL15_dropped = 16, port_xmit_wait = 32,
}
pc.WIDTH = WIDTH

--- The error counters and the rise over one run that makes a finding
-- (defaults; a counter not listed here is reported, never judged).  The
-- InfiniBand ones follow infiniband-diags' error_thresholds, the provider
-- ones (rxe, mlx5) flag a rise past a few: a healthy RC link retransmits
-- nothing, but a busy host's soft-RoCE may now and then.
pc.THRESHOLDS = {
  -- InfiniBand PortCounters
  symbol_error = 10, link_error_recovery = 10, link_downed = 0, port_rcv_errors = 10,
  port_rcv_remote_physical_errors = 100, port_rcv_switch_relay_errors = 100, port_xmit_discards = 100,
  port_xmit_constraint_errors = 100, port_rcv_constraint_errors = 100, local_link_integrity_errors = 10,
  excessive_buffer_overrun_errors = 10, VL15_dropped = 100,
  -- rxe (soft-RoCE) hw_counters
  retry_exceeded_err = 0, retry_rnr_exceeded_err = 0, completer_retry_err = 10, out_of_seq_request = 10,
  duplicate_request = 10, rcvd_seq_err = 10, send_err = 0,
  -- mlx5 hw_counters
  out_of_sequence = 10, packet_seq_err = 10, implied_nak_seq_err = 10, local_ack_timeout_err = 10,
  req_cqe_error = 0, resp_cqe_error = 0, req_remote_access_errors = 0, resp_local_length_error = 0,
  rnr_nak_retry_err = 10,
}

-- Files of hw_counters that are settings, not counters.
local NOT_COUNTERS = { lifespan = true }

-- The names read one by one when no directory can be listed: the thresholds'
-- and the traffic counters.
local KNOWN = { "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets", "port_xmit_wait",
  "port_unicast_xmit_packets", "port_unicast_rcv_packets", "sent_pkts", "rcvd_pkts", "rcvd_rnr_err",
  "send_rnr_err", "ack_deferred", "rdma_sends", "rdma_recvs", "out_of_buffer" }
for name in pairs(pc.THRESHOLDS) do KNOWN[#KNOWN + 1] = name end
table.sort(KNOWN)

-- The names in directory dir (nil when it cannot be listed or is not there), or false: no lister.
local function list(dir)
  local ok, uv = pcall(require, "luv")
  if ok and uv.fs_scandir then
    local req = uv.fs_scandir(dir)
    if not req then return nil end
    local out = {}
    while true do
      local name = uv.fs_scandir_next(req)
      if not name then break end
      out[#out + 1] = name
    end
    return out
  end
  local lok, lfs = pcall(require, "lfs")
  if lok and lfs.dir then
    if lfs.attributes(dir, "mode") ~= "directory" then return nil end
    local out = {}
    for name in lfs.dir(dir) do
      if name ~= "." and name ~= ".." then out[#out + 1] = name end
    end
    return out
  end
  return false
end

-- A counter file's value: an integer (a float past 2^63), or nil.
local function value(path)
  local fh = io.open(path)
  if not fh then return nil end
  local text = fh:read("a")
  fh:close()
  local digits = text and text:match("^%s*(%d+)%s*$")
  if not digits then return nil end
  local n = tonumber(digits)
  return math.tointeger and math.tointeger(n) or n
end

--- The counters of port of device (an opened context, or a device's name), as name -> integer; root
-- replaces /sys/class/infiniband (a copy of that tree, for tests).  A name in
-- both directories keeps counters/'s value, hw_counters/'s goes in as
-- "hw_" .. name.  nil, message when the port has neither directory.
function pc.read(device, port, root)
  if type(device) == "userdata" and type(device.name) == "function" then device = device:name() end
  if type(device) ~= "string" or not device:find("^[%w_.-]+$") then
    error("bad argument #1 to 'read' (context or device name expected, got " .. tostring(device) .. ")", 2)
  end
  if type(port) ~= "number" or port ~= math.floor(port) or port < 1 or port > 255 then
    error("bad argument #2 to 'read' (port 1 to 255 expected, got " .. tostring(port) .. ")", 2)
  end
  local base = string.format("%s/%s/ports/%d/", root or pc.ROOT, device, math.floor(port))
  local out, found = {}, false
  for _, dir in ipairs({ "counters", "hw_counters" }) do
    local names = list(base .. dir)
    if names then found = true end
    for _, name in ipairs(names or (names == false and KNOWN) or {}) do
      local v = not NOT_COUNTERS[name] and value(base .. dir .. "/" .. name)
      if v then
        found = true
        local key = (dir == "hw_counters" and out[name] ~= nil) and ("hw_" .. name) or name
        out[key] = v
      end
    end
  end
  if not found then
    return nil, string.format("%s port %d: no counters in %s (counters, hw_counters)", device, port, base)
  end
  return out
end

--- Whether a counter's value is at its maximum (saturated: its delta is unknown).
function pc.saturated(name, v)
  local w = WIDTH[name]
  if w and v == 2 ^ w - 1 then return true end
  return v == 0xffffffff or v >= 2 ^ 63 -- 2^64-1 reads as a float past 2^63
end

--- The rise of each counter from before to after (two readings of one port):
-- deltas (name -> integer) and unknown (name -> "saturated", "went backwards",
-- "missing before" or "missing after").
function pc.deltas(before, after)
  if type(before) ~= "table" or type(after) ~= "table" then
    error("bad argument to 'deltas' (two tables of counters expected)", 2)
  end
  local d, unknown = {}, {}
  for name, a in pairs(after) do
    local b = before[name]
    if b == nil then
      unknown[name] = "missing before"
    elseif pc.saturated(name, a) or pc.saturated(name, b) then
      unknown[name] = "saturated"
    elseif a < b then
      unknown[name] = "went backwards"
    else
      d[name] = a - b
    end
  end
  for name in pairs(before) do
    if after[name] == nil then unknown[name] = "missing after" end
  end
  return d, unknown
end

--- The error counters whose delta rose past their threshold (thresholds:
-- name -> the largest rise allowed; pc.THRESHOLDS by default), as a list of
-- {name =, delta =, threshold =} sorted by name.
function pc.exceeded(deltas, thresholds)
  thresholds = thresholds or pc.THRESHOLDS
  local out = {}
  for name, limit in pairs(thresholds) do
    local v = deltas[name] or deltas["hw_" .. name]
    if v and v > limit then out[#out + 1] = { name = name, delta = v, threshold = limit } end
  end
  table.sort(out, function(a, b) return a.name < b.name end)
  return out
end

--- Thresholds from text "name=n,name=n" (or "all=n": every error counter)
-- over the defaults: a new table, or nil, message naming the bad item (a
-- name ibverbs.counter_names does not know: it and the nearest known ones).
function pc.parse_thresholds(text, base)
  local names = require "ibverbs.counter_names"
  local t = {}
  for k, v in pairs(base or pc.THRESHOLDS) do t[k] = v end
  for item in tostring(text):gmatch("[^,]+") do
    local name, n = item:match("^%s*([%w_]+)%s*=%s*(%d+)%s*$")
    if not name then return nil, "'" .. item .. "' is not name=count" end
    n = math.tointeger and math.tointeger(tonumber(n)) or tonumber(n)
    if name == "all" then
      for k in pairs(t) do t[k] = n end
    else
      local known, err = names.check(name)
      if not known then return nil, err end
      t[name] = n
    end
  end
  return t
end

return pc
