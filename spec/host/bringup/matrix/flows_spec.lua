-- lua/ibverbs/bringup/matrix/flows.lua: a pair's flow labels (distinct, each
-- its own UDP source port, the same on both ends, turned by the pair), a
-- flow's stalls, its line to rank 0 and back as the contract's record
-- (hops traced, none, or not traced), which pairs' flows stand out, the list
-- the diagnosis reads; and the coverage its header promises, drawn.
local flows = require "ibverbs.bringup.matrix.flows"
local ibv = require "ibverbs"

describe("lua/ibverbs/bringup/matrix/flows.lua", function()
  it("gives a pair's flows distinct labels from 1 to 0x3fff, each its own port, the same on both ends", function()
    for _, n in ipairs({ 2, 3, 8, 16 }) do
      for _, p in ipairs({ { 0, 1, 1 }, { 1, 0, 1 }, { 7, 3, 2 }, { 12499, 12498, 8 } }) do
        local l = flows.labels(p[1], p[2], p[3], n)
        assert.equal(n, #l)
        local ports = {}
        for _, x in ipairs(l) do
          assert.is_true(x >= 1 and x <= 0x3fff, tostring(x))
          local port = ibv.roce_udp_sport(x)
          assert.equal(0xc000 + x, port)
          assert.is_nil(ports[port])
          ports[port] = true
        end
        assert.same(l, flows.labels(p[1], p[2], p[3], n)) -- what the other end computes
      end
    end
    assert.are_not.same(flows.labels(0, 1, 1, 8), flows.labels(1, 0, 1, 8)) -- each direction its ports
    assert.are_not.same(flows.labels(0, 1, 1, 8), flows.labels(0, 1, 2, 8)) -- each rail
    assert.same({ 0 }, flows.labels(3, 4, 1, 1)) -- one flow: the provider's port from the QP numbers
  end)

  it("splits a pair's traffic, never multiplies it: no more flows than 8 round trips and 8 messages each", function()
    assert.equal(8, flows.effective(8, 500, 1000)) -- the defaults
    assert.equal(1, flows.effective(8, 10, 8)) -- a tiny run: as without flows
    assert.equal(4, flows.effective(8, 100, 32))
    assert.equal(2, flows.effective(16, 50, 16))
    assert.equal(16, flows.effective(16, 500, 1000))
    assert.equal(1, flows.effective(1, 500, 1000))
    assert.equal(1, flows.effective(8, 1, 1))
  end)

  it("covers two paths but for 0.8 % of pairs with its default, four in about 62 %", function()
    -- N flows hashed at random onto k paths, 20,000 pairs drawn (a fixed seed)
    local seed = 4242
    local function rand(k)
      seed = (seed * 1103515245 + 12345) % 2147483648
      return math.floor(seed / 65536) % k + 1
    end
    local function covered(k, n, pairs)
      local all = 0
      for _ = 1, pairs do
        local hit, c = {}, 0
        for _ = 1, n do
          local p = rand(k)
          if not hit[p] then hit[p], c = true, c + 1 end
        end
        if c == k then all = all + 1 end
      end
      return all / pairs
    end
    local two, four = covered(2, flows.ECMP, 20000), covered(4, flows.ECMP, 20000)
    assert.is_true(math.abs(two - (1 - 2 * 0.5 ^ 8)) < 0.005, tostring(two))
    assert.is_true(math.abs(four - (1 - 4 * 0.75 ^ 8 + 6 * 0.5 ^ 8 - 4 * 0.25 ^ 8)) < 0.02, tostring(four))
    assert.is_true(covered(4, 16, 20000) > 0.95)
  end)

  it("counts the samples over 100 x the median as stalls, or over half the ack timeout", function()
    local s = ibv.samples({ 10e-6, 11e-6, 12e-6, 999e-6, 1.2e-3, 70e-3 })
    assert.equal(2, flows.stalls(s, 11e-6, 0.067)) -- over 1.1 ms: a jitter of 90 x is not one
    -- a slow link: median 1 ms; a lost frame's 70 ms is under 100 x, over half the ack timeout
    s = ibv.samples({ 1e-3, 1e-3, 1.1e-3, 20e-3, 70e-3 })
    assert.equal(1, flows.stalls(s, 1e-3, 0.067))
    assert.equal(0, flows.stalls(ibv.samples({ 1e-6 }), 1e-6, 0.067))
  end)

  it("writes a flow's line and reads it back as the contract's record", function()
    local fig = { label = 1234, sport = 0xc000 + 1234, src = "10.0.1.11", dst = "10.0.2.13", lat_us = 2.5,
      samples = 61, stalls = 1, write_mbs = 1200.5, send_mbs = 1100, hops = { "10.0.1.1", false, "10.0.9.2" } }
    local line = flows.line(2, 3, 4, fig)
    assert.equal("L 2 3 4 1234 50386 10.0.1.11 10.0.2.13 2.5 61 1 1200.5 1100 10.0.1.1,*,10.0.9.2|", line)
    assert.same({ a = 1, b = 3, rail = 2, flow = 4, host_a = "n1", host_b = "n3", src = "10.0.1.11",
      dst = "10.0.2.13", sport = 50386, dport = 4791, flow_label = 1234, lat_us = 2.5, samples = 61, stalls = 1,
      write_mbs = 1200.5, send_mbs = 1100, hops = { "10.0.1.1", false, "10.0.9.2" } },
      flows.parse(line, 1, { "n0", "n1", "n2", "n3" }))
    -- traced on one segment: no hop; not traced; InfiniBand (no address, no port); failed, its why kept whole
    assert.same({}, flows.parse(flows.line(1, 0, 1, { label = 5, sport = 49157, src = "a", dst = "b", hops = {} }),
      1).hops)
    assert.is_nil(flows.parse(flows.line(1, 0, 1, { label = 5, sport = 49157, src = "a", dst = "b" }), 1).hops)
    local ib = flows.parse(flows.line(1, 0, 2, { label = 9, error = "ping-pong: timed out | after 30 s\n" }), 1)
    assert.same({ a = 1, b = 0, rail = 1, flow = 2, flow_label = 9, samples = 0, stalls = 0,
      failed = "ping-pong: timed out   after 30 s " }, ib)
    assert.is_nil(flows.parse("O 1 2 3|", 1))
  end)

  it("says which pairs' flows stand out, and lists every flow of the stores with its pass", function()
    assert.is_false(flows.stand_out({}))
    assert.is_false(flows.stand_out({ flows = { { stalls = 0 }, { stalls = 0 } } }))
    assert.is_true(flows.stand_out({ flows = { { stalls = 0 }, { stalls = 3 } } }))
    assert.is_true(flows.stand_out({ flows = { { stalls = 0, failed = "ping-pong: ..." } } }))
    local a, b = { a = 0, b = 1, flow = 1 }, { a = 0, b = 1, flow = 2 }
    local first = { list = { { pass = "first", round = 2, flows = { a, b } }, { pass = "first" } } }
    local retest = { list = { { pass = "retest", round = 0, flows = { { a = 1, b = 0, flow = 1 } } } } }
    local l = flows.list(first, nil, retest)
    assert.equal(3, #l)
    assert.same({ "first", "first", "retest" }, { l[1].pass, l[2].pass, l[3].pass })
    assert.equal(2, l[1].round)
    assert.equal(0, #flows.list(nil))
  end)

  it("reads the IPv4 address of an IPv4-mapped GID only", function()
    assert.equal("10.0.1.11", flows.ipv4("::ffff:10.0.1.11"))
    assert.is_nil(flows.ipv4("fe80::1"))
    assert.is_nil(flows.ipv4(nil))
  end)
end)
