-- lua/ibverbs/bringup/matrix/localize.lua (and the search it runs, fabric_cover.lua): fabric
-- verdicts from flows drawn over synthetic leaf-spine fabrics (spec/clos_support.lua), faults planted.
local localize = require "ibverbs.bringup.matrix.localize"
local clos = require "clos_support"

local GRAY = 0.01 -- a gray link's loss: one frame in a hundred

-- The pairs of res.explained, sorted ("0-2:1", ...).
local function explained(res)
  local l = {}
  for k in pairs(res.explained) do l[#l + 1] = k end
  table.sort(l)
  return l
end

-- The explained keys of every pair of ranks in as with ranks in bs (rail 1), sorted.
local function pairs_between(as, bs)
  local l = {}
  for _, a in ipairs(as) do
    for _, b in ipairs(bs) do l[#l + 1] = localize.key(a, b, 1) end
  end
  table.sort(l)
  return l
end

describe("the fabric's localization (lua/ibverbs/bringup/matrix/localize.lua)", function()
  it("names a gray leaf-spine link of a 2-leaf 2-spine fabric of 4 hosts, with its twin (every flow that crossed "
    .. "one crossed the other), blames no host, counts the clean flows on the sibling paths", function()
    local t = clos.topology{ leaves = 2, spines = 2, hosts = 4 }
    local flows = clos.flows(t, { seed = 3, known = true, gray = { ["leaf1 -- spine1"] = GRAY } })
    local res = localize.run(flows, {})
    assert.equal(1, #res.verdicts)
    local v = res.verdicts[1]
    assert.equal("fabric", v.kind)
    assert.is_true(v.located)
    -- a flow between the two leaves through spine1 crosses leaf1 -- spine1 and leaf2 -- spine1: no flow tells
    -- the two apart, so both are named
    assert.same({ "leaf1 -- spine1", "leaf2 -- spine1" }, v.links)
    assert.equal("leaf1 -- spine1", v.link)
    assert.is_nil(v.switch)
    local crossed = 0
    for _, f in ipairs(flows) do if f.true_path[1] == "leaf1 -- spine1" then crossed = crossed + 1 end end
    assert.equal(crossed, v.flows)
    assert.is_true(v.bad >= 0.8 * v.flows and v.bad <= v.flows, v.why)
    assert.is_true(v.loss > 0.005 and v.loss < 0.02, v.why)
    -- the sibling flows: the same 4 pairs, through spine2, clean
    local siblings = 0
    for _, f in ipairs(flows) do
      if f.true_path[1] == "leaf1 -- spine2" and f.stalls < 2 then siblings = siblings + 1 end
    end
    assert.equal(siblings, v.clean_siblings)
    assert.equal(4, #v.pairs)
    assert.same({}, v.ranks)
    assert.matches("^leaf1 %-%- spine1 or leaf2 %-%- spine1 %(every flow that crossed one crossed the others: the "
      .. "hosts cannot tell them apart%): %d+ flows crossed it, %d+ bad %(loss [%d.]+ %%%), %d+ clean flows of the "
      .. "same pairs on other paths; 4 pairs: node1 <%-> node3, node1 <%-> node4, node2 <%-> node3, node2 <%-> node4$",
      v.why)
    assert.same({}, res.hosts) -- no host end taken
    -- the pairs between the leaves are the fabric's; those within a leaf are nobody's
    assert.same(pairs_between({ 0, 1 }, { 2, 3 }), explained(res))
    assert.equal(0, res.unexplained)
  end)

  it("names the same link from traced hops through the topology, and exactly once a third leaf tells the two apart",
    function()
    local t = clos.topology{ leaves = 2, spines = 2, hosts = 4 }
    local res = localize.run(clos.flows(t, { seed = 3, gray = { ["leaf1 -- spine1"] = GRAY } }), { topology = t })
    assert.same({ "leaf1 -- spine1", "leaf2 -- spine1" }, clos.named(res))
    local t3 = clos.topology{ leaves = 3, spines = 2, hosts = 6 }
    res = localize.run(clos.flows(t3, { seed = 3, gray = { ["leaf1 -- spine1"] = GRAY } }), { topology = t3 })
    assert.equal(1, #res.verdicts)
    assert.same({ "leaf1 -- spine1" }, res.verdicts[1].links)
    assert.matches("^leaf1 %-%- spine1: %d+ flows crossed it", res.verdicts[1].why)
    -- node1, node2 (leaf1) with the four hosts of leaves 2 and 3
    assert.same(pairs_between({ 0, 1 }, { 2, 3, 4, 5 }), explained(res))
    assert.same({}, res.hosts)
  end)

  it("names the uplinks of the leaf when the topology gives candidate paths alone (the ECMP hash unknown)", function()
    local t3 = clos.topology{ leaves = 3, spines = 2, hosts = 6 }
    local flows = clos.flows(t3, { seed = 3, gray = { ["leaf1 -- spine1"] = GRAY } })
    for _, f in ipairs(flows) do f.hops = nil end
    local res = localize.run(flows, { topology = t3 })
    assert.equal(1, #res.verdicts)
    assert.same({ "leaf1 -- spine1", "leaf1 -- spine2" }, res.verdicts[1].links)
    assert.same(pairs_between({ 0, 1 }, { 2, 3, 4, 5 }), explained(res))
  end)

  it("explains a pair whose every flow crossed the gray link (they stall alike: none stands out from its siblings)",
    function()
    local t = clos.topology{ leaves = 3, spines = 2, hosts = 6 }
    local flows = clos.flows(t, { seed = 3, known = true, gray = { ["leaf1 -- spine1"] = GRAY } })
    local r = clos.random(9)
    for _, f in ipairs(flows) do
      if f.a == 0 and f.b == 2 then -- node1 <-> node3: all 8 flows hashed onto spine1
        f.path = { "leaf1 -- spine1", "leaf2 -- spine1" }
        f.stalls = 5 + clos.poisson(r, 5)
      end
    end
    local res = localize.run(flows, {})
    assert.same({ "leaf1 -- spine1" }, clos.named(res))
    assert.is_true(res.explained[localize.key(0, 2, 1)])
    assert.same(pairs_between({ 0, 1 }, { 2, 3, 4, 5 }), explained(res))
  end)

  it("names two gray links at once, a lossy one and a slow one, exactly", function()
    local t = clos.topology{ leaves = 4, spines = 2, hosts = 8 }
    local res = localize.run(clos.flows(t, { seed = 3, known = true, gray = { ["leaf1 -- spine1"] = GRAY },
      slow = { ["leaf3 -- spine2"] = 3 } }), {})
    assert.same({ "leaf1 -- spine1", "leaf3 -- spine2" }, clos.named(res))
    local lossy, slow = res.verdicts[1], res.verdicts[2]
    assert.is_true(lossy.loss > 0.005, lossy.why)
    assert.is_true(slow.lat_factor > 2.5 and slow.lat_factor < 3.5, slow.why)
    assert.matches("latency [%d.]+ x the fabric's", slow.why)
    assert.same({}, res.hosts)
  end)

  it("names nothing for noise: a few random bad flows on a small fabric, forty on a larger one", function()
    local t = clos.topology{ leaves = 2, spines = 2, hosts = 4 }
    for seed = 1, 10 do
      local res = localize.run(clos.flows(t, { seed = seed, known = true, noise = 3 }), {})
      assert.same({}, res.verdicts)
      assert.same({}, explained(res))
      assert.same({}, res.hosts)
    end
    local big = clos.topology{ leaves = 8, spines = 4, hosts = 32 }
    local res = localize.run(clos.flows(big, { seed = 5, known = true, per_pair = 4, noise = 40 }), { topology = big })
    assert.same({}, res.verdicts)
    assert.same({}, explained(res))
    assert.is_true(res.bad >= 30 and res.unexplained == res.bad)
  end)

  it("gives no fabric verdict for a host whose flows are bad on every path, and leaves its pairs to the node "
    .. "diagnosis", function()
    local t = clos.topology{ leaves = 3, spines = 2, hosts = 6 }
    -- node1's link loses 1 %: every flow of it stalls, through both spines, so none stands out from its siblings
    local res = localize.run(clos.flows(t, { seed = 3, known = true, host_loss = { node1 = GRAY } }), {})
    assert.same({}, res.verdicts)
    assert.same({}, explained(res))
    -- node1's link is down: every flow of it failed, through both spines and within its leaf: its end is taken
    res = localize.run(clos.flows(t, { seed = 3, known = true, host_dead = { node1 = true } }), {})
    assert.same({}, res.verdicts)
    assert.same({}, explained(res))
    assert.equal(1, #res.hosts)
    assert.equal("node1", res.hosts[1].host)
    assert.equal(40, res.hosts[1].bad) -- 5 partners x 8 flows
    -- and so with one flow a pair (today's pairs): the host, not its uplinks
    res = localize.run(clos.flows(t, { seed = 3, known = true, per_pair = 1, host_loss = { node1 = 0.02 } }), {})
    assert.same({}, res.verdicts)
    assert.same({}, explained(res))
    assert.equal("node1", res.hosts[1].host)
  end)

  it("without a topology gives a pair whose flows differ (some clean, some bad) a verdict 'not located', never a "
    .. "host's", function()
    local t = clos.topology{ leaves = 2, spines = 2, hosts = 4 }
    local flows = clos.flows(t, { seed = 3, gray = { ["leaf1 -- spine1"] = GRAY } })
    for _, f in ipairs(flows) do f.hops = nil end
    local res = localize.run(flows, {})
    assert.equal(4, #res.verdicts)
    for _, v in ipairs(res.verdicts) do
      assert.equal("fabric", v.kind)
      assert.is_false(v.located)
      assert.is_nil(v.link)
      assert.same({}, v.ranks)
      assert.is_true(v.bad >= 2 and v.clean_siblings >= 1 and v.bad + v.clean_siblings == v.flows)
      assert.matches("^not located: node[12] <%-> node[34] %(rail 1%): 8 flows, %d bad %(loss [%d.]+ %%%), %d clean "
        .. "flows? of the same pair on other paths; their paths differ, and none is known %(no %-%-topology, no traced "
        .. "hops%) to name the link$", v.why)
    end
    assert.same({ 0, 2 }, res.verdicts[1].pair)
    assert.same(pairs_between({ 0, 1 }, { 2, 3 }), explained(res))
    assert.same({}, res.hosts)
    -- a host whose every flow is bad: its pairs' flows do not differ, no verdict
    flows = clos.flows(t, { seed = 3, host_dead = { node1 = true } })
    for _, f in ipairs(flows) do f.hops = nil end
    res = localize.run(flows, {})
    assert.same({}, res.verdicts)
    assert.same({}, explained(res))
  end)

  it("names a dead spine: its two links on two leaves, the spine itself on four", function()
    local t = clos.topology{ leaves = 2, spines = 2, hosts = 4 }
    local res = localize.run(clos.flows(t, { seed = 3, known = true,
      dead = { ["leaf1 -- spine1"] = true, ["leaf2 -- spine1"] = true } }), {})
    assert.equal(1, #res.verdicts)
    assert.same({ "leaf1 -- spine1", "leaf2 -- spine1" }, res.verdicts[1].links)
    assert.equal(res.verdicts[1].bad, res.verdicts[1].failed)
    local t4 = clos.topology{ leaves = 4, spines = 2, hosts = 8 }
    local dead = {}
    for l = 1, 4 do dead["leaf" .. l .. " -- spine1"] = true end
    res = localize.run(clos.flows(t4, { seed = 3, known = true, dead = dead }), {})
    assert.equal(1, #res.verdicts)
    local v = res.verdicts[1]
    assert.equal("spine1", v.switch)
    assert.same({ "leaf1 -- spine1", "leaf2 -- spine1", "leaf3 -- spine1", "leaf4 -- spine1" }, v.links)
    assert.equal(v.flows, v.failed)
    assert.matches("^spine1 %(every link of it bad or named: leaf1 %-%- spine1, leaf2 %-%- spine1, leaf3 %-%- spine1, "
      .. "leaf4 %-%- spine1%): %d+ flows crossed it, %d+ bad %(%d+ failed%)", v.why)
    assert.equal(24, #explained(res)) -- every pair across leaves (28 pairs less the 4 within one)
    assert.same({}, res.hosts)
    -- two gray links of one spine are two links, not the spine: its other links carry clean flows
    res = localize.run(clos.flows(t4, { seed = 3, known = true,
      gray = { ["leaf1 -- spine1"] = GRAY, ["leaf2 -- spine1"] = GRAY } }), {})
    assert.same({ "leaf1 -- spine1", "leaf2 -- spine1" }, clos.named(res))
    assert.equal(2, #res.verdicts)
    assert.is_nil(res.verdicts[1].switch)
  end)

  it("finds 1 and 5 gray links of 1 % loss in a rail-optimized fabric (64 hosts, 2 planes of 8 leaves and 4 "
    .. "spines, ECMP at random) with precision and recall 1", function()
    local t = clos.topology{ leaves = 8, spines = 4, hosts = 64, planes = 2 }
    local links = t.links()
    for _, n in ipairs({ 1, 5 }) do
      for seed = 1, 2 do
        local r = clos.random(seed * 101 + n)
        local gray, planted = {}, {}
        while #planted < n do
          local k = links[1 + math.floor(r() * #links)]
          if not gray[k] then gray[k] = GRAY; planted[#planted + 1] = k end
        end
        table.sort(planted)
        local flows = clos.flows(t, { seed = seed, rails = 2, per_pair = 4, gray = gray, noise = 20 })
        local res = localize.run(flows, { topology = t })
        assert.same(planted, clos.named(res))
        assert.equal(n, #res.verdicts)
        assert.same({}, res.hosts)
        -- every pair a flow of which stalled on a planted link is explained (no node pays for it), and only those
        -- whose flows crossed one
        local crossed, hurt = {}, {}
        for _, f in ipairs(flows) do
          for _, k in ipairs(f.true_path) do
            if gray[k] then
              crossed[localize.key(f.a, f.b, f.rail)] = true
              if f.stalls >= 2 then hurt[localize.key(f.a, f.b, f.rail)] = true end
            end
          end
        end
        for k in pairs(hurt) do assert.is_true(res.explained[k], k) end
        for k in pairs(res.explained) do assert.is_true(crossed[k], k) end
      end
    end
  end)

  it("keeps the topology's notes on traced paths, takes no path for a flow it cannot place, and prints nothing",
    function()
    local t = clos.topology{ leaves = 2, spines = 2, hosts = 4 }
    local trace = t.trace_path
    t.trace_path = function(self, f)
      local p = trace(self, f)
      return p, f.host_a == "node1" and "node1: traced under leaf1, the file says leaf1" or nil
    end
    local said, iolib = {}, io
    local print0, write0 = print, iolib.write
    _G.print = function(...) said[#said + 1] = table.concat({ ... }, " ") end
    rawset(iolib, "write", function(...) said[#said + 1] = table.concat({ ... }) end)
    local ok, res = pcall(localize.run, clos.flows(t, { seed = 3, gray = { ["leaf1 -- spine1"] = GRAY } }),
      { topology = t })
    _G.print = print0
    rawset(iolib, "write", write0)
    assert(ok, res)
    assert.same({}, said)
    assert.same({ "node1: traced under leaf1, the file says leaf1" }, res.notes)
    -- no flows; flows with no figures at all: nothing to say
    res = localize.run({}, { topology = t })
    assert.same({}, res.verdicts)
    assert.equal(0, res.flows)
    res = localize.run({ { a = 0, b = 1, rail = 1, host_a = "nodeX", host_b = "nodeY" } }, {})
    assert.same({}, res.verdicts)
    assert.equal(0, res.bad)
  end)

  it("refuses what is not flows, and a path that is not link keys, naming the argument or the flow", function()
    assert.has_error(function() localize.run("flows", {}) end, "localize.run: flows: a list expected, got string")
    local flows = { { a = 0, b = 1, rail = 1, host_a = "node1", host_b = "node2", path = { "leaf1 -- spine1", 7 } } }
    assert.has_error(function() localize.run(flows, {}) end,
      "localize.run: flow 1 (node1 <-> node2): its path: link keys (strings) expected, got number")
  end)
end)
