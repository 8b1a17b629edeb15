-- The statistics of ibv.samples on known data (no device): min, max, median,
-- average, standard deviation, percentiles by perftest's rule, perftest's
-- left-out tail, the histogram, and the argument checks.
local ibv = require "ibverbs"

local function near(want, got, what)
  assert(math.abs(want - got) <= 1e-12 * math.max(1, math.abs(want)),
    string.format("%s: want %.17g, got %.17g", what or "value", want, got))
end

describe("ibv.samples statistics", function()
  -- 1..1000 microseconds, given out of order
  local t = {}
  for i = 1, 1000 do t[i] = ((i * 7919) % 1000 + 1) * 1e-6 end
  local s = ibv.samples(t)

  it("holds the samples as given and sorted", function()
    assert.equal(1000, s:count())
    assert.equal(1000, #s)
    near(t[1], s:get(1))
    near(t[1000], s:get(1000))
    for i = 1, 1000 do near(i * 1e-6, s:sorted(i), "sorted " .. i) end
    near(t[17], s:get(17)) -- sorting left the order taken alone
  end)

  it("sorts as table.sort does: negatives, both zeros, subnormals, huge values, 5,000 random ones", function()
    local v = { 3.5, -2, 0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308, 1e-6, 1e-6, 2^53, -(2^53), 0.1 }
    local seed = 12345
    for _ = 1, 5000 do
      seed = (seed * 1103515245 + 12345) % 2147483648
      v[#v + 1] = (seed / 2147483648 - 0.3) * 10 ^ (seed % 13 - 6)
    end
    local r = ibv.samples(v)
    table.sort(v)
    for i = 1, #v do
      assert(v[i] == r:sorted(i), string.format("sorted %d: want %.17g, got %.17g", i, v[i], r:sorted(i)))
    end
    local one = ibv.samples{ 4e-6 }
    assert.equal(4e-6, one:sorted(1))
    assert.equal(4e-6, one:stats().median)
  end)

  it("gives min, max, median, average, stddev, p99 and p99.9", function()
    local st = s:stats()
    assert.equal(1000, st.count)
    near(1e-6, st.min, "min")
    near(1000e-6, st.max, "max")
    near(500.5e-6, st.median, "median") -- even count: the mean of the two middle ones
    near(500.5e-6, st.average, "average")
    near(math.sqrt((1000 ^ 2 - 1) / 12) * 1e-6, st.stddev, "stddev") -- population, of 1..n
    near(991e-6, st.p99, "p99")       -- sorted index ceil(1000 * 0.99) = 990, 0-based
    near(1000e-6, st.p99_9, "p99.9")  -- index ceil(999.0) = 999
  end)

  it("leaves out perftest's tail of largest samples", function()
    local st = s:stats(2) -- perftest's LAT_MEASURE_TAIL
    assert.equal(998, st.count)
    near(499.5e-6, st.median, "median of 1..998")
    near(499.5e-6, st.average, "average of 1..998")
    near(999e-6, st.max, "max: sorted index 998, as perftest prints it")
    near(990e-6, st.p99, "p99: index ceil(998 * 0.99) = 989")
    near(999e-6, st.p99_9, "p99.9: index ceil(998 * 0.999) = 998")
  end)

  it("gives any percentile, an odd count's median, a single sample", function()
    near(501e-6, s:percentile(50))
    near(1e-6, s:percentile(0))
    near(1000e-6, s:percentile(100))
    local odd = ibv.samples{ 5, 1, 3 }
    assert.equal(3, odd:stats().median)
    assert.equal(3, odd:stats().average)
    local one = ibv.samples{ 2.5 }
    local st = one:stats()
    assert.same({ 1, 2.5, 2.5, 2.5, 2.5, 0, 2.5, 2.5 },
      { st.count, st.min, st.max, st.median, st.average, st.stddev, st.p99, st.p99_9 })
  end)

  it("counts a histogram in equal bins, the largest in the last", function()
    local counts, lo, width = s:histogram(4)
    near(1e-6, lo)
    near(999e-6 / 4, width)
    assert.same({ 250, 250, 250, 250 }, counts)
    local c2 = ibv.samples{ 1, 2, 2, 3, 10 }:histogram(3, 0, 3)
    assert.same({ 0, 1, 3 }, c2) -- 10 is outside [0, 3]; 3 sits in the last bin
    assert.same({ 5 }, ibv.samples{ 4, 4, 4, 4, 4 }:histogram(1))
  end)

  it("is empty before a kernel fills it", function()
    local e = ibv.samples(10)
    assert.equal(0, e:count())
    assert.equal(10, #e)
    assert.same({ count = 0 }, e:stats())
    assert.is_nil(e:percentile(99))
  end)

  it("raises errors naming the bad argument", function()
    assert.error_matches(function() ibv.samples(0) end, "bad argument #1")
    assert.error_matches(function() ibv.samples{ 1, "x" } end, "sample 2: number expected, got string")
    assert.error_matches(function() ibv.samples{ 0 / 0 } end, "sample 1: number expected, got NaN")
    assert.error_matches(function() ibv.samples(2 ^ 24 + 1) end, "out of range")
    assert.error_matches(function() s:get(1001) end, "index 1001 outside the 1000 samples")
    assert.error_matches(function() s:sorted(0) end, "index 0 outside")
    assert.error_matches(function() s:percentile(101) end, "percentile between 0 and 100")
    assert.error_matches(function() s:percentile(0 / 0) end, "percentile between 0 and 100")
    assert.error_matches(function() s:stats(1000) end, "tail 1000 leaves none of the 1000 samples")
    assert.error_matches(function() s:stats(-1) end, "%-1 out of range")
    assert.error_matches(function() s:histogram(0) end, "0 out of range")
    assert.error_matches(function() s:histogram(2, 5, 1) end, "hi below lo")
    assert.error_matches(function() s.stats(42) end, "ibverbs.samples expected")
  end)
end)
