-- lua/ibverbs/bringup/matrix/pair_counters.lua: a rank's port counters around a round of
-- fabric_matrix.lua (deltas only; saturated or backwards: unknown, never 0),
-- the lines that carry them to rank 0, rank 0's store of them, their
-- attribution to the round's pairs and the flags and verdicts they give
-- (lua/ibverbs/bringup/matrix/diagnose.lua) when the figures alone pass.
local pcount = require "ibverbs.bringup.matrix.pair_counters"
local results = require "ibverbs.bringup.matrix.results"
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local schedule = require "ibverbs.bringup.matrix.schedule"
local dkjson = require "dkjson"

local tree = require("fabric_support").sysfs_tree -- a fake /sys/class/infiniband: its root

local function rail(index, dev, port)
  return { index = index, name = dev .. ":" .. port, port = port, ctx = { name = function() return dev end } }
end

local function name(r) return "rank " .. r end

-- A store of n ranks (hosts node1 ...) holding each rank's result and counter lines.
local function store_of(n, texts, per_sample, pass)
  local hosts = {}
  for r = 0, n - 1 do hosts[r + 1] = "node" .. (r + 1) end
  local store = results.store(1, n, hosts, per_sample)
  for r = 0, n - 1 do
    if texts[r] then store:absorb(r, texts[r], 0, pass or "first", name) end
  end
  return store
end

-- Rank src's lines of round k: its out end to dst (figures that pass) and counter line c.
local function lines(k, dst, c, figures)
  local f = figures or { lat_us = 10, write_mbs = 100, send_mbs = 100 }
  return "@" .. k .. "\n" .. results.lines({ { kind = "out", rail = { index = 1 }, peer = dst, res = f } }) ..
    (c and ("\n" .. c) or "")
end

local NAMES = { { "rxe0:1" }, { "rxe0:1" }, { "rxe0:1" }, { "rxe0:1" } }

describe("lua/ibverbs/bringup/matrix/pair_counters.lua", function()
  it("reads every rail's port, and gives the deltas that moved, the unknown ones and those past their thresholds",
    function()
    local before = tree{
      ["rxe0/ports/1/hw_counters/rcvd_seq_err"] = "5\n", ["rxe0/ports/1/hw_counters/sent_pkts"] = "100\n",
      ["rxe0/ports/1/hw_counters/duplicate_request"] = "9\n", ["rxe0/ports/1/hw_counters/out_of_seq_request"] = "2\n",
      ["mlx5_0/ports/2/counters/symbol_error"] = "65535\n", ["mlx5_0/ports/2/counters/port_rcv_errors"] = "7\n",
      ["mlx5_0/ports/2/counters/link_downed"] = "1\n", ["mlx5_0/ports/2/hw_counters/link_downed"] = "4\n",
    }
    local after = tree{
      ["rxe0/ports/1/hw_counters/rcvd_seq_err"] = "42\n", ["rxe0/ports/1/hw_counters/sent_pkts"] = "900\n",
      ["rxe0/ports/1/hw_counters/duplicate_request"] = "9\n", ["rxe0/ports/1/hw_counters/out_of_seq_request"] = "1\n",
      ["mlx5_0/ports/2/counters/symbol_error"] = "65535\n", ["mlx5_0/ports/2/counters/port_rcv_errors"] = "9\n",
      ["mlx5_0/ports/2/counters/link_downed"] = "1\n", ["mlx5_0/ports/2/hw_counters/link_downed"] = "6\n",
    }
    local rails = { rail(1, "rxe0", 1), rail(2, "mlx5_0", 2), { index = 3, name = "x:1", fault = "down" },
      { index = 4, dry = true } }
    local b, a = pcount.read(rails, before), pcount.read(rails, after)
    assert.same({ 1, 2 }, { next(b) and 1, b[2] and 2 })
    assert.is_nil(b[3])
    assert.is_nil(b[4])
    local limits = { [1] = { rcvd_seq_err = 10, out_of_seq_request = 0 }, [2] = { port_rcv_errors = 1, link_downed = 0,
      symbol_error = 0 } }
    local text = pcount.lines(b, a, function(ki) return limits[ki] end, nil, function(ki) return rails[ki] end)
    local l = {}
    for line in text:gmatch("[^\n]+") do l[#l + 1] = line end
    -- symbol_error, judged, at 2^16-1: it fails its port ("!"), with how to reset it (mlx5_0 port 2 has no LID here)
    assert.same({
      "C 1 rcvd_seq_err=37!10,sent_pkts=800|out_of_seq_request:went backwards",
      "C 2 hw_link_downed=2,port_rcv_errors=2!1|symbol_error:!saturated at 65535 (16 bits): its rise cannot be seen; "
        .. "reset it: perfquery -R <lid> 2 on InfiniBand; a RoCE port's counters reset only with its driver",
    }, l)
    local ki, deltas, unknown, exceeded, faults, packets = pcount.parse(l[1])
    assert.equal(1, ki)
    assert.same({ rcvd_seq_err = 37, sent_pkts = 800 }, deltas) -- the unmoved duplicate_request is left out
    assert.same({ out_of_seq_request = "went backwards" }, unknown) -- unknown, not 0
    assert.same({ { name = "rcvd_seq_err", delta = 37, threshold = 10 } }, exceeded)
    assert.same({}, faults)
    assert.is_nil(packets) -- rxe0 here counts sent_pkts, no rcvd_pkts: no packet count
    local _
    _, _, unknown, _, faults = pcount.parse(l[2])
    assert.matches("^saturated at 65535", unknown.symbol_error)
    assert.same({ { name = "symbol_error", why = unknown.symbol_error } }, faults)
    assert.is_nil(pcount.parse("O 1 2 3"))
    assert.equal("", pcount.lines({}, a, function() return {} end)) -- no reading before: no line
  end)

  it("names an hw_counters counter past its threshold when the port has no counters/ one of that name", function()
    local b = { [1] = { hw_link_downed = 1, link_downed = 0 }, [2] = { hw_link_downed = 1 } }
    local a = { [1] = { hw_link_downed = 3, link_downed = 0 }, [2] = { hw_link_downed = 3 } }
    local text = pcount.lines(b, a, function() return { link_downed = 0 } end)
    assert.equal("C 1 hw_link_downed=2|\nC 2 hw_link_downed=2!0|", text)
  end)

  it("judges port_counters' error counters by default, but not duplicate_request (a retransmitted window)",
    function()
    local pc = require "ibverbs.port_counters"
    assert.is_nil(pcount.THRESHOLDS.duplicate_request)
    assert.equal(10, pc.THRESHOLDS.duplicate_request) -- fabric_check's stay
    for k, v in pairs(pc.THRESHOLDS) do
      if k ~= "duplicate_request" then assert.equal(v, pcount.THRESHOLDS[k], k) end
    end
    for _, k in ipairs({ "rcvd_seq_err", "out_of_seq_request", "completer_retry_err", "retry_exceeded_err",
      "symbol_error", "port_rcv_errors", "link_error_recovery", "link_downed" }) do
      assert.is_number(pcount.THRESHOLDS[k], k)
    end
  end)

  it("takes a port's --expect counters over the thresholds given, for that device and port alone", function()
    local base = { rcvd_seq_err = 10, symbol_error = 10 }
    local entries = { { device = "rxe0", port = 1, counters = { rcvd_seq_err = 2 } }, { device = "rxe1", port = 1 } }
    assert.same({ rcvd_seq_err = 2, symbol_error = 10 }, pcount.thresholds(base, entries, "rxe0", 1))
    assert.equal(base, pcount.thresholds(base, entries, "rxe0", 2))
    assert.equal(base, pcount.thresholds(base, entries, "rxe1", 1))
    assert.equal(base, pcount.thresholds(base, nil, "rxe0", 1))
    assert.equal(10, base.rcvd_seq_err) -- the given table is not changed
  end)

  it("rank 0 keeps each rank's counters of each round, and streams them as JSON lines", function()
    local store = store_of(2, { [0] = lines(0, 1, "C 1 rcvd_seq_err=37!10|x:saturated") .. "\n" .. lines(1, 1,
      "C 1 -|"), [1] = lines(0, 0) })
    assert.equal(2, #store.counters)
    local c = store:counters_of(0, 0, 1)
    assert.same({ rcvd_seq_err = 37 }, c.deltas)
    assert.equal("node1", c.host)
    assert.equal("first", c.pass)
    assert.same({}, store:counters_of(1, 0, 1).deltas)
    assert.is_nil(store:counters_of(0, 1, 1))
    assert.equal(2, #store.list) -- the pair lines around the counter lines are all read
    local j = dkjson.decode(results.json_line(c, NAMES))
    assert.same({ pass = "first", round = 0, rank = 0, host = "node1", rail = "rxe0:1", deltas = { rcvd_seq_err = 37 },
      unknown = { x = "saturated" }, exceeded = { { name = "rcvd_seq_err", delta = 37, threshold = 10 } } }, j)
    assert.matches('"deltas":{}', results.json_line(store:counters_of(1, 0, 1), NAMES), 1, true) -- an object
  end)

  it("attributes a rank's deltas of a round to the pairs it was an end of in that round, and to no other: "
    .. "a physical counter as a counter error, a transport counter as a rate per packet", function()
    -- a tournament of 4: round 0 pairs 0-3 and 1-2 (both ways); rank 1's symbol_error and rcvd_seq_err rose in round 0
    local s = schedule.new("tournament", 4)
    local texts = {}
    for r = 0, 3 do
      local t = {}
      for k = 0, 2 do
        local dst = s:partners(r, k)
        t[#t + 1] = lines(k, dst, (r == 1 and k == 0) and "C 1 rcvd_seq_err=37!10,sent_pkts=200,symbol_error=12!10|"
          .. "|400" or "C 1 sent_pkts=9||18")
      end
      texts[r] = table.concat(t, "\n")
    end
    local store = store_of(4, texts)
    pcount.attribute(store, NAMES)
    local partner = s:partners(1, 0)
    for _, x in ipairs(store.list) do
      local mine = x.round == 0 and (x.src == 1 or x.dst == 1)
      assert.is_true(x.counted)
      if mine then
        assert.is_true(x.src == partner or x.dst == partner)
        assert.same({ { rank = 1, host = "node2", rail = "rxe0:1", name = "symbol_error", delta = 12,
          threshold = 10 } }, x.counter_errors)
        assert.same({ { rank = 1, host = "node2", rail = "rxe0:1", name = "rcvd_seq_err", delta = 37, packets = 400,
          rate = 37 / 400, threshold = 10 } }, x.rates)
      else
        assert.is_nil(x.counter_errors, dkjson.encode(x))
        assert.is_nil(x.rates, dkjson.encode(x))
      end
    end
    -- a shift: rank 1 sends to 2 and receives from 0 in round 0: both pairs get its deltas
    s = schedule.new("shift", 4)
    for r = 0, 3 do
      texts[r] = lines(0, (s:partners(r, 0)), r == 1 and "C 1 out_of_seq_request=20!10|x:saturated|500" or nil)
    end
    store = store_of(4, texts)
    pcount.attribute(store, NAMES)
    local hit = {}
    for _, x in ipairs(store.list) do
      if x.rates then hit[#hit + 1] = x.src .. ">" .. x.dst .. " " .. x.rates[1].rate end
      assert.is_false(x.counted) -- (ranks 0, 2 and 3 sent no counters: their pairs' rates count nowhere)
    end
    table.sort(hit)
    assert.same({ "0>1 0.04", "1>2 0.04" }, hit)
  end)

  it("leaves a port's transport counters unjudged when its packets are unknown, and says which end", function()
    local store = store_of(2, { [0] = lines(0, 1, "C 1 completer_retry_err=30!10|rcvd_pkts:saturated"),
      [1] = lines(0, 0, "C 1 sent_pkts=100,rcvd_pkts=100||200") })
    pcount.attribute(store, NAMES)
    for _, x in ipairs(store.list) do
      assert.is_nil(x.rates)
      assert.same({ { rank = 0, host = "node1", rail = "rxe0:1" } }, x.rates_unknown)
      assert.is_false(x.counted)
    end
  end)

  it("sends a port whose counters cannot be judged to rank 0 with '!': a saturated or unreadable counter, a port "
    .. "whose counters went away", function()
    local b = { [1] = { link_downed = 255, symbol_error = 3 }, [2] = { sent_pkts = 1, rcvd_pkts = 1 } }
    local a = { [1] = { link_downed = 255, symbol_error = 4 } }
    local lost = { {}, { [1] = { port_rcv_errors = "/sys/x/counters/port_rcv_errors: Input/output error" },
      [2] = { counters = "rxe1 port 1: no counters in /sys/x/ (counters, hw_counters)" } } }
    local text = pcount.lines(b, a, function() return { link_downed = 0, symbol_error = 10 } end, lost,
      function(ki) return { lid = 7, port = ki } end)
    assert.equal("C 1 symbol_error=1|link_downed:!saturated at 255 (8 bits): its rise cannot be seen; reset it: "
      .. "perfquery -R 7 1,port_rcv_errors:!unreadable: /sys/x/counters/port_rcv_errors: Input/output error\n"
      .. "C 2 -|counters:!unreadable: rxe1 port 1: no counters in /sys/x/ (counters  hw_counters)", text)
    local store = store_of(1, { [0] = "@0\n" .. text })
    local c = store:counters_of(0, 0, 1)
    assert.same({ "link_downed", "port_rcv_errors" }, { c.faults[1].name, c.faults[2].name })
    assert.equal("unreadable: /sys/x/counters/port_rcv_errors: Input/output error", c.faults[2].why)
    assert.equal("counters", store:counters_of(0, 0, 2).faults[1].name)
    local j = dkjson.decode(results.json_line(c, { { "rxe0:1" } }))
    assert.matches("^saturated at 255", j.faults.link_downed)
  end)

  it("keeps the counter errors every sample had, at their smallest rise (the best of the retests)", function()
    local function e(rank, n, d) return { rank = rank, host = "h", rail = "r", name = n, delta = d, threshold = 1 } end
    assert.same({ e(1, "a", 3) }, pcount.common({ { counter_errors = { e(1, "a", 5), e(1, "b", 9) } },
      { counter_errors = { e(1, "a", 3) } }, { counter_errors = { e(1, "a", 4), e(2, "b", 9) } } }))
    assert.is_nil(pcount.common({ { counter_errors = { e(1, "a", 5) } }, {} }))
    assert.is_nil(pcount.common({}))
    assert.equal("rxe0:1 on node2: rcvd_seq_err +37 (threshold 10), out_of_seq_request +12 (threshold 10); "
      .. "rxe0:1 on node4: completer_retry_err +3 (threshold 2)", pcount.text({
      { rank = 1, host = "node2", rail = "rxe0:1", name = "rcvd_seq_err", delta = 37, threshold = 10 },
      { rank = 1, host = "node2", rail = "rxe0:1", name = "out_of_seq_request", delta = 12, threshold = 10 },
      { rank = 3, host = "node4", rail = "rxe0:1", name = "completer_retry_err", delta = 3, threshold = 2 } }))
  end)

  it("flags a pair whose ends' transport counters stand out per packet although its figures pass; the retest makes "
    .. "it a link verdict naming the counters, or passes it", function()
    local opts = { lat_factor = 2, bw_fraction = 0.01, reference = "best", retests = 2 }
    -- round 0: 0-1 and 2-3, round 1: 0-2 and 1-3 (lossy: rank 1 and rank 3 count), round 2: 0-3 and 1-2
    local s = schedule.explicit("first", 4, { { { 0, 1 }, { 2, 3 } }, { { 0, 2 }, { 1, 3 } }, { { 0, 3 }, { 1, 2 } } })
    local texts = {}
    for r = 0, 3 do
      local t = {}
      for k = 0, 2 do
        local dst = s:partners(r, k)
        local lossy = k == 1 and (r == 1 or r == 3)
        t[#t + 1] = lines(k, dst, lossy and (r == 1 and "C 1 rcvd_seq_err=37!10||300" or
          "C 1 out_of_seq_request=30!10||300") or "C 1 sent_pkts=100,rcvd_pkts=100||200")
      end
      texts[r] = table.concat(t, "\n")
    end
    local first = store_of(4, texts)
    pcount.attribute(first, NAMES)
    local ref = diagnose.flag(first.list, opts)
    local flagged = {}
    for _, x in ipairs(first.list) do
      if x.flagged then flagged[#flagged + 1] = x.src .. ">" .. x.dst .. ": " .. x.why end
    end
    table.sort(flagged)
    -- against the lowest rate of the fabric (--reference best: 0 here), the floor judges
    local both = "transport counters stand out: rxe0:1 on node2: rcvd_seq_err +37 in 300 packets (0.123 a packet > "
      .. "floor 0.001); rxe0:1 on node4: out_of_seq_request +30 in 300 packets (0.1 a packet > floor 0.001)"
      -- both directions alike: the lower rank's end first
    assert.same({ "1>3: " .. both, "3>1: " .. both }, flagged)
    local plan = diagnose.retest_plan(first.list, 4)
    assert.same({ { 1, 3 } }, plan.flagged)
    -- the retest (two samples): 1-3 rises again every time; its ends with other partners do not
    local function retest(rises)
      local rt = schedule.explicit("retest", 4, { { { 1, 3 } }, { { 1, plan.partner[1] } }, { { 3, plan.partner[3] } },
        { { 1, 3 } }, { { 1, plan.partner[1] } }, { { 3, plan.partner[3] } } })
      local tt = {}
      for r = 0, 3 do
        local t = {}
        for k = 0, 5 do
          local dst = rt:partners(r, k)
          if dst then
            local c = rises[k] and (r == 1 or r == 3) and ("C 1 rcvd_seq_err=" .. rises[k] .. "!10||300") or
              "C 1 -||300"
            t[#t + 1] = lines(k, dst, c)
          end
        end
        tt[r] = table.concat(t, "\n")
      end
      local st = store_of(4, tt, 3, "retest")
      pcount.attribute(st, NAMES)
      return diagnose.verdicts(st.list, ref, plan, opts)
    end
    local v, transient = retest({ [0] = 25, [3] = 19 })
    assert.equal(1, #v)
    assert.equal("link", v[1].kind)
    assert.same({ 1, 3 }, v[1].ranks)
    local why = "transport counters stand out: rxe0:1 on node2: rcvd_seq_err +19 in 300 packets (0.0633 a packet > "
      .. "floor 0.001); rxe0:1 on node4: rcvd_seq_err +19 in 300 packets (0.0633 a packet > floor 0.001) (best of 2)"
      -- the lowest rate of the two samples
    assert.equal("both pass with other partners; between them still bad: rank 1 -> rank 3: " .. why
      .. "; rank 3 -> rank 1: the same transport counters (best of 2)", v[1].why) -- one round, the same ends' counters
    assert.same({}, transient)
    -- a rise in one sample alone: noise, the pair passes its retest
    v, transient = retest({ [0] = 25 })
    assert.same({}, v)
    assert.same({ { 1, 3 } }, transient)
  end)
end)
