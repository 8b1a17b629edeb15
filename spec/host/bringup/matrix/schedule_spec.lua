-- lua/ibverbs/bringup/matrix/schedule.lua, fabric_matrix.lua's rounds: the tournament, the
-- shift, serial, quick, a pairs file, the retest's disjoint rounds.
local schedule = require "ibverbs.bringup.matrix.schedule"

-- Every ordered pair of s exactly once; returns the number of rounds that used each rank twice.
local function check_schedule(s, n, want_pairs)
  local seen, count = {}, 0
  for k = 0, s.rounds - 1 do
    local sends, recvs = {}, {}
    for r = 0, n - 1 do
      local dst, src = s:partners(r, k)
      if dst then
        assert.is_nil(sends[r]); sends[r] = dst
        local key = r .. "-" .. dst
        assert.is_nil(seen[key], "pair measured twice: " .. key .. " in round " .. k)
        seen[key] = k
        count = count + 1
        -- the receiver agrees
        local _, back = s:partners(dst, k)
        assert.equal(r, back)
      end
      if src then assert.is_nil(recvs[r]); recvs[r] = src end
    end
  end
  assert.equal(want_pairs, count)
  return seen
end

describe("fabric_matrix.lua's schedules (lua/ibverbs/bringup/matrix/schedule.lua)", function()
  it("tournament: every ordered pair once, rounds of disjoint pairs, N-1 rounds for even N, N for odd", function()
    for n = 2, 33 do
      local s = schedule.new("tournament", n)
      assert.equal(n % 2 == 0 and n - 1 or n, s.rounds)
      check_schedule(s, n, n * (n - 1))
      for k = 0, s.rounds - 1 do
        local idle = 0
        for r = 0, n - 1 do
          local dst, src = s:partners(r, k)
          assert.equal(dst, src) -- one partner, both directions
          if dst then assert.equal(r, (s:partners(dst, k))) else idle = idle + 1 end
        end
        assert.equal(n % 2, idle) -- odd N: one rank rests each round
      end
    end
  end)

  it("shift: round d-1 sends to rank+d and receives from rank-d; serial: one pair a round; quick: one round", function()
    for _, n in ipairs({ 2, 3, 7, 16 }) do
      local s = schedule.new("shift", n)
      assert.equal(n - 1, s.rounds)
      check_schedule(s, n, n * (n - 1))
      assert.same({ 2 % n, (0 - 2) % n }, { s:partners(0, 1) })
      local serial = schedule.new("serial", n)
      assert.equal(n * (n - 1), serial.rounds)
      check_schedule(serial, n, n * (n - 1))
      for k = 0, serial.rounds - 1 do assert.equal(1, #serial:round_pairs(k)) end
      local q = schedule.new("quick", n)
      assert.equal(1, q.rounds)
      check_schedule(q, n, 2 * math.floor(n / 2))
    end
  end)

  it("reads a pairs file of ranks or host names, rounds in increasing order", function()
    local s = assert(schedule.from_pairs("# round a b\n5 0 1\n5 h2 3\n\n2 0 h2  # by name\n", 4,
      { "h0", "h1", "h2", "h3" }))
    assert.equal(2, s.rounds)
    assert.same({ 2, 2 }, { s:partners(0, 0) }) -- round 2 first
    assert.same({ 1, 1 }, { s:partners(0, 1) })
    assert.same({ 3, 3 }, { s:partners(2, 1) })
    assert.is_nil((s:partners(1, 0)))
    assert.equal(6, s:pair_count())
    local plan = s:rank_plan(2)
    local again = schedule.from_plan("pairs", 4, 2, plan, 2)
    assert.same({ 0, 0 }, { again:partners(2, 0) })
  end)

  it("refuses a bad pairs file, naming the line: unknown rank or host, a rank twice in a round, empty", function()
    local hosts = { "a", "b", "c", "c" }
    local cases = {
      { "1 0 4\n", "f:1: rank 4 is not a rank %(0 to 3%)" },
      { "1 0 1\n1 zz 2\n", "f:2: unknown host or rank 'zz'" },
      { "1 0 1\n1 1 2\n", "f:2: rank 1 is twice in round 1 %(line 1 too%)" },
      { "", "f: no pairs %(empty file%)" },
      { "# only a comment\n\n", "f: no pairs %(empty file%)" },
      { "1 0 0\n", "f:1: rank 0 paired with itself" },
      { "1 0 1\n2 1 0\n", "f:2: ranks 1 and 0 are paired twice %(line 1 too%)" },
      { "1 0\n", "f:1: expected 'round rankA rankB', got '1 0'" },
      { "x 0 1\n", "f:1: round 'x' is not a number >= 0" },
      { "1 a c\n", "f:1: host c runs several ranks: name the rank" },
    }
    for _, c in ipairs(cases) do
      local s, err = schedule.from_pairs(c[1], 4, hosts, "f")
      assert.is_nil(s)
      assert.matches(c[2], err)
    end
  end)

  it("splits a retest list into rounds of disjoint pairs, at most width a round", function()
    local r = schedule.disjoint_rounds({ { 0, 1 }, { 1, 2 }, { 2, 3 }, { 0, 3 } })
    assert.same({ { { 0, 1 }, { 2, 3 } }, { { 1, 2 }, { 0, 3 } } }, r)
    assert.equal(4, #schedule.disjoint_rounds({ { 0, 1 }, { 1, 2 }, { 2, 3 }, { 0, 3 } }, 1))
  end)
end)
