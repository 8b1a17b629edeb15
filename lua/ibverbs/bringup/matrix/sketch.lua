--- A mergeable quantile sketch: the figures of many pairs summed up where
-- they are measured, merged on the way up the relay tree, and asked for a
-- quantile at rank 0 (fabric_matrix's references: ibverbs.bringup.matrix.pass_summary).
--
--   local sketch = require "ibverbs.bringup.matrix.sketch"
--   local s = sketch.new(); s:add(11.5); s:add(11.8)
--   local t = sketch.decode(s:encode()); t:merge(other)
--   t:quantile(0.75), t.n, t.min, t.max
--
-- Up to sketch.EXACT values are kept as they are: a quantile of them is
-- exact (measures.quantile's, interpolated between neighbours).  Past that,
-- each value counts in a bucket of a fixed log scale, (g^(i-1), g^i] with
-- g = (1 + ALPHA) / (1 - ALPHA), whose representative 2 g^i / (g + 1) is
-- within ALPHA (0.5 %) of every value in it; values at or below 0 count
-- apart.  The lowest and the highest value stay exact whatever the count,
-- so "best" (p100: the highest bandwidth, the lowest latency) is exact, and
-- any other quantile is within ALPHA of the exact one, relatively.  A merge
-- adds counts, so merging in any order and any tree shape gives the same
-- sketch: the buckets are fixed, and exact values past EXACT all land in
-- the buckets they would have reached one by one.
local measures = require "ibverbs.bringup.matrix.measures"

local sketch = {}

sketch.ALPHA = 0.005 -- the relative error of a quantile past EXACT values
sketch.EXACT = 256 -- values kept exactly
local G = (1 + sketch.ALPHA) / (1 - sketch.ALPHA)
local LOG_G = math.log(G)

local S = {}
S.__index = S

--- An empty sketch.
function sketch.new()
  return setmetatable({ n = 0, exact = {} }, S)
end

-- The bucket of v (> 0), and a bucket's representative value.
local function bucket(v) return math.ceil(math.log(v) / LOG_G) end
local function rep(i) return 2 * G ^ i / (G + 1) end

-- One value counted in bucket mode: its bucket's count, or the zeros'.
local function count(s, v)
  if v > 0 then
    local i = bucket(v)
    s.buckets[i] = (s.buckets[i] or 0) + 1
  else
    s.zeros = s.zeros + 1
  end
end

-- The exact values moved into the buckets.
local function to_buckets(s)
  if not s.exact then return end
  s.buckets, s.zeros = {}, 0
  for _, v in ipairs(s.exact) do count(s, v) end
  s.exact = nil
end

--- Counts v (a number, not NaN).
function S:add(v)
  self.n = self.n + 1
  if not self.min or v < self.min then self.min = v end
  if not self.max or v > self.max then self.max = v end
  if self.exact then
    self.exact[#self.exact + 1] = v
    if #self.exact > sketch.EXACT then to_buckets(self) end
  else
    count(self, v)
  end
  return self
end

--- Counts z more values of 0.
function S:add_zeros(z)
  if z <= 0 then return self end
  if self.exact and #self.exact + z <= sketch.EXACT then
    for _ = 1, z do self.exact[#self.exact + 1] = 0 end
  else
    to_buckets(self)
    self.zeros = self.zeros + z
  end
  self.n = self.n + z
  self.min = math.min(self.min or 0, 0)
  self.max = math.max(self.max or 0, 0)
  return self
end

--- Adds other's counts to this sketch (other unchanged); returns self.
function S:merge(other)
  if other.n == 0 then return self end
  if not self.min or other.min < self.min then self.min = other.min end
  if not self.max or other.max > self.max then self.max = other.max end
  self.n = self.n + other.n
  if self.exact and other.exact and #self.exact + #other.exact <= sketch.EXACT then
    for _, v in ipairs(other.exact) do self.exact[#self.exact + 1] = v end
    return self
  end
  to_buckets(self)
  if other.exact then
    for _, v in ipairs(other.exact) do count(self, v) end
  else
    for i, c in pairs(other.buckets) do self.buckets[i] = (self.buckets[i] or 0) + c end
    self.zeros = self.zeros + other.zeros
  end
  return self
end

-- The value of rank j (1-based, in increasing order) in bucket mode: the
-- lowest and the highest exact, others their bucket's representative.
local function at_rank(s, order, j)
  if j <= 1 then return s.min end
  if j >= s.n then return s.max end
  local seen = s.zeros
  if j <= seen then return math.min(0, s.max) end
  for _, i in ipairs(order) do
    seen = seen + s.buckets[i]
    if j <= seen then return math.max(s.min, math.min(s.max, rep(i))) end
  end
  return s.max
end

--- The q-quantile (0 lowest, 0.5 median, 1 highest), interpolated as
-- measures.quantile does; nil when empty.  Exact up to EXACT values, within
-- ALPHA relatively past them (min and max always exact).
function S:quantile(q)
  if self.n == 0 then return nil end
  if self.exact then
    table.sort(self.exact)
    return measures.quantile(self.exact, q)
  end
  local order = {}
  for i in pairs(self.buckets) do order[#order + 1] = i end
  table.sort(order)
  local h = (self.n - 1) * q + 1
  local i = math.floor(h)
  local lo = at_rank(self, order, i)
  if i >= self.n then return lo end
  return lo + (h - i) * (at_rank(self, order, i + 1) - lo)
end

local function num(v) return string.format("%.17g", v) end

--- The sketch as one line of text (no spaces, no newline): "e<n>:v,v,..."
-- or "b<n>:min:max:zeros:i=c,...".
function S:encode()
  if self.n == 0 then return "e0:" end
  local l = {}
  if self.exact then
    table.sort(self.exact) -- one text whatever order the values came in
    for i, v in ipairs(self.exact) do l[i] = num(v) end
    return "e" .. self.n .. ":" .. table.concat(l, ",")
  end
  for i, c in pairs(self.buckets) do l[#l + 1] = i .. "=" .. c end
  table.sort(l)
  return string.format("b%d:%s:%s:%d:%s", self.n, num(self.min), num(self.max), self.zeros, table.concat(l, ","))
end

--- A sketch read back from encode's text, or nil.
function sketch.decode(text)
  local s = sketch.new()
  local n, rest = tostring(text):match("^e(%d+):(.*)$")
  if n then
    for v in rest:gmatch("[^,]+") do s:add(tonumber(v)) end
    return s.n == tonumber(n) and s or nil
  end
  local mn, mx, zeros
  n, mn, mx, zeros, rest = tostring(text):match("^b(%d+):([^:]+):([^:]+):(%d+):(.*)$")
  if not n then return nil end
  s.n, s.min, s.max, s.exact, s.zeros, s.buckets = tonumber(n), tonumber(mn), tonumber(mx), nil, tonumber(zeros), {}
  for i, c in rest:gmatch("(%-?%d+)=(%d+)") do s.buckets[tonumber(i)] = tonumber(c) end
  return s
end

return sketch
