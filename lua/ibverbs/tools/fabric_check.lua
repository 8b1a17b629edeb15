--- fabric_check (`ibvlua fabric_check`, examples/fabric_check.lua): a bring-up
-- checker.  For every device and port: state, MTU and GIDs, then loopback
-- traffic on the port: RC send/recv, RDMA write, RDMA read, atomics, UD send; each PASS or FAIL with its time.
--   ibvlua fabric_check [-d rxe0] [-i 1] [-g 1] [--json]
-- Under a launcher (srun, mpirun, tools/rxe-vm --nodes) or with --rank/--size,
-- every rank checks its own ports, then the fabric as a whole: the same MTU and
-- link layer everywhere, every pair of ranks reachable over RC (one send each
-- way) and UD (--ud-count datagrams each way, at most --ud-loss of them lost,
-- counted in the report); rank 0 reports and names the ranks (hosts) at fault
-- and their pairs.
-- A port that is not active is listed (state, link layer) and fails the node
-- only when the run needs it: named with -d or -i, or no active port left
-- ("port is down; no active port on this node").  A node where nothing was
-- checked fails ("nothing was checked: ..."): 0 checks are never a pass.
-- --expect FILE (docs/expect.md): exactly the ports it names for this host
-- (within -d and -i) must be active, with its values; a host that no host
-- list of the file names (in full or by its short form) is an error, exit 2,
-- as is a file that cannot be read or has a wrong key, value or counter name
-- (as in --counter-thresholds).  Exit 2 comes before any scontrol call:
-- --drain drains nothing (the operator's error must not drain a cluster) and
-- --undrain-ok resumes nothing (a host the file does not name never passes).
-- Exit status, per rank: 0 when this node has no fault, 1 when it has one (a
-- local check failed, or it is named in rank 0's report: its own fault, or an
-- end of a broken pair whose other end has no fault of its own), 2 when the
-- run could not be made (bad options, no rendezvous, an exchange failed);
-- --exit-any: 1 on every rank when any rank has a fault.
-- A port whose link went down during the run (its link_downed counter rose,
-- its state changed, or the device sent a port event) fails with a check
-- "flapped" naming the node, device, port and what was seen.
-- Slurm: --drain drains this node when it is at fault, with a reason
-- "ibverbs fabric_check [<the ports it checked>]: ..." (" wide" after the
-- ports when only the run across nodes found the fault); --undrain-ok
-- resumes it when it passes, fabric_check drained it, and this run checked
-- every port of that scope again (a wide one: across nodes, not
-- --slurm-health).  A node DOWN, FAIL, MAINT, ... or drained by anyone else
-- (fabric_matrix included) is left alone, and said so.
-- --slurm-health checks this node alone, for Slurm's HealthCheckProgram.
-- Counters: the physical ones (symbol_error, link_downed, ...) are judged
-- always; the transport ones (retries, sequence errors) only over the
-- check's own traffic: not with --busy, not when Slurm says the node runs
-- work (--slurm-health with --drain or --undrain-ok asks it), not when the
-- port carried far more packets than the check sent.  A saturated or
-- unreadable counter fails its port (lua/ibverbs/bringup/check/counters.lua).
local ibv = require "ibverbs"
local cli = require "ibverbs.tools.cli"
local dkjson = require "dkjson"
local rails = require "ibverbs.bringup.rails"
local expectations = require "ibverbs.bringup.expect"
local pc = require "ibverbs.port_counters"
local flaps = require "ibverbs.bringup.flaps"
local cc = require "ibverbs.bringup.check.counters"
local loopback = require "ibverbs.bringup.check.loopback"


local fabric_check = {}

local VERSION = "fabric_check.lua 2" -- ranks of one run must agree on it (and on their options)

-- ------------------------------------------------------------------ options

-- The command line (usage errors: exit 2).
local function options(arg)
  return cli.run(arg, {
    name = "fabric_check.lua", usage = { "            check every device and port" }, error_status = 2,
    cli.ib_dev{ help = "check only device <dev>" },
    cli.ib_port{ default = false, help = "check only port <port>" },
    cli.gid_idx{ default = false, min = 0,
                 help = "GID index for the traffic (default: the first RoCE v2 IPv4 GID, else 0)" },
    { "t", "timeout", arg = "seconds", type = "number", default = 2, help = "completion timeout (default 2)" },
    { nil, "json", help = "machine-readable output (one JSON object)" },
    -- across ranks (lua/ibverbs/bringup/check/wide.lua): under a launcher, or with --size
    { nil, "rank", arg = "rank", type = "int", min = 0, help = "this process's rank (default: from the launcher)" },
    { nil, "size", arg = "n", type = "int", min = 1, help = "the number of ranks (default: from the launcher)" },
    { nil, "root", arg = "host[:port]", help = "rank 0's address (default: IBV_FABRIC_ROOT or the launcher's)" },
    { nil, "fabric-port", arg = "port", type = "int",
      help = "rendezvous TCP port (default: PMIx's, Slurm's, else 18600)" },
    { nil, "fabric-timeout", arg = "seconds", type = "number", default = 60,
      help = "limit of the rendezvous and of each exchange between ranks (default 60)" },
    { nil, "ud-count", arg = "n", type = "int", default = 10, min = 1, max = 1000,
      help = "UD datagrams each way per pair of ranks (default 10; as many again for a direction over the limit)" },
    { nil, "ud-loss", arg = "fraction", type = "number", default = 0.2, min = 0, max = 0.99,
      help = "share of a direction's UD datagrams that may be lost: UD may drop (default 0.2)" },
    { nil, "exit-any", help = "exit 1 on every rank when any rank has a fault (default: only the ranks at fault)" },
    { nil, "counter-thresholds", arg = "name=n,...",
      help = "the largest rise of an error counter over the run (all=n: every one; defaults: docs/bringup.md)" },
    { nil, "busy", help = "this node runs other work (Slurm: ALLOCATED or MIXED): its ports carry other traffic, "
      .. "so the transport counters (retries, sequence errors) are not judged; the physical ones are" },
    { nil, "expect", arg = "file", help = "expected values per host list (JSON, or Lua returning a table; "
      .. "docs/expect.md): exactly the ports it names must be active, with its values" },
    { nil, "drain", help = "when this node is at fault, drain it in Slurm (scontrol, reason 'ibverbs fabric_check "
      .. "[<ports checked>]: ...'; a node DOWN, FAIL, MAINT, ... or drained by anyone else is left alone)" },
    { nil, "undrain-ok", help = "when this node passes, resume it in Slurm if fabric_check drained it and this run "
      .. "checked every port of the drain's scope again" },
    { nil, "flap-state", arg = "file", help = "keep each port's link_downed in <file>: a rise since the run that "
      .. "wrote it is a flap too (for --slurm-health)" },
    { nil, "slurm-health", help = "this node alone, never with other ranks (Slurm's HealthCheckProgram; "
      .. "docs/bringup.md)" },
  })
end

-- v, or (nil, err) a usage error: exit 2 before any device or peer is touched.
local function usable(what, v, err)
  if v == nil then
    io.stderr:write("fabric_check.lua: ", what, err, "\n")
    os.exit(2)
  end
  return v
end

-- ------------------------------------------------------------------ setup

-- run.expected: this host's port entries of --expect (within -d, -i);
-- run.not_named: why the file does not name it (exit 2).
local function load_expect(run)
  local o = run.o
  if not o.expect then return end
  local why
  run.expected, why = expectations.for_host(usable("--expect ", expectations.load(o.expect)), run.host)
  run.not_named = why and ("--expect " .. o.expect .. ": " .. why)
  local expected = run.expected
  for i = #(expected or {}), 1, -1 do
    local e = expected[i]
    if (o.ib_dev and e.device ~= o.ib_dev) or (o.ib_port and e.port ~= o.ib_port) then table.remove(expected, i) end
  end
end

-- run.slurm (--drain, --undrain-ok), run.node: this node's Slurm name, checked
-- before anything runs; run.busy: why the transport counters are not judged.
local function slurm_setup(run)
  local o = run.o
  local slurm = (o.drain or o.undrain_ok) and require "ibverbs.fabric.slurm"
  run.slurm = slurm
  run.node = slurm and slurm.node_name()
  if slurm then
    usable("option '--drain'/'--undrain-ok': ", slurm.check_node(run.node))
    if o.exit_any then usable("option '--drain'/'--undrain-ok': ", nil, "does not go with '--exit-any' (whose "
      .. "status says nothing about this node)") end
  end
  -- the health check on a node that runs a job (Slurm says ALLOCATED, MIXED or
  -- COMPLETING: HealthCheckNodeState=ANY) is busy, as with --busy: its ports
  -- carry the job's traffic, so the transport counters are not judged
  run.busy = o.busy and "the node is busy (--busy): its port carries other traffic than the check's" or nil
  if slurm and o.slurm_health and not run.busy then
    local st = slurm.node_state(run.node)
    if st and slurm.busy(st) then
      run.busy = "Slurm runs work on " .. run.node .. " (" .. st.state
        .. "): its port carries other traffic than the check's"
    end
  end
end

-- The run's state from the options (started: when the tool started): thresholds, host, --expect, Slurm, the
-- agreement text; a host --expect does not name exits 2 here.
local function setup(o, started)
  local run = { o = o, started = started }
  run.thresholds = o.counter_thresholds and
    usable("option '--counter-thresholds': ", pc.parse_thresholds(o.counter_thresholds)) or pc.THRESHOLDS
  run.host = require("ibverbs.fabric.launcher").hostname()
  load_expect(run)
  slurm_setup(run)
  -- what every rank must give alike: this version, the options, whether --expect names the rank's host
  run.agree = cli.agreement(VERSION, o, { rank = true, size = true, root = true, fabric_port = true,
    json = true, exit_any = true, busy = true }) .. (o.expect and (" host_named=" .. tostring(not run.not_named)) or "")
  if run.not_named then -- exit 2, no node drained or resumed; under a launcher, every rank stops at the rendezvous
    io.stderr:write("fabric_check.lua: ", run.not_named, "\n")
    local wide = require "ibverbs.bringup.check.wide"
    if not o.slurm_health and wide.wanted(o) then wide.refuse(o, run.agree) end
    os.exit(2)
  end
  run.last = o.flap_state and usable("option '--flap-state': ", flaps.load(o.flap_state)) -- the previous run's
  return run
end

-- Whether the run needs port of device: named in --expect, else named with -d or -i.
local function needed(run, device, port)
  if run.expected then
    for _, e in ipairs(run.expected) do
      if e.device == device and e.port == port then return true end
    end
    return false
  end
  return run.o.ib_dev ~= nil or run.o.ib_port ~= nil
end

-- ------------------------------------------------------------------ ports

-- A port's checks when it is not active: every one failed, "not run" (why: more to say).
local function inactive_checks(r, why)
  r.checks[1] = { name = "port_state", pass = false, ms = 0,
    detail = "port is " .. tostring(r.state) .. (why and ("; " .. why) or "") }
  for _, t in ipairs(loopback.TESTS) do
    r.checks[#r.checks + 1] = { name = t.name, pass = false, ms = 0,
      detail = "not run: port is " .. tostring(r.state) }
  end
end

-- A port's state, GIDs and checks.  A port that is not active and that the
-- run does not need (must) is listed as idle, with no checks.
local function check_port(o, ctx, port, must)
  local r = { port = port, checks = {} }
  local p, msg = ctx:query_port(port)
  if not p then
    r.checks[1] = { name = "port_state", pass = false, ms = 0, detail = msg }
    return r
  end
  r.state, r.active_mtu, r.max_mtu, r.link_layer, r.lid = p.state, p.active_mtu, p.max_mtu, p.link_layer, p.lid
  r.gids = {}
  for _, g in ipairs(ctx:query_gid_table() or {}) do
    if g.port_num == port then r.gids[#r.gids + 1] = { index = g.gid_index, gid = g.gid, type = g.gid_type } end
  end
  if p.state ~= "active" then
    if must then inactive_checks(r) else r.idle = true end
    return r
  end
  r.checks[1] = { name = "port_state", pass = true, ms = 0 }
  local gid_index = rails.pick_gid(ctx, port, p.link_layer, o.gid_idx)
  r.gid_index = gid_index
  r.before, r.lost = pc.read(ctx, port) -- nil, why: the port has no counters (none read after either)
  if not r.before then r.no_counters, r.lost = r.lost, nil end
  for _, t in ipairs(loopback.TESTS) do
    r.checks[#r.checks + 1] = loopback.run(ctx, port, gid_index, t, o.timeout)
  end
  return r
end

local function check_device(run, d)
  local o = run.o
  local dev = { name = d.name, ports = {} }
  local ctx, msg = ibv.open(d.name)
  if not ctx then
    dev.error = msg
    return dev
  end
  local a = assert(ctx:query_device())
  dev.fw_ver = a.fw_ver
  for port = 1, a.phys_port_cnt do
    if not o.ib_port or o.ib_port == port then
      dev.ports[#dev.ports + 1] = check_port(o, ctx, port, needed(run, d.name, port))
    end
  end
  if #dev.ports == 0 then dev.error = "no port " .. tostring(o.ib_port) end
  ctx:close()
  return dev
end

-- ------------------------------------------------------------------ output

-- JSON through dkjson: the lists (devices, ports, GIDs, checks) are arrays even
-- when empty ([] rather than {}); NaN and infinities become null.
local LISTS = { devices = true, ports = true, gids = true, checks = true, idle = true, exceeded = true,
  faults = true }
local function mark_lists(v)
  for k, x in pairs(v) do
    if type(x) == "table" then
      if LISTS[k] then setmetatable(x, { __jsontype = "array" }) end
      mark_lists(x)
    end
  end
  return v
end

local function json(v)
  local seen, keys = {}, {}
  local function collect(t)
    for k, x in pairs(t) do
      if type(k) == "string" and not seen[k] then seen[k] = true; keys[#keys + 1] = k end
      if type(x) == "table" then collect(x) end
    end
  end
  collect(v)
  table.sort(keys) -- keys in a fixed (sorted) order
  return dkjson.encode(mark_lists(v), { keyorder = keys })
end

local function print_text(devs)
  for _, dev in ipairs(devs) do
    print(dev.name .. (dev.error and (": FAIL " .. dev.error) or ""))
    for _, p in ipairs(dev.ports) do
      print(string.format("  port %d: %s, MTU %s (max %s), link %s, LID %s%s", p.port, tostring(p.state),
        tostring(p.active_mtu), tostring(p.max_mtu), tostring(p.link_layer), tostring(p.lid),
        p.idle and " (idle: not checked, not needed)" or ""))
      for _, g in ipairs(p.gids or {}) do
        print(string.format("    GID[%d] %s (%s)%s", g.index, g.gid, g.type, g.index == p.gid_index and " *" or ""))
      end
      for _, c in ipairs(p.checks) do
        print(string.format("    %-14s %s %8.2f ms%s", c.name, c.pass and "PASS" or "FAIL", c.ms,
          c.detail and ("  " .. c.detail) or ""))
      end
      if p.counters then print("    counters: " .. cc.text(p.counters)) end
      if p.counters and p.counters.note then print("    counters: " .. p.counters.note) end
      if p.no_counters then print("    counters: none: " .. p.no_counters) end
    end
  end
end

-- ------------------------------------------------------------------ counters

-- The thresholds of a port: --counter-thresholds', and its --expect entry's counters over them.
local function thresholds_of(run, device, port)
  return require("ibverbs.bringup.matrix.pair_counters").thresholds(run.thresholds, run.expected, device, port)
end

-- One port's counters read again and judged (p.counters); a failed check
-- "counters" naming what fails it, its text added to found.
local function port_counters(run, dev, p, own, found)
  local after, lost = pc.read(dev.name, p.port)
  local c, failed = cc.judge(p.before, after, after and { p.lost, lost } or { lost }, thresholds_of(run, dev.name,
    p.port), { own = own, busy = run.busy, lid = p.lid, port = p.port })
  p.counters = c
  if after then p.link_downed = after.link_downed or after.hw_link_downed end
  if #failed > 0 then
    local detail = dev.name .. " port " .. p.port .. ": " .. table.concat(failed, ", ")
    p.checks[#p.checks + 1] = { name = "counters", pass = false, ms = 0, detail = detail }
    found[#found + 1] = "counters: " .. detail
  end
end

-- The counters of every port read before its checks, read again: their
-- deltas (p.counters) and, for a counter that cannot be judged (saturated,
-- unreadable) or an error counter that rose past its threshold (transport
-- ones only over the check's own traffic: ibverbs.bringup.check.counters), a failed
-- check "counters" naming each; then the flaps since the watch (run.watch: a
-- failed check "flapped").  size: the ranks of the run (1 alone): the first
-- active port carried traffic with the others.  Returns those findings as text.
local function counter_findings(run, devs, size)
  local o = run.o
  local found, run_port = {}, nil
  for _, dev in ipairs(devs) do
    for _, p in ipairs(dev.ports) do
      run_port = run_port or (p.state == "active" and not p.idle and p) or nil
      if p.before then
        port_counters(run, dev, p, cc.own_packets(loopback.PACKETS, p == run_port and (size or 1) - 1 or 0, o.ud_count),
          found)
      end
      p.before, p.lost = nil, nil
    end
  end
  for _, x in ipairs(flaps.judge(run.watch, devs, run.host, run.last)) do found[#found + 1] = x end
  flaps.close(run.watch)
  if o.flap_state then
    local ok, err = flaps.save(o.flap_state, devs, os.time())
    if not ok then io.stderr:write("fabric_check.lua: option '--flap-state': ", tostring(err), "\n") end
  end
  return found
end

-- ------------------------------------------------------------------ the local checks

-- Every device asked for checked (run.watch: the flaps' watch, made before
-- their checks), --expect judged; the idle ports needed after all when no
-- active port is left.  The results, a list of devices.
local function check_devices(run)
  local o = run.o
  -- a node without RDMA: no driver (ENOSYS from ibv_get_device_list) is a fault of this node, not a crash
  local devices, derr, derrno = ibv.devices()
  local no_devices
  if not devices then
    devices = {}
    no_devices = derrno == 38 and ("no RDMA driver loaded (" .. tostring(derr) .. ")") or tostring(derr)
  end
  local names = {}
  for _, d in ipairs(devices) do
    if not o.ib_dev or d.name == o.ib_dev then names[#names + 1] = d.name end
  end
  run.watch = flaps.watch(names) -- each port's state now, and the port events until the counters are read again
  local results = {}
  for _, d in ipairs(devices) do
    if not o.ib_dev or d.name == o.ib_dev then results[#results + 1] = check_device(run, d) end
  end
  if #results == 0 and (no_devices or not run.expected or #run.expected == 0) then
    results[1] = { name = o.ib_dev or "(none)", error = no_devices or "no such RDMA device", ports = {} }
  end
  if run.expected then expectations.judge(results, run.expected, o.expect, pc.read) end
  -- no active port left for the run: the idle ports are needed after all (with
  -- --expect, exactly the ports it names are)
  local active = false
  for _, dev in ipairs(results) do
    for _, p in ipairs(dev.ports) do active = active or (not p.idle and p.state == "active") end
  end
  for _, dev in ipairs(results) do
    for _, p in ipairs(dev.ports) do
      if p.idle and not active and not run.expected then
        p.idle = nil
        inactive_checks(p, "no active port on this node")
      end
    end
  end
  return results
end

-- The checks failed and run; nothing checked is no pass (a "(node)" entry, one failed).
local function count(run, results)
  local failed, total = 0, 0
  for _, dev in ipairs(results) do
    if dev.error then failed = failed + 1 end
    for _, p in ipairs(dev.ports) do
      for _, c in ipairs(p.checks) do
        total = total + 1
        if not c.pass then failed = failed + 1 end
      end
    end
  end
  if total == 0 and failed == 0 then -- nothing checked is no pass
    results[#results + 1] = { name = "(node)", ports = {}, error = "nothing was checked: no port is active or needed"
      .. (run.expected and " (--expect names no port of -d/-i's)" or "") }
    failed = 1
  end
  return failed, total
end

-- ------------------------------------------------------------------ exit status

-- Why this node is at fault, briefly (a Slurm drain reason): its failed
-- checks, flaps first, each with its device and port unless its text names
-- them; the checks "not run" (the port is down: said once) left out.
local function short_reason(results)
  local flapped, other = {}, {}
  for _, dev in ipairs(results) do
    if dev.error then other[#other + 1] = dev.name .. ": " .. dev.error end
    for _, p in ipairs(dev.ports) do
      for _, c in ipairs(p.checks) do
        local detail = tostring(c.detail)
        if not c.pass and not detail:find("^not run:") then
          local where = detail:find(dev.name, 1, true) and "" or (dev.name .. ":" .. p.port .. " ")
          table.insert(c.name == "flapped" and flapped or other, where .. c.name .. ": " .. detail)
        end
      end
    end
  end
  for _, x in ipairs(other) do flapped[#flapped + 1] = x end
  if #flapped == 0 then return "named at fault in rank 0's report (a broken pair)" end
  return table.concat(flapped, "; ", 1, math.min(#flapped, 2)) ..
    (#flapped > 2 and string.format(" (+%d more)", #flapped - 2) or "")
end

-- What this run checked, for a Slurm drain's scope: each port whose checks
-- ran (not idle, not left out by -d, -i or --expect) as "dev:port", and each
-- device that failed before it had one (slurm.scope_text leaves "(none)" out).
local function checked_ports(results)
  local list = {}
  for _, dev in ipairs(results) do
    local any = false
    for _, p in ipairs(dev.ports) do
      if not p.idle and #p.checks > 0 then list[#list + 1], any = dev.name .. ":" .. p.port, true end
    end
    if dev.error and not any then list[#list + 1] = dev.name end
  end
  return list
end

-- Ends the process with status, after Slurm was told (--drain, --undrain-ok):
-- a failed scontrol call is printed, the status stays the verdict's.  The
-- drain's scope is what this run checked; "wide" when only the run across
-- nodes found the fault (every local check passed: failed counts them alone).
local function finish(run, results, failed, status)
  local o, slurm = run.o, run.slurm
  if slurm and status ~= 2 then
    local line, err = slurm.act(run.node, status == 1, status == 1 and short_reason(results),
      { drain = o.drain, undrain = o.undrain_ok, tool = "fabric_check", ports = checked_ports(results),
        wide = not run.alone and failed == 0, multi_rank = not run.alone })
    if line then -- (after --json's one object: on stderr)
      (o.json and io.stderr or io.stdout):write(line, "\n")
    elseif err then
      io.stderr:write("fabric_check.lua: ", err, "\n")
    end
  end
  os.exit(status)
end

-- This node's report alone: the text or one JSON object, and --slurm-health's line.
local function report_alone(run, results, failed, total)
  local o = run.o
  if o.json then
    print(json({ devices = results, checks = total, failed = failed, pass = failed == 0 }))
  else
    print_text(results)
    print(string.format("%d checks, %d failed: %s", total, failed, failed == 0 and "PASS" or "FAIL"))
  end
  if o.slurm_health and not o.json then
    print(string.format("slurm-health %s: %s in %.0f ms%s", run.host, failed == 0 and "PASS" or "FAIL",
      (ibv.now() - run.started) * 1000, failed == 0 and "" or ("; " .. short_reason(results))))
  end
end

--- The tool: `ibvlua fabric_check ...`, `lua5.4 examples/fabric_check.lua ...`; arg is the command line
-- (arg[1] the first option), as a script's.  Ends the process with the exit status.
function fabric_check.main(arg)
  local started = ibv.now()
  local run = setup(options(arg), started)
  local o = run.o
  local results = check_devices(run)
  -- alone, the counters are read again now; one rank of many reads them after the traffic between ranks
  local wide = require "ibverbs.bringup.check.wide"
  run.alone = o.slurm_health or not wide.wanted(o)
  if run.alone then counter_findings(run, results, 1) end
  local failed, total = count(run, results)
  -- one rank of many: the fabric as a whole (rank 0 reports)
  if not run.alone then
    finish(run, results, failed, wide.run(o, results, failed, total, { print_text = print_text, json = json,
      agree = run.agree, after_traffic = function(size) return counter_findings(run, results, size) end }))
  end
  report_alone(run, results, failed, total)
  finish(run, results, failed, failed == 0 and 0 or 1)
end

return fabric_check
