-- lua/ibverbs/bringup/matrix/counter_judge.lua: transport counters judged per packet on
-- synthetic rates: the fabric's reference rate, what stands out (threshold,
-- floor, factor), the best of the retests' samples, the retest's controls,
-- the load note.
local judge = require "ibverbs.bringup.matrix.counter_judge"

-- A pair record counted with its ends' rates: {name, delta, packets, threshold} per end rank.
local function pair(src, dst, ends)
  local p = { src = src, dst = dst, counted = true, rates = {} }
  for rank, list in pairs(ends or {}) do
    for _, e in ipairs(list) do
      table.insert(p.rates, { rank = rank, host = "node" .. (rank + 1), rail = "rxe0:1", name = e[1], delta = e[2],
        packets = e[3], rate = e[2] / e[3], threshold = e[4] })
    end
  end
  return p
end

describe("lua/ibverbs/bringup/matrix/counter_judge.lua", function()
  it("takes the fabric's rate of each counter at the reference's low quantile, 0 for the pairs that counted none",
    function()
    local l = {}
    for i = 1, 8 do l[i] = pair(0, i, { [0] = { { "completer_retry_err", i, 1000 } } }) end -- 0.001 .. 0.008
    l[9] = pair(0, 9) -- counted, no rise: rate 0
    l[10] = { src = 0, dst = 10, rates = { { name = "completer_retry_err", rate = 1 } } } -- not counted: left out
    local best = judge.reference(l, "best")
    assert.equal(0, best.values.completer_retry_err)
    assert.equal("lowest", best.lo)
    assert.equal(9, best.pairs)
    local p75 = judge.reference(l, "p75")
    assert.equal("p25", p75.lo)
    assert.near(0.002, p75.values.completer_retry_err, 1e-12) -- the 25th percentile of 0, 0.001 .. 0.008
    assert.near(0.004, judge.reference(l, "median").values.completer_retry_err, 1e-12)
    -- a pair's rate is the higher of its two ends'
    assert.equal(0.5, judge.pair_rate(pair(1, 2, { [1] = { { "x", 1, 10 } }, [2] = { { "x", 5, 10 } } }), "x"))
  end)

  it("lets a rate stand out only past its threshold, the floor and the factor x the reference", function()
    local rref = { values = { rcvd_seq_err = 0.01 }, lo = "p25", names = {} }
    local opts = { counter_factor = 4, counter_floor = 0.001 }
    -- 0.05 a packet > 4 x 0.01: stands out
    local out = judge.why(pair(1, 3, { [1] = { { "rcvd_seq_err", 50, 1000, 10 } } }), rref, opts)
    assert.equal(1, #out)
    assert.equal("4 x p25 0.01", out[1].against)
    assert.equal("rxe0:1 on node2: rcvd_seq_err +50 in 1000 packets (0.05 a packet > 4 x p25 0.01)", judge.text(out))
    -- 0.03 a packet: within 4 x the reference
    assert.is_nil(judge.why(pair(1, 3, { [1] = { { "rcvd_seq_err", 30, 1000, 10 } } }), rref, opts))
    -- a rise within its threshold (no threshold in the entry) is no evidence, whatever its rate
    assert.is_nil(judge.why(pair(1, 3, { [1] = { { "rcvd_seq_err", 9, 10 } } }), rref, opts))
    -- a reference of 0: the floor judges; at or below it nothing stands out
    local zero = { values = {}, lo = "lowest", names = {} }
    assert.equal("floor 0.001", judge.why(pair(1, 3, { [1] = { { "completer_retry_err", 11, 5000, 10 } } }), zero,
      opts)[1].against)
    assert.is_nil(judge.why(pair(1, 3, { [1] = { { "completer_retry_err", 11, 20000, 10 } } }), zero, opts))
    -- the defaults: factor 4, floor 0.001
    assert.same({ counter_factor = 4, counter_floor = 1e-3 }, judge.DEFAULTS)
    assert.is_truthy(judge.why(pair(1, 3, { [1] = { { "rcvd_seq_err", 50, 1000, 10 } } }), rref))
  end)

  it("keeps the rates every sample had, each at its lowest, judged only when every sample passed the threshold",
    function()
    local a = pair(1, 3, { [1] = { { "rcvd_seq_err", 40, 1000, 10 }, { "out_of_seq_request", 30, 1000, 10 } } })
    local b = pair(1, 3, { [1] = { { "rcvd_seq_err", 20, 1000, 10 } } })
    local c = pair(1, 3, { [1] = { { "rcvd_seq_err", 9, 100 } } }) -- below its threshold: 0.09 but no evidence
    local best, counted = judge.common({ a, b })
    assert.is_true(counted)
    assert.equal(1, #best)
    assert.same({ "rcvd_seq_err", 0.02, 10 }, { best[1].name, best[1].rate, best[1].threshold })
    best = judge.common({ a, c })
    assert.equal(0.04, best[1].rate) -- c's rate is higher; a's, the lower, is kept
    assert.is_nil(best[1].threshold) -- c's rise passed no threshold: not judged
    assert.is_nil((judge.common({ a, pair(1, 3) }))) -- a sample without it: gone
    local _, some = judge.common({ a, { src = 1, dst = 3 } })
    assert.is_false(some) -- a sample not counted
  end)

  it("judges a retest against its controls' rate where it is the higher, and says so", function()
    local first = { values = { completer_retry_err = 0.001, rcvd_seq_err = 0.02 }, lo = "p25", names = {} }
    local controls = { values = { completer_retry_err = 0.006, rcvd_seq_err = 0.001 }, lo = "p25" }
    local m = judge.merge(first, controls)
    assert.equal(0.006, m.values.completer_retry_err)
    assert.equal("the retest's controls' p25", m.names.completer_retry_err)
    assert.equal(0.02, m.values.rcvd_seq_err)
    assert.is_nil(m.names.rcvd_seq_err)
    local out = judge.why(pair(1, 3, { [3] = { { "completer_retry_err", 30, 1000, 10 } } }), m)
    assert.equal("4 x the retest's controls' p25 0.006", out[1].against)
  end)

  it("says a reference above the floor is load or congestion, for the judged counters alone", function()
    local rref = { values = { completer_retry_err = 0.0061, duplicate_request = 0.05, rcvd_seq_err = 0.0004 },
      lo = "p25", names = {} }
    assert.equal("counters: transport rates high on every pair (rxe0:1, first pass: completer_retry_err p25 0.0061 a "
      .. "packet, above the floor 0.001): load or congestion, not blamed on a pair",
      judge.load_note(rref, nil, { completer_retry_err = 10, rcvd_seq_err = 10 }, "rxe0:1, first pass"))
    assert.is_nil(judge.load_note({ values = { rcvd_seq_err = 0.0004 }, lo = "p25" }, nil, nil, "x"))
  end)
end)
