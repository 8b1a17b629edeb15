-- lua/ibverbs/bringup/matrix/sketch.lua: the mergeable quantile sketch of the reduced
-- first pass: any merge order gives one sketch, quantiles within its stated
-- relative error, exact while small, the extremes always exact.
local sketch = require "ibverbs.bringup.matrix.sketch"
local measures = require "ibverbs.bringup.matrix.measures"

local function values(n, seed, spread)
  math.randomseed(seed)
  local l = {}
  for i = 1, n do l[i] = 46000 * math.exp(spread * (math.random() - 0.5)) end
  return l
end

local function of(list)
  local s = sketch.new()
  for _, v in ipairs(list) do s:add(v) end
  return s
end

-- The values in parts of random sizes, each its own sketch.
local function parts(list, nparts)
  local out = {}
  for i = 1, nparts do out[i] = sketch.new() end
  for _, v in ipairs(list) do out[math.random(nparts)]:add(v) end
  return out
end

-- Merged as a random tree: pairs of random neighbours, through the text a relay sends.
local function random_tree(list)
  local l = {}
  for i, s in ipairs(list) do l[i] = sketch.decode(s:encode()) end
  while #l > 1 do
    local i = math.random(#l - 1)
    local m = sketch.decode(l[i]:encode()):merge(l[i + 1])
    table.remove(l, i + 1)
    l[i] = m
  end
  return l[1]
end

describe("ibverbs.bringup.matrix.sketch", function()
  it("gives one summary whatever the tree: merged in order, reversed, as random trees, through its text", function()
    for _, n in ipairs({ 40, 200, 3000 }) do -- exact throughout, exact in the parts only, buckets
      local l = values(n, n, 0.4)
      local whole = of(l):encode()
      local p = parts(l, 37)
      local forward, backward = sketch.new(), sketch.new()
      for i = 1, #p do forward:merge(p[i]); backward:merge(p[#p + 1 - i]) end
      assert.equal(whole, forward:encode())
      assert.equal(whole, backward:encode())
      for _ = 1, 5 do assert.equal(whole, random_tree(p):encode()) end
    end
  end)

  it("is exact up to EXACT values, as measures.quantile", function()
    local l = values(sketch.EXACT, 7, 0.5)
    local s = of(l)
    table.sort(l)
    for _, q in ipairs({ 0, 0.1, 0.25, 0.5, 0.75, 0.9, 1 }) do assert.equal(measures.quantile(l, q), s:quantile(q)) end
  end)

  it("keeps every quantile within ALPHA of the exact one past EXACT values, the lowest and highest exact", function()
    for _, spread in ipairs({ 0.05, 1, 6 }) do
      local l = values(20000, 11, spread)
      local s = of(l)
      table.sort(l)
      assert.equal(l[1], s:quantile(0))
      assert.equal(l[#l], s:quantile(1))
      for q = 0, 1, 0.01 do
        local exact = measures.quantile(l, q)
        assert.is_true(math.abs(s:quantile(q) - exact) <= sketch.ALPHA * exact * (1 + 1e-9),
          string.format("q %.2f: %.6g against %.6g", q, s:quantile(q), exact))
      end
    end
  end)

  it("counts values of 0 apart (the pairs that counted no error), in both modes", function()
    local small = sketch.new():add(0.003):add_zeros(3)
    assert.equal(0, small:quantile(0.25))
    assert.equal(0.003, small:quantile(1))
    local big = sketch.new()
    for _ = 1, 300 do big:add(0.002) end
    big:add_zeros(700)
    assert.equal(0, big:quantile(0.5))
    assert.is_true(math.abs(big:quantile(0.9) - 0.002) <= 0.002 * sketch.ALPHA)
    assert.equal(big:encode(), sketch.decode(big:encode()):encode())
  end)
end)
