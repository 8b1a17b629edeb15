-- lua/ibverbs/bringup/matrix/results.lua: the result lines a rank writes after a round and
-- rank 0 reads back into its store, one record per (sample, rail, src, dst)
-- under one key, with its hosts.
local results = require "ibverbs.bringup.matrix.results"

local function name(r) return "rank " .. r end

describe("lua/ibverbs/bringup/matrix/results.lua", function()
  it("writes an end's line and reads it back into the pair's record (both ends of a pair, one record; the latency's"
    .. " percentiles too)", function()
    local rail = { index = 2 }
    local text = results.lines({
      { kind = "out", rail = rail, peer = 3, res = { lat_us = 2.5, write_mbs = 1000, send_mbs = 990, lat_p99_us = 3.25,
        lat_p999_us = 7.5, lat_max_us = 12 } },
      { kind = "in", rail = rail, peer = 4,
        res = { data_ok = false, verified = 77, error = "data check failed: send" } },
      { kind = "out", rail = rail, peer = 5, skip = "rank 5 unreachable\nfor | ever" },
    })
    local store = results.store(2, 6, { "h0", "h1", "h2", "h3", "h4", "h5" })
    assert.equal(2, store:absorb(1, "@7\n" .. text, 0, "first", name))
    local out = store:find(2, 1, 3)
    assert.same({ rail = 2, src = 1, dst = 3, src_host = "h1", dst_host = "h3", round = 7, pass = "first",
      lat_us = 2.5, write_mbs = 1000, send_mbs = 990, lat_p99_us = 3.25, lat_p999_us = 7.5, lat_max_us = 12 }, out)
    local inb = store:find(2, 4, 1)
    assert.equal(false, inb.data_ok)
    assert.equal(77, inb.verified_bytes)
    assert.equal("rank 1: data check failed: send", inb.error)
    assert.equal("rank 5 unreachable for   ever", store:find(2, 1, 5).unmeasured)
    assert.equal(3, #store.list)
    assert.same({}, store:of_rail(1))
  end)

  it("keys each sample of a retest apart (round k: sample floor(k / per_sample) + 1)", function()
    local store = results.store(1, 4, {}, 2)
    local line = results.lines({ { kind = "out", rail = { index = 1 }, peer = 2, res = { lat_us = 1 } } })
    store:absorb(0, "@1\n" .. line .. "\n@3\n" .. line, 0, "retest", name)
    assert.equal(2, #store.list)
    assert.equal(1, store:find(1, 0, 2, 1).sample)
    assert.equal(2, store:find(1, 0, 2, 2).sample)
    assert.are_not.equal(store:key(1, 0, 2, 1), store:key(1, 0, 2, 2))
    assert.is_nil(store:find(1, 2, 0, 1))
  end)

  it("reads an out end's flow lines into its pair's record, and streams them with it", function()
    local rail = { index = 1 }
    local text = results.lines({ { kind = "out", rail = rail, peer = 1, res = { lat_us = 2 },
      flow_figs = { { label = 7, sport = 49159, src = "10.0.0.1", dst = "10.0.0.2", lat_us = 2, samples = 9,
        stalls = 1, hops = {} }, { label = 9, sport = 49161, src = "10.0.0.1", dst = "10.0.0.2", lat_us = 2.2,
        samples = 9, error = "ping-pong: x" } } } })
    local store = results.store(1, 2, { "a", "b" })
    assert.equal(1, store:absorb(0, "@4\n" .. text, 0, "first", name))
    local r = store:find(1, 0, 1)
    assert.equal(2, r.lat_us)
    assert.equal(2, #r.flows)
    assert.same({ a = 0, b = 1, rail = 1, flow = 1, host_a = "a", host_b = "b", src = "10.0.0.1", dst = "10.0.0.2",
      sport = 49159, dport = 4791, flow_label = 7, lat_us = 2, samples = 9, stalls = 1, hops = {} }, r.flows[1])
    assert.equal("ping-pong: x", r.flows[2].failed)
    local j = require("dkjson").decode(results.json_line(r, { { "rxe0:1" } }))
    assert.equal(49161, j.flows[2].sport)
    assert.equal(1, j.flows[1].stalls)
  end)

  it("streams a record as one JSON line naming its rail", function()
    local store = results.store(1, 2, { "a", "b" })
    local r = store:rec(1, 0, 1)
    r.lat_us, r.lat_p99_us, r.pass = 3, 4.5, "first"
    local j = require("dkjson").decode(results.json_line(r, { { "mlx5_0:1" } }))
    assert.same({ pass = "first", rail = "mlx5_0:1", src = 0, dst = 1, src_host = "a", dst_host = "b", lat_us = 3,
      lat_p99_us = 4.5 }, j)
  end)
end)
