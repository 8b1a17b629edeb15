-- lua/ibverbs/bringup/topology.lua (with its parts topology/conf.lua,
-- topology/graph.lua, topology/trace.lua): Slurm's topology.conf read as
-- Slurm reads it (comments, continued lines, case-insensitive keys, host
-- lists) with this project's "#ibverbs" lines; every bad file refused with
-- the file, the line and the name; the paths between two hosts (the ECMP
-- choices of two- and three-tier trees); traced hops turned into links, gaps
-- filled from the file where it leaves one choice, a miscabled host noted;
-- and fabric_matrix.lua refusing a bad file, or a measured host the file
-- leaves out, with exit 2 before any traffic.
local topology = require "ibverbs.bringup.topology"
local fs = require "fabric_support"

local FIX = "spec/fixtures/topology/"

local function file(body)
  local path = os.tmpname() .. ".conf"
  fs.write(path, body)
  return path
end

-- The error reading body gives, without its file name (":LINE: msg" or ": msg"); opts as read's.
local function err_of(body, opts)
  local p = file(body)
  local t, err = topology.read(p, opts)
  os.remove(p)
  assert.is_nil(t)
  assert.equal(p, err:sub(1, #p))
  return err:sub(#p + 1)
end

local TWO = "SwitchName=leaf1 Nodes=node[01-02]\nSwitchName=leaf2 Nodes=node[03-04]\n"
  .. "SwitchName=spine1 Switches=leaf[1-2]\nSwitchName=spine2 Switches=leaf[1-2]\n"

describe("topology.read: the file", function()
  it("reads the two-tier rail-optimized example: comments, host lists, continued lines, keys in any case", function()
    local hosts = {}
    for i = 1, 8 do hosts[i] = string.format("gpu%03d", i) end
    local topo = assert(topology.read(FIX .. "two_tier_rails.conf", { hosts = hosts, rails = 2 }))
    assert.same({ "leaf1", "leaf2", "spine1", "spine2", "r2-leaf1", "r2-leaf2", "r2-spine1", "r2-spine2" },
      topo:switches())
    assert.same({ "leaf1 -- spine1", "leaf1 -- spine2", "leaf2 -- spine1", "leaf2 -- spine2",
      "r2-leaf1 -- r2-spine1", "r2-leaf1 -- r2-spine2", "r2-leaf2 -- r2-spine1", "r2-leaf2 -- r2-spine2" },
      topo:links())
    assert.equal("leaf1", topo:leaf("gpu004"))
    assert.equal("leaf2", topo:leaf("gpu007")) -- (gpu[005-006],gpu007,gpu008)
    assert.equal("leaf1", topo:leaf("gpu001", 1)) -- rail 1: Slurm's lines
    assert.equal("r2-leaf1", topo:leaf("gpu001", 2)) -- rail 2: its own plane
    assert.equal("leaf2", topo:leaf("gpu008.cluster.example")) -- a host named with its domain
    assert.is_nil(topo:leaf("gpu009"))
    assert.equal("spine2", topo:switch_at("10.1.254.2")) -- Addresses=10.1.254.[1-2]
    assert.equal("spine1", topo:switch_at("10.1.255.2"))
    assert.equal("r2-leaf2", topo:switch_at("10.2.2.1"))
    assert.is_nil(topo:switch_at("10.9.9.9"))
    assert.equal("spine1", topo:switch_at("spine1")) -- a hop that names its switch
    assert.equal("spine1", topo:switch_at("spine1.mgmt.example"))
    assert.is_nil(topo:switch_at("spine9.mgmt.example"))
  end)

  it("takes addresses from a second file of SwitchName= Addresses= lines, and names its line", function()
    local conf, addr = file(TWO), file("# routers\nSwitchName=spine1 Addresses=10.0.9.1\n"
      .. "#ibverbs SwitchName=spine2 Addresses=10.0.9.2\n")
    local topo = assert(topology.read(conf, { addresses = addr }))
    assert.equal("spine1", topo:switch_at("10.0.9.1"))
    assert.equal("spine2", topo:switch_at("10.0.9.2"))
    fs.write(addr, "SwitchName=spine1 Addresses=10.0.9.1\nSwitchName=spine3 Addresses=10.0.9.3\n")
    assert.same({ nil, addr .. ":2: Addresses= for spine3, a switch no SwitchName= line defines" },
      { topology.read(conf, { addresses = addr }) })
    fs.write(addr, "SwitchName=spine1 Nodes=x Addresses=10.0.9.1\n")
    assert.same({ nil, addr .. ":1: an addresses file takes 'SwitchName=x Addresses=...' lines only" },
      { topology.read(conf, { addresses = addr }) })
    os.remove(conf); os.remove(addr)
  end)

  it("refuses a file that does not parse, naming the line and what it could not read", function()
    assert.equal(":2: cannot read 'Nodes' (key=value expected)",
      err_of("SwitchName=leaf1 Nodes=a1\nSwitchName=leaf2 Nodes a2\n"))
    assert.equal(":1: Nodes=node[1-2: unmatched '[' in the host list 'node[1-2'",
      err_of("SwitchName=leaf1 Nodes=node[1-2\n"))
    assert.equal(":3: the file ends inside a continued line", err_of("# x\n\nSwitchName=leaf1 \\\n"))
    assert.equal(":1: a statement starts with SwitchName=, got 'Nodes='", err_of("Nodes=a1 SwitchName=leaf1\n"))
    assert.equal(":1: Nodes= given twice", err_of("SwitchName=leaf1 Nodes=a1 nodes=a2\n"))
    assert.equal(":1: SwitchName=leaf[1-2]: one switch's name expected (a line defines one switch)",
      err_of("SwitchName=leaf[1-2] Nodes=a1\n"))
    assert.equal(":1: LinkSpeed=fast of leaf1: a whole number expected", err_of("SwitchName=leaf1 LinkSpeed=fast\n"))
    assert.equal(": no switch defined (no SwitchName= line)", err_of("# nothing but comments\n"))
  end)

  it("refuses an unknown key, and this project's keys on lines Slurm reads", function()
    assert.equal(":3: unknown key 'Node' (SwitchName, Nodes, Switches, LinkSpeed)",
      err_of("# a\nSwitchName=leaf1 Nodes=a1\nSwitchName=leaf2 Node=a2\n"))
    assert.equal(":1: unknown key 'Ports' (SwitchName, Nodes, Switches, LinkSpeed, Addresses, Rail)",
      err_of("#ibverbs SwitchName=leaf1 Ports=4\n"))
    assert.equal(":1: 'Addresses' is for '#ibverbs' lines only (Slurm does not know it)",
      err_of("SwitchName=leaf1 Nodes=a1 Addresses=10.0.0.1\n"))
    -- a comment that only starts like one of this project's lines is Slurm's comment
    assert.truthy(topology.read(file("#ibverbsX SwitchName=x Bogus=1\nSwitchName=leaf1 Nodes=a1\n")))
  end)

  it("refuses a switch defined twice, naming both lines", function()
    assert.equal(":5: switch leaf1 defined twice (first at line 1)", err_of(TWO .. "SwitchName=leaf1 Nodes=node9\n"))
    assert.equal(":5: switch spine1 defined twice (first at line 3)",
      err_of(TWO .. "#ibverbs SwitchName=spine1 Switches=leaf1\n"))
  end)

  it("refuses a host under two leaves, or twice under one, naming the host and both lines", function()
    assert.equal(":2: host node02 under two leaves: leaf2 and leaf1 (line 1)",
      err_of("SwitchName=leaf1 Nodes=node[01-02]\nSwitchName=leaf2 Nodes=node[02-03]\n"))
    assert.equal(":1: host node02 named twice under leaf1", err_of("SwitchName=leaf1 Nodes=node[01-02],node02\n"))
    assert.equal(":6: host node01 under two leaves of rail 2: r2-b and r2-a (line 5)", err_of(TWO
      .. "#ibverbs SwitchName=r2-a Nodes=node01 Rail=2\n#ibverbs SwitchName=r2-b Nodes=node01 Rail=2\n"))
  end)

  it("refuses Switches= naming an undefined switch, the switch itself, or one twice; a loop; both kinds "
    .. "of children", function()
    assert.equal(":3: Switches= of spine1 names leaf9, a switch no SwitchName= line defines",
      err_of("SwitchName=leaf1 Nodes=a1\nSwitchName=leaf2 Nodes=a2\nSwitchName=spine1 Switches=leaf[1-2],leaf9\n"))
    assert.equal(":2: Switches= of spine1 names spine1 itself",
      err_of("SwitchName=leaf1 Nodes=a1\nSwitchName=spine1 Switches=leaf1,spine1\n"))
    assert.equal(":2: Switches= of spine1 names leaf1 twice",
      err_of("SwitchName=leaf1 Nodes=a1\nSwitchName=spine1 Switches=leaf1,leaf[1]\n"))
    assert.equal(":2: the switches make a loop: core -> agg -> core",
      err_of("SwitchName=leaf1 Nodes=a1\nSwitchName=core Switches=agg\nSwitchName=agg Switches=core,leaf1\n"))
    assert.equal(":1: switch s1 has both Nodes= and Switches= (a leaf has hosts, a switch above has switches)",
      err_of("SwitchName=s1 Nodes=a1 Switches=s2\nSwitchName=s2 Nodes=a2\n"))
    assert.equal(":6: Switches= of top names r2-leaf, which only an '#ibverbs' line defines (Slurm would not find it)",
      err_of(TWO .. "#ibverbs SwitchName=r2-leaf Nodes=node01 Rail=2\nSwitchName=top Switches=r2-leaf\n"))
    assert.equal(":5: Rail= of r2 goes with Nodes= (a leaf's hosts on that rail)",
      err_of(TWO .. "#ibverbs SwitchName=r2 Switches=leaf1 Rail=2\n"))
  end)

  it("refuses an address given twice or not IPv4, naming the switch and both lines", function()
    assert.equal(":6: address 10.0.9.1 given to spine2 and spine1 (line 5)", err_of(TWO
      .. "#ibverbs SwitchName=spine1 Addresses=10.0.9.1\n#ibverbs SwitchName=spine2 Addresses=10.0.9.[0-1]\n"):gsub(
      "%(%S+:5%)", "(line 5)"))
    assert.equal(":5: Addresses= of spine1: '10.0.9.256' is no IPv4 address",
      err_of(TWO .. "#ibverbs SwitchName=spine1 Addresses=10.0.9.256\n"))
    assert.equal(":5: Addresses= for spine9, a switch no SwitchName= line defines",
      err_of(TWO .. "#ibverbs SwitchName=spine9 Addresses=10.0.9.1\n"))
  end)

  it("refuses a measured host the file leaves out, naming the file and the hosts", function()
    assert.equal(": measured host node9 under no leaf of the file", err_of(TWO, { hosts = { "node01", "node9" } }))
    local many = { "node01" }
    for i = 10, 16 do many[#many + 1] = "node" .. i end
    assert.equal(": measured hosts node10, node11, node12, node13, node14 under no leaf of the file (and 2 more)",
      err_of(TWO, { hosts = many }))
    assert.equal(": measured host node03 (rail 2) under no leaf of the file",
      err_of("#ibverbs SwitchName=top Switches=r[1-2]\n#ibverbs SwitchName=r1 Nodes=node[01-04] Rail=1\n"
        .. "#ibverbs SwitchName=r2 Nodes=node[01-02] Rail=2\n", { hosts = { "node01", "node03" }, rails = 2 }))
    assert.equal("/nonexistent/topology.conf: No such file or directory",
      select(2, topology.read("/nonexistent/topology.conf")))
  end)
end)

describe("topo:paths", function()
  it("gives one empty path on a leaf, one path per spine across leaves (two-tier)", function()
    local topo = assert(topology.read(FIX .. "two_tier_rails.conf"))
    assert.same({ {} }, topo:paths("gpu001", "gpu004"))
    assert.same({ { "leaf1 -- spine1", "leaf2 -- spine1" }, { "leaf1 -- spine2", "leaf2 -- spine2" } },
      topo:paths("gpu001", "gpu005"))
    assert.same({ { "leaf2 -- spine1", "leaf1 -- spine1" }, { "leaf2 -- spine2", "leaf1 -- spine2" } },
      topo:paths("gpu008", "gpu002"))
    assert.same({ { "r2-leaf1 -- r2-spine1", "r2-leaf2 -- r2-spine1" },
      { "r2-leaf1 -- r2-spine2", "r2-leaf2 -- r2-spine2" } }, topo:paths("gpu001", "gpu005", 2))
    assert.same({ nil, FIX .. "two_tier_rails.conf: host gpu042 is under no leaf" },
      { topo:paths("gpu001", "gpu042") })
  end)

  it("gives the up-down paths of a three-tier tree: two within a pod, four across pods", function()
    local topo = assert(topology.read(FIX .. "three_tier.conf"))
    assert.same({ {} }, topo:paths("n01", "n02"))
    assert.same({ { "a1-1 -- e1-1", "a1-1 -- e1-2" }, { "a1-2 -- e1-1", "a1-2 -- e1-2" } }, topo:paths("n01", "n03"))
    assert.same({
      { "a1-1 -- e1-1", "a1-1 -- core1", "a2-1 -- core1", "a2-1 -- e2-1" },
      { "a1-1 -- e1-1", "a1-1 -- core2", "a2-1 -- core2", "a2-1 -- e2-1" },
      { "a1-2 -- e1-1", "a1-2 -- core3", "a2-2 -- core3", "a2-2 -- e2-1" },
      { "a1-2 -- e1-1", "a1-2 -- core4", "a2-2 -- core4", "a2-2 -- e2-1" } }, topo:paths("n01", "n05"))
    assert.equal(16, #topo:links())
  end)

  it("gives the same paths once its cache of leaf pairs has started again", function()
    local graph = require "ibverbs.bringup.topology.graph"
    local topo = assert(topology.read(FIX .. "three_tier.conf"))
    local before = { topo:paths("n01", "n05"), topo:paths("n03", "n07"), topo:paths("n01", "n03") }
    local keep = graph.CACHE
    graph.CACHE = 1
    local fresh = assert(topology.read(FIX .. "three_tier.conf"))
    local after = { fresh:paths("n01", "n05"), fresh:paths("n03", "n07"), fresh:paths("n01", "n03"),
      fresh:paths("n01", "n05") }
    graph.CACHE = keep
    assert.same(before, { after[1], after[2], after[3] })
    assert.same(before[1], after[4])
    assert.equal(1, fresh.g.cached)
  end)

  it("gives no path between leaves no switch is above", function()
    local topo = assert(topology.read(file("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2\n")))
    assert.same({}, topo:paths("n1", "n2"))
  end)
end)

describe("topo:trace_path", function()
  local topo = assert(topology.read(FIX .. "two_tier_rails.conf"))
  local function flow(hops, a, b, rail, dst)
    return { host_a = a or "gpu001", host_b = b or "gpu005", rail = rail or 1, src = "10.1.1.11",
      dst = dst or "10.1.2.15", hops = hops }
  end
  local VIA2 = { "leaf1 -- spine2", "leaf2 -- spine2" }

  it("maps every answering hop to its switch: the links crossed, nothing to note", function()
    assert.same({ VIA2 }, { topo:trace_path(flow({ "10.1.1.1", "10.1.254.1", "10.1.2.1", "10.1.2.15" })) })
    -- two hosts on one leaf
    assert.same({ {} }, { topo:trace_path(flow({ "10.1.1.1", "10.1.1.14" }, "gpu001", "gpu004", 1, "10.1.1.14")) })
    assert.same({ { "r2-leaf1 -- r2-spine1", "r2-leaf2 -- r2-spine1" } },
      { topo:trace_path(flow({ "10.2.1.1", "10.2.255.2", "10.2.2.1" }, nil, nil, 2)) })
    assert.is_nil(topo:trace_path({ host_a = "gpu001", host_b = "gpu005" })) -- no hops: nothing traced
  end)

  it("fills an unanswered hop the file leaves one switch for, and says how many it filled", function()
    -- the first hop (the source's leaf), the last (the destination answered after it), the way down from a spine
    assert.same({ VIA2, { filled = 1 } }, { topo:trace_path(flow({ false, "10.1.254.1", "10.1.2.1" })) })
    assert.same({ VIA2, { filled = 1 } },
      { topo:trace_path(flow({ "10.1.1.1", "10.1.254.1", false, "10.1.2.15" })) })
    assert.same({ VIA2, { filled = 1 } }, { topo:trace_path(flow({ "10.1.1.1", "10.1.254.1", false, false })) })
    assert.same({ VIA2, { filled = 2 } }, { topo:trace_path(flow({ false, "spine2", false, "10.1.2.15" })) })
  end)

  it("leaves a gap the file cannot fill (a spine of two), saying so, the path partial", function()
    local path, note = topo:trace_path(flow({ "10.1.1.1", false, "10.1.2.1" }))
    assert.same({}, path)
    assert.same({ gaps = { { from = "leaf1", to = "leaf2", hops = 1, choices = 2 } }, partial = true }, note)
    path, note = topo:trace_path(flow({ "10.1.1.1", false, false }))
    assert.same({}, path)
    assert.same({ gaps = { { from = "leaf1", to = "leaf2", hops = 1, choices = 2 } }, partial = true }, note)
    assert.same({ nil, { untraced = true } }, { topo:trace_path(flow({ false, false, false })) })
  end)

  it("counts a gap's choices in a three-tier tree: four ways between pods", function()
    local t3 = assert(topology.read(FIX .. "three_tier.conf"))
    local path, note = t3:trace_path({ host_a = "n01", host_b = "n05", hops = { "e1-1", false, false, false, "e2-1" } })
    assert.same({}, path)
    assert.same({ gaps = { { from = "e1-1", to = "e2-1", hops = 3, choices = 4 } }, partial = true }, note)
    assert.same({ { "a1-2 -- e1-1", "a1-2 -- core4", "a2-2 -- core4", "a2-2 -- e2-1" }, { filled = 2 } },
      { t3:trace_path({ host_a = "n01", host_b = "n05", hops = { "e1-1", false, "core4", false, "e2-1" } }) })
  end)

  it("notes a host whose first hop is another leaf than the file's: miscabled, reported with the path", function()
    -- gpu001 is under leaf1 in the file; its first hop answers from leaf2
    local path, note = topo:trace_path(flow({ "10.1.2.1", "10.1.255.1", "10.1.1.1" }, "gpu001", "gpu003"))
    assert.same({ "leaf2 -- spine1", "leaf1 -- spine1" }, path)
    local m = { host = "gpu001", file_leaf = "leaf1", traced = "leaf2" }
    assert.same({ miscabled = m, miscabled_all = { m } }, note)
    -- the destination's side: the leaf before it is not the file's
    path, note = topo:trace_path(flow({ "10.1.1.1", "10.1.254.1", "10.1.1.1", "10.1.2.15" }))
    assert.same({ "leaf1 -- spine2", "leaf1 -- spine2" }, path)
    m = { host = "gpu005", file_leaf = "leaf2", traced = "leaf1" }
    assert.same({ miscabled = m, miscabled_all = { m } }, note)
  end)

  it("notes an address no switch has, and a traced link the file lacks", function()
    local path, note = topo:trace_path(flow({ "10.1.1.1", "10.7.7.7", "10.1.2.1" }))
    assert.same({}, path)
    assert.same({ "10.7.7.7" }, note.unknown)
    assert.is_true(note.partial)
    path, note = topo:trace_path(flow({ "10.1.1.1", "10.1.2.1" }))
    assert.same({ "leaf1 -- leaf2" }, path)
    assert.same({ unlinked = { "leaf1 -- leaf2" } }, note)
  end)
end)

describe("fabric_matrix.lua --topology", function()
  it("refuses a bad file before the rendezvous, naming the file and line (exit 2)", function()
    local p = file(TWO .. "SwitchName=leaf1 Nodes=node9\n")
    local t0 = os.time()
    local out, rc = fs.matrix_ranks(1, "--size 2 --root 127.0.0.1:1 --topology " .. p) -- (rank 0 of 2: waits otherwise)
    assert.equal(2, rc[0], out)
    assert.equal("fabric_matrix.lua: --topology " .. p .. ":5: switch leaf1 defined twice (first at line 1)\n", out)
    assert.is_true(os.time() - t0 < 5)
    out, rc = fs.matrix_ranks(1, "--size 2 --root 127.0.0.1:1 --lfts " .. p)
    assert.equal(2, rc[0], out)
    assert.equal("fabric_matrix.lua: --lfts and --topology-addresses go with --topology\n", out)
    os.remove(p)
  end)

  it("stops every rank with exit 2 when a measured host is under no leaf, before any traffic", function()
    local p = file(TWO)
    local started = os.time()
    local _, rc, texts = fs.job("examples/fabric_matrix.lua", 3, "--dry-run --topology " .. p,
      function(r) return "SLURMD_NODENAME=" .. (r == 2 and "node9" or "node0" .. (r + 1)) .. " " end)
    assert.same({ [0] = 2, 2, 2 }, rc)
    assert.is_true(os.time() - started < 20)
    assert.equal("fabric_matrix.lua: --topology " .. p .. ": measured host node9 under no leaf of the file\n", texts[0])
    -- every host placed: the run goes on
    _, rc = fs.job("examples/fabric_matrix.lua", 2, "--dry-run --topology " .. p,
      function(r) return "SLURMD_NODENAME=node0" .. (r + 1) .. " " end)
    assert.same({ [0] = 0, 0 }, rc)
    os.remove(p)
  end)
end)
