-- lua/ibverbs/bringup/check/counters.lua, fabric_check.lua's port counters judged on
-- synthetic readings: what fails the port (a counter that cannot be judged,
-- a physical counter past its threshold whatever else ran, a transport one
-- only over the check's own traffic), what is said instead when the node
-- carries other traffic, and the line the text prints.
local cc = require "ibverbs.bringup.check.counters"
local pc = require "ibverbs.port_counters"

local LIMITS = pc.THRESHOLDS
-- The check alone: 22 packets of loopback on the port.
local OWN = cc.own_packets(22, 0, 10)

describe("lua/ibverbs/bringup/check/counters.lua", function()
  it("estimates the check's own packets: its loopback, and the traffic with each other rank", function()
    assert.equal(22, OWN)
    assert.equal(22 + 3 * (4 + 40), cc.own_packets(22, 3, 10))
  end)

  it("judges the transport counters of a quiet node: a retry past its threshold fails the port", function()
    local c, failed = cc.judge({ sent_pkts = 100, rcvd_pkts = 100, retry_exceeded_err = 0 },
      { sent_pkts = 111, rcvd_pkts = 111, retry_exceeded_err = 2 }, {}, LIMITS, { own = OWN })
    assert.equal("judged", c.transport)
    assert.is_nil(c.note)
    assert.equal(22, c.packets)
    assert.same({ "retry_exceeded_err +2 (threshold 0)" }, failed)
  end)

  it("does not judge them on a node carrying other traffic, and says so; physical counters are judged all the same",
    function()
    local before = { sent_pkts = 0, rcvd_pkts = 0, retry_exceeded_err = 0, link_downed = 1 }
    local after = { sent_pkts = 20615, rcvd_pkts = 20615, retry_exceeded_err = 5, link_downed = 2 }
    local c, failed = cc.judge(before, after, {}, LIMITS, { own = OWN })
    assert.equal("not judged: 41230 packets beside the check's ~22 (the node carries other traffic)", c.transport)
    assert.equal("transport not judged: 41230 packets beside the check's ~22 (the node carries other traffic)", c.note)
    assert.same({ "link_downed +1 (threshold 0)" }, failed)
    -- --busy: the caller says so, whatever the counts
    c, failed = cc.judge({ sent_pkts = 0, rcvd_pkts = 0, completer_retry_err = 0 },
      { sent_pkts = 11, rcvd_pkts = 11, completer_retry_err = 50 }, {}, LIMITS, { own = OWN, busy = true })
    assert.matches("^transport not judged: the node is busy %(%-%-busy%)", c.note)
    assert.same({}, failed)
    -- just past 2 x own + BUSY_MARGIN is busy; at it, judged
    local at = 2 * OWN + cc.BUSY_MARGIN
    c = cc.judge({ sent_pkts = 0, rcvd_pkts = 0 }, { sent_pkts = at, rcvd_pkts = 0 }, {}, LIMITS, { own = OWN })
    assert.equal("judged", c.transport)
    c = cc.judge({ sent_pkts = 0, rcvd_pkts = 0 }, { sent_pkts = at + 1, rcvd_pkts = 0 }, {}, LIMITS, { own = OWN })
    assert.is_truthy(c.note)
  end)

  it("does not judge them when the port's packets are unknown (a packet counter saturated: rate unknown)", function()
    local c, failed = cc.judge({ port_xmit_packets = 4294967295, port_rcv_packets = 5, out_of_sequence = 0 },
      { port_xmit_packets = 4294967295, port_rcv_packets = 9, out_of_sequence = 40 }, {}, LIMITS, { own = OWN })
    assert.equal("transport not judged: the port's packet count is unknown (port_xmit_packets saturated: rate "
      .. "unknown)", c.note)
    assert.same({}, failed) -- a saturated data or packet counter fails nothing
    assert.matches("unknown: port_xmit_packets %(saturated: rate unknown%)", cc.text(c))
  end)

  it("fails the port for a judged counter saturated or a counter file unreadable, each with its reason", function()
    local before = { symbol_error = 65535, sent_pkts = 1, rcvd_pkts = 1 }
    local after = { symbol_error = 65535, sent_pkts = 12, rcvd_pkts = 12 }
    local c, failed = cc.judge(before, after, { nil, { port_rcv_errors = "/s/port_rcv_errors: Input/output error" } },
      LIMITS, { own = OWN, lid = 4, port = 1 })
    assert.same({ "port_rcv_errors unreadable: /s/port_rcv_errors: Input/output error",
      "symbol_error saturated at 65535 (16 bits): its rise cannot be seen; reset it: perfquery -R 4 1" }, failed)
    assert.equal(2, #c.faults)
    assert.equal("rcvd_pkts +11, sent_pkts +11; unknown: port_rcv_errors (unreadable: /s/port_rcv_errors: "
      .. "Input/output error), symbol_error (saturated at 65535 (16 bits): its rise cannot be seen; reset it: "
      .. "perfquery -R 4 1)", cc.text(c))
    -- the second reading failed altogether
    c, failed = cc.judge(before, nil, { "rxe0 port 1: no counters in /sys/x/ (counters, hw_counters)" }, LIMITS, {})
    assert.same({ "counters unreadable after the checks: rxe0 port 1: no counters in /sys/x/ (counters, hw_counters)" },
      failed)
    assert.equal("not judged: no second reading", c.transport)
  end)
end)
