--- Flap verdicts: a port whose link went down (and perhaps came back) while
-- fabric_check ran, or between two rounds of fabric_matrix.  A bring-up engine
-- module that both tools share: it judges, the caller prints and exits.
--
--   local flaps = require "ibverbs.bringup.flaps"
--   local w = flaps.watch({ "rxe0" })             -- at the start: a context per device, each port's state
--   ... the checks, the traffic; the counters read again (p.counters.deltas) ...
--   local found = flaps.judge(w, results, host)   -- a failed check "flapped" on each port that did; their text
--   flaps.close(w)
--   local last = assert(flaps.load(path))         -- --flap-state: link_downed as the previous run saved it
--   flaps.judge(w, results, host, last); assert(flaps.save(path, results, os.time()))
--   local rw = flaps.rails_watch(rails)           -- fabric_matrix: its rails' ports, at the start
--   for _, x in ipairs(flaps.rails_check(rw)) do print(x.index, x.words) end   -- after every round
--
-- A port flapped when, between watch and judge, its link_downed counter rose
-- (p.counters.deltas, from ibverbs.port_counters: rxe and InfiniBand count
-- every transition to down), its state or physical state differs, or the
-- device sent a port_err or port_active event for it (the watch's context
-- stays open for them; the kernel queues them until judge reads them).
-- With the reading a previous run saved (load, save: a small JSON file), a
-- rise of link_downed between the two runs is a flap too: a quick health
-- check every few minutes sees the flaps between its runs.
local dkjson = require "dkjson"

local flaps = {}

-- Physical port states (IBA 14.2.5.6 PortPhysicalState).
local PHYS = { "sleep", "polling", "disabled", "port_configuration_training", "link_up", "link_error_recovery",
  "phy_test" }
local function phys(n) return PHYS[n] or tostring(n) end

local PORT_EVENTS = { port_err = true, port_active = true }
local MAX_EVENTS = 8 -- events named in a verdict; more are counted

--- A watch on the devices named (a list of names): a context on each (kept
-- open for its async events) and the state and physical state of each port.
-- A device that cannot be opened is left out (its check fails on its own).
function flaps.watch(names)
  local ibv = require "ibverbs"
  local w = {}
  for _, name in ipairs(names) do
    local ctx = ibv.open(name)
    local a = ctx and ctx:query_device()
    if a then
      local ports = {}
      for port = 1, a.phys_port_cnt do
        local p = ctx:query_port(port)
        if p then ports[port] = { state = p.state, phys_state = p.phys_state } end
      end
      w[name] = { ctx = ctx, ports = ports }
    elseif ctx then
      ctx:close()
    end
  end
  return w
end

-- The port events queued on ctx, by port: port -> list of event types in the order they came.
local function port_events(ctx)
  local out = {}
  while true do
    local ev = ctx:get_async_event(0)
    if not ev then break end
    if PORT_EVENTS[ev.type] and ev.port_num then
      out[ev.port_num] = out[ev.port_num] or {}
      table.insert(out[ev.port_num], ev.type)
    end
  end
  return out
end

-- What changed on one port (last: its link_downed as the previous run saved
-- it, and that run's time): a list of text, empty when nothing did.
local function changes(p, before, now, events, last)
  local words = {}
  local d = p.counters and p.counters.deltas
  local downs = d and (d.link_downed or d.hw_link_downed)
  if downs and downs > 0 then words[#words + 1] = "link_downed +" .. downs end
  local between = last and p.link_downed and p.link_downed - last.value - (downs or 0) -- (lower: reset, unknown)
  if between and between > 0 then
    words[#words + 1] = string.format("link_downed +%d between the last check (%s) and this one", between,
      os.date("!%Y-%m-%dT%H:%M:%SZ", last.time))
  end
  if before and now then
    if before.state ~= now.state then
      words[#words + 1] = string.format("state %s -> %s", tostring(before.state), tostring(now.state))
    end
    if before.phys_state ~= now.phys_state then
      words[#words + 1] = string.format("phys_state %s -> %s", phys(before.phys_state), phys(now.phys_state))
    end
  end
  if events and #events > 0 then
    local shown = {}
    for i = 1, math.min(#events, MAX_EVENTS) do shown[i] = events[i] end
    words[#words + 1] = "events " .. table.concat(shown, ", ") ..
      (#events > MAX_EVENTS and string.format(" (%d in all)", #events) or "")
  end
  return words
end

--- The flaps since watch on the ports of results (fabric_check's devices,
-- each with .name and .ports, each port with .port, .checks and, once read
-- again, .counters and .link_downed), and since the run that saved last
-- (optional, from flaps.load): a failed check "flapped" added to each port
-- that flapped ("node1 rxe0 port 1: link_downed +1; events port_err,
-- port_active", host naming the node), and the list of those texts
-- ("flapped: ...").
function flaps.judge(w, results, host, last)
  local found = {}
  for _, dev in ipairs(results) do
    local dw = w[dev.name]
    local events = dw and port_events(dw.ctx) or {}
    for _, p in ipairs(dev.ports or {}) do
      local now = dw and dw.ctx:query_port(p.port)
      local key = dev.name .. ":" .. p.port
      local prev = last and last.ports[key] and { value = last.ports[key], time = last.time }
      local words = changes(p, dw and dw.ports[p.port], now, events[p.port], prev)
      if #words > 0 then
        local detail = string.format("%s %s port %d: %s", host, dev.name, p.port, table.concat(words, "; "))
        p.checks[#p.checks + 1] = { name = "flapped", pass = false, ms = 0, detail = detail }
        found[#found + 1] = "flapped: " .. detail
      end
    end
  end
  return found
end

--- The reading a previous run saved in path: {time = seconds since the
-- epoch, ports = {["rxe0:1"] = link_downed, ...}}, an empty one when there
-- is no such file yet, or nil, message naming the file and what is wrong.
function flaps.load(path)
  local f = io.open(path)
  if not f then return { time = 0, ports = {} } end
  local text = f:read("a")
  f:close()
  local t, _, err = dkjson.decode(text)
  local bad = err or (type(t) ~= "table" and "not a JSON object") or (type(t.time) ~= "number" and "no 'time'")
    or (type(t.ports) ~= "table" and "no 'ports'")
  if not bad then
    for k, v in pairs(t.ports) do
      if type(k) ~= "string" or not k:find("^[%w_.-]+:%d+$") or type(v) ~= "number" or v < 0 or v ~= math.floor(v) then
        bad = "'ports' entry " .. string.format("%q", tostring(k)) .. " is not \"device:port\": integer"
        break
      end
    end
  end
  if bad then return nil, path .. ": not a fabric_check flap state (" .. bad .. ")" end
  return t
end

--- Saves the link_downed counters read in this run (each port's .link_downed)
-- to path with the time now (written to path .. ".tmp", then renamed): true,
-- or nil, message.
function flaps.save(path, results, now)
  local ports = {}
  for _, dev in ipairs(results) do
    for _, p in ipairs(dev.ports or {}) do
      if p.link_downed then ports[dev.name .. ":" .. p.port] = p.link_downed end
    end
  end
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "w")
  if not f then return nil, err end
  f:write(dkjson.encode({ time = now, ports = ports }), "\n")
  f:close()
  local ok, rerr = os.rename(tmp, path)
  if not ok then return nil, rerr end
  return true
end

-- One port's state, physical state and link_downed now (root: another sysfs tree, for the specs).
local function reading(ctx, port, root)
  local p = ctx:query_port(port)
  local c = require("ibverbs.port_counters").read(ctx:name(), port, root)
  return { state = p and p.state, phys_state = p and p.phys_state,
    downs = c and (c.link_downed or c.hw_link_downed) }
end

--- fabric_matrix's watch on its rails (each {index =, ctx =, port =}; those
-- with a fault or without a context are left out): each port's state,
-- physical state and link_downed counter now, the baseline of rails_check.
-- The rails' own contexts are used: their port events queue there.
function flaps.rails_watch(rails, root)
  local w = { root = root }
  for _, r in ipairs(rails) do
    if r.ctx and not r.fault and not r.dry then
      w[#w + 1] = { index = r.index, ctx = r.ctx, port = r.port, seen = reading(r.ctx, r.port, root) }
    end
  end
  return w
end

--- What changed on each watched port since the last check (or the watch): a
-- list of {index = the rail, words = "state active -> down; link_downed +1;
-- events port_err"}, empty when nothing did.  The readings become the next
-- check's baseline; a context's events are read once for all its ports.
function flaps.rails_check(w)
  local events_of, out = {}, {}
  for _, x in ipairs(w) do
    events_of[x.ctx] = events_of[x.ctx] or port_events(x.ctx)
    local now = reading(x.ctx, x.port, w.root)
    local was = x.seen
    local downs = was.downs and now.downs and now.downs >= was.downs and now.downs - was.downs or nil
    local words = changes({ counters = { deltas = { link_downed = downs } } }, was, now, events_of[x.ctx][x.port])
    x.seen = now
    if #words > 0 then out[#out + 1] = { index = x.index, words = table.concat(words, "; ") } end
  end
  return out
end

--- Closes the watch's contexts.
function flaps.close(w)
  for _, dw in pairs(w) do dw.ctx:close() end
end

return flaps
