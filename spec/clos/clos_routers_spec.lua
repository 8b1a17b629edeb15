-- Run on every node of `tools/rxe-vm --clos` (tools/run-tests): the routed
-- Clos itself (tools/rxe-vm-router), before the fault campaign that uses it.
-- Node K's fabric NIC is a point-to-point link to its leaf; RoCEv2 between
-- the leaves crosses a spine chosen by the leaf's ECMP hash of the 5-tuple.
-- Plain UDP datagrams from node 1 (a source port of the spec's choosing,
-- counted on the router's veths, where nothing is lost but what netem drops)
-- show the hash and the faults exactly; RC traffic (ibv_rc_pingpong on GID
-- index 1) shows RoCEv2 routed.  The other nodes wait at meeting points.
local support = require "support"
local socket = require "socket"
local vm = require "clos.fabric_vm"

local NODE = vm.NODE
local SPORTS = { 40001, 40002, 40003, 40004, 40005, 40006, 40007, 40008 }

-- n datagrams from node 1's fabric address, source port sport, to node 3's
-- discard port (paced: the router VM's queues are not what is measured)
local function send(sport, n)
  local u = assert(socket.udp())
  assert(u:setsockname(vm.addr(1), sport))
  for _ = 1, n do
    assert(u:sendto("clos", vm.addr(3), 9))
    socket.sleep(0.002)
  end
  u:close()
end

-- the spine each source port's datagrams crossed (n of them on one, none on the other, from leaf1's
-- uplinks, and all n reached leaf2 from it): a list in the order of sports (one counters' read between
-- two ports)
local function spines_of(sports, n)
  local l, a = {}, vm.stats()
  for i, sport in ipairs(sports) do
    send(sport, n)
    local b = vm.stats()
    local one, two = vm.delta(a, b, "leaf1 spine1"), vm.delta(a, b, "leaf1 spine2")
    assert(one + two >= n and math.min(one, two) <= 1, -- (+1: a stray neighbour probe)
      string.format("source port %d: %d datagrams, %d to spine1 and %d to spine2", sport, n, one, two))
    l[i] = one > two and "spine1" or "spine2"
    local arrived = vm.delta(a, b, "leaf2 " .. l[i], "rx")
    assert(arrived >= n, string.format("source port %d: %d datagrams to %s, %d reached leaf2", sport, n, l[i],
      arrived))
    a = b
  end
  return l
end
local function spine_of(sport, n) return spines_of({ sport }, n)[1] end

-- ibv_rc_pingpong from node `client` to node `server` (GID index 1, its GIDs
-- exchanged over the management network); true on the client when it passed
local function rc_pingpong(server, client, iters)
  local args = "-d rxe0 -g 1 -s 64 -n " .. iters
  if NODE == server then
    local out, rc = support.capture("timeout 60 ibv_rc_pingpong " .. args)
    assert(rc == 0, out)
  elseif NODE == client then
    local out, rc
    for _ = 1, 60 do -- until the server listens
      out, rc = support.capture("timeout 60 ibv_rc_pingpong " .. args .. " " .. vm.mgmt(server))
      if rc == 0 or not out:match("Couldn't connect") then break end
      socket.sleep(0.5)
    end
    assert(rc == 0, out)
    assert.matches(iters .. " iters in", out)
    return out
  end
end

-- fn on node 1 alone, then every node meets (node 1 there even when fn failed), then fn's error
local function on_node1(meeting, fn)
  local ok, err = true, nil
  if NODE == 1 then ok, err = pcall(fn) end
  vm.meet(meeting)
  assert(ok, err)
end

describe("tools/rxe-vm --clos: four nodes behind a routed leaf-spine", function()
  local spine_of_sport = {} -- (the hash seen by node 1, for the faults below)

  it("puts each node behind its leaf: its /24, GID index 1 its IPv4-mapped address, the fabric via its leaf",
    function()
    local leaf = (NODE + 1) // 2
    local me = string.format("10.0.%d.1%d", leaf, NODE)
    assert.equal(me, os.getenv("RXE_VM_ADDR"))
    assert.matches("inet " .. me:gsub("%.", "%%.") .. "/24 ", support.capture("ip -4 -o addr show eth0"))
    local gid = support.slurp("/sys/class/infiniband/rxe0/ports/1/gids/1")
    assert.equal(string.format("0000:0000:0000:0000:0000:ffff:0a00:%02x%02x", leaf, 10 + NODE), gid:match("%S+"))
    local other = vm.addr(NODE <= 2 and 3 or 1)
    assert.matches("via 10%.0%." .. leaf .. "%.1 dev eth0", support.capture("ip route get " .. other))
    -- the router's view, through the shell's client of its control channel: this node's port up, and
    -- every port of the fabric up at this node's MTU (1500: rxe0's active_mtu 1024 fits everywhere)
    local out, rc = support.capture("tools/rxe-vm-router ctl links")
    assert.equal(0, rc, out)
    assert.matches(string.format("\nleaf%d node%d 10%%.0%%.%d%%.1 UP 1500\n", leaf, NODE, leaf), "\n" .. out)
    local ports = 0
    for l in out:gmatch("[^\n]+") do
      assert.matches("^%S+ %S+ [%d.]+/?%d* UP 1500$", l)
      ports = ports + 1
    end
    assert.equal(12, ports, out) -- 4 uplinks x 2 ends, 4 host ports
    assert.equal("1500", support.slurp("/sys/class/net/eth0/mtu"):match("%d+"))
    assert.matches("active_mtu:%s+1024", support.capture("ibv_devinfo -d rxe0"))
  end)

  it("routes RC traffic across the spines: ibv_rc_pingpong node1 -> node3 and node2 -> node4 at once", function()
    rc_pingpong(3, 1, 200)
    rc_pingpong(4, 2, 200)
    vm.meet("rc")
  end)

  it("answers traced hops from the port each probe came in on: leaf1's host port, a spine's port toward leaf1, "
    .. "leaf2's port toward a spine", function()
    on_node1("trace", function()
      -- (busybox traceroute: UDP probes, one a hop, each to the next port: each its own 5-tuple)
      local out, rc = support.capture("busybox traceroute -n -q 1 -w 3 -m 6 " .. vm.addr(3))
      assert.equal(0, rc, out)
      local hops = {}
      for n, addr in out:gmatch("\n%s*(%d+)%s+(%S+)") do hops[tonumber(n)] = addr end
      assert.equal("10.0.1.1", hops[1], out)
      assert.is_truthy(({ ["10.0.9.2"] = true, ["10.0.9.6"] = true })[hops[2]], out)
      assert.is_truthy(({ ["10.0.9.9"] = true, ["10.0.9.13"] = true })[hops[3]], out)
      assert.equal(vm.addr(3), hops[4], out)
    end)
  end)

  it("hashes the 5-tuple: one UDP source port crosses one spine every time, eight ports reach both", function()
    on_node1("hash", function()
      local seen, twice = {}, {}
      for _, sport in ipairs(SPORTS) do twice[#twice + 1] = sport end
      for _, sport in ipairs(SPORTS) do twice[#twice + 1] = sport end
      local spines = spines_of(twice, 10)
      for i, sport in ipairs(SPORTS) do
        spine_of_sport[sport] = spines[i]
        assert.equal(spines[i], spines[i + #SPORTS], "source port " .. sport .. " changed spines")
        seen[spines[i]] = true
      end
      assert.is_true(seen.spine1 and seen.spine2, "eight source ports on one spine")
    end)
  end)

  it("netem loss on spine1's port toward leaf2 loses the datagrams through spine1 alone", function()
    on_node1("netem", function()
      local via = {}
      for _, sport in ipairs(SPORTS) do via[spine_of_sport[sport]] = via[spine_of_sport[sport]] or sport end
      vm.must("netem spine1 leaf2 loss 30%")
      local ok, err = pcall(function()
        local a = vm.stats()
        send(via.spine1, 100)
        send(via.spine2, 100)
        local b = vm.stats()
        -- in at the spine from leaf1, out at leaf2 from the spine (a neighbour probe or two besides)
        local sent1, got1 = vm.delta(a, b, "spine1 leaf1", "rx"), vm.delta(a, b, "leaf2 spine1", "rx")
        local sent2, got2 = vm.delta(a, b, "spine2 leaf1", "rx"), vm.delta(a, b, "leaf2 spine2", "rx")
        io.stderr:write(string.format("clos: netem loss 30%%: spine1 %d in, %d out; spine2 %d in, %d out\n",
          sent1, got1, sent2, got2))
        assert.is_true(sent1 >= 100 and sent2 >= 100, sent1 .. " " .. sent2)
        assert.is_true(math.abs(sent2 - got2) <= 2, sent2 .. " in, " .. got2 .. " out: lost on spine2")
        local lost = (sent1 - got1) / sent1
        assert.is_true(lost > 0.1 and lost < 0.55, "lost " .. lost .. " through spine1") -- (30 %: 9 sigmas)
      end)
      vm.must("clear")
      assert(ok, err)
    end)
  end)

  it("routes around a dead spine: spine1's ports down, its source ports cross spine2, RC passes; back when up",
    function()
    local moved -- a source port spine1 carried
    for _, sport in ipairs(SPORTS) do
      if spine_of_sport[sport] == "spine1" then moved = sport; break end
    end
    on_node1("spine1-down", function()
      vm.must("down spine1")
      assert.equal("spine2", spine_of(moved, 20))
    end)
    local ok, err = pcall(rc_pingpong, 3, 1, 100)
    on_node1("spine1-up", function()
      vm.must("up spine1")
      local back
      for _ = 1, 10 do -- (the carrier comes back at once; the neighbours are probed again)
        back = spine_of(moved, 1) == "spine1"
        if back then break end
        socket.sleep(0.5)
      end
      assert.is_true(back, "source port " .. moved .. " did not come back to spine1 once it was up")
    end)
    assert(ok, err)
  end)
end)
