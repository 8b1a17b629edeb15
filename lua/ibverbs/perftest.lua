--- What the perftest counterparts (ibverbs.tools.perftest: send_lat,
-- write_lat, ...) share: the command-line options perftest's tests have in common, the
-- connection (perftest's TCP exchange: ibverbs.exchange), the QP brought up
-- to the peer, and perftest's printed tables.
--
--   local pt = require "ibverbs.perftest"
--   local env = pt.start(o, host)          -- device, port, GID; TCP; versions, MTU
--   local rem = pt.keys(env, me)           -- one key exchange (a perftest hand shake)
--   pt.connect(env, qp, rem)               -- INIT, RTR, RTS towards the peer
--   pt.header(env, "Send Latency Test"); pt.dest(env, "local", me)
--   pt.lat_report(o, samples, 2)           -- perftest's latency table, one way (RTT / 2)
--   pt.close(env, me)                      -- perftest's closing exchange
-- A library module: the whole tests with their command lines (ib_send_lat,
-- ...) are the tools' (ibverbs.tools.perftest).
-- Each step returns nil, msg when it fails (the device, the network, a verbs call).
local ibv = require "ibverbs"
local ex = require "ibverbs.exchange"

local pt = {}

pt.RESULT_LINE = string.rep("-", 87)

--- v, or a failure of the step it is in (msg: the message steps returns).
local function check(v, msg)
  if v == nil then error({ msg = msg }, 0) end
  return v
end
pt.check = check

local function result(ok, ...)
  if ok then return ... end
  local e = ...
  if type(e) == "table" then return nil, tostring(e.msg) end
  error(e, 0) -- a bug, not a failure
end

--- f, whose check failures become nil, msg (any other error is a bug: raised).
local function steps(f)
  return function(...) return result(pcall(f, ...)) end
end
pt.steps = steps

--- The device, its port and GID, the TCP connection and perftest's opening
-- exchange (versions, system data, MTU): a table env.
pt.start = steps(function(o, host)
  local env = { host = host, o = o }
  env.ctx = check(ibv.open(o.ib_dev))
  env.port = check(env.ctx:query_port(o.ib_port))
  env.gid = o.gid_index >= 0 and check(env.ctx:query_gid(o.ib_port, o.gid_index)) or "::"
  if not host then
    print("\n************************************\n* Waiting for client to connect... *")
    print("************************************")
  end
  if host then env.conn = check(ex.connect(host, o.port)) else env.conn = check(ex.listen(o.port)) end
  env.mtu, env.rem_version = ex.perftest_start(env.conn, o.mtu or env.port.active_mtu)
  check(env.mtu, env.rem_version)
  return env
end)

--- The inline size perftest's latency tests use by default on ctx's device:
-- def (236 for sends, 220 for writes) on the devices perftest knows, 0 on
-- the others (soft-RoCE among them).  Known here: Mellanox/NVIDIA's vendor
-- id; perftest's own list also has a few other vendors' parts.
function pt.default_inline(ctx, def)
  local attr = ctx:query_device()
  return attr and attr.vendor_id == 0x02c9 and def or 0
end

--- A key message for this side: lid, qpn, a random psn, rkey and vaddr given.
function pt.me(env, qp, rkey, vaddr)
  return { lid = env.port.lid, out_reads = 1, qpn = qp.qp_num, psn = math.random(0, 0xffffff), rkey = rkey or 0,
           vaddr = vaddr or 0, gid = env.gid }
end

--- One perftest hand shake: the peer's key message.
pt.keys = steps(function(env, me)
  return check(ex.hand_shake(env.conn, me))
end)

--- Brings an RC QP to RTS towards the peer's key message rem: as perftest,
-- the RDMA reads and atomics this side accepts at once are its own out_reads,
-- those it issues at once the peer's.
pt.connect = steps(function(env, qp, rem, me, access)
  local o = env.o
  local global = rem.gid_raw:sub(9, 16) ~= string.rep("\0", 8)
  check(qp:to_init{ port_num = o.ib_port, qp_access_flags = access })
  check(qp:to_rtr{ qpn = rem.qpn, psn = rem.psn, lid = rem.lid, port_num = o.ib_port, path_mtu = env.mtu,
    gid = global and rem.gid_raw or nil, sgid_index = global and o.gid_index or nil,
    max_dest_rd_atomic = me.out_reads or 1 })
  check(qp:to_rts{ psn = me.psn, max_rd_atomic = rem.out_reads or 1 })
  return true
end)

--- perftest's test banner.
function pt.header(env, title)
  print(pt.RESULT_LINE)
  print("                    " .. title .. " (lua-ibverbs)")
  print(string.format(" Device         : %s\tConnection type : RC\tMtu : %d[B]", env.ctx:name(), env.mtu))
  print(pt.RESULT_LINE)
end

--- perftest's address line (and GID line with a GID index).
function pt.dest(env, side, d)
  print(string.format(" %s address: LID %04x QPN 0x%04x PSN 0x%x", side, d.lid, d.qpn, d.psn))
  if env.o.gid_index >= 0 then
    local raw, t = ex.gid_raw(d.gid), {}
    for i = 1, 16 do t[i] = string.format("%02d", raw:byte(i)) end
    print(" GID: " .. table.concat(t, ":"))
  end
end

--- The peer's key message, printed as perftest prints it after its own.
function pt.exchange_dests(env, me)
  pt.dest(env, "local", me)
  local rem, err = pt.keys(env, me)
  if not rem then return nil, err end
  pt.dest(env, "remote", rem)
  print(pt.RESULT_LINE)
  return rem
end

local LAT_TAIL = 2 -- perftest leaves the two largest round trips out of its figures

--- perftest's latency table from samples (round trips in seconds), each
-- divided by factor (2: one way, as ib_send_lat and ib_write_lat; 1: read,
-- atomic); o.histogram (-H) lists the sorted samples first, o.unsorted
-- (-U) as taken.
function pt.lat_report(o, s, factor)
  local us = 1e6 / factor
  local function list(get, n)
    print("#, usec")
    for i = 1, n do print(string.format("%d, %g", i, get(s, i) * us)) end
  end
  if o.unsorted then list(s.get, s:count()) end
  if o.histogram then list(s.sorted, s:count() - LAT_TAIL) end
  local st = s:stats(LAT_TAIL)
  print(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]"
    .. "   99% percentile[usec]   99.9% percentile[usec] ")
  print(string.format(" %-7d %-13d %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f",
    o.size, o.iters, st.min * us, st.max * us, st.median * us, st.average * us, st.stddev * us, st.p99 * us,
    st.p99_9 * us))
  print(pt.RESULT_LINE)
  return st
end

--- A bandwidth report from a kernel's figures (ibv.bw): size, iters, bw_peak
-- and bw_avg (MB/s; the same: the kernel gives the whole run's figure), msg_rate (Mpps).
function pt.bw_figures(o, f)
  local bw = o.size * f.sent / f.seconds / 2 ^ 20
  return { size = o.size, iters = f.sent, bw_peak = bw, bw_avg = bw, msg_rate = f.sent / f.seconds / 1e6 }
end

--- perftest's bandwidth table of a report (pt.bw_figures, or the peer's).
function pt.bw_report(rep)
  print(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]")
  print(string.format(" %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f", rep.size, rep.iters,
    rep.bw_peak, rep.bw_avg, rep.msg_rate))
  print(pt.RESULT_LINE)
end

--- perftest's closing exchange: a hand shake, then "done".
pt.close = steps(function(env, me)
  check(ex.hand_shake(env.conn, me))
  check(env.conn:write("done\0"))
  env.conn:close()
  return true
end)

return pt
