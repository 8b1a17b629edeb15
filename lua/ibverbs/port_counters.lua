--- A port's counters from sysfs, as deltas: the hardware's own evidence.
--
--   local pc = require "ibverbs.port_counters"
--   local before, lost = assert(pc.read(ctx, 1))  -- a context or a device name: pc.read("mlx5_0", 1)
--   ... traffic ...
--   local after, lost2 = assert(pc.read(ctx, 1))
--   local d, unknown = pc.deltas(before, after)
--   for _, x in ipairs(pc.exceeded(d, pc.THRESHOLDS)) do print(x.name, x.delta, x.threshold) end
--   for _, x in ipairs(pc.faults(before, after, pc.THRESHOLDS, { lost, lost2 })) do print(x.name, x.why) end
--
-- read: every file of /sys/class/infiniband/<dev>/ports/<port>/counters (the
-- InfiniBand PortCounters: symbol_error, link_downed, port_rcv_errors, ...)
-- and .../hw_counters (the provider's own: rxe's retry_exceeded_err,
-- out_of_seq_request, ...; mlx5's out_of_sequence, local_ack_timeout_err, ...)
-- as name -> integer, and the files that could not be read (name -> "path:
-- message": an open or read error such as EINVAL or EIO, an empty file, text
-- that is not a number).  Nothing is ever reset: a tool compares two readings.
-- The data and packet counters of counters/ are the 64-bit ones of
-- PortCountersExtended when the port's PMA has them (the kernel picks them,
-- drivers/infiniband/core/sysfs.c get_counter_table), else the 32-bit ones.
-- A counter at its maximum (InfiniBand counters stop there: 2^4-1 to 2^32-1 by
-- counter, 2^64-1 for 64-bit ones) or lower in the second reading than in the
-- first (reset by someone, or wrapped) has no delta: it is "unknown", never 0.
-- faults: what makes a port's counters a finding of their own: a judged
-- counter at its maximum (its rise can never be seen again until it is reset:
-- said how) and a counter file that could not be read.  A data or packet
-- counter at its maximum is no fault: only the port's rate is then unknown.
-- The counters are in classes (pc.CLASS): physical-layer and port errors are
-- judged by their rise over a run, whatever else ran; transport errors
-- (retries, sequence errors, error completions) measure the path and its
-- load, and are judged per packet of the tool's own traffic; traffic counters
-- count that traffic (pc.packets).
-- Directory listings go through lua-luv or LuaFileSystem when one is there,
-- else the counters named in this file are read one by one; no program runs.
local pc = {}

pc.ROOT = "/sys/class/infiniband"

-- The InfiniBand PortCounters' widths in bits (IBA 16.1.3.5, as the kernel
-- reads them: drivers/infiniband/core/sysfs.c); PortCountersExtended makes
-- the data and packet counters 64-bit, so both maxima stand for them.
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
  rnr_nak_retry_err = 10, rx_icrc_encapsulated = 10,
}

--- The class of each counter (name -> class; a provider's counter named
-- like an InfiniBand one, hw_<name>, has its name's):
--   physical   the link's own errors, judged by their rise over a run whatever
--              else runs: InfiniBand's symbol_error, link_error_recovery,
--              link_downed, port_rcv_errors, local_link_integrity_errors,
--              excessive_buffer_overrun_errors, port_rcv_remote_physical_errors;
--              rxe's link_downed; mlx5's rx_icrc_encapsulated (RoCE packets whose
--              ICRC failed: corrupted on the wire or in a NIC, as a symbol error is)
--   port       the port's other PortCounters errors (discards, constraint,
--              switch relay, VL15_dropped): judged as the physical ones, as
--              ibqueryerrors judges them
--   transport  retries, sequence errors, RNR NAKs, error completions, and the
--              congestion counters (CNPs, ECN marks, adaptive retransmission):
--              the path and its load; judged per packet, over the tool's own
--              traffic only
--   traffic    the data and packet counters: what ran (pc.packets)
pc.CLASS = {}
local function classes(class, names)
  for _, n in ipairs(names) do pc.CLASS[n] = class end
end
classes("physical", { "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
  "local_link_integrity_errors", "excessive_buffer_overrun_errors", "port_rcv_remote_physical_errors",
  "rx_icrc_encapsulated" })
classes("port", { "port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors",
  "port_rcv_constraint_errors", "VL15_dropped" })
classes("transport", {
  -- rxe
  "completer_retry_err", "out_of_seq_request", "rcvd_seq_err", "duplicate_request", "retry_exceeded_err",
  "retry_rnr_exceeded_err", "rcvd_rnr_err", "send_rnr_err", "send_err",
  -- mlx5
  "out_of_sequence", "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err",
  "req_cqe_error", "resp_cqe_error", "req_cqe_flush_error", "resp_cqe_flush_error", "req_remote_access_errors",
  "resp_remote_access_errors", "req_remote_invalid_request", "resp_local_length_error", "out_of_buffer",
  "roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart", "roce_slow_restart_cnps",
  "roce_slow_restart_trans", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "np_ecn_marked_roce_packets" })
classes("traffic", { "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
  "unicast_xmit_packets", "unicast_rcv_packets", "multicast_xmit_packets", "multicast_rcv_packets",
  "sent_pkts", "rcvd_pkts" })

--- A counter's class ("physical", "port", "transport", "traffic"), or nil (reported, never judged by class).
function pc.class(name)
  name = tostring(name)
  return pc.CLASS[name] or pc.CLASS[(name:gsub("^hw_", ""))]
end

-- Files of hw_counters that are settings, not counters.
local NOT_COUNTERS = { lifespan = true }

-- The names read one by one when no directory can be listed: the thresholds'
-- and the traffic counters.
local KNOWN = { "port_xmit_wait", "ack_deferred", "rdma_sends", "rdma_recvs" }
for name in pairs(pc.THRESHOLDS) do KNOWN[#KNOWN + 1] = name end
for name, class in pairs(pc.CLASS) do
  if class == "traffic" then KNOWN[#KNOWN + 1] = name end
end
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

local ENOENT = 2

-- A counter file's value: an integer (a float past 2^63); or nil, why it is
-- not one ("path: message"), and the errno of an open or read that failed;
-- nil, nil for the kernel's "N/A" (a counters/ file of a device without a PMA).
local function value(path)
  local fh, err, errno = io.open(path)
  if not fh then return nil, tostring(err), errno end
  local text, rerr, rerrno = fh:read("a")
  fh:close()
  if not text then return nil, path .. ": " .. tostring(rerr), rerrno end
  local digits = text:match("^%s*(%d+)%s*$")
  if not digits then
    if text:find("^N/A") then return nil, nil end -- the kernel's "N/A (no PMA)": a counter the device has not
    if text:find("^%s*$") then return nil, path .. ": empty" end
    local shown = text:gsub("%s+$", ""):sub(1, 40):gsub("[%c|,]", " ")
    return nil, path .. ": not a number: '" .. shown .. "'"
  end
  local n = tonumber(digits)
  return math.tointeger and math.tointeger(n) or n
end

-- Where each reading's counters came from: reading -> name -> "counters" or "hw_counters" (pc.dir).
local FROM = setmetatable({}, { __mode = "k" })

--- The counters of port of device (an opened context, or a device's name),
-- as name -> integer; and the counter files that could not be read, as name
-- -> "path: message" (nil when every one was read: a counter that cannot be
-- read is a finding of its own, pc.faults).  root replaces
-- /sys/class/infiniband (a copy of that tree, for tests).  A name in both
-- directories keeps counters/'s value, hw_counters/'s goes in as "hw_" ..
-- name.  nil, message when the port has neither directory.
function pc.read(device, port, root)
  if type(device) == "userdata" and type(device.name) == "function" then device = device:name() end
  if type(device) ~= "string" or not device:find("^[%w_.-]+$") then
    error("bad argument #1 to 'read' (context or device name expected, got " .. tostring(device) .. ")", 2)
  end
  if type(port) ~= "number" or port ~= math.floor(port) or port < 1 or port > 255 then
    error("bad argument #2 to 'read' (port 1 to 255 expected, got " .. tostring(port) .. ")", 2)
  end
  local base = string.format("%s/%s/ports/%d/", root or pc.ROOT, device, math.floor(port))
  local out, lost, from, found = {}, nil, {}, false
  for _, dir in ipairs({ "counters", "hw_counters" }) do
    local names = list(base .. dir)
    if names then found = true end
    for _, name in ipairs(names or (names == false and KNOWN) or {}) do
      if not NOT_COUNTERS[name] then
        local key = (dir == "hw_counters" and (out[name] ~= nil or (lost and lost[name]))) and ("hw_" .. name) or name
        local v, why, errno = value(base .. dir .. "/" .. name)
        if v then
          found = true
          out[key], from[key] = v, dir
        elseif why and (names or errno ~= ENOENT) then -- (by name: a counter this port does not have)
          found = true
          lost = lost or {}
          lost[key] = why
        end
      end
    end
  end
  if not found then
    return nil, string.format("%s port %d: no counters in %s (counters, hw_counters)", device, port, base)
  end
  FROM[out] = from
  return out, lost
end

--- The directory a counter of a reading (pc.read's) came from: "counters" or "hw_counters", or nil.
function pc.dir(reading, name)
  local from = FROM[reading]
  return from and from[name]
end

--- Whether a counter's value is at its maximum (saturated: its delta is unknown).
function pc.saturated(name, v)
  local w = WIDTH[name]
  if w and v == 2 ^ w - 1 then return true end
  return v == 0xffffffff or v >= 2 ^ 63 -- 2^64-1 reads as a float past 2^63
end

-- A saturated value in words: "65535 (16 bits)", "4294967295 (32 bits)", "2^64-1 (64 bits)".
local function top(name, v)
  if v >= 2 ^ 63 then return "2^64-1 (64 bits)" end
  local w = WIDTH[name] and v == 2 ^ WIDTH[name] - 1 and WIDTH[name] or 32
  return string.format("%d (%d bits)", v, w)
end

--- How a saturated counter is reset: InfiniBand's PortCounters (counters/)
-- with perfquery (-x for the 64-bit data and packet ones); a provider's
-- (hw_counters/) only by reloading its driver.  dir: pc.dir's (nil: by the
-- name); lid, port: the port's (a LID of 0 or nil: RoCE, or not known).
function pc.reset_hint(name, dir, lid, port)
  local bare = tostring(name):gsub("^hw_", "")
  dir = dir or ((name:find("^hw_") or not (WIDTH[bare] or pc.CLASS[bare] == "traffic")) and "hw_counters"
    or "counters")
  if dir == "hw_counters" then
    return "a provider counter (hw_counters): nothing resets it but reloading the driver"
  end
  local x = pc.CLASS[bare] == "traffic" and "-x " or ""
  if lid and lid > 0 then return string.format("reset it: perfquery %s-R %d %d", x, lid, port or 1) end
  return string.format("reset it: perfquery %s-R <lid> %s on InfiniBand; a RoCE port's counters reset only with "
    .. "its driver", x, tostring(port or "<port>"))
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

--- What makes a port's counters a finding of their own, from two readings
-- (before, after: pc.read's) and the files they could not read (lost: a
-- list of pc.read's second values; nil ones allowed): a list of {name =,
-- why =} sorted by name, each one that fails the port: every counter file
-- that could not be read ("unreadable: path: message"), and a counter that
-- limits judge (name -> threshold; a hw_<name> counter for name), at its
-- maximum in either reading ("saturated at 255 (8 bits): its rise cannot be
-- seen; reset it: perfquery -R 3 1").  A traffic counter at its maximum is
-- none (the rate is unknown, not the port).  how: {lid =, port =}, for the hint.
function pc.faults(before, after, limits, lost, how)
  how = how or {}
  local out, seen = {}, {}
  for _, l in pairs(lost or {}) do -- (a list that may hold nils)
    for name, why in pairs(l) do
      if not seen[name] then
        seen[name] = true
        out[#out + 1] = { name = name, why = "unreadable: " .. why }
      end
    end
  end
  for _, reading in ipairs({ after or {}, before or {} }) do
    for name, v in pairs(reading) do
      local judged = limits and (limits[name] or limits[(name:gsub("^hw_", ""))])
      if judged and not seen[name] and pc.class(name) ~= "traffic" and pc.saturated(name, v) then
        seen[name] = true
        out[#out + 1] = { name = name, why = string.format("saturated at %s: its rise cannot be seen; %s",
          top(name, v), pc.reset_hint(name, pc.dir(reading, name), how.lid, how.port)) }
      end
    end
  end
  table.sort(out, function(a, b) return a.name < b.name end)
  return out
end

--- The packets a port sent and received between two readings (deltas:
-- pc.deltas'): InfiniBand's port_xmit_packets + port_rcv_packets, else the
-- provider's (rxe's sent_pkts + rcvd_pkts); nil when the port counts none
-- or a count is unknown (saturated, went backwards).
function pc.packets(deltas)
  local sent = deltas.port_xmit_packets or deltas.sent_pkts or deltas.hw_sent_pkts
  local rcvd = deltas.port_rcv_packets or deltas.rcvd_pkts or deltas.hw_rcvd_pkts
  if sent and rcvd then return sent + rcvd end
  return nil
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
