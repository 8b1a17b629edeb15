--- Shared helpers for the device specs (run inside tools/rxe-vm on rxe0).
local ibv = require "ibverbs"

local support = {}

support.DEVICE = os.getenv("IBV_SPEC_DEVICE") or "rxe0"
support.PORT = 1
support.GID_INDEX = 1 -- ::ffff:192.0.2.1 (RoCE v2) on rxe0

support.CM_ADDR = "192.0.2.1" -- rxe0's address in the VM

--- Opens the spec device; fails the spec (never skips) when it is missing.
function support.open()
  local ctx, err = ibv.open(support.DEVICE)
  assert(ctx, "the device specs need " .. support.DEVICE .. " (run them with tools/rxe-vm): " .. tostring(err))
  return ctx
end

--- A loopback setup on the spec device: ctx, pd, one cq, and two QPs of
-- qp_type connected to each other (RC/UC via GID index 1; UD ready to send).
-- opts: qp_type ("rc"), cap, access (qp_access_flags), cqe, create_ex (init attr extras
-- for ctx:create_qp_ex, e.g. {send_ops_flags = {...}}), cq_attr (a ctx:create_cq argument
-- instead of cqe, e.g. {cqe = 256, wc_flags = {...}} for a cq_ex).
function support.pair(opts)
  opts = opts or {}
  local env = { ctx = support.open() }
  env.pd = assert(env.ctx:alloc_pd())
  env.cq = assert(env.ctx:create_cq(opts.cq_attr or opts.cqe or 256))
  local qp_type = opts.qp_type or "rc"
  local cap = opts.cap or { max_send_wr = 64, max_recv_wr = 64, max_send_sge = 4, max_recv_sge = 4,
                            max_inline_data = 64 }
  local function make()
    if opts.create_ex then
      local attr = { pd = env.pd, qp_type = qp_type, send_cq = env.cq, recv_cq = env.cq, cap = cap }
      for k, v in pairs(opts.create_ex) do attr[k] = v end
      return assert(env.ctx:create_qp_ex(attr))
    end
    return assert(env.pd:create_qp{ qp_type = qp_type, send_cq = env.cq, recv_cq = env.cq, cap = cap })
  end
  env.a, env.b = make(), make()
  local gid = env.ctx:query_gid(support.PORT, support.GID_INDEX)
  local access = opts.access or { "local_write", "remote_write", "remote_read", "remote_atomic" }
  for _, p in ipairs({ { env.a, env.b }, { env.b, env.a } }) do
    assert(p[1]:connect({ qpn = p[2].qp_num, psn = 0, gid = gid },
      { sgid_index = support.GID_INDEX, qp_access_flags = access }))
  end
  env.gid = gid
  env.wcs = ibv.wc_array(64)
  return env
end

--- Polls env.cq until n completions arrive (2 s at most); returns them as tables.
function support.completions(cq, n, timeout)
  local wcs = ibv.wc_array(math.max(n, 1))
  local got = assert(cq:wait(wcs, n, timeout or 2))
  local out = {}
  for i = 1, got do out[i] = wcs:get(i) end
  return out
end

-- ---------------------------------------------------------------- processes
-- The interop specs run the C tools and the examples as child processes, each
-- under timeout(1) so that nothing can hang.

--- The interpreter running the specs, for starting the examples with it
-- (IBVL_SPEC_LUA names another: a portable host, in tools/bullseye's runs).
support.LUA = os.getenv("IBVL_SPEC_LUA")
  or (rawget(_G, "jit") and "luajit" or _VERSION == "Lua 5.3" and "lua5.3" or "lua5.4")

--- The checkout (the specs run from it), the build the specs use
-- (IBVL_SPEC_BUILD, else build/<interpreter>) and its scripting host.
support.ROOT = io.popen("pwd"):read("*l")
support.BUILD = os.getenv("IBVL_SPEC_BUILD") or ("build/" .. support.LUA)
support.IBVLUA = support.ROOT .. "/" .. support.BUILD .. "/ibvlua"

local function sleep(s) require("socket").sleep(s) end

--- A file's contents, or nil when it cannot be read.
function support.slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end
local slurp = support.slurp

--- Runs a shell command; true when it exits 0 (Lua 5.4 returns true, LuaJIT 0).
function support.sh(cmd)
  local r = os.execute(cmd)
  return r == true or r == 0
end

--- Runs a shell command in the foreground; returns its output (stderr with
-- stdout) and its exit status.
function support.capture(cmd)
  local p = assert(io.popen("(" .. cmd .. ") 2>&1; echo \"rc=$?\""))
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return (out:gsub("rc=%d+%s*$", "")), rc
end

--- The lines a command prints.
function support.lines_of(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

--- Waits up to 10 s for port 1 of the spec device to reach state; returns the state it has.
function support.wait_port(state)
  local ctx = support.open()
  local deadline = ibv.now() + 10
  local p = ctx:query_port(1)
  while p.state ~= state and ibv.now() < deadline do
    sleep(0.1)
    p = ctx:query_port(1)
  end
  ctx:close()
  return p.state
end

--- Starts cmd in the background (stdout and stderr to a file); returns a
-- handle whose :wait([timeout]) gives the output and the exit status.
function support.spawn(cmd)
  local out = os.tmpname()
  os.remove(out .. ".rc")
  local script = string.format("(%s) > %s 2>&1; echo $? > %s.rc.tmp; mv %s.rc.tmp %s.rc", cmd, out, out, out, out)
  os.execute("sh -c '" .. script:gsub("'", "'\\''") .. "' &")
  local h = { out = out }
  function h.wait(_, timeout)
    local deadline = os.time() + (timeout or 90)
    while os.time() <= deadline do
      local rc = slurp(out .. ".rc")
      if rc and rc:match("%d") then
        local text = slurp(out) or ""
        os.remove(out); os.remove(out .. ".rc")
        return text, tonumber(rc:match("%d+"))
      end
      sleep(0.05)
    end
    return slurp(out) or "", nil
  end
  return h
end

--- Runs cmd in the foreground; returns its output and exit status.
function support.run(cmd)
  return support.spawn(cmd):wait()
end

--- Runs a script in a child interpreter (this one: plain, LuaJIT or the ASan
-- build, with this run's environment), so that a crash, a sanitizer report or
-- a hang fails one case instead of ending the run.  The script is prelude,
-- then body, then io.write("child done"); it finds the module and the specs'
-- helpers from the checkout, and runs at most limit seconds (600).  Returns
-- its output (stderr with stdout) ending " exit=N", and N (124: killed at the
-- limit): "child done exit=0" says it ran to its end and exited cleanly.
function support.run_child(prelude, body, limit)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write('package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path\n', prelude, body,
    "\nio.write('child done')\n")
  f:close()
  local p = assert(io.popen("timeout " .. (limit or 600) .. " " .. support.LUA .. " " .. path
    .. " 2>&1; echo \" exit=$?\""))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  return out, tonumber(out:match("exit=(%d+)%s*$"))
end

--- Waits until a TCP port is being listened on (true) or timeout s pass (false).
function support.wait_listen(port, timeout)
  local deadline = os.time() + (timeout or 30)
  while os.time() <= deadline do
    local p = io.popen("ss -Hltn 'sport = :" .. port .. "' 2>/dev/null")
    local s = p:read("a")
    p:close()
    if s:find("LISTEN") then return true end
    sleep(0.05)
  end
  return false
end

--- Waits until an rdma_cm id listens on port (true) or timeout s pass (false),
-- as `rdma resource show cm_id` lists them.
function support.wait_cm_listen(port, timeout)
  local deadline = os.time() + (timeout or 30)
  while os.time() <= deadline do
    local p = io.popen("rdma resource show cm_id 2>/dev/null")
    local s = p:read("a")
    p:close()
    for line in s:gmatch("[^\n]+") do
      if line:find("state LISTEN", 1, true) and line:find(":" .. port .. " ", 1, true) then return true end
    end
    sleep(0.05)
  end
  return false
end

--- A server command and a client command (given the server port as %d where
-- port_fmt is used): starts the server, waits for its port, runs the client.
-- Returns {server = output, server_rc = n, client = output, client_rc = n}.
function support.pair_run(server_cmd, client_cmd, port, limit)
  limit = limit or 60
  local srv = support.spawn(string.format("timeout %d %s", limit, server_cmd))
  local r = {}
  if not support.wait_listen(port, limit) then
    r.server, r.server_rc = srv:wait(limit + 5)
    r.client, r.client_rc = "(not started: the server never listened)", -1
    return r
  end
  r.client, r.client_rc = support.run(string.format("timeout %d %s", limit, client_cmd))
  r.server, r.server_rc = srv:wait(limit + 5)
  return r
end

--- The address lines of a perftest tool's output (or its Lua counterpart's):
-- {local = "qpn:psn", remote = "qpn:psn"}.
function support.perftest_addresses(out)
  local t = {}
  for side, qpn, psn in out:gmatch(" (%a+) address: LID %x+ QPN 0x(%x+) PSN 0x(%x+)") do
    t[side] = tonumber(qpn, 16) .. ":" .. tonumber(psn, 16)
  end
  return t
end

--- A perftest pair (support.pair_run) ran: both sides exited 0, and each
-- one's remote address is the other's local one.
function support.check_perftest_pair(r)
  assert(r.server_rc == 0, "server failed:\n" .. r.server)
  assert(r.client_rc == 0, "client failed:\n" .. r.client)
  local s, c = support.perftest_addresses(r.server), support.perftest_addresses(r.client)
  assert(s["local"] and s["local"] == c.remote, "the client's remote address is not the server's:\n" .. r.server
    .. "\n" .. r.client)
  assert(c["local"] and c["local"] == s.remote, "the server's remote address is not the client's")
end

--- support.pair_run of server(q) and client(q) (command lines for port q),
-- run again up to four times, 20 ports on each time, while a perftest tool's
-- figures show that its own estimate of the CPU clock failed (under load it
-- prints inf, nan or a zero rate): usable(r) says whether the outputs are.
function support.perftest_pair(server, client, p, limit, usable)
  local r
  for try = 0, 4 do
    local q = p + 20 * try
    r = support.pair_run(server(q), client(q), q, limit)
    if usable(r) then break end
  end
  return r
end

--- The command that runs an example under this interpreter.
--- On an rdma_cm channel ch: a listener on rxe0's address at port p and a
-- client id with its address and route resolved towards it (tcp port space).
function support.cm_resolved(ch, p)
  local cm = require "ibverbs.cm"
  local listen = assert(ch:create_id{ps = "tcp"})
  assert(listen:bind_addr(support.CM_ADDR .. ":" .. p))
  assert(listen:listen(4))
  local client = assert(ch:create_id{ps = "tcp"})
  assert(client:resolve_addr(nil, support.CM_ADDR .. ":" .. p, 2000))
  assert(cm.expect(ch, "addr_resolved", 5))
  assert(client:resolve_route(2000))
  assert(cm.expect(ch, "route_resolved", 5))
  return listen, client
end

--- fabric_matrix's text report of a healthy run: npairs pairs measured, no
-- verdict, PASS.  A pair the emulation flagged (a lost frame, a busy host:
-- its figures or its retransmission counters) must have passed its retest
-- (a "transient" line), as the diagnosis intends: it is no fault.
function support.assert_matrix_pass(out, npairs)
  local flagged = tonumber(out:match(npairs .. " pairs, %d+ bytes verified, (%d+) flagged"))
  assert(flagged, "no summary of " .. npairs .. " pairs measured: " .. out)
  assert(not out:find("VERDICT", 1, true), out)
  local _, transient = out:gsub("\ntransient: ", "")
  assert(flagged == 0 or transient > 0, "flagged and not cleared by the retest: " .. out)
  assert(out:find("\nPASS"), out)
end

function support.example(name, args)
  return support.LUA .. " examples/" .. name .. " " .. (args or "")
end

--- A verbs call rxe lacks: nil, "<call>: Operation not supported", EOPNOTSUPP
-- (then the call's further returns, given back).
function support.unsupported(call, ok, msg, errno, ...)
  local check = require "luassert"
  check.is_nil(ok)
  check.equal(call .. ": Operation not supported", msg)
  check.equal(ibv.errno.EOPNOTSUPP, errno)
  return ...
end

--- An RC loopback pair (support.pair) still moves data: the context is left usable.
function support.still_works(env)
  local mr = assert(env.pd:reg_mr(4096, { "local_write", "remote_write", "remote_read", "remote_atomic" }))
  assert(env.b:post_recv{ wr_id = 9, sge = { mr = mr, offset = 100, length = 64 } })
  assert(env.a:post_send{ wr_id = 8, inline = "still works", send_flags = { "signaled" } })
  local check = require "luassert"
  local wcs = support.completions(env.cq, 2)
  for _, wc in ipairs(wcs) do check.equal("success", wc.status) end
  check.equal("still works", mr:read(100, 11))
end

--- s in single quotes for sh.
function support.quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

--- A shell command line run with a time limit (limit seconds, 120 by
-- default) and without LUA_PATH or LUA_CPATH (a Slurm job's ibvlua needs
-- none): its output, exit status and seconds.
function support.run_clean(cmd, limit)
  local socket = require "socket"
  local t0 = socket.gettime()
  local out, rc = support.capture(string.format("env -u LUA_PATH -u LUA_CPATH timeout -k 5 %d sh -c %s",
    limit or 120, support.quote(cmd)))
  return out, rc, socket.gettime() - t0
end

--- busted's it (given as it) with each case's time appended to the file
-- path ("  12.3 s  name", " (failed)" after a failed one).
function support.timed(it, path)
  return function(name, fn)
    it(name, function()
      local socket = require "socket"
      local t0 = socket.gettime()
      local ok, err = pcall(fn)
      local f = io.open(path, "a")
      if f then
        f:write(string.format("%5.1f s  %s%s\n", socket.gettime() - t0, name, ok and "" or " (failed)"))
        f:close()
      end
      if not ok then error(err, 0) end
    end)
  end
end

return support
