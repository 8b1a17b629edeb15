-- ibverbs.fabric.wire: the frames made by hand for route (any bytes in the
-- strings, no up, no messages), a relay's bundle and its answer, the one
-- record reader and the one body decoder every frame goes through, the split
-- of a stream into frames, exact 64-bit numbers in JSON.
local wire = require "ibverbs.fabric.wire"

local function body(frame) return frame:sub(9) end

describe("ibverbs.fabric.wire", function()
  it("frames a rank's route by hand and reads it back: any bytes, no up, no messages", function()
    local b = body(wire.route_encode(7, { m = { { 3, "a b\n\0c" }, { 12, "" } }, u = "x y" }))
    assert.same({ op = "route", seq = 7, raw = true, v = { u = "x y", m = { { 3, "a b\n\0c" }, { 12, "" } } } },
      wire.decode(b))
    assert.same({ op = "route", seq = 1, raw = true, v = { m = {} } }, wire.decode(body(wire.route_encode(1,
      { m = {} }))))
    assert.is_nil(wire.decode("R1 5 ab"))
  end)

  it("answers a route by hand when every value is a string, in JSON otherwise", function()
    local b = body(wire.route_reply({ { 2, "p q" }, { 0, "" } }, { { 4, "gone" } }))
    assert.equal("r", b:sub(1, 1))
    assert.same({ v = { { 2, "p q" }, { 0, "" } }, dead = { { 4, "gone" } } }, wire.decode(b))
    assert.same({ v = { { 1, { x = 1 } } } }, wire.decode(body(wire.route_reply({ { 1, { x = 1 } } }))))
    assert.is_nil(wire.decode("r0 1 5 ab"))
  end)

  it("frames a bundle and its answer by hand: any bytes, the sources, the dead", function()
    local parts = { [2] = { "3 7 2 s\0" }, [-1] = { "5 -1 3 sup" } }
    local b = body(wire.bundle_encode(5, { { 4, "gone" } }, { 3, 5 }, parts))
    local msg = wire.decode(b)
    assert.same({ op = "route", seq = 5, v = { dead = { { 4, "gone" } }, srcs_text = "3,5",
      parts = { [2] = "3 7 2 s\0", [-1] = "5 -1 3 sup" } } }, msg)
    assert.same({ 3, 5 }, wire.bundle_srcs(msg.v)) -- read when asked
    assert.is_nil(wire.decode("B1 0 x"))
    assert.same({ blob = "1 2 1 x" }, wire.decode("b0 1 2 1 x"))
    assert.same({ blob = "", dead = { { 1, "x" } } }, wire.decode(body(wire.bundle_reply({ { 1, "x" } }))))
  end)

  it("reads records of one or two keys with one reader, and says when they end short", function()
    local got = {}
    assert.is_true(wire.records("3 2 ab-1 0 ", 1, 1, function(p, k) got[#got + 1] = { k, p } end))
    assert.same({ { 3, "ab" }, { -1, "" } }, got)
    got = {}
    assert.is_true(wire.records("1 2 3 xyz", 1, 2, function(p, a, b) got[#got + 1] = { a, b, p } end))
    assert.same({ { 1, 2, "xyz" } }, got)
    assert.is_nil(wire.records("1 9 ab", 1, 1, function() end))
    assert.is_nil(wire.records("x 1 a", 1, 1, function() end))
    local inbox = assert(wire.inbox_of(wire.item(0, 2, "a") .. wire.item(1, 2, "b") .. wire.item(1, 3, "c")))
    assert.same({ [2] = { { 0, "a" }, { 1, "b" } }, [3] = { { 1, "c" } } }, inbox)
    assert.is_nil(wire.inbox_of("0 2 5 a"))
  end)

  it("splits a stream into frames, keeping a partial one, and stops at a length that is not one", function()
    local a, b = wire.encode({ x = 1 }), wire.route_encode(2, { m = {} })
    local bodies, rest = wire.split(a .. b .. b:sub(1, 5))
    assert.same({ body(a), body(b) }, bodies)
    assert.equal(b:sub(1, 5), rest)
    local _, left, err = wire.split(a .. "zzzzzzzz{}")
    assert.equal("", left)
    assert.matches("^malformed frame", err)
  end)

  it("writes 64-bit numbers with every digit (LuaJIT's tostring keeps 14) and tags tree payloads", function()
    local n = 0x7fffabcd1234
    assert.equal(n, wire.decode(body(wire.encode({ v = n }))).v)
    assert.equal("sabc", wire.tag("abc"))
    assert.same({ k = 2 }, wire.untag(wire.tag({ k = 2 })))
    assert.same({ { 1, "abc" }, { 2, { 5 } } }, wire.untag_list({ { 1, "sabc" }, { 2, wire.tag({ 5 }) } }))
    assert.matches("^malformed frame", select(2, wire.decode("{nope")))
  end)
end)
