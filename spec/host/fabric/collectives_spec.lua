-- ibverbs.fabric's group object and its collectives on the star: a group of
-- one, then real processes on loopback TCP (values exact, 64-bit addresses
-- included), route through rank 0, a rank that never arrives or leaves named
-- in every rank's error within the time limit, a tolerant group going on
-- without it.
local fabric = require "ibverbs.fabric"
local fs = require "fabric_support"

-- A rank's script: joins, runs the collectives, prints one JSON line of what it saw.
local RANK = [[
local fabric = require "ibverbs.fabric"
local dkjson = require "dkjson"
local f, err = fabric.init{ timeout = tonumber(os.getenv("T")), host = "h" .. os.getenv("IBV_FABRIC_RANK"),
  tolerant = os.getenv("TOLERANT") == "1", group = os.getenv("IBV_FABRIC_RANK") == "1" and os.getenv("GROUP1") or nil,
  agree = os.getenv("AGREE" .. os.getenv("IBV_FABRIC_RANK")) or os.getenv("AGREE") }
if not f then print(dkjson.encode{ init_err = err }) os.exit(2) end
local out = { rank = f.rank, hosts = f.hosts }
local big = 0x7fffabcd1234 + f.rank -- an MR address
out.all = assert(f:allgather({ rank = f.rank, addr = big, s = "x\0y", f = 0.1 }))
out.exact = true -- checked here: this script's own dkjson.encode keeps 14 digits under LuaJIT
for i, v in ipairs(out.all) do
  out.exact = out.exact and v.addr == 0x7fffabcd1234 + i - 1
  v.addr = nil
end
local l = {}
for r = 0, f.size - 1 do l[r + 1] = f.rank * 100 + r end
out.a2a = assert(f:alltoall(l))
out.gather = assert(f:gather(f.rank * 2, 1))
out.bcast = assert(f:bcast(f.rank == 0 and "from 0" or "not me"))
out.scatter = assert(f:scatter(f.rank == 0 and { "a", "b", "c" } or nil, 0))
local got, ups = assert(f:route({ { (f.rank + 1) % f.size, "to " .. (f.rank + 1) % f.size } }, f.rank * 10))
out.route, out.ups = got, f.rank == 0 and ups or nil
got, ups = assert(f:route({ { (f.rank + 1) % f.size, "s 1\n" .. f.rank } }, "u\n" .. f.rank)) -- framed by hand
out.route_s, out.ups_s = got, f.rank == 0 and ups or nil
assert(f:barrier())
if tonumber(os.getenv("LEAVE") or -1) == f.rank then print(dkjson.encode{ left = true }) os.exit(0) end
local t0 = os.time()
out.ok, out.err = f:barrier(tonumber(os.getenv("T")))
out.waited = os.time() - t0
out.after = select(2, f:barrier())
out.dead = f:dead_ranks()
print(dkjson.encode(out))
]]

local function ranks(size, which, vars) return fs.ranks(RANK, size, which, vars) end

describe("ibverbs.fabric among processes on loopback TCP", function()
  it("is a group of one without a launcher: collectives return at once", function()
    local f = assert(fabric.init{ getenv = fs.env{}, host = "solo" })
    assert.equal(0, f.rank); assert.equal(1, f.size)
    assert.is_true(f:barrier())
    assert.same({ { a = 1 } }, f:allgather({ a = 1 }))
    assert.same({ "x" }, f:alltoall({ "x" }))
    assert.equal("rank 0 (solo)", f:name(0))
    f:close()
  end)
  it("gives every rank every value: allgather (exact 64-bit numbers), alltoall, gather, bcast, barrier", function()
    local out = ranks(3, { 0, 1, 2 }, "T=10")
    for r = 0, 2 do
      local o = out[r]
      assert.is_table(o, "rank " .. r)
      assert.same({ "h0", "h1", "h2" }, o.hosts)
      assert.is_true(o.exact)
      for i = 1, 3 do
        assert.equal(i - 1, o.all[i].rank)
        assert.equal("x\0y", o.all[i].s)
        assert.equal(0.1, o.all[i].f)
        assert.equal((i - 1) * 100 + r, o.a2a[i])
      end
      if r == 1 then assert.same({ 0, 2, 4 }, o.gather) else assert.is_true(o.gather) end
      assert.equal("from 0", o.bcast)
      assert.equal(({ "a", "b", "c" })[r + 1], o.scatter)
      assert.same({ { (r + 2) % 3, "to " .. r } }, o.route)
      assert.same({ { (r + 2) % 3, "s 1\n" .. (r + 2) % 3 } }, o.route_s)
      assert.is_true(o.ok)
    end
  end)

  it("names a rank that leaves in every other rank's error, within the time limit", function()
    local out = ranks(3, { 0, 1, 2 }, "T=5 LEAVE=2")
    for _, r in ipairs({ 0, 1 }) do
      assert.is_nil(out[r].ok)
      assert.matches("rank 2 %(h2%) left the fabric during barrier", out[r].err)
      assert.is_true(out[r].waited <= 16)
      assert.equal(out[r].err, out[r].after) -- broken for good, same message
    end
  end)

  it("routes point to point through rank 0 (route) and hands rank 0 every rank's value", function()
    local out = ranks(3, { 0, 1, 2 }, "T=10")
    assert.same({ 0, 10, 20 }, out[0].ups)
    assert.same({ "u\n0", "u\n1", "u\n2" }, out[0].ups_s)
  end)

  it("goes on without a rank that leaves when tolerant: every rank names it, the collectives still work", function()
    local out = ranks(3, { 0, 1, 2 }, "T=5 LEAVE=2 TOLERANT=1")
    for _, r in ipairs({ 0, 1 }) do
      assert.is_true(out[r].ok, tostring(out[r].err))
      assert.is_nil(out[r].after)
      assert.equal(1, #out[r].dead)
      assert.equal(2, out[r].dead[1].rank)
      assert.matches("rank 2 %(h2%) left the fabric during barrier", out[r].dead[1].why)
    end
  end)

  it("names a rank that never arrives at the rendezvous, on every rank that did", function()
    local out = ranks(3, { 0, 1 }, "T=3")
    for _, r in ipairs({ 0, 1 }) do
      assert.matches("rank 2 did not arrive at the rendezvous %(port %d+%) within 3 s", out[r].init_err)
    end
    out = ranks(2, { 1 }, "T=2")
    assert.matches("rank 1: rank 0 at 127%.0%.0%.1:%d+ did not answer within 2 s", out[1].init_err)
  end)

  it("refuses ranks that disagree on the group size, and a group size that is not one", function()
    -- (no key: rank 1 cannot be told from a stranger of another run; it is dropped, and named)
    local out = ranks(3, { 0, 1, 2 }, "T=5 IBV_FABRIC_GROUP=2 GROUP1=0")
    assert.matches("rank 1 did not arrive at the rendezvous %(port %d+%) within 5 s; 1 connection dropped: "
      .. "127%.0%.0%.1:%d+: rank 1 %(h1%) says the relay groups have 0 ranks, rank 0 says 2", out[0].init_err)
    -- with a key and a named run, a proven hello is this run's rank: the rendezvous fails at once, saying why
    out = ranks(3, { 0, 1, 2 }, "T=10 IBV_FABRIC_GROUP=2 GROUP1=0 IBV_FABRIC_KEY=k0123456789abcdef IBV_FABRIC_RUN=r1")
    assert.matches("^fabric: rank 1 %(h1%) says the relay groups have 0 ranks, rank 0 says 2 %(IBV_FABRIC_GROUP%)$",
      out[0].init_err)
    local f, err = fabric.init{ rank = 0, size = 4, group = -1, getenv = function() return nil end }
    assert.is_nil(f)
    assert.matches("group must be 0 %(no tree%) or a group size, got %-1", err)
  end)

  it("refuses ranks that run another script version or options, naming every rank that differs", function()
    local out = ranks(4, { 0, 1, 2, 3 }, "T=5 AGREE='check 2 -d rxe0' AGREE2='check 2 -d rxe1' AGREE3='check 1'")
    for r = 0, 3 do
      assert.equal("fabric: the ranks do not run the same script version and options: rank 0 (h0) and rank 1 (h1): "
        .. "'check 2 -d rxe0'; rank 2 (h2): 'check 2 -d rxe1'; rank 3 (h3): 'check 1'", out[r].init_err)
    end
    out = ranks(2, { 0, 1 }, "T=5 AGREE='check 2'")
    assert.is_nil(out[0].init_err)
    assert.is_nil(out[1].init_err)
  end)
end)
