--- The bring-up engine's port counters of fabric_check judged: one port's
-- two readings (before its checks, after all traffic) into its deltas and
-- the findings they give.  Pure judgement: the tool
-- (ibverbs.tools.fabric_check) prints and exits.
--
--   local cc = require "ibverbs.bringup.check.counters"
--   local own = cc.own_packets(22, peers, o.ud_count)            -- the check's own traffic on the port
--   local c, failed = cc.judge(before, after, { lost, lost2 }, limits, { own = own, busy = o.busy, lid = 3, port = 1 })
--   print("counters: " .. cc.text(c)); if c.note then print("counters: " .. c.note) end
--
-- What fails the port (failed: a list of text, one failed check "counters"):
--   a counter that cannot be judged: a judged counter at the top of its width,
--     a counter file that could not be read (ibverbs.port_counters' faults:
--     with the file, the error, and how to reset a saturated counter);
--   a physical or port error counter (symbol errors, link recovery, link
--     downed, receive errors, discards, ...) that rose past its threshold,
--     whatever else ran on the node: their rise is the link's own;
--   a transport counter (retries, sequence errors, RNR NAKs, error
--     completions) that rose past its threshold, judged only over the
--     check's own traffic on a node that runs nothing else: not when the
--     caller says the node is busy (--busy: a job runs there), nor when the
--     port's packet counters rose well past what the check sends (another
--     job's traffic shares the port: its retries are not this node's fault),
--     nor when the port counts no packets; said so in c.note.
-- A data or packet counter at its maximum fails nothing: the port's packet
-- count is then unknown, and the transport counters go unjudged.
local pc = require "ibverbs.port_counters"

local cc = {}

--- Packets other traffic may add beside the check's own before the port
-- counts as busy: a subnet manager's sweeps and a few IPoIB exchanges over
-- the seconds a check takes stay under it, a job's traffic (thousands of
-- packets a second) does not.  The port is busy past 2 x own + BUSY_MARGIN
-- (own is an estimate: retransmissions may double it).
cc.BUSY_MARGIN = 1000

--- The packets a check sends and receives on one port: loopback, the
-- loopback checks' packets (each counted sent and received: fabric_check's
-- tests' packets); peers, the other ranks it exchanges with on this port (0
-- alone): one RC send and its ack each way, and ud_count datagrams each way
-- (twice, for a second round).
function cc.own_packets(loopback, peers, ud_count)
  return loopback + (peers or 0) * (4 + 4 * (ud_count or 0))
end

-- Why the transport counters are not judged (c: the port's deltas and packets), or nil.
local function not_judged(c, how)
  if how.busy then
    return type(how.busy) == "string" and how.busy or "the node is busy (--busy): its port carries other traffic "
      .. "than the check's"
  end
  if not c.packets then
    return "the port's packet count is unknown (" .. (c.packets_why or "no packet counters") .. ")"
  end
  if c.packets > 2 * (how.own or 0) + cc.BUSY_MARGIN then
    return string.format("%d packets beside the check's ~%d (the node carries other traffic)", c.packets,
      how.own or 0)
  end
  return nil
end

-- Why the packet count is unknown: a packet counter without a delta.
local function packets_why(unknown)
  for _, name in ipairs({ "port_xmit_packets", "port_rcv_packets", "sent_pkts", "rcvd_pkts" }) do
    if unknown[name] then return name .. " " .. unknown[name] .. ": rate unknown" end
  end
  return nil
end

--- One port's counters judged: before, after (pc.read's first values; after
-- nil: the second reading failed, lost then carries why), lost (a list of
-- pc.read's second values), limits (name -> threshold), how = {own = the
-- check's packets on this port (own_packets), busy = true or the reason
-- (text) when the node runs a job, lid =, port =}.  Returns the port's counters ({deltas =, unknown =,
-- exceeded =, faults =, packets =, own =, transport = "judged" or "not
-- judged: why", note = the text line when not judged}) and the failed
-- check's details (a list of text, empty when the counters pass).
function cc.judge(before, after, lost, limits, how)
  how = how or {}
  local failed = {}
  if not after then
    local why = tostring(lost and lost[#lost] or "no reading")
    return { deltas = {}, unknown = {}, exceeded = {}, faults = { { name = "counters", why = "unreadable: " .. why } },
      transport = "not judged: no second reading" }, { "counters unreadable after the checks: " .. why }
  end
  local d, unknown = pc.deltas(before, after)
  local faults = pc.faults(before, after, limits, lost, how)
  for _, x in ipairs(faults) do
    unknown[x.name] = nil
    failed[#failed + 1] = x.name .. " " .. x.why
  end
  local c = { deltas = d, unknown = unknown, faults = faults, packets = pc.packets(d), own = how.own,
    packets_why = packets_why(unknown) }
  local why = not_judged(c, how)
  local judged = {}
  for name, limit in pairs(limits) do
    if not why or pc.class(name) ~= "transport" then judged[name] = limit end
  end
  c.exceeded = pc.exceeded(d, judged)
  for _, x in ipairs(c.exceeded) do
    failed[#failed + 1] = string.format("%s +%d (threshold %d)", x.name, x.delta, x.threshold)
  end
  c.transport = why and ("not judged: " .. why) or "judged"
  c.note = why and ("transport not judged: " .. why) or nil
  c.packets_why = nil
  return c, failed
end

--- A port's counters that moved, and those without a delta: "sent_pkts +12,
-- ...; unknown: port_xmit_packets (saturated: rate unknown), x (went backwards)".
function cc.text(c)
  local moved, unknown = {}, {}
  for k, v in pairs(c.deltas) do
    if v > 0 then moved[#moved + 1] = k .. " +" .. v end
  end
  for k, why in pairs(c.unknown) do
    local rate = why == "saturated" and pc.class(k) == "traffic" and ": rate unknown" or ""
    unknown[#unknown + 1] = k .. " (" .. why .. rate .. ")"
  end
  for _, x in ipairs(c.faults or {}) do unknown[#unknown + 1] = x.name .. " (" .. x.why .. ")" end
  table.sort(moved)
  table.sort(unknown)
  return (#moved > 0 and table.concat(moved, ", ") or "none moved") ..
    (#unknown > 0 and ("; unknown: " .. table.concat(unknown, ", ")) or "")
end

return cc
