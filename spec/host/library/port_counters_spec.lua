-- ibverbs.port_counters on a fake /sys/class/infiniband tree: what read takes
-- from counters/ and hw_counters/, the files it cannot read (named with the
-- error, never skipped), deltas that are never made up (saturated, went
-- backwards, missing: unknown, not 0), the faults a port's counters are on
-- their own (saturated at each width, unreadable), the classes and packets,
-- the thresholds and their option text.
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
    assert.is_nil(c.unreadable) -- "N/A": the kernel's word for a counter the device has not
    assert.equal("counters", pc.dir(c, "link_downed"))
    assert.equal("hw_counters", pc.dir(c, "hw_link_downed"))
    local rxe, lost = pc.read("rxe0", 1, ROOT)
    assert.same({ link_downed = 0, retry_exceeded_err = 0 }, rxe)
    assert.is_nil(lost) -- every file read
  end)

  -- A port whose counter files fail: garbage, empty, a directory where a file should be (EISDIR on read,
  -- a real read error even as root); read by listing the directory and by name alike.
  local BAD = tree{
    ["rxe0/ports/1/hw_counters/sent_pkts"] = "12\n",
    ["rxe0/ports/1/hw_counters/rcvd_seq_err"] = "a lot\n",
    ["rxe0/ports/1/hw_counters/completer_retry_err"] = "",
    ["rxe0/ports/1/hw_counters/link_downed/x"] = "",
  }
  local function by_name(fn)
    local saved = { luv = package.loaded.luv, lfs = package.loaded.lfs }
    local preload = { luv = package.preload.luv, lfs = package.preload.lfs }
    for m in pairs(saved) do
      package.loaded[m] = nil
      package.preload[m] = function() error("not here") end
    end
    local ok, a, b = pcall(fn)
    for m in pairs(saved) do package.loaded[m], package.preload[m] = saved[m], preload[m] end
    assert(ok, a)
    return a, b
  end

  for _, how in ipairs({ "listed", "by name" }) do
    it("names every counter file it cannot read, with its path and the error (" .. how .. "), and keeps the others",
      function()
      local read = function() return pc.read("rxe0", 1, BAD) end
      local c, lost
      if how == "listed" then c, lost = read() else c, lost = by_name(read) end
      local dir = BAD .. "/rxe0/ports/1/hw_counters/"
      assert.same({ sent_pkts = 12 }, c)
      assert.same({ rcvd_seq_err = dir .. "rcvd_seq_err: not a number: 'a lot'",
        completer_retry_err = dir .. "completer_retry_err: empty",
        link_downed = dir .. "link_downed: Is a directory" }, lost)
    end)
  end

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

describe("ibverbs.port_counters.faults", function()
  local LIMITS = { local_link_integrity_errors = 10, link_downed = 0, symbol_error = 10, port_xmit_wait = 0,
    completer_retry_err = 10, port_xmit_packets = 0 }

  it("fails a judged counter at the top of its width, 4, 8, 16, 32 or 64 bits, with how to reset it", function()
    local at = { local_link_integrity_errors = 15, link_downed = 255, symbol_error = 65535, port_xmit_wait = 4294967295,
      completer_retry_err = 18446744073709551615 }
    local f = pc.faults({ local_link_integrity_errors = 15, link_downed = 254, symbol_error = 1, port_xmit_wait = 0,
      completer_retry_err = 0 }, at, LIMITS, nil, { lid = 3, port = 1 })
    local why = {}
    for _, x in ipairs(f) do why[x.name] = x.why end
    assert.same({
      completer_retry_err = "saturated at 2^64-1 (64 bits): its rise cannot be seen; a provider counter (hw_counters): "
        .. "nothing resets it but reloading the driver",
      link_downed = "saturated at 255 (8 bits): its rise cannot be seen; reset it: perfquery -R 3 1",
      local_link_integrity_errors = "saturated at 15 (4 bits): its rise cannot be seen; reset it: perfquery -R 3 1",
      port_xmit_wait = "saturated at 4294967295 (32 bits): its rise cannot be seen; reset it: perfquery -R 3 1",
      symbol_error = "saturated at 65535 (16 bits): its rise cannot be seen; reset it: perfquery -R 3 1",
    }, why)
    -- one below the top is a counter like any other; a counter no threshold judges is reported, not a fault
    assert.same({}, pc.faults({}, { local_link_integrity_errors = 14, link_downed = 254, symbol_error = 65534 },
      LIMITS))
    assert.same({}, pc.faults({}, { symbol_error = 65535 }, {}))
  end)

  it("takes a provider counter's reset hint from the directory it was read from, and RoCE's from a LID of 0", function()
    local c = assert(pc.read("rxe0", 1, tree{ ["rxe0/ports/1/hw_counters/link_downed"] = "255\n" }))
    assert.same({ { name = "link_downed", why = "saturated at 255 (8 bits): its rise cannot be seen; a provider "
      .. "counter (hw_counters): nothing resets it but reloading the driver" } }, pc.faults(c, c, LIMITS, nil,
      { lid = 5 }))
    assert.equal("reset it: perfquery -R <lid> 1 on InfiniBand; a RoCE port's counters reset only with its driver",
      pc.reset_hint("symbol_error", "counters", 0, 1))
    assert.equal("reset it: perfquery -x -R 9 2", pc.reset_hint("port_xmit_data", nil, 9, 2))
  end)

  it("is no fault for a data or packet counter at its maximum: the rate is unknown, not the port", function()
    local at = { port_xmit_packets = 4294967295, port_rcv_packets = 10, port_xmit_data = 4294967295 }
    assert.same({}, pc.faults(at, at, LIMITS))
    local d = pc.deltas(at, { port_xmit_packets = 4294967295, port_rcv_packets = 30, port_xmit_data = 4294967295 })
    assert.is_nil(pc.packets(d))
  end)

  it("fails every counter file either reading could not read, named once with its path and error", function()
    local f = pc.faults({ a = 1 }, { a = 2 }, LIMITS, { { x = "/p/x: Input/output error" }, nil,
      { x = "/p/x: Invalid argument", y = "/p/y: empty" } })
    assert.same({ { name = "x", why = "unreadable: /p/x: Input/output error" },
      { name = "y", why = "unreadable: /p/y: empty" } }, f)
  end)
end)

describe("ibverbs.port_counters classes and packets", function()
  it("puts every counter with a default threshold in a class, a provider's hw_<name> in its name's", function()
    for name in pairs(pc.THRESHOLDS) do assert.is_string(pc.class(name), name) end
    assert.equal("physical", pc.class("hw_link_downed"))
    assert.equal("physical", pc.class("rx_icrc_encapsulated"))
    assert.equal("port", pc.class("port_xmit_discards"))
    assert.equal("transport", pc.class("completer_retry_err"))
    assert.equal("transport", pc.class("np_cnp_sent"))
    assert.equal("traffic", pc.class("sent_pkts"))
    assert.is_nil(pc.class("ack_deferred"))
  end)

  it("counts a port's packets sent and received: InfiniBand's, else the provider's; unknown without both", function()
    assert.equal(30, pc.packets({ port_xmit_packets = 10, port_rcv_packets = 20, sent_pkts = 1, rcvd_pkts = 1 }))
    assert.equal(7, pc.packets({ sent_pkts = 3, rcvd_pkts = 4 }))
    assert.is_nil(pc.packets({ sent_pkts = 3 }))
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
