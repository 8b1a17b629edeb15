--- The bring-up engine's check across ranks: fabric_check's second half
-- (one rank per host, from the launcher).  After each rank checked its own
-- ports, the fabric as a whole: the same MTU and link layer everywhere, and
-- every pair of ranks reachable both ways over RC and UD.  Rank 0 prints the
-- report; it names the ranks (and hosts) at fault and the pairs they break.
-- It prints and returns each rank's exit status; the tool
-- (ibverbs.tools.fabric_check) exits.
--
--   local wide = require "ibverbs.bringup.check.wide"
--   local status = wide.run(o, results, failed, total, { print_text = f, json = f, agree = text,
--     after_traffic = f })   -- after_traffic(size): this rank's findings after the traffic (counters), a list of text
--   -- 0: this rank's node has no fault, 1: it has one (o.exit_any: any rank has one), 2: no run
local ibv = require "ibverbs"
local exit_status = require "ibverbs.bringup.status"
-- loaded when needed: a single-host run (or a fake ibverbs in the specs) goes without
local has_fabric, fabric = pcall(require, "ibverbs.fabric")

local wide = {}

local ACCESS = { "local_write", "remote_write" }
local QKEY = 0x11111111
local GRH = 40
-- wr_ids: an RC receive is its sender's rank; a send is its destination's plus one of these, a UD
-- receive its buffer slot's
local RC_SEND, UD_SEND, UD_RECV = 1000000, 2000000, 3000000

--- Whether fabric_check runs as one rank of many (launcher or --size).
function wide.wanted(o)
  if o.size then return o.size > 1 end
  if not has_fabric then return false end
  local _, size = fabric.detect()
  return size > 1
end

-- The port this rank runs on: the first active one (idle ports are only
-- listed), else the first one, and its device.
local function run_port(results)
  for _, dev in ipairs(results) do
    for _, p in ipairs(dev.ports or {}) do
      if p.state == "active" and not p.idle then return dev, p end
    end
  end
  local dev = results[1] or {}
  return dev, dev.ports and dev.ports[1] or {}
end

-- This rank's port, as the other ranks need it.
local function summary(results, failed, total)
  local dev, p = run_port(results)
  local s = { device = dev.name, error = dev.error, port = p.port, state = p.state, mtu = p.active_mtu,
    link_layer = p.link_layer, gid_index = p.gid_index, checks = total, failed = failed, failures = {} }
  s.idle = {} -- the ports listed, not needed: "rxe1:1 down (ethernet)"
  for _, d in ipairs(results) do
    for _, port in ipairs(d.ports or {}) do
      if port.idle then
        s.idle[#s.idle + 1] = string.format("%s:%d %s (%s)", d.name, port.port, tostring(port.state),
          tostring(port.link_layer))
      end
    end
    if d.error then s.failures[#s.failures + 1] = d.name .. ": " .. d.error end
    for _, port in ipairs(d.ports or {}) do
      for _, c in ipairs(port.checks) do
        if not c.pass then
          s.failures[#s.failures + 1] = (#results > 1 and (d.name .. " ") or "") .. c.name .. ": " .. tostring(c.detail)
        end
      end
    end
  end
  return s
end

-- Datagrams are told apart by what they carry ("ud <src>-><dst> #<n>"): one UD
-- QP receives from every peer, and a receive takes whichever datagram comes
-- next, so the receive a datagram lands in says nothing about its sender.
local function ud_text(src, dst, n) return string.format("ud %d->%d #%d", src, dst, n) end

local function poll_into(st, wcs, on)
  local n = st.cq:poll(wcs)
  for i = 1, n do on(wcs:wr_id(i), wcs:status(i)) end
  return n
end

-- One UD round: every rank sends `count` datagrams (numbered from first) to each
-- rank in to[], and receives from the ranks in from[] (what they send it in this
-- round) into its own receives (buffer slots from st.slot on: a receive a lost
-- datagram left posted keeps its slot); res[src + 1].ud_got counts the distinct
-- numbers that arrived intact.  The sends go one at a time, each waited for, so
-- a burst never outruns the receives posted for it.
local function ud_round(f, st, remote, to, from, count, first, timeout, res)
  local want = 0
  for _ in pairs(from) do want = want + count end
  for _ = 1, want do
    assert(st.ud:post_recv{ wr_id = UD_RECV + st.slot, sge = { mr = st.udmr, offset = 128 * st.slot,
      length = GRH + 64 } })
    st.slot = st.slot + 1
  end
  local ok, err = f:barrier()
  if not ok then return nil, err end
  local seen, got = {}, 0
  local function on(id, status)
    if id >= UD_RECV then
      if status ~= "success" then return end
      local text = st.udmr:read(128 * (id - UD_RECV) + GRH, 64):match("^[^%z]*")
      local src, dst, n = text:match("^ud (%d+)%->(%d+) #(%d+)$")
      src, dst, n = tonumber(src), tonumber(dst), tonumber(n)
      if src and dst == f.rank and from[src] and n >= first and n < first + count then
        seen[src] = seen[src] or {}
        if not seen[src][n] then
          seen[src][n] = true
          got = got + 1
          res[src + 1].ud_got = res[src + 1].ud_got + 1
        end
      end
    elseif id >= UD_SEND then
      st.pending = st.pending - 1
      if status ~= "success" then res[id - UD_SEND + 1].detail = "UD send: " .. status end
    elseif id >= RC_SEND then
      if status ~= "success" then res[id - RC_SEND + 1].detail = "RC send: " .. status end
    end
  end
  local wcs = ibv.wc_array(64)
  local sendbuf, stuck = 128 * (st.slots or 0), {}
  for n = first, first + count - 1 do
    for r, ah in pairs(to) do
      if not stuck[r] then
        st.udmr:write(sendbuf, ud_text(f.rank, r, n) .. "\0")
        st.pending = 1
        local sok, serr = st.ud:post_send{ wr_id = UD_SEND + r, send_flags = { "signaled" },
          sge = { mr = st.udmr, offset = sendbuf, length = 64 }, ah = ah, remote_qpn = remote[r + 1].ud,
          remote_qkey = QKEY }
        if sok then
          res[r + 1].ud_sent = res[r + 1].ud_sent + 1
          local limit = ibv.now() + timeout
          while st.pending > 0 and ibv.now() < limit do poll_into(st, wcs, on) end
          if st.pending > 0 then
            stuck[r] = true
            res[r + 1].detail = string.format("UD send: no completion within %g s", timeout)
          end
        else
          stuck[r] = true
          res[r + 1].detail = "UD send: " .. tostring(serr)
        end
      end
    end
  end
  local deadline = ibv.now() + timeout
  while got < want and ibv.now() < deadline do poll_into(st, wcs, on) end
  return true
end

-- This rank's resources for the pairs (raises on a failed verbs call): one RC
-- QP per peer, one UD QP for all, their buffers.
local function open_resources(st, f, me, count)
  if me.error or not me.port then error(me.error or "no port", 0) end
  st.ctx = assert(ibv.open(me.device))
  st.pd = assert(st.ctx:alloc_pd())
  st.cq = assert(st.ctx:create_cq(2 * count * f.size + 4 * f.size + 16))
  st.mr = assert(st.pd:reg_mr(4096 * f.size, ACCESS))
  st.slots, st.slot = 2 * count * f.size, 0 -- receive buffers for two rounds, then the send buffer
  st.udmr = assert(st.pd:reg_mr(128 * (st.slots + 1), ACCESS))
  st.gid = assert(st.ctx:query_gid(me.port, me.gid_index))
  st.lid = assert(st.ctx:query_port(me.port)).lid
  local cap = { max_send_wr = f.size + 2, max_recv_wr = f.size + 2, max_send_sge = 1, max_recv_sge = 1 }
  st.ud = assert(st.pd:create_qp{ qp_type = "ud", send_cq = st.cq, recv_cq = st.cq,
    cap = { max_send_wr = 4, max_recv_wr = st.slots + 2, max_send_sge = 1, max_recv_sge = 1 } })
  assert(st.ud:connect({ qpn = 0 }, { port_num = me.port }))
  st.rc = {}
  for r = 0, f.size - 1 do
    if r ~= f.rank then
      st.rc[r + 1] = assert(st.pd:create_qp{ qp_type = "rc", send_cq = st.cq, recv_cq = st.cq, cap = cap })
    end
  end
end

-- Connects to every peer that could take part (RC, one receive posted each at
-- 4096 * peer; UD, an address handle: to[r]); returns how many RC sends to expect.
local function connect_peers(f, st, me, remote, res, to, from)
  local expect = 0
  for r = 0, f.size - 1 do
    local rem = remote[r + 1]
    if r ~= f.rank then
      if rem.err then
        res[r + 1].detail = "peer: " .. rem.err
      else
        local cok, cerr = st.rc[r + 1]:connect({ qpn = rem.rc, psn = 0, lid = rem.lid, gid = rem.gid },
          { port_num = me.port, sgid_index = me.gid_index, qp_access_flags = ACCESS,
            path_mtu = math.min(me.mtu or 1024, rem.mtu or 1024) })
        if not cok then
          res[r + 1].detail = "RC connect: " .. tostring(cerr)
        else
          assert(st.rc[r + 1]:post_recv{ wr_id = r, sge = { mr = st.mr, offset = 4096 * r, length = 64 } })
          expect = expect + 1
        end
        from[r] = true
        to[r] = st.pd:create_ah{ port_num = me.port,
          grh = { dgid = rem.gid, sgid_index = me.gid_index, hop_limit = 1 } }
        if not to[r] then res[r + 1].detail = "UD: no address handle for " .. tostring(rem.gid) end
      end
    end
  end
  return expect
end

-- One RC send to every connected peer, and what the peers sent this rank (res[peer + 1].rc).
local function rc_exchange(f, st, remote, res, expect, timeout)
  for r = 0, f.size - 1 do
    if r ~= f.rank and not remote[r + 1].err and res[r + 1].detail == nil then
      local base = 4096 * f.rank + 2048
      st.mr:write(base, string.format("rc %d->%d", f.rank, r))
      st.rc[r + 1]:post_send{ wr_id = RC_SEND + r, opcode = "send", sge = { mr = st.mr, offset = base, length = 64 } }
    end
  end
  local wcs = ibv.wc_array(math.max(expect, 1))
  local deadline, got = ibv.now() + timeout, 0
  while got < expect and ibv.now() < deadline do
    poll_into(st, wcs, function(id, status)
      if id < RC_SEND then
        got = got + 1
        if status == "success" then
          local text = st.mr:read(4096 * id, 64):match("^[^%z]*")
          if text == string.format("rc %d->%d", id, f.rank) then res[id + 1].rc = true end
        else
          res[id + 1].detail = "RC receive: " .. status
        end
      elseif status ~= "success" then
        res[id % RC_SEND + 1].detail = (id >= UD_SEND and "UD" or "RC") .. " send: " .. status
      end
    end)
  end
end

-- UD: a first round for every pair, then a second for the directions over the
-- loss limit; then each peer learns what this rank sent it (res[r + 1].ud_sent).
local function ud_phase(f, st, o, remote, to, from, res, timeout)
  local count = o.ud_count
  local rok, rerr = ud_round(f, st, remote, to, from, count, 1, timeout, res)
  if not rok then return nil, rerr end
  local mine = {}
  for r = 0, f.size - 1 do mine[r + 1] = res[r + 1] and res[r + 1].ud_got or 0 end
  local got_all, gerr = f:allgather(mine) -- got_all[dst + 1][src + 1]: datagrams src -> dst that arrived
  if not got_all then return nil, gerr end
  local again_to, again_from, any = {}, {}, false
  for src = 0, f.size - 1 do
    for dst = 0, f.size - 1 do
      if src ~= dst and (got_all[dst + 1][src + 1] or 0) < count * (1 - o.ud_loss) then
        any = true
        if src == f.rank and to[dst] then again_to[dst] = to[dst] end
        if dst == f.rank and from[src] then
          again_from[src] = true
          res[src + 1].ud_rounds = 2
        end
      end
    end
  end
  if any then
    rok, rerr = ud_round(f, st, remote, again_to, again_from, count, count + 1, timeout, res)
    if not rok then return nil, rerr end
  end
  local sent = {}
  for r = 0, f.size - 1 do sent[r + 1] = res[r + 1] and res[r + 1].ud_sent or 0 end
  local sent_all, serr = f:allgather(sent) -- sent_all[src + 1][dst + 1]
  if not sent_all then return nil, serr end
  for r = 0, f.size - 1 do
    if r ~= f.rank then res[r + 1].ud_sent = sent_all[r + 1][f.rank + 1] end
  end
  return true
end

-- Nothing left behind for `rdma resource show`: QPs, AHs, MRs, then the CQ, PD and context.
local function close_resources(st, to)
  if st.ud then st.ud:close() end
  for _, qp in pairs(st.rc or {}) do qp:close() end
  for _, ah in pairs(to) do ah:close() end
  for _, k in ipairs({ "udmr", "mr", "cq", "pd", "ctx" }) do if st[k] then st[k]:close() end end
end

-- RC and UD both ways with every other rank: one RC QP per peer (one send each
-- way), one UD QP for all (o.ud_count datagrams each way, a second round for a
-- direction that lost more than o.ud_loss of them).  A rank whose resources
-- failed still takes part in every collective, with nothing to send.
local function pair_traffic(f, me, o, timeout)
  local res = {} -- res[peer + 1] = {rc = bool, ud_sent = n, ud_got = n, detail = text} (what peer sent to me)
  local info, st = {}, {}
  local ok, err = pcall(open_resources, st, f, me, o.ud_count)
  for r = 0, f.size - 1 do
    local qp = ok and st.rc[r + 1]
    info[r + 1] = qp and { rc = qp.qp_num, ud = st.ud.qp_num, gid = st.gid, lid = st.lid, mtu = me.mtu }
      or { err = ok and nil or tostring(err) }
  end
  local remote, ferr = f:alltoall(info)
  if not remote then return nil, ferr end
  local to, from = {}, {} -- UD peers: to[r] = the AH to reach rank r; from[r] = true
  for r = 0, f.size - 1 do
    if r ~= f.rank then res[r + 1] = { rc = false, ud_sent = 0, ud_got = 0, ud_rounds = 1 } end
  end
  local expect = ok and connect_peers(f, st, me, remote, res, to, from)
  local bok, berr = f:barrier()
  if not bok then return nil, berr end
  if ok then rc_exchange(f, st, remote, res, expect, timeout) end
  local uok, uerr = ud_phase(f, st, o, remote, ok and to or {}, ok and from or {}, res, timeout)
  if not uok then return nil, uerr end
  close_resources(st, to)
  if not ok then
    for r = 0, f.size - 1 do
      if r ~= f.rank then res[r + 1].detail = res[r + 1].detail or tostring(err) end
    end
  end
  return res
end

-- Rank 0: the value most ranks have of each key is right; the others are named (blame).
local function consistency(f, all, blame)
  local out = {}
  for _, key in ipairs({ "mtu", "link_layer" }) do
    local count, best = {}, nil
    for r = 0, f.size - 1 do
      local v = tostring(all[r + 1][key])
      count[v] = (count[v] or 0) + 1
      if not best or count[v] > count[best] then best = v end
    end
    local odd = {}
    for r = 0, f.size - 1 do
      if tostring(all[r + 1][key]) ~= best then
        odd[#odd + 1] = f:name(r) .. " has " .. tostring(all[r + 1][key])
        blame(r, key .. " " .. tostring(all[r + 1][key]) .. " (the others: " .. best .. ")")
      end
    end
    out[#out + 1] = { name = key, value = best, pass = #odd == 0, detail = #odd > 0 and table.concat(odd, ", ") or nil }
  end
  return out
end

-- Rank 0: one pair a kind: RC both ways must arrive; UD both ways with at most
-- o.ud_loss of the datagrams lost (matrix[dst + 1][src + 1]: what dst saw of src).
local function pair_results(f, matrix, o)
  local out = {}
  local function ud_way(src, dst) -- datagrams src -> dst, as dst counted them
    local x = matrix[dst + 1][src + 1] or {}
    return { from = src, to = dst, sent = x.ud_sent or 0, got = x.ud_got or 0, rounds = x.ud_rounds or 1 }
  end
  local function ud_words(w)
    return string.format("%s -> %s: %d of %d datagrams arrived (%.0f%% lost, limit %.0f%%)", f:name(w.from),
      f:name(w.to), w.got, w.sent, w.sent > 0 and 100 * (w.sent - w.got) / w.sent or 100, 100 * o.ud_loss)
  end
  for a = 0, f.size - 1 do
    for b = a + 1, f.size - 1 do
      local ab, ba = matrix[a + 1][b + 1] or {}, matrix[b + 1][a + 1] or {}
      for _, kind in ipairs({ "rc", "ud" }) do
        local pass, d, ways = true, {}, nil
        if kind == "rc" then
          pass = ab.rc == true and ba.rc == true
          if ba.rc ~= true then d[#d + 1] = string.format("%s -> %s lost", f:name(a), f:name(b)) end
          if ab.rc ~= true then d[#d + 1] = string.format("%s -> %s lost", f:name(b), f:name(a)) end
        else
          ways = { ud_way(a, b), ud_way(b, a) }
          for _, w in ipairs(ways) do
            if not (w.sent > 0 and w.got >= w.sent * (1 - o.ud_loss)) then
              pass = false
              d[#d + 1] = ud_words(w)
            elseif w.got < w.sent then
              d[#d + 1] = "lossy but working: " .. ud_words(w)
            end
          end
        end
        if not pass then
          if ab.detail then d[#d + 1] = f:name(a) .. ": " .. ab.detail end
          if ba.detail then d[#d + 1] = f:name(b) .. ": " .. ba.detail end
        end
        out[#out + 1] = { a = a, b = b, kind = kind, pass = pass, ud = ways,
          detail = #d > 0 and table.concat(d, "; ") or nil }
      end
    end
  end
  return out
end

-- Rank 0: the report from every rank's summary (all) and pair results (matrix).
local function build_report(f, all, matrix, o, later)
  local what, strangers = f:door()
  local report = { ranks = {}, faults = {}, launcher = f.launcher, wireup = f.wireup, rendezvous = what,
    strangers = strangers }
  local bad = {} -- rank -> reasons
  local function blame(r, why)
    bad[r] = bad[r] or {}
    table.insert(bad[r], why)
  end
  for r = 0, f.size - 1 do
    local s = all[r + 1]
    s.rank, s.host = r, f.hosts[r + 1]
    report.ranks[r + 1] = s
    for _, x in ipairs(s.failures) do blame(r, x) end
    for _, x in ipairs(later[r + 1] or {}) do blame(r, x) end
  end
  report.consistency = consistency(f, all, blame)
  report.pairs = pair_results(f, matrix, o)
  -- the faults: ranks with failures of their own, and the broken pairs of each
  local fails = #report.pairs
  for _, p in ipairs(report.pairs) do if p.pass then fails = fails - 1 end end
  for _, c in ipairs(report.consistency) do if not c.pass then fails = fails + 1 end end
  for r = 0, f.size - 1 do
    if bad[r] then
      local broken = {}
      for _, p in ipairs(report.pairs) do
        if not p.pass and (p.a == r or p.b == r) then
          broken[#broken + 1] = string.format("%s<->%s %s", f.hosts[p.a + 1], f.hosts[p.b + 1], p.kind:upper())
        end
      end
      report.faults[#report.faults + 1] = { rank = r, host = f.hosts[r + 1], reasons = bad[r], pairs = broken }
    end
  end
  report.pass = fails == 0 and #report.faults == 0
  -- the nodes at fault: their own faults, and both ends of a broken pair neither of whose ends has one
  local at_fault = {}
  for r in pairs(bad) do at_fault[r] = true end
  for _, p in ipairs(report.pairs) do
    if not p.pass and not bad[p.a] and not bad[p.b] then at_fault[p.a], at_fault[p.b] = true, true end
  end
  report.bad_ranks = setmetatable({}, { __jsontype = "array" })
  for r = 0, f.size - 1 do
    if at_fault[r] then report.bad_ranks[#report.bad_ranks + 1] = r end
  end
  return report
end

-- Rank 0: the report as text.
local function print_report(f, report, o)
  print(string.format("fabric: %d ranks (%s launcher); wire-up: %s", f.size, f.launcher, f.wireup))
  print("rendezvous: " .. report.rendezvous)
  for _, s in ipairs(report.strangers) do print("stranger dropped: " .. s) end
  for _, s in ipairs(report.ranks) do
    print(string.format("  %-22s %s port %s: %s, MTU %s, link %s: %d checks, %d failed", f:name(s.rank),
      tostring(s.device), tostring(s.port), tostring(s.state), tostring(s.mtu), tostring(s.link_layer),
      s.checks, s.failed))
    if s.idle and #s.idle > 0 then print("  " .. string.rep(" ", 22) .. " idle: " .. table.concat(s.idle, ", ")) end
  end
  for _, c in ipairs(report.consistency) do
    print(string.format("  consistent %-10s %s %s%s", c.name, c.pass and "PASS" or "FAIL", tostring(c.value),
      c.detail and ("  " .. c.detail) or ""))
  end
  local ud_sent, ud_got = 0, 0
  for _, p in ipairs(report.pairs) do
    local counts = ""
    if p.ud then
      counts = string.format("  %d/%d, %d/%d", p.ud[1].got, p.ud[1].sent, p.ud[2].got, p.ud[2].sent)
      for _, w in ipairs(p.ud) do ud_sent, ud_got = ud_sent + w.sent, ud_got + w.got end
    end
    print(string.format("  %s %-22s <-> %-22s %s%s%s", p.kind:upper(), f:name(p.a), f:name(p.b),
      p.pass and "PASS" or "FAIL", counts, p.detail and ("  " .. p.detail) or ""))
  end
  print(string.format("  UD: %d of %d datagrams arrived; a direction passes with at most %.0f%% of its %d lost" ..
    " (a second round of %d when the first lost more)", ud_got, ud_sent, 100 * o.ud_loss, o.ud_count,
    o.ud_count))
  for _, x in ipairs(report.faults) do
    print(string.format("FAULT %s: %s; pairs: %s", f:name(x.rank), table.concat(x.reasons, "; "),
      #x.pairs > 0 and table.concat(x.pairs, ", ") or "none"))
  end
  local names = {}
  for i, r in ipairs(report.bad_ranks) do names[i] = f:name(r) end
  print(string.format("fabric: %d pairs x RC, UD; %s%s", math.floor(#report.pairs / 2),
    report.pass and "PASS" or "FAIL",
    #names > 0 and ("; nodes at fault (exit 1): " .. table.concat(names, ", ")) or ""))
end

--- A rank that must not run (--expect names its host in no host list): it
-- meets the others at the rendezvous with agree, which differs from theirs,
-- so that every rank stops there (exit 2) rather than waiting for it; then
-- it leaves.  Its caller exits 2.
function wide.refuse(o, agree)
  if not has_fabric then return end
  local f = fabric.init{ rank = o.rank, size = o.size, root = o.root, port = o.fabric_port,
    timeout = o.fabric_timeout, agree = agree }
  if f then f:close() end
end

--- The fabric-wide part (hooks: print_text(results) and json(value), rank
-- 0's output; agree, the script's version and options, which every rank must
-- give alike; after_traffic(size), this rank's findings once the traffic
-- with the size - 1 other ranks is over, a list of text); returns this rank's exit status: 0 when its node
-- has no fault, 1 when it has one (o.exit_any: when any node has one), 2
-- when the run could not be made (no rendezvous, an exchange failed).
function wide.run(o, results, failed, total, hooks)
  if not has_fabric then error(fabric, 0) end
  local f, err = fabric.init{ rank = o.rank, size = o.size, root = o.root, port = o.fabric_port,
    timeout = o.fabric_timeout, agree = hooks.agree }
  if not f then
    print("fabric: FAIL " .. err)
    return 2
  end
  local me = summary(results, failed, total)
  local all, ferr = f:allgather(me)
  local traffic
  if all then traffic, ferr = pair_traffic(f, me, o, math.max(o.timeout, 5)) end
  local matrix = traffic and f:gather(traffic, 0)
  local mine = matrix and hooks.after_traffic and hooks.after_traffic(f.size) or {}
  local later = matrix and f:gather(setmetatable(mine, { __jsontype = "array" }), 0)
  if not later then
    print(string.format("fabric (rank %d): FAIL %s", f.rank, tostring(ferr)))
    f:close()
    return 2
  end
  local verdict
  if f.rank == 0 then
    local report = build_report(f, all, matrix, o, later)
    if o.json then
      print(hooks.json({ fabric = report, size = f.size, pass = report.pass, devices = results }))
    else
      hooks.print_text(results)
      print_report(f, report, o)
    end
    verdict = { bad = report.bad_ranks, any = not report.pass }
  else
    print(string.format("%s: %d local checks, %d failed; the report is rank 0's", f:name(f.rank), total, failed))
  end
  local status = exit_status.own(f.rank, o.exit_any, f:bcast(verdict))
  if status == 0 and (failed > 0 or #mine > 0) and not o.exit_any then status = 1 end
  f:close()
  return status
end

return wide
