--- The all-pairs schedules of fabric_matrix.lua: which rank sends to which in
-- each round.  Pure functions; every rank computes its own partners in O(1)
-- per round (no schedule is sent around), except a --pairs file, which rank 0
-- reads and hands out.
--
--   local schedule = require "ibverbs.bringup.matrix.schedule"
--   local s = schedule.new("tournament", n)       -- or "shift", "serial", "quick"
--   s.rounds                                       -- how many rounds
--   local dst, src = s:partners(rank, k)           -- round k (0-based): rank sends to dst, receives from src
--   local s = assert(schedule.from_pairs(text, n, hosts))  -- lines "round a b" (ranks or host names)
--
-- In a round every rank sends to at most one rank and receives from at most
-- one: tournament pairs it with one partner both ways (N/2 disjoint pairs, the
-- round-robin "circle" method: N-1 rounds, N for odd N); shift sends to rank+d
-- and receives from rank-d in round d-1 (mpiGraph); serial measures one
-- ordered pair per round (N(N-1) rounds, the baseline).
local schedule = {}

local S = {}
S.__index = S

-- an integer from a number or text (Lua 5.4 and LuaJIT alike), else nil
local function toint(x)
  local v = tonumber(x)
  if v and v == math.floor(v) and v > -2^53 and v < 2^53 then return math.floor(v) end
  return nil
end

schedule.PATTERNS = { tournament = true, shift = true, serial = true, quick = true }

-- Tournament partner of r in round k of m slots (m even): slot m-1 stays, the
-- others turn.  Returns nil for the idle rank of an odd n.
local function circle(r, k, m, n)
  local p
  if r == m - 1 then p = k
  elseif r == k then p = m - 1
  else p = (2 * k - r) % (m - 1) end
  if p >= n then return nil end
  return p
end

--- A generated schedule of pattern for n ranks.
function schedule.new(pattern, n)
  assert(schedule.PATTERNS[pattern], "unknown pattern " .. tostring(pattern))
  local s = setmetatable({ pattern = pattern, n = n }, S)
  if n < 2 then s.rounds = 0
  elseif pattern == "tournament" or pattern == "quick" then
    s.m = n % 2 == 0 and n or n + 1
    s.rounds = pattern == "quick" and 1 or s.m - 1
  elseif pattern == "shift" then s.rounds = n - 1
  else s.rounds = n * (n - 1) end
  return s
end

--- Round k's partners of rank r: dst (r sends to it) and src (r receives from it), each nil when none.
function S:partners(r, k)
  local n = self.n
  if self.list then
    local p = self.by_rank[r] and self.by_rank[r][k]
    return p, p
  elseif self.m then
    local p = circle(r, k, self.m, n)
    return p, p
  elseif self.pattern == "shift" then
    local d = k + 1
    return (r + d) % n, (r - d) % n
  end
  local s = math.floor(k / (n - 1))
  local j = k % (n - 1)
  local d = j < s and j or j + 1
  if r == s then return d, nil end
  if r == d then return nil, s end
  return nil, nil
end

--- The ordered pairs of round k, as {src, dst} (rank 0's view, for counts and checks).
function S:round_pairs(k)
  local out = {}
  for r = 0, self.n - 1 do
    local dst = self:partners(r, k)
    if dst then out[#out + 1] = { r, dst } end
  end
  return out
end

--- How many ordered pairs the schedule measures.
function S:pair_count()
  if self.list then return self.npairs end
  if self.pattern == "quick" then return #self:round_pairs(0) end
  return self.n * (self.n - 1)
end

-- A schedule of explicit rounds: rounds[k + 1] = list of unordered {a, b}.
local function explicit(pattern, n, rounds)
  local s = setmetatable({ pattern = pattern, n = n, list = rounds, rounds = #rounds, by_rank = {} }, S)
  local npairs = 0
  for k, list in ipairs(rounds) do
    for _, p in ipairs(list) do
      for i = 1, 2 do
        local r, o = p[i], p[3 - i]
        s.by_rank[r] = s.by_rank[r] or {}
        s.by_rank[r][k - 1] = o
      end
      npairs = npairs + 2
    end
  end
  s.npairs = npairs
  return s
end
schedule.explicit = explicit

--- Rank r's partners by round (what rank 0 sends rank r): {[k] = partner}.
function S:rank_plan(r)
  return self.by_rank and self.by_rank[r] or {}
end

--- A schedule rebuilt from rank_plan lists on a rank (only its own partners are known).
function schedule.from_plan(pattern, n, rounds, plan, r)
  local s = setmetatable({ pattern = pattern, n = n, list = true, rounds = rounds, by_rank = { [r] = {} } }, S)
  for k, p in pairs(plan or {}) do s.by_rank[r][toint(k)] = p end
  return s
end

--- Parses a pairs file: lines "round a b" where a and b are ranks or host
-- names (hosts: list indexed rank + 1), "#" comments and blank lines
-- ignored.  Rounds are numbered as the file likes and run in increasing
-- order.  Returns the schedule, or nil and an error naming the line.
function schedule.from_pairs(text, n, hosts, file)
  file = file or "pairs file"
  local by_host = {}
  for i, h in ipairs(hosts or {}) do
    if by_host[h] == nil then by_host[h] = i - 1 else by_host[h] = false end -- two ranks on one host
  end
  local function rank_of(word, line)
    local r = toint(word)
    if r then
      if r < 0 or r >= n then
        return nil, string.format("%s:%d: rank %d is not a rank (0 to %d)", file, line, r, n - 1)
      end
      return r
    end
    local h = by_host[word]
    if h == false then
      return nil, string.format("%s:%d: host %s runs several ranks: name the rank", file, line, word)
    end
    if h == nil then return nil, string.format("%s:%d: unknown host or rank '%s'", file, line, word) end
    return h
  end
  local rounds, order = {}, {}
  local seen_pair = {}
  local line = 0
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    line = line + 1
    l = l:gsub("#.*", "")
    if l:find("%S") then
      local w = {}
      for x in l:gmatch("%S+") do w[#w + 1] = x end
      if #w ~= 3 then
        return nil, string.format("%s:%d: expected 'round rankA rankB', got '%s'", file, line, l:gsub("%s+$", ""))
      end
      local k = toint(w[1])
      if not k or k < 0 then return nil, string.format("%s:%d: round '%s' is not a number >= 0", file, line, w[1]) end
      local a, err = rank_of(w[2], line)
      if not a then return nil, err end
      local b
      b, err = rank_of(w[3], line)
      if not b then return nil, err end
      if a == b then return nil, string.format("%s:%d: rank %d paired with itself", file, line, a) end
      local rd = rounds[k]
      if not rd then rd = { pairs = {}, used = {} }; rounds[k] = rd; order[#order + 1] = k end
      for _, r in ipairs({ a, b }) do
        if rd.used[r] then
          return nil, string.format("%s:%d: rank %d is twice in round %d (line %d too)", file, line, r, k, rd.used[r])
        end
        rd.used[r] = line
      end
      local key = math.min(a, b) .. "-" .. math.max(a, b)
      if seen_pair[key] then
        return nil, string.format("%s:%d: ranks %d and %d are paired twice (line %d too)", file, line, a, b,
          seen_pair[key])
      end
      seen_pair[key] = line
      rd.pairs[#rd.pairs + 1] = { a, b }
    end
  end
  if #order == 0 then return nil, file .. ": no pairs (empty file)" end
  table.sort(order)
  local list = {}
  for i, k in ipairs(order) do list[i] = rounds[k].pairs end
  return explicit("pairs", n, list)
end

--- Rounds of disjoint pairs for a list of unordered pairs {a, b} (greedy, in
-- order), at most width pairs a round: a retest pass, with fewer pairs at a
-- time than the first so that contention does not repeat.
function schedule.disjoint_rounds(list, width)
  width = width or math.huge
  local rounds, left = {}, {}
  for i, p in ipairs(list) do left[i] = p end
  while #left > 0 do
    local used, round, rest = {}, {}, {}
    for _, p in ipairs(left) do
      if not used[p[1]] and not used[p[2]] and #round < width then
        used[p[1]], used[p[2]] = true, true
        round[#round + 1] = p
      else
        rest[#rest + 1] = p
      end
    end
    rounds[#rounds + 1] = round
    left = rest
  end
  return rounds
end

return schedule
