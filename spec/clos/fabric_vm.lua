--- The routed Clos of `tools/rxe-vm --clos`, seen from one of its nodes
-- (spec/clos's helpers): the router's control channel, the switches' port
-- counters, the nodes' addresses, and a meeting point for the four nodes.
--
--   local vm = require "clos.fabric_vm"
--   vm.NODE                          -- this node's number (RXE_VM_NODE)
--   vm.addr(k), vm.mgmt(k)           -- node k's fabric (10.0.L.1K) and management addresses
--   vm.ctl("netem leaf1 spine1 loss 10%")   -- the router's answer and status (tools/rxe-vm-router)
--   vm.must("clear")                 -- the answer; an error naming the request when its status is not 0
--   vm.stats()                       -- { ["spine1 leaf2"] = { tx =, rx =, tx_dropped = }, ... }
--   vm.meet("name", 120)             -- waits until every node reached vm.meet("name")
local socket = require "socket"

local vm = {}

vm.NODE = tonumber(os.getenv("RXE_VM_NODE") or "0")
vm.NODES = tonumber(os.getenv("RXE_VM_NODES") or "0")
local RUN = os.getenv("RXE_VM_RUN")

local function word(list, k)
  local i = 0
  for w in (list or ""):gmatch("%S+") do
    i = i + 1
    if i == k then return w end
  end
  error("no node " .. tostring(k) .. " in '" .. tostring(list) .. "'")
end

function vm.addr(k) return word(os.getenv("RXE_VM_ADDRS"), k) end
function vm.mgmt(k) return word(os.getenv("RXE_VM_MGMT_ADDRS"), k) end

--- The router's answer to request (one line) and the request's status
-- (125: the router could not be reached): tools/rxe-vm-router's protocol,
-- spoken here (a request costs no process on this node).
function vm.ctl(request)
  local host, port = (os.getenv("RXE_VM_ROUTER") or ""):match("^(.+):(%d+)$")
  assert(host, "RXE_VM_ROUTER is not set: run under tools/rxe-vm --clos")
  local c = assert(socket.tcp())
  c:settimeout(60)
  local ok, err = c:connect(host, tonumber(port))
  if not ok then return "cannot reach the router at " .. host .. ":" .. port .. ": " .. tostring(err), 125 end
  c:send(request .. "\n")
  local answer, why, part = c:receive("*a")
  c:close()
  answer = answer or part or ""
  local body, rc = answer:match("^(.-)\n?rc (%d+)\n$")
  if not rc then return answer .. (why and ("(" .. why .. ")") or "") .. ": no status from the router", 125 end
  return body, tonumber(rc)
end

function vm.must(request)
  local out, rc = vm.ctl(request)
  assert(rc == 0, string.format("router: %s: rc %s: %s", request, tostring(rc), out))
  return out
end

--- Every switch port's counters, keyed "SWITCH PORT" (the port toward PORT).
function vm.stats()
  local t = {}
  for l in vm.must("stats"):gmatch("[^\n]+") do
    local sw, port, tx, rx, txd = l:match("^(%S+) (%S+) (%d+) (%d+) (%d+)$")
    assert(sw, "router stats: " .. l)
    t[sw .. " " .. port] = { tx = tonumber(tx), rx = tonumber(rx), tx_dropped = tonumber(txd) }
  end
  return t
end

--- The rise of a port's counter between two vm.stats().
function vm.delta(before, after, port, counter)
  return after[port][counter or "tx"] - before[port][counter or "tx"]
end

--- Waits until every node called vm.meet(name) (a file each in the run's
-- shared directory), at most limit seconds (an error then).
function vm.meet(name, limit)
  assert(RUN, "RXE_VM_RUN is not set: run under tools/rxe-vm --clos")
  local f = assert(io.open(string.format("%s/meet-%s.%d", RUN, name, vm.NODE), "w"))
  f:close()
  local deadline = socket.gettime() + (limit or 120)
  while true do
    local n = 0
    for k = 1, vm.NODES do
      local g = io.open(string.format("%s/meet-%s.%d", RUN, name, k))
      if g then g:close(); n = n + 1 end
    end
    if n == vm.NODES then return end
    assert(socket.gettime() < deadline, string.format("meeting %s: %d of %d nodes came within %d s", name, n,
      vm.NODES, limit or 120))
    socket.sleep(0.2)
  end
end

return vm
