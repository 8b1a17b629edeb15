-- ibv.trace_flow and ibv.trace_flows (csrc/net/trace.c) on this machine's
-- own kernel: routed paths built of network namespaces joined by veth pairs
-- (root needed: `ip netns`), the probes sent from host h1 inside its
-- namespace (`ip netns exec`), as an unprivileged flow's would be.  A line
-- h1 - r1 - r2 - h2: each router named in order, then the destination that
-- answers (nothing on UDP 4791 there), or, when a socket holds 4791 on h2 as
-- rxe's kernel does, the routers alone and "not reached".  Two routers ra
-- and rb between h1 and r2, h1 hashing its ECMP route on the 5-tuple
-- (fib_multipath_hash_policy 1): a source port always takes the same router
-- (and the same side of r2), and different source ports reach both.  The
-- flows of trace_flows are probed at once.  Every namespace is deleted after
-- each case, passed or failed.  Then the bad arguments, and a source port
-- another socket holds (EADDRINUSE), named.
local ibv = require "ibverbs"
local support = require "support"
local dkjson = require "dkjson"

local sh, capture, quote = support.sh, support.capture, support.quote

-- this run's names: namespaces are global, and two runs may overlap
local TAG = "ibvt" .. (io.open("/proc/self/stat"):read("*l"):match("^(%d+)") or "0") .. "-"

local function run(cmd)
  local out, rc = capture(cmd)
  assert(rc == 0, cmd .. "\n" .. out)
  return out
end

-- A set of namespaces (names: their short names) and their setup, every
-- command gathered (N.link, N.addr, ...) and run at once by N.up(); N.down()
-- deletes them.  N.ns(name) is a namespace's full name; N.link(a, ia, b, ib)
-- a veth pair between namespace a (interface ia) and b (ib).
local function net(names)
  local N, cmds = {}, {}
  function N.ns(n) return TAG .. n end
  local function add(fmt, ...) cmds[#cmds + 1] = fmt:format(...) end
  for _, n in ipairs(names) do
    add("ip netns add %s", N.ns(n))
    add("ip -n %s link set lo up", N.ns(n))
    -- answers at once, however many: the kernel's ICMP rate limits off in every namespace
    add("ip netns exec %s sysctl -qw net.ipv4.icmp_ratelimit=0", N.ns(n))
  end
  function N.sysctl(n, kv) add("ip netns exec %s sysctl -qw %s", N.ns(n), kv) end
  function N.router(n)
    N.sysctl(n, "net.ipv4.ip_forward=1")
    -- a router answers from the address the probe came in on: the path's side of it
    N.sysctl(n, "net.ipv4.icmp_errors_use_inbound_ifaddr=1")
  end
  function N.link(a, ia, b, ib)
    add("ip -n %s link add name %s type veth peer name %s netns %s", N.ns(a), ia, ib, N.ns(b))
    add("ip -n %s link set %s up", N.ns(a), ia)
    add("ip -n %s link set %s up", N.ns(b), ib)
  end
  function N.addr(n, i, cidr) add("ip -n %s addr add %s dev %s", N.ns(n), cidr, i) end
  function N.route(n, spec) add("ip -n %s route add %s", N.ns(n), spec) end
  function N.up()
    local ok, err = pcall(run, "set -e\n" .. table.concat(cmds, "\n"))
    if not ok then N.down(); error(err, 0) end
  end
  function N.down()
    for _, n in ipairs(names) do os.execute("ip netns del " .. N.ns(n) .. " 2>/dev/null") end
  end
  -- a UDP socket bound to port on host n until the case ends (as rxe's kernel holds 4791)
  function N.hold_port(finally, n, port)
    local pidfile = os.tmpname()
    local code = ("local s = require('socket').udp(); assert(s:setsockname('0.0.0.0', %d)); "
      .. "local f = io.open(%q, 'w'); f:write('ready'); f:close(); s:settimeout(60); "
      .. "local t = os.time() while os.time() - t < 60 do s:receive() end"):format(port, pidfile .. ".ready")
    local inner = ("echo $$ > %s; exec ip netns exec %s %s -e %s"):format(pidfile, N.ns(n), support.LUA, quote(code))
    os.execute("sh -c " .. quote(inner) .. " >/dev/null 2>&1 &")
    local pid
    finally(function()
      if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
      os.remove(pidfile); os.remove(pidfile .. ".ready")
    end)
    local deadline = os.time() + 10
    while not support.slurp(pidfile .. ".ready") and os.time() < deadline do require("socket").sleep(0.05) end
    pid = assert(tonumber(support.slurp(pidfile)), "the port holder did not start")
    assert(support.slurp(pidfile .. ".ready"), "the port holder did not bind " .. port)
    require("socket").sleep(0.2)
    assert(sh("kill -0 " .. pid .. " 2>/dev/null"), "the port holder stopped")
  end
  -- flows traced from inside host n, in one trace_flows call: its results, decoded
  function N.trace(n, flows)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    -- the module this run loaded (the ASan build under make spec SAN=...), found the same way
    f:write(('package.path, package.cpath = %q, %q\n'
      .. 'local ibv = require "ibverbs"\n'
      .. 'io.write(require("dkjson").encode(ibv.trace_flows(require("dkjson").decode(%q))))\n')
      :format(package.path, package.cpath, dkjson.encode(flows)))
    f:close()
    local out = run(("timeout 60 ip netns exec %s %s %s"):format(N.ns(n), support.LUA, path))
    os.remove(path)
    return assert(dkjson.decode(out), out)
  end
  return N
end

-- h1 - r1 - r2 - h2: 10.0.1.0/24, 10.0.9.0/24, 10.0.2.0/24
local function line()
  local N = net({ "h1", "r1", "r2", "h2" })
  N.router("r1"); N.router("r2")
  N.link("h1", "eth0", "r1", "w1"); N.link("r1", "e2", "r2", "w1"); N.link("r2", "e2", "h2", "eth0")
  N.addr("h1", "eth0", "10.0.1.11/24"); N.addr("r1", "w1", "10.0.1.1/24")
  N.addr("r1", "e2", "10.0.9.1/24"); N.addr("r2", "w1", "10.0.9.2/24")
  N.addr("r2", "e2", "10.0.2.1/24"); N.addr("h2", "eth0", "10.0.2.13/24")
  N.route("h1", "default via 10.0.1.1"); N.route("h2", "default via 10.0.2.1")
  N.route("r1", "10.0.2.0/24 via 10.0.9.2"); N.route("r2", "10.0.1.0/24 via 10.0.9.1")
  return N
end

-- h1 = {ra, rb} = r2 - h2: h1 and r2 hash their ECMP routes on the 5-tuple.  (The choice is
-- h1's own: a packet crossing a veth keeps the hash its sending socket gave it, a random one per
-- socket, and a router past it spreads by that hash instead of the 5-tuple; on a real link, and
-- through a VM's NIC, the next router hashes the packet's own header.)
local function ecmp()
  local N = net({ "h1", "ra", "rb", "r2", "h2" })
  N.router("ra"); N.router("rb"); N.router("r2")
  N.sysctl("h1", "net.ipv4.fib_multipath_hash_policy=1"); N.sysctl("r2", "net.ipv4.fib_multipath_hash_policy=1")
  N.link("h1", "ea", "ra", "w1"); N.link("h1", "eb", "rb", "w1")
  N.link("ra", "e2", "r2", "wa"); N.link("rb", "e2", "r2", "wb"); N.link("r2", "e2", "h2", "eth0")
  N.addr("h1", "lo", "10.0.1.11/32")
  N.addr("h1", "ea", "10.0.11.1/24"); N.addr("ra", "w1", "10.0.11.2/24")
  N.addr("h1", "eb", "10.0.12.1/24"); N.addr("rb", "w1", "10.0.12.2/24")
  N.addr("ra", "e2", "10.0.21.1/24"); N.addr("r2", "wa", "10.0.21.2/24")
  N.addr("rb", "e2", "10.0.22.1/24"); N.addr("r2", "wb", "10.0.22.2/24")
  N.addr("r2", "e2", "10.0.2.1/24"); N.addr("h2", "eth0", "10.0.2.13/24")
  N.route("h1", "10.0.2.0/24 nexthop via 10.0.11.2 nexthop via 10.0.12.2"); N.route("h2", "default via 10.0.2.1")
  N.route("r2", "10.0.1.0/24 nexthop via 10.0.21.1 nexthop via 10.0.22.1")
  N.route("ra", "10.0.1.0/24 via 10.0.11.1"); N.route("ra", "10.0.2.0/24 via 10.0.21.2")
  N.route("rb", "10.0.1.0/24 via 10.0.12.1"); N.route("rb", "10.0.2.0/24 via 10.0.22.2")
  return N
end

local function flow(sport, extra)
  local f = { src = "10.0.1.11", dst = "10.0.2.13", sport = sport, dport = 4791, max_hops = 8, timeout_ms = 300 }
  for k, v in pairs(extra or {}) do f[k] = v end
  return f
end

describe("ibv.trace_flow on routed namespaces", function()
  it("runs as root, where `ip netns` works (the cases below need it)", function()
    assert.equal("0", support.lines_of("id -u")[1], "these cases build network namespaces: run them as root")
    assert.is_true(sh("ip netns list >/dev/null"))
  end)

  describe("on a line h1 - r1 - r2 - h2", function()
    local N = line()
    setup(function() N.up() end)
    teardown(function() N.down() end)

    it("names each router in order, then the destination that answers", function()
      local res = N.trace("h1", { flow(49153) })
      assert.same({ { hops = { "10.0.1.1", "10.0.9.2", "10.0.2.13" }, reached = true } }, res)
    end)

    it("ends at the last router when the destination holds the port (as rxe's kernel holds 4791)", function()
      N.hold_port(finally, "h2", 4791)
      local res = N.trace("h1", { flow(49153, { timeout_ms = 200, gap = 2 }) })
      assert.same({ { hops = { "10.0.1.1", "10.0.9.2" }, reached = false } }, res)
      -- the same path to another port, where nothing listens: reached again
      res = N.trace("h1", { flow(49153, { dport = 4792 }) })
      assert.same({ { hops = { "10.0.1.1", "10.0.9.2", "10.0.2.13" }, reached = true } }, res)
    end)

    it("probes the flows of trace_flows at once: eight silent ends cost about one", function()
      N.hold_port(finally, "h2", 4791)
      local flows = {}
      for i = 1, 8 do flows[i] = flow(49200 + i, { timeout_ms = 400, gap = 2 }) end
      local t0 = ibv.now()
      local res = N.trace("h1", flows)
      local took = ibv.now() - t0
      for i = 1, 8 do assert.same({ hops = { "10.0.1.1", "10.0.9.2" }, reached = false }, res[i]) end
      -- one flow: two silent hops of 0.4 s; eight one after the other: 6.4 s
      assert.is_true(took < 4, string.format("eight flows took %.2f s", took))
    end)
  end)

  describe("on two routers in ECMP, h1 = {ra, rb} = r2 - h2", function()
    local N = ecmp()
    setup(function() N.up() end)
    teardown(function() N.down() end)

    it("follows the source port: the same port the same router, different ports both", function()
      local flows = {}
      for i = 1, 24 do flows[i] = flow(49152 + 97 * i) end
      local first, again = N.trace("h1", flows), N.trace("h1", flows)
      local via = {}
      local side = { ["10.0.11.2"] = "10.0.21.2", ["10.0.12.2"] = "10.0.22.2" } -- ra, rb: r2's address past them
      for i = 1, 24 do
        local h = first[i].hops
        assert.is_true(first[i].reached, dkjson.encode(first[i]))
        assert.equal(3, #h, dkjson.encode(first[i]))
        assert.is_string(side[h[1]], "hop 1 is ra or rb: " .. dkjson.encode(h))
        assert.equal(side[h[1]], h[2])
        assert.equal("10.0.2.13", h[3])
        assert.same(first[i], again[i]) -- the same 5-tuple, the same path
        via[h[1]] = (via[h[1]] or 0) + 1
      end
      -- 24 ports on one router of two by chance: 2 in 2^24
      assert.is_number(via["10.0.11.2"], dkjson.encode(via))
      assert.is_number(via["10.0.12.2"], dkjson.encode(via))
    end)
  end)
end)

describe("ibv.trace_flow's arguments", function()
  local function err(t) return select(2, pcall(ibv.trace_flow, t)) end
  local ok = { src = "127.0.0.1", dst = "127.0.0.1", sport = 49153 }
  local function with(k, v)
    local t = {}
    for a, b in pairs(ok) do t[a] = b end
    t[k] = v
    return t
  end

  it("names the field that is wrong", function()
    assert.matches("field 'src': an IPv4 address expected, got nil", err(with("src", nil)), 1, true)
    assert.matches("field 'dst': an IPv4 address expected, got '10.0.0.300'", err(with("dst", "10.0.0.300")), 1,
      true)
    assert.matches("field 'src': string expected, got number", err(with("src", 5)), 1, true)
    assert.matches("field 'sport': a UDP port (1 to 65535) expected, got nil", err(with("sport", nil)), 1, true)
    assert.matches("field 'sport'", err(with("sport", 0)), 1, true)
    assert.matches("field 'dport'", err(with("dport", 65536)), 1, true)
    assert.matches("field 'max_hops'", err(with("max_hops", 65)), 1, true)
    assert.matches("field 'timeout_ms'", err(with("timeout_ms", 0)), 1, true)
    assert.matches("field 'probes'", err(with("probes", 11)), 1, true)
    assert.matches("field 'gap'", err(with("gap", 0)), 1, true)
    assert.matches("unknown field 'ttl'", err(with("ttl", 3)), 1, true)
    assert.matches("table expected", select(2, pcall(ibv.trace_flow, "10.0.0.1")), 1, true)
  end)

  it("names the flow of trace_flows, and wants a list of 1 to 1024", function()
    local e = select(2, pcall(ibv.trace_flows, { ok, with("dst", "x") }))
    assert.matches("flow 2: field 'dst': an IPv4 address expected, got 'x'", e, 1, true)
    assert.matches("a list of 1 to 1024 flows expected, got 0", select(2, pcall(ibv.trace_flows, {})), 1, true)
  end)

  it("says when another socket holds the source port, or src is not this host's", function()
    local s = require("socket").udp()
    assert(s:setsockname("127.0.0.1", 0))
    local _, port = s:getsockname()
    local hops, msg, errno = ibv.trace_flow(with("sport", tonumber(port)))
    s:close()
    assert.is_nil(hops)
    assert.equal(("bind 127.0.0.1:%d: Address already in use (another socket holds this source port: the flow "
      .. "cannot be probed from it)"):format(port), msg)
    assert.equal(ibv.errno.EADDRINUSE, errno)
    hops, msg, errno = ibv.trace_flow(with("src", "192.0.2.254"))
    assert.is_nil(hops)
    assert.matches("^bind 192%.0%.2%.254:49153: .* %(not an address of this host%)$", msg)
    assert.equal(ibv.errno.EADDRNOTAVAIL, errno)
    local res = ibv.trace_flows({ with("src", "192.0.2.254") })
    assert.equal(msg, res[1].error)
    assert.equal(ibv.errno.EADDRNOTAVAIL, res[1].errno)
  end)

  it("reaches this host's own loopback address at once (it answers: nothing on traceroute's port)", function()
    local hops, reached = ibv.trace_flow(with("dport", 33434))
    assert.same({ "127.0.0.1" }, hops)
    assert.is_true(reached)
  end)
end)
