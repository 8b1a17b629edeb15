-- ibverbs.port_counters on a fake /sys/class/infiniband tree: what read takes
-- from counters/ and hw_counters/, deltas that are never made up (saturated,
-- went backwards, missing: unknown, not 0), the thresholds and their option text.
local pc = require "ibverbs.port_counters"

local tree = require("fabric_support").sysfs_tree

local ROOT = tree{
  ["mlx5_0/ports/1/counters/symbol_error"] = "3\n",
  ["mlx5_0/ports/1/counters/link_downed"] = "1\n",
  ["mlx5_0/ports/1/counters/port_xmit_data"] = "18446744073709551615\n",
  ["mlx5_0/ports/1/counters/port_rcv_data"] = "123456789012\n",
  ["mlx5_0/ports/1/counters/unreadable"] = "N/A\n",
  ["mlx5_0/ports/1/hw_counters/out_of_sequence"] = "7\n",
  ["mlx5_0/ports/1/hw_counters/link_downed"] = "2\n",
  ["mlx5_0/ports/1/hw_counters/lifespan"] = "12\n",
  ["rxe0/ports/1/hw_counters/retry_exceeded_err"] = "0\n",
  ["rxe0/ports/1/hw_counters/link_downed"] = "0\n",
}

describe("ibverbs.port_counters.read", function()
  it("reads counters/ and hw_counters/ as name -> integer, a clash as hw_<name>, settings and text left out", function()
    local c = assert(pc.read("mlx5_0", 1, ROOT))
    assert.equal(3, c.symbol_error)
    assert.equal(1, c.link_downed)
    assert.equal(2, c.hw_link_downed)
    assert.equal(7, c.out_of_sequence)
    assert.equal(123456789012, c.port_rcv_data)
    assert.is_true(c.port_xmit_data >= 2 ^ 63) -- past 2^63: kept, as a float, and saturated
    assert.is_nil(c.lifespan)
    assert.is_nil(c.unreadable)
    assert.same({ link_downed = 0, retry_exceeded_err = 0 }, assert(pc.read("rxe0", 1, ROOT)))
  end)

  it("reads the counters it knows by name when neither lua-luv nor LuaFileSystem is there", function()
    local saved = { luv = package.loaded.luv, lfs = package.loaded.lfs }
    local preload = { luv = package.preload.luv, lfs = package.preload.lfs }
    for m in pairs(saved) do
      package.loaded[m] = nil
      package.preload[m] = function() error("not here") end
    end
    local c, err = pc.read("mlx5_0", 1, ROOT)
    for m in pairs(saved) do package.loaded[m], package.preload[m] = saved[m], preload[m] end
    assert(c, err)
    assert.equal(3, c.symbol_error)
    assert.equal(7, c.out_of_sequence)
    assert.is_nil(c.lifespan)
  end)

  it("returns nil and a message naming the port when it has no counters; raises on a bad argument", function()
    local c, err = pc.read("rxe0", 2, ROOT)
    assert.is_nil(c)
    assert.equal("rxe0 port 2: no counters in " .. ROOT .. "/rxe0/ports/2/ (counters, hw_counters)", err)
    assert.has_error(function() pc.read("../etc", 1, ROOT) end,
      "bad argument #1 to 'read' (context or device name expected, got ../etc)")
    assert.has_error(function() pc.read("rxe0", 0, ROOT) end,
      "bad argument #2 to 'read' (port 1 to 255 expected, got 0)")
  end)
end)

describe("ibverbs.port_counters.deltas", function()
  it("gives each counter's rise; saturated, backwards or missing counters are unknown, never 0", function()
    local d, unknown = pc.deltas(
      { sent = 10, rcvd_seq_err = 5, link_downed = 3, symbol_error = 65535, wide = 0xffffffff, gone = 1, same = 4 },
      { sent = 25, rcvd_seq_err = 2, link_downed = 255, symbol_error = 65535, wide = 0xffffffff, new = 1, same = 4 })
    assert.same({ sent = 15, same = 0 }, d)
    assert.same({ rcvd_seq_err = "went backwards", link_downed = "saturated", symbol_error = "saturated",
      wide = "saturated", gone = "missing after", new = "missing before" }, unknown)
  end)

  it("knows each InfiniBand counter's maximum: 4-bit, 8-bit, 16-bit and 32-bit ones, and 2^64-1", function()
    assert.is_true(pc.saturated("local_link_integrity_errors", 15))
    assert.is_false(pc.saturated("local_link_integrity_errors", 14))
    assert.is_true(pc.saturated("link_downed", 255))
    assert.is_true(pc.saturated("port_rcv_errors", 65535))
    assert.is_false(pc.saturated("retry_exceeded_err", 65535))
    assert.is_true(pc.saturated("port_xmit_wait", 4294967295))
    assert.is_true(pc.saturated("port_xmit_data", 18446744073709551615))
  end)
end)

describe("ibverbs.port_counters thresholds", function()
  it("names the error counters that rose past their threshold, with delta and threshold", function()
    local d = { link_downed = 1, symbol_error = 10, port_rcv_errors = 11, sent_pkts = 9999,
      hw_completer_retry_err = 11 }
    assert.same({
      { name = "completer_retry_err", delta = 11, threshold = 10 },
      { name = "link_downed", delta = 1, threshold = 0 },
      { name = "port_rcv_errors", delta = 11, threshold = 10 },
    }, pc.exceeded(d))
    assert.same({}, pc.exceeded(d, { link_downed = 1 }))
  end)

  it("parses name=n,all=n over the defaults, and names an item that is not one", function()
    local t = assert(pc.parse_thresholds("link_downed=2,sent_pkts=0,hw_link_downed=1"))
    assert.equal(2, t.link_downed)
    assert.equal(0, t.sent_pkts)
    assert.equal(1, t.hw_link_downed)
    assert.equal(10, t.symbol_error)
    t = assert(pc.parse_thresholds("all=50"))
    assert.equal(50, t.link_downed)
    assert.equal(50, t.retry_exceeded_err)
    local bad, err = pc.parse_thresholds("link_downed=two")
    assert.is_nil(bad)
    assert.equal("'link_downed=two' is not name=count", err)
  end)

  it("refuses a counter name no source knows, naming the nearest known ones; every default is a known name", function()
    local t, err = pc.parse_thresholds("link_downed=2,symbol_errors=3")
    assert.is_nil(t)
    assert.equal("unknown counter 'symbol_errors' (nearest: symbol_error, port_rcv_errors, req_cqe_error)", err)
    assert.equal("unknown counter 'my_counter' (nearest: rx_bytes, tx_bytes, link_downed)",
      select(2, pc.parse_thresholds("my_counter=0")))
    local names = require "ibverbs.counter_names"
    for name in pairs(pc.THRESHOLDS) do assert.is_true(names.known(name), name) end
  end)
end)
