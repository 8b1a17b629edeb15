-- lua/ibverbs/bringup/matrix/report.lua, fabric_matrix.lua's report: the text, the JSON,
-- the gnuplot heatmaps.
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local matrix = require "ibverbs.bringup.matrix.report"
local dkjson = require "dkjson"
local fs = require "fabric_support"
local fabric_of, OPTS = fs.fabric_of, fs.OPTS

describe("fabric_matrix.lua's report (lua/ibverbs/bringup/matrix/report.lua)", function()
  local function report()
    local l = fabric_of(4, function(p) if p.src == 2 then p.send_mbs = 3 end end)
    diagnose.flag(l, OPTS)
    for _, p in ipairs(l) do p.pass, p.round = "first", 0 end
    return { size = 4, hosts = { "n1", "n2", "n3", "n4" }, pattern = "tournament", rounds = 3, rails = { "mlx5_0:1" },
      pairs = l, verdicts = { { kind = "node", ranks = { 2 }, hosts = { "n3" }, rail = "mlx5_0:1", why = "slow" } },
      options = { lat_factor = 2.1, bw_fraction = 0.93 }, control = { exchanges = 5, rank0_ms_per_round = 1,
        rank0_cpu_ms_per_round = 0.5, slowest_ms_per_round = 2, slowest_rank = 3 } }
  end

  it("prints the matrices, the flagged pairs and the verdicts", function()
    local text = matrix.text(report())
    assert.matches("fabric_matrix: 4 ranks, pattern tournament, 3 rounds, rails: mlx5_0:1", text)
    assert.matches("12 pairs, 1200 bytes verified, 3 flagged %(latency > 2%.1x min, bandwidth < 0%.93 x max%)", text)
    assert.matches("FLAGGED 2 n3 %-> 0 n1: send bandwidth 3%.00 MB/s < 0%.93 x max", text)
    assert.matches("VERDICT node: rank 2 %(n3%) mlx5_0:1: slow", text)
    assert.matches("\nFAIL$", text)
    assert.is_nil(text:find("worst p99", 1, true)) -- no percentiles, no spread line
  end)

  it("prints the latency's spread: the typical pair, the worst p99 and the worst max, each with its pair", function()
    local r = report()
    for _, p in ipairs(r.pairs) do
      p.lat_p99_us, p.lat_p999_us, p.lat_max_us = p.lat_us * 2, p.lat_us * 3, p.lat_us * 4
    end
    r.pairs[5].lat_p99_us, r.pairs[7].lat_max_us = 99, 500
    local text = matrix.text(r)
    local line = assert(text:match("latency, one way %(us%): [^\n]*"), text)
    local p5, p7 = r.pairs[5], r.pairs[7]
    assert.matches(string.format("worst p99 99%%.0 %%(%d n%d %%-> %d n%d, p99%%.9 %.1f%%)", p5.src, p5.src + 1, p5.dst,
      p5.dst + 1, p5.lat_p999_us), line)
    assert.matches(string.format("worst max 500%%.0 %%(%d n%d %%-> %d n%d%%)", p7.src, p7.src + 1, p7.dst, p7.dst + 1),
      line)
    assert.matches("median of 12 pairs", line)
  end)

  it("prints the counters' notes and a pair not retested with why, in the text and the JSON", function()
    local r = report()
    r.notes = { "counters: transport rates high on every pair (x): load or congestion, not blamed on a pair" }
    r.transient = { { 0, 1, 1 }, { 2, 3, 1, note = "not retested: rank 2 passed with rank 0, after every pair of it "
      .. "was flagged in the first pass" } }
    local text = matrix.text(r)
    assert.matches("\ncounters: transport rates high on every pair %(x%): load or congestion, not blamed on a pair\n",
      text)
    assert.matches("\ntransient: rank 0 %(n1%) <%-> rank 1 %(n2%) passed when measured again\n", text)
    assert.matches("\ntransient: rank 2 %(n3%) <%-> rank 3 %(n4%) not retested: rank 2 passed with rank 0", text)
    local j = dkjson.decode(matrix.json(r))
    assert.same({ { 0, 1 }, { 2, 3 } }, j.transient)
    assert.equal(2, #j.notes)
    assert.matches("^transient: 2 <%-> 3 not retested", j.notes[2])
  end)

  it("writes JSON with the round of every pair, the pattern, the rounds and the verdicts", function()
    local j = dkjson.decode(matrix.json(report()))
    assert.equal("tournament", j.pattern)
    assert.equal(3, j.rounds)
    assert.equal(12, #j.pairs)
    assert.equal(0, j.pairs[1].round)
    assert.same({ kind = "node", ranks = { 2 }, hosts = { "n3" }, rail = "mlx5_0:1", why = "slow" }, j.verdicts[1])
    assert.is_false(j.pass)
    local r = report()
    r.verdicts = {}
    assert.matches('"verdicts":%[%]', matrix.json(r))
  end)

  it("ends with the fabric's verdicts, each naming its link and evidence (FABRIC: no node at fault, rank 0 exits 3), "
    .. "and gives them in the JSON with kind 'fabric'", function()
    local localize = require "ibverbs.bringup.matrix.localize"
    local clos = require "clos_support"
    local t = clos.topology{ leaves = 2, spines = 2, hosts = 4 }
    local res = localize.run(clos.flows(t, { seed = 3, known = true, dead = { ["leaf1 -- spine1"] = true,
      ["leaf2 -- spine1"] = true } }), {})
    local r = report()
    r.verdicts, r.at_fault = res.verdicts, {}
    local text = matrix.text(r)
    assert.matches("\nFABRIC: no node at fault %(every node exits 0%); 1 fabric verdict, rank 0 exits 3:\nFABRIC "
      .. "leaf1 %-%- spine1 or leaf2 %-%- spine1 %(every flow that crossed one crossed the others: the hosts cannot "
      .. "tell them apart%): 12 flows crossed it, 12 bad %(12 failed%), 20 clean flows of the same pairs on other "
      .. "paths; 4 pairs: node1 <%-> node3, node1 <%-> node4, node2 <%-> node3, node2 <%-> node4$", text)
    assert.is_nil(text:find("VERDICT", 1, true))
    -- with a node verdict besides: FAIL and the nodes at fault, the fabric's verdicts after them
    table.insert(r.verdicts, 1, { kind = "node", ranks = { 2 }, hosts = { "n3" }, rail = "mlx5_0:1", why = "slow" })
    r.at_fault = { 2 }
    text = matrix.text(r)
    assert.matches("\nVERDICT node: rank 2 %(n3%) mlx5_0:1: slow\n", text)
    assert.matches("\nFAIL; nodes at fault %(exit 1%): rank 2 %(n3%)\nFABRIC leaf1 %-%- spine1 or leaf2", text)
    local j = dkjson.decode(matrix.json(r))
    assert.is_false(j.pass)
    local v = j.verdicts[2]
    assert.same({ "fabric", true, "leaf1 -- spine1", { "leaf1 -- spine1", "leaf2 -- spine1" }, 12, 12, 12, 20, {}, {} },
      { v.kind, v.located, v.link, v.links, v.flows, v.bad, v.failed, v.clean_siblings, v.ranks, v.hosts })
    assert.equal(4, #v.pairs)
    assert.same({ a = 0, b = 2, rail = 1, hosts = { "node1", "node3" } }, v.pairs[1])
    assert.matches("^leaf1 %-%- spine1 or leaf2 %-%- spine1 ", v.why)
    -- one not located
    r.verdicts = { { kind = "fabric", located = false, pair = { 0, 2 }, ranks = {}, hosts = { "n1", "n3" },
      rail = "mlx5_0:1", flows = 8, bad = 3, failed = 0, clean_siblings = 5, pairs = {}, rails = { 1 },
      why = "not located: n1 <-> n3 (rail 1): 8 flows, 3 bad" } }
    r.at_fault = {}
    j = dkjson.decode(matrix.json(r))
    assert.same({ "fabric", false, { 0, 2 }, { "n1", "n3" }, "mlx5_0:1" },
      { j.verdicts[1].kind, j.verdicts[1].located, j.verdicts[1].pair, j.verdicts[1].hosts, j.verdicts[1].rail })
    assert.matches("\nFABRIC not located: n1 <%-> n3 %(rail 1%): 8 flows, 3 bad$", matrix.text(r))
  end)

  it("draws the heatmaps with gnuplot (png and svg)", function()
    local r = report()
    for _, ext in ipairs({ "png", "svg" }) do
      local file = os.tmpname() .. "." .. ext
      assert(matrix.plot(r, file))
      local h = assert(io.open(file, "rb"))
      local head = h:read(8)
      h:close()
      os.remove(file)
      if ext == "png" then assert.equal("\137PNG\r\n\26\n", head) else assert.matches("^<%?xml", head) end
    end
    assert.matches("png or %.svg", select(2, matrix.plot(r, "/tmp/x.jpg")))
  end)

  it("says why gnuplot failed (its exit status and what it printed)", function()
    local ok, err = matrix.plot(report(), "/nonexistent/dir/x.png")
    assert.is_nil(ok)
    assert.matches("^gnuplot failed: exit %d+: .*/nonexistent/dir/x%.png", err)
  end)
end)
