--- fabric_check.lua across ranks (one per host, from the launcher): after each
-- rank checked its own ports, the fabric as a whole: the same MTU and link
-- layer everywhere, and every pair of ranks reachable both ways over RC and
-- UD.  Rank 0 prints the report; it names the ranks (and hosts) at fault and
-- the pairs they break.  Example support: it prints, the caller exits.
--
--   local wide = require "fabric_wide"
--   local status = wide.run(o, results, failed, total, print_text, json)  -- 0 or 1, the same on every rank
local ibv = require "ibverbs"
-- loaded when needed: a single-host run (or a fake ibverbs in the specs) goes without
local has_fabric, fabric = pcall(require, "ibverbs.fabric")

local wide = {}

local ACCESS = { "local_write", "remote_write" }
local QKEY = 0x11111111
local GRH = 40

--- Whether fabric_check runs as one rank of many (launcher or --size).
function wide.wanted(o)
  if o.size then return o.size > 1 end
  if not has_fabric then return false end
  local _, size = fabric.detect()
  return size > 1
end

-- This rank's port, as the other ranks need it.
local function summary(results, failed, total)
  local dev = results[1] or {}
  local p = dev.ports and dev.ports[1] or {}
  local s = { device = dev.name, error = dev.error, port = p.port, state = p.state, mtu = p.active_mtu,
    link_layer = p.link_layer, gid_index = p.gid_index, checks = total, failed = failed, failures = {} }
  if dev.error then s.failures[#s.failures + 1] = dev.name .. ": " .. dev.error end
  for _, port in ipairs(dev.ports or {}) do
    for _, c in ipairs(port.checks) do
      if not c.pass then s.failures[#s.failures + 1] = c.name .. ": " .. tostring(c.detail) end
    end
  end
  return s
end

-- RC and UD both ways with every other rank: one RC QP per peer, one UD QP for all.
local function pair_traffic(f, me, timeout)
  local res = {} -- res[peer + 1] = {rc = bool, ud = bool, detail = text}
  local info, st = {}, {}
  local ok, err = pcall(function()
    if me.error or not me.port then error(me.error or "no port", 0) end
    st.ctx = assert(ibv.open(me.device))
    st.pd = assert(st.ctx:alloc_pd())
    st.cq = assert(st.ctx:create_cq(8 * f.size + 16))
    st.mr = assert(st.pd:reg_mr(4096 * f.size, ACCESS))
    st.gid = assert(st.ctx:query_gid(me.port, me.gid_index))
    st.lid = assert(st.ctx:query_port(me.port)).lid
    local cap = { max_send_wr = f.size + 2, max_recv_wr = f.size + 2, max_send_sge = 1, max_recv_sge = 1 }
    st.ud = assert(st.pd:create_qp{ qp_type = "ud", send_cq = st.cq, recv_cq = st.cq, cap = cap })
    assert(st.ud:connect({ qpn = 0 }, { port_num = me.port }))
    st.rc = {}
    for r = 0, f.size - 1 do
      if r ~= f.rank then
        st.rc[r + 1] = assert(st.pd:create_qp{ qp_type = "rc", send_cq = st.cq, recv_cq = st.cq, cap = cap })
      end
    end
  end)
  for r = 0, f.size - 1 do
    local qp = ok and st.rc[r + 1]
    info[r + 1] = qp and { rc = qp.qp_num, ud = st.ud.qp_num, gid = st.gid, lid = st.lid, mtu = me.mtu }
      or { err = ok and nil or tostring(err) }
  end
  local remote, ferr = f:alltoall(info)
  if not remote then return nil, ferr end
  local expect = 0
  if ok then
    -- connect, post the receives (RC one per peer at 4096 * peer, UD one per peer after)
    for r = 0, f.size - 1 do
      local rem = remote[r + 1]
      if r ~= f.rank then
        res[r + 1] = { rc = false, ud = false }
        if rem.err then
          res[r + 1].detail = "peer: " .. rem.err
        else
          local cok, cerr = st.rc[r + 1]:connect({ qpn = rem.rc, psn = 0, lid = rem.lid, gid = rem.gid },
            { port_num = me.port, sgid_index = me.gid_index, qp_access_flags = ACCESS,
              path_mtu = math.min(me.mtu or 1024, rem.mtu or 1024) })
          if not cok then
            res[r + 1].detail = "RC connect: " .. tostring(cerr)
          else
            assert(st.rc[r + 1]:post_recv{ wr_id = 2 * r, sge = { mr = st.mr, offset = 4096 * r, length = 64 } })
            expect = expect + 1
          end
          assert(st.ud:post_recv{ wr_id = 2 * r + 1,
            sge = { mr = st.mr, offset = 4096 * r + 1024, length = GRH + 64 } })
          expect = expect + 1
        end
      end
    end
  end
  local bok, berr = f:barrier()
  if not bok then return nil, berr end
  if ok then
    local msg = function(kind, to) return string.format("%s %d->%d", kind, f.rank, to) end
    for r = 0, f.size - 1 do
      local rem = remote[r + 1]
      if r ~= f.rank and not rem.err then
        local base = 4096 * f.rank + 2048
        if res[r + 1].detail == nil then
          st.mr:write(base, msg("rc", r))
          st.rc[r + 1]:post_send{ wr_id = 1000000 + r, opcode = "send",
            sge = { mr = st.mr, offset = base, length = 64 } }
        end
        local ah = st.pd:create_ah{ port_num = me.port,
          grh = { dgid = rem.gid, sgid_index = me.gid_index, hop_limit = 1 } }
        if ah then
          st.mr:write(base + 512, msg("ud", r))
          st.ud:post_send{ wr_id = 2000000 + r, sge = { mr = st.mr, offset = base + 512, length = 64 },
            ah = ah, remote_qpn = rem.ud, remote_qkey = QKEY }
        end
      end
    end
    -- receives only (sends are unsignaled): wait for what the peers send us
    local wcs = ibv.wc_array(math.max(expect, 1))
    local deadline, got = ibv.now() + timeout, 0
    while got < expect and ibv.now() < deadline do
      local n = st.cq:poll(wcs)
      for i = 1, n do
        local id, status = wcs:wr_id(i), wcs:status(i)
        if id < 1000000 then
          got = got + 1
          local r, ud = math.floor(id / 2), id % 2 == 1
          if status == "success" then
            local text = st.mr:read(4096 * r + (ud and 1024 + GRH or 0), 64):match("^[^%z]*")
            if text == string.format("%s %d->%d", ud and "ud" or "rc", r, f.rank) then
              res[r + 1][ud and "ud" or "rc"] = true
            end
          else
            res[r + 1].detail = (ud and "UD" or "RC") .. " receive: " .. status
          end
        elseif status ~= "success" then
          local r = id % 1000000
          res[r + 1].detail = (id >= 2000000 and "UD" or "RC") .. " send: " .. status
        end
      end
    end
  end
  for r = 0, f.size - 1 do
    if r ~= f.rank and not res[r + 1] then res[r + 1] = { rc = false, ud = false, detail = tostring(err) } end
  end
  return res
end

--- The fabric-wide part; returns the exit status (the same on every rank).
function wide.run(o, results, failed, total, print_text, json)
  if not has_fabric then error(fabric, 0) end
  local f, err = fabric.init{ rank = o.rank, size = o.size, root = o.root, port = o.fabric_port,
    timeout = o.fabric_timeout }
  if not f then
    print("fabric: FAIL " .. err)
    return 1
  end
  local me = summary(results, failed, total)
  local all, ferr = f:allgather(me)
  local traffic
  if all then traffic, ferr = pair_traffic(f, me, math.max(o.timeout, 5)) end
  local matrix = traffic and f:gather(traffic, 0)
  if not matrix then
    print(string.format("fabric (rank %d): FAIL %s", f.rank, tostring(ferr)))
    f:close()
    return 1
  end
  local status = 0
  if f.rank == 0 then
    local report = { ranks = {}, consistency = {}, pairs = {}, faults = {} }
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
    end
    -- consistency: the value most ranks have is right; the others are named
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
      report.consistency[#report.consistency + 1] = { name = key, value = best, pass = #odd == 0,
        detail = #odd > 0 and table.concat(odd, ", ") or nil }
    end
    -- pairs: both directions must arrive
    for a = 0, f.size - 1 do
      for b = a + 1, f.size - 1 do
        local ab, ba = matrix[a + 1][b + 1] or {}, matrix[b + 1][a + 1] or {}
        for _, kind in ipairs({ "rc", "ud" }) do
          local pass = ab[kind] == true and ba[kind] == true
          local detail
          if not pass then
            local d = {}
            if ba[kind] ~= true then d[#d + 1] = string.format("%s -> %s lost", f:name(a), f:name(b)) end
            if ab[kind] ~= true then d[#d + 1] = string.format("%s -> %s lost", f:name(b), f:name(a)) end
            if ab.detail then d[#d + 1] = f:name(a) .. ": " .. ab.detail end
            if ba.detail then d[#d + 1] = f:name(b) .. ": " .. ba.detail end
            detail = table.concat(d, "; ")
          end
          report.pairs[#report.pairs + 1] = { a = a, b = b, kind = kind, pass = pass, detail = detail }
        end
      end
    end
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
    if o.json then
      print(json({ fabric = report, size = f.size, pass = report.pass, devices = results }))
    else
      print_text(results)
      print(string.format("fabric: %d ranks (%s launcher)", f.size, f.launcher))
      for _, s in ipairs(report.ranks) do
        print(string.format("  %-22s %s port %s: %s, MTU %s, link %s: %d checks, %d failed", f:name(s.rank),
          tostring(s.device), tostring(s.port), tostring(s.state), tostring(s.mtu), tostring(s.link_layer),
          s.checks, s.failed))
      end
      for _, c in ipairs(report.consistency) do
        print(string.format("  consistent %-10s %s %s%s", c.name, c.pass and "PASS" or "FAIL", tostring(c.value),
          c.detail and ("  " .. c.detail) or ""))
      end
      for _, p in ipairs(report.pairs) do
        print(string.format("  %s %-22s <-> %-22s %s%s", p.kind:upper(), f:name(p.a), f:name(p.b),
          p.pass and "PASS" or "FAIL", p.detail and ("  " .. p.detail) or ""))
      end
      for _, x in ipairs(report.faults) do
        print(string.format("FAULT %s: %s; pairs: %s", f:name(x.rank), table.concat(x.reasons, "; "),
          #x.pairs > 0 and table.concat(x.pairs, ", ") or "none"))
      end
      print(string.format("fabric: %d pairs x RC, UD; %s", math.floor(#report.pairs / 2),
        report.pass and "PASS" or "FAIL"))
    end
    status = report.pass and 0 or 1
  else
    print(string.format("%s: %d local checks, %d failed; the report is rank 0's", f:name(f.rank), total, failed))
  end
  status = f:bcast(status) or 1
  f:close()
  return status
end

return wide
