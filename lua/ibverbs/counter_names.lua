--- The port counter names the tools know, by source: a name given to
-- --counter-thresholds or in an --expect file's counters is checked here, so
-- that a misspelt one is an error rather than a threshold nothing reads.
-- Data and lookup only: which counters are judged, and how, is
-- ibverbs.port_counters'.
--
--   local names = require "ibverbs.counter_names"
--   names.known("symbol_error")        --> true
--   names.check("symbol_errors")       --> nil, "unknown counter 'symbol_errors' (nearest: symbol_error, ...)"
--   names.sources.rxe                  --> {"ack_deferred", ...}: one source's names, sorted
--
-- Each list is the Linux kernel's (the file each comes from is named at the
-- list); a provider adds or drops counters by firmware capability and kernel
-- version, so a known name may still be missing on a given port.  A name in
-- both counters/ and a provider's hw_counters/ is also known as "hw_" ..
-- name, the form ibverbs.port_counters.read gives the hw_counters one.
local names = {}

local sources = {
  -- /sys/class/infiniband/<dev>/ports/<n>/counters: the InfiniBand PMA
  -- PortCounters and, where the port has them, PortCountersExtended
  -- (drivers/infiniband/core/sysfs.c: pma_attrs, pma_attrs_ext, pma_attrs_noietf)
  ib = {
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors", "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors",
    "port_rcv_constraint_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors", "VL15_dropped",
    "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets", "port_xmit_wait",
    "unicast_xmit_packets", "unicast_rcv_packets", "multicast_xmit_packets", "multicast_rcv_packets",
  },
  -- soft-RoCE's hw_counters (drivers/infiniband/sw/rxe/rxe_hw_counters.c);
  -- ack_deffered is the spelling of kernels before 4.19 (ack_deferred since)
  rxe = {
    "sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request", "rcvd_rnr_err", "send_rnr_err",
    "rcvd_seq_err", "ack_deferred", "ack_deffered", "retry_exceeded_err", "retry_rnr_exceeded_err",
    "completer_retry_err", "send_err", "link_downed", "rdma_sends", "rdma_recvs",
  },
  -- ConnectX's hw_counters (drivers/infiniband/hw/mlx5/counters.c): the Q
  -- counters below, the congestion counters and the extended PPCNT one
  mlx5 = {
    "rp_cnp_ignored", "rp_cnp_handled", "np_ecn_marked_roce_packets", "np_cnp_sent", "rx_icrc_encapsulated",
  },
  -- AWS EFA's per-port hw_counters (drivers/infiniband/hw/efa/efa_verbs.c:
  -- EFA_DEFINE_PORT_STATS; the device-wide ones are not a port's)
  efa = {
    "tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts", "rx_drops", "send_bytes", "send_wrs", "recv_bytes", "recv_wrs",
    "rdma_read_wrs", "rdma_read_bytes", "rdma_read_wr_err", "rdma_read_resp_bytes", "rdma_write_wrs",
    "rdma_write_bytes", "rdma_write_wr_err", "rdma_write_recv_bytes", "retrans_bytes", "retrans_pkts",
    "retrans_timeout_events", "unresponsive_remote_events", "impaired_remote_conn_events",
  },
}
-- mlx5's Q counters (basic, out of sequence, retransmission, extended
-- errors, RoCE acceleration), and again per vport in switchdev mode ("vport_" .. name)
local MLX5_Q = {
  "rx_write_requests", "rx_read_requests", "rx_atomic_requests", "rx_dct_connect", "out_of_buffer",
  "out_of_sequence", "duplicate_request", "rnr_nak_retry_err", "packet_seq_err", "implied_nak_seq_err",
  "local_ack_timeout_err", "resp_local_length_error", "resp_cqe_error", "req_cqe_error",
  "req_remote_invalid_request", "req_remote_access_errors", "resp_remote_access_errors", "resp_cqe_flush_error",
  "req_cqe_flush_error", "req_transport_retries_exceeded", "req_rnr_retries_exceeded", "roce_adp_retrans",
  "roce_adp_retrans_to", "roce_slow_restart", "roce_slow_restart_cnps", "roce_slow_restart_trans",
}
for _, n in ipairs(MLX5_Q) do
  sources.mlx5[#sources.mlx5 + 1] = n
  sources.mlx5[#sources.mlx5 + 1] = "vport_" .. n
end

local KNOWN = {}
for _, list in pairs(sources) do
  table.sort(list)
  for _, n in ipairs(list) do KNOWN[n] = true end
end
-- a provider's name that counters/ has too: ibverbs.port_counters.read's "hw_" form
local IB = {}
for _, n in ipairs(sources.ib) do IB[n] = true end
for src, list in pairs(sources) do
  if src ~= "ib" then
    for _, n in ipairs(list) do
      if IB[n] then KNOWN["hw_" .. n] = true end
    end
  end
end

--- Every source's names, sorted: ib (counters/), rxe, mlx5, efa (hw_counters/).
names.sources = sources

--- Whether name is a counter name of some source (or the "hw_" form of one in both directories).
function names.known(name)
  return type(name) == "string" and KNOWN[name] == true
end

-- The edit distance (Levenshtein) between a and b, case ignored.
local function distance(a, b)
  a, b = a:lower(), b:lower()
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    local ca = a:byte(i)
    for j = 1, #b do
      local cost = ca == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

--- The known names nearest to name by edit distance, case ignored: up to n (default 3), nearest first.
function names.nearest(name, n)
  local all = {}
  for k in pairs(KNOWN) do all[#all + 1] = { name = k, d = distance(tostring(name), k) } end
  table.sort(all, function(x, y)
    if x.d ~= y.d then return x.d < y.d end
    return x.name < y.name
  end)
  local out = {}
  for i = 1, math.min(n or 3, #all) do out[i] = all[i].name end
  return out
end

--- true when name is known, else nil and "unknown counter 'name' (nearest: a, b, c)".
function names.check(name)
  if names.known(name) then return true end
  return nil, string.format("unknown counter '%s' (nearest: %s)", tostring(name),
    table.concat(names.nearest(name), ", "))
end

return names
