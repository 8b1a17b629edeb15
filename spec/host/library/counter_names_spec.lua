-- ibverbs.counter_names: the counter names the tools know, by source (the
-- kernel's InfiniBand PortCounters in counters/, the rxe, mlx5 and EFA
-- hw_counters), the "hw_" form of a name in both directories, and an unknown
-- name refused with the nearest known ones.
local names = require "ibverbs.counter_names"

describe("ibverbs.counter_names", function()
  it("knows every name of the kernel's counters/ directory (core/sysfs.c), and no more there", function()
    assert.same({ "VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
      "local_link_integrity_errors", "multicast_rcv_packets", "multicast_xmit_packets", "port_rcv_constraint_errors",
      "port_rcv_data", "port_rcv_errors", "port_rcv_packets", "port_rcv_remote_physical_errors",
      "port_rcv_switch_relay_errors", "port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards",
      "port_xmit_packets", "port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets" },
      names.sources.ib)
    for _, n in ipairs(names.sources.ib) do assert.is_true(names.known(n), n) end
  end)

  it("knows the providers' hw_counters: rxe's (and its old spelling), mlx5's with their vport_ forms, EFA's", function()
    assert.same({ "ack_deferred", "ack_deffered", "completer_retry_err", "duplicate_request", "link_downed",
      "out_of_seq_request", "rcvd_pkts", "rcvd_rnr_err", "rcvd_seq_err", "rdma_recvs", "rdma_sends",
      "retry_exceeded_err", "retry_rnr_exceeded_err", "send_err", "send_rnr_err", "sent_pkts" }, names.sources.rxe)
    for _, n in ipairs({ "out_of_sequence", "local_ack_timeout_err", "vport_out_of_sequence", "np_cnp_sent",
      "rx_icrc_encapsulated", "req_rnr_retries_exceeded", "retrans_timeout_events", "rdma_write_recv_bytes" }) do
      assert.is_true(names.known(n), n)
    end
    for src, list in pairs(names.sources) do
      local sorted = {}
      for i, n in ipairs(list) do sorted[i] = n end
      table.sort(sorted)
      assert.same(sorted, list, src)
    end
    assert.is_false(names.known("vport_np_cnp_sent")) -- a congestion counter: no vport_ form
  end)

  it("takes a hw_counters name that counters/ has too in port_counters.read's hw_ form only", function()
    assert.is_true(names.known("hw_link_downed")) -- rxe's link_downed beside counters/' one
    assert.is_false(names.known("hw_sent_pkts"))
    assert.is_false(names.known("hw_symbol_error"))
  end)

  it("takes names as sysfs spells them: case counts, and nothing but a string is a name", function()
    assert.is_true(names.known("VL15_dropped"))
    assert.is_false(names.known("vl15_dropped"))
    assert.is_false(names.known("lifespan")) -- a setting in hw_counters/, not a counter
    assert.is_false(names.known(nil))
    assert.is_false(names.known(1))
  end)

  it("refuses an unknown name with up to three nearest known names, nearest first, case ignored", function()
    assert.is_true(names.check("symbol_error"))
    local ok, err = names.check("symbol_errors")
    assert.is_nil(ok)
    assert.equal("unknown counter 'symbol_errors' (nearest: symbol_error, port_rcv_errors, req_cqe_error)", err)
    assert.equal("unknown counter 'vl15_dropped' (nearest: VL15_dropped, link_downed, rx_drops)",
      select(2, names.check("vl15_dropped")))
    assert.same({ "retry_exceeded_err" }, names.nearest("retry_exceded_err", 1))
    assert.equal(3, #names.nearest("x"))
  end)
end)
