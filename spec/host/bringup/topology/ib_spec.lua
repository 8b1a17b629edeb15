-- lua/ibverbs/bringup/topology/ib.lua through topology.read_ib: an
-- InfiniBand fabric from recorded files (written by hand in the formats of
-- rdma-core's ibnetdiscover and dump_fts/ibroute, and ibdiagnet's .lst: no
-- InfiniBand fabric here), two leaves, two spines, four hosts; each pair's
-- path the one the forwarding tables give (LID routed: one, and not the same
-- both ways), and every bad file named with its line.
local topology = require "ibverbs.bringup.topology"
local fs = require "fabric_support"

local FIX = "spec/fixtures/topology/"
local LINKS, LST, LFTS = FIX .. "ib_2x2.ibnetdiscover", FIX .. "ib_2x2.lst", FIX .. "ib_2x2.lfts"

local function file(body)
  local path = os.tmpname()
  fs.write(path, body)
  return path
end

local VIA1 = { "leaf1 -- spine1", "leaf2 -- spine1" }
local VIA2 = { "leaf1 -- spine2", "leaf2 -- spine2" }

describe("topology.read_ib", function()
  for _, links in ipairs({ LINKS, LST }) do
    it("reads the switches, links and hosts of " .. links:match("[^/]+$") .. " and routes each pair as the tables "
      .. "say", function()
      local topo = assert(topology.read_ib(links, LFTS, { hosts = { "node1", "node2", "node3", "node4" } }))
      assert.equal("infiniband", topo.kind)
      assert.same({ "leaf1", "leaf2", "spine1", "spine2" }, topo:switches())
      assert.same({ "leaf1 -- spine1", "leaf1 -- spine2", "leaf2 -- spine1", "leaf2 -- spine2" }, topo:links())
      assert.equal("leaf1", topo:leaf("node2"))
      assert.equal("leaf2", topo:leaf("node3"))
      assert.same({ {} }, topo:paths("node1", "node2")) -- one leaf
      assert.same({ VIA1 }, topo:paths("node1", "node3")) -- leaf1's table: LID 7 out of port 31, spine1
      assert.same({ VIA2 }, topo:paths("node1", "node4")) -- LID 8 out of port 32, spine2
      assert.same({ { "leaf2 -- spine2", "leaf1 -- spine2" } }, topo:paths("node3", "node2")) -- back another way
      assert.same({ { "leaf1 -- spine1", "leaf2 -- spine1" } }, topo:paths("node2", "node3"))
      assert.same({ VIA1 }, topo:paths("node1", "node3", "mlx5_0")) -- a rail by its device
      assert.same({ VIA1 }, topo:paths("node1", "node3", "mlx5_0:1"))
      assert.same({ nil, links .. ": host node1 has no port for rail 2 in it" }, { topo:paths("node1", "node3", 2) })
      assert.same({ VIA2 }, { topo:trace_path({ host_a = "node1", host_b = "node4", rail = 1 }) })
      assert.same({ nil, links .. ": host node9 has no port in it" }, { topo:paths("node1", "node9") })
    end)
  end

  it("refuses a measured host without a port in the link map, naming the file and the host", function()
    assert.same({ nil, LINKS .. ": measured host node9 under no leaf of the file" },
      { topology.read_ib(LINKS, LFTS, { hosts = { "node1", "node9" } }) })
  end)

  it("reads ibroute's header (a switch by LID) and OpenSM's dump of the tables too", function()
    local text = fs.slurp(LFTS):gsub("DR path slid 0; dlid 0; [%d,]+", "Lid 9")
    local p = file(text)
    assert.same({ VIA1 }, assert(topology.read_ib(LINKS, p)):paths("node1", "node3"))
    -- OpenSM's form: leaf1 sends LID 7 by spine2 instead
    local osm = text:gsub("Unicast lids %[[^\n]*guid 0x(%x+) %([^\n]*\n",
      "osm_ucast_mgr_dump_ucast_routes: Switch 0x%1\n"):gsub("0x(%x+) (%d+) : [^\n]*", "0x%1 : %2 : 01 : yes")
      :gsub("0x0007 : 031", "0x0007 : 032")
    fs.write(p, osm)
    assert.same({ VIA2 }, assert(topology.read_ib(LINKS, p)):paths("node1", "node3"))
    os.remove(p)
  end)

  it("says where a route breaks: no entry for the LID, a port to nowhere, a loop", function()
    local text = fs.slurp(LFTS)
    local p = file((text:gsub("\n0x0007 031 [^\n]*", "", 1)))
    local topo = assert(topology.read_ib(LINKS, p))
    assert.same({ nil, p .. ": switch leaf1 has no route to LID 7 (node3)" }, { topo:paths("node1", "node3") })
    fs.write(p, (text:gsub("\n0x0007 031", "\n0x0007 017", 1)))
    assert.same({ nil, p .. ": switch leaf1 routes LID 7 (node3) to port 17, which goes nowhere" },
      { assert(topology.read_ib(LINKS, p)):paths("node1", "node3") })
    -- spine1 sends LID 7 back down to leaf1
    fs.write(p, (text:gsub("(0x0007 )002", "%1001")))
    assert.same({ nil, p .. ": the route to LID 7 (node3) loops (more than 64 switches)" },
      { assert(topology.read_ib(LINKS, p)):paths("node1", "node3") })
    os.remove(p)
  end)

  it("refuses link maps and tables it cannot read, naming the line", function()
    local p = file((fs.slurp(LINKS):gsub('%[31%]\t"S%-0002c90300000201"', "[31]\tS-0002c90300000201", 1)))
    assert.same({ nil, p .. ":13: cannot read this port line (\"<type>-<guid>\"[<port>] expected)" },
      { topology.read_ib(p, LFTS) })
    fs.write(p, "# nothing\n")
    assert.same({ nil, p .. ": no switch in it (ibnetdiscover output or an ibdiagnet .lst expected)" },
      { topology.read_ib(p, LFTS) })
    fs.write(p, (fs.slurp(LST):gsub("LID:0005 PN:01 }", "LID:0005 }", 1)))
    assert.matches("^" .. p:gsub("%p", "%%%0") .. ":1: cannot read the port end '{ CA Ports:01 ", select(2,
      topology.read_ib(p, LFTS)))
    fs.write(p, "0x0001 001 : (Switch)\n" .. fs.slurp(LFTS))
    assert.same({ nil, p .. ":1: a route before any switch's header ('Unicast lids ... guid 0x...')" },
      { topology.read_ib(LINKS, p) })
    fs.write(p, (fs.slurp(LFTS):gsub("guid 0x0002c90300000202", "guid 0x0002c903000009ff")))
    assert.same({ nil, p .. ":37: switch 0x2c903000009ff is not in the link map " .. LINKS },
      { topology.read_ib(LINKS, p) })
    fs.write(p, "nothing here\n")
    assert.same({ nil, p .. ": no switch's forwarding table in it" }, { topology.read_ib(LINKS, p) })
    os.remove(p)
  end)

  it("names switches by their description, by GUID without one, and tells apart two that share a name", function()
    local text = fs.slurp(LINKS):gsub("MF0;spine2:MQM8700/U1", "MF0;spine1:MQM8700/U1")
      :gsub('# "MF0;leaf2:MQM8700/U1" enhanced', '# "" enhanced')
    local p = file(text)
    local topo = assert(topology.read_ib(p, LFTS))
    assert.same({ "S-2c90300000102", "leaf1", "spine1@2c90300000201", "spine1@2c90300000202" }, topo:switches())
    assert.same({ { "leaf1 -- spine1@2c90300000201", "S-2c90300000102 -- spine1@2c90300000201" } },
      topo:paths("node1", "node3"))
    os.remove(p)
  end)
end)
