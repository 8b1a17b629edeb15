--- fabric_matrix (`ibvlua fabric_matrix`, examples/fabric_matrix.lua): the
-- all-pairs test to run after racking a cluster.  One
-- process per host, started by the launcher the cluster already has (srun,
-- mpirun, tools/rxe-vm --nodes) or with --rank/--size; rank 0 collects.
-- Every ordered pair of ranks gets an RC connection of its own: ping-pong
-- latency (--lat-size bytes), RDMA write and send bandwidth (--bw-size bytes)
-- and a check of every byte that arrived.
--
-- The pairs run in rounds in which every rank works (--pattern):
--   tournament  N/2 disjoint pairs a round, both directions at once: N-1 rounds (N for odd N); the default
--   shift       round d: every rank sends to rank+d and receives from rank-d (mpiGraph): N-1 rounds
--   serial      one ordered pair at a time: N(N-1) rounds, the baseline
--   --pairs F   lines "round rankA rankB" (ranks or host names); --quick: the tournament's first round
-- Every rank reads its ports' counters (ibverbs.port_counters) just before
-- and after each round's traffic; a rank's deltas of a round go to the pairs
-- it was an end of in that round, and into --json and --json-lines.
-- The first pass's results stay on the ranks, each pair with both of its
-- ends (ibverbs.bringup.matrix.ledger), and go up reduced (ibverbs.bringup.matrix.reduction):
-- the relays merge summaries, rank 0 takes the references from them, sends
-- them down, and gets back only the pairs that fail (every pair up to 16
-- ranks); --json-lines is then each rank's own file of its own pairs.
-- Flagged pairs (latency above --lat-factor x the lowest, bandwidth below
-- --bw-fraction x the highest, or against a percentile: --reference; failed,
-- bad data; a physical or port error counter of an end's port that rose past
-- its threshold: --counter-thresholds, --expect's counters; a transport
-- counter, retries and sequence errors, whose rise per packet stands out
-- from the fabric's: --counter-factor, --counter-floor) are measured again
-- (--retests times, judged by their best figures), each end against a
-- partner that passed; a rank all of whose pairs were flagged has two of
-- them retested, not all.  The report gives a verdict per fault: a node, a
-- link, an unreachable rank, a port that flapped (its state, link_downed or
-- port events changed since the last round: lua/ibverbs/bringup/flaps.lua; the run
-- goes on), a port whose counters cannot be judged (a judged counter
-- saturated, a counter file unreadable: "counters").  A healthy fabric gives
-- none; transport rates high on every pair are said as load, not blamed.
-- With the flows of the pairs (one QP's traffic each, its path known or not:
-- ibverbs.bringup.matrix.localize), faults inside the fabric are localized
-- first: a `fabric` verdict names the switch link (or "not located", a pair
-- whose flows differ by path), the pairs it explains are neither retested
-- nor blamed, and rank 0's report ends with those verdicts.
-- Exit status, per rank: 0 when its own node has no verdict, 1 when it has one
-- (a node, flap, counters or unreachable verdict on it, an end of a link verdict, an end of a
-- flagged pair not retested whose other end has no verdict; also a rank that
-- lost rank 0 mid-run), 2 when the run could not be made (bad options,
-- --expect or --topology file, a rank whose host none of its host lists names
-- or the topology leaves out: every rank, at the rendezvous; no rendezvous or
-- ranks that disagree, a bad pairs file, rank 0's output files not written);
-- --exit-any: 1 on every rank when any verdict names a node; 3 on rank 0 when
-- fabric verdicts are all there is (its own node has none: every node exits 0,
-- ibverbs.bringup.status).
-- Slurm: --drain (rank 0, after the report) drains every node a verdict names
-- (never for a fabric verdict: Slurm cannot drain a switch) with a reason
-- "ibverbs fabric_matrix [<its rails in the run>]: <verdict>" and resumes a
-- node that passed when fabric_matrix drained it and the node measured
-- pairs on every rail of that scope; a node DOWN, FAIL, MAINT, ... or
-- drained by anyone else (fabric_check included) is left alone.
--   srun -N 64 --ntasks-per-node=1 ibvlua fabric_matrix -d all --json m.json --json-lines m.jsonl
--   tools/rxe-vm --nodes 4 ibvlua fabric_matrix --pattern shift
--   ibvlua fabric_matrix --dry-run ...   # the control plane alone: no device, no traffic
local fabric = require "ibverbs.fabric"
local socket = require "socket"
local dkjson = require "dkjson"
local cli = require "ibverbs.tools.cli"
local exit_status = require "ibverbs.bringup.status"
local schedule = require "ibverbs.bringup.matrix.schedule"
local matrix = require "ibverbs.bringup.matrix.report"
local rails_mod = require "ibverbs.bringup.rails"
local traffic = require "ibverbs.bringup.matrix.pair_traffic"
local results = require "ibverbs.bringup.matrix.results"
local rounds = require "ibverbs.bringup.matrix.rounds"
local findings = require "ibverbs.bringup.matrix.findings"
local ledger = require "ibverbs.bringup.matrix.ledger"
local reduction = require "ibverbs.bringup.matrix.reduction"
local pc = require "ibverbs.port_counters"
local pcount = require "ibverbs.bringup.matrix.pair_counters"
local expectations = require "ibverbs.bringup.expect"
local topology = require "ibverbs.bringup.topology"
local flows = require "ibverbs.bringup.matrix.flows"
local flow_trace = require "ibverbs.bringup.matrix.flow_trace"

local options = require "ibverbs.tools.fabric_matrix.options"
local usage_error = options.usage_error

local fabric_matrix = {}

local function say(...) io.stderr:write(string.format(...), "\n") end
local fmt_time = rounds.fmt_time

-- The counter thresholds (run.thresholds; a port's --expect entry's counters
-- go over them) and --expect: run.expected, this host's port entries (a
-- wrong file: one error, exit 2, before any device or peer is touched);
-- run.limits, every pair's absolute limits (the file's pairs section), or
-- nil; run.not_named, why no host list of the file names this host (exit 2
-- on every rank, at the rendezvous).
local function load_limits(run)
  local o = run.o
  run.thresholds = pcount.THRESHOLDS
  if o.counter_thresholds then
    local t, err = pc.parse_thresholds(o.counter_thresholds, pcount.THRESHOLDS)
    if not t then usage_error("option '--counter-thresholds': " .. err) end
    run.thresholds = t
  end
  if o.expect then
    local spec, err = expectations.load(o.expect)
    if not spec then
      say("fabric_matrix.lua: --expect %s", err)
      os.exit(2)
    end
    if spec.hosts then -- (a file of pairs alone names no host)
      run.expected, err = expectations.for_host(spec, require("ibverbs.fabric.launcher").hostname())
      run.not_named = err and string.format("fabric_matrix.lua: --expect %s: %s", o.expect, err)
      if run.not_named then say("%s", run.not_named) end
    end
    run.limits = expectations.pair_limits(spec)
  end
end

-- ------------------------------------------------------------------ the group and its limits

-- This rank's end of a failure: said, the group closed, exit 1.
local function fatal(run, err)
  say("fabric_matrix (%s): %s", run.f:name(run.me), tostring(err))
  run.f:close()
  os.exit(1)
end

local function must(run, v, err)
  if v == nil then fatal(run, err) end
  return v
end

-- The group (run.f, run.n ranks, this one run.me; a failed rendezvous: exit
-- 2), rounds per exchange (run.block) and the limit of an exchange.
local function join(run)
  local o = run.o
  -- every rank runs this version with these options, or the rendezvous names the ones that differ
  -- (and whether --expect names its host: a rank it does not name fails the rendezvous of all)
  local agree = cli.agreement("fabric_matrix.lua 2", o, { rank = true, size = true, root = true, fabric_port = true,
    json = true, json_lines = true, plot = true, exit_any = true }) .. (run.not_named and " host_named=false" or "")
  local f, ferr = fabric.init{ rank = o.rank, size = o.size, root = o.root, port = o.fabric_port,
    timeout = o.timeout + 15, tolerant = true, agree = agree }
  if not f or run.not_named then -- (every rank's host unnamed: they agree, and stop here all the same)
    if not f then say("fabric_matrix: %s", ferr) end
    if f then f:close() end
    os.exit(2)
  end
  run.f, run.n, run.me = f, f.size, f.rank
  local N, ME = run.n, run.me
  if ME == 0 and run.flows_asked and run.flows_asked > o.flows then
    say("fabric_matrix: %d flows a pair, not %d: -n %d and -N %d give %d flows %d round trips and %d messages at least",
      o.flows, run.flows_asked, o.lat_iters, o.bw_iters, o.flows, flows.MIN_LAT, flows.MIN_BW)
  end
  -- a lost frame costs a pair one ack timeout: past half a bandwidth phase, one loss ends a healthy pair's phase
  local ACK_S = traffic.ack_seconds(o.qp_timeout)
  if ME == 0 and 2 * ACK_S > traffic.bw_phase_limit(o) then
    say("fabric_matrix: warning: --qp-timeout %d (acks given %.3g s) leaves a bandwidth phase (-t %g / 2) room for "
      .. "less than two ack timeouts: one lost frame can end a healthy pair's phase with an error", o.qp_timeout,
      ACK_S, o.timeout)
  end
  -- Rounds per exchange: one (a barrier per round) on small fabrics; past 64
  -- ranks, rank 0's share of a round is cut by running several rounds between
  -- exchanges, each pair starting when both of its ends reach it.
  run.block = o.block or (N < 64 and 1 or math.min(16, math.ceil(N / 64)))
  -- rank 0 waits this long for a rank at a block's end: its traffic (2 x --timeout a round), its QPs
  -- of the next rounds, slack
  local EXCHANGE_LIMIT = run.block * 2 * o.timeout + 2 * o.timeout + 30
  run.exchange_limit = EXCHANGE_LIMIT
  -- every collective after the rendezvous follows a block: it waits as long as an exchange
  f.timeout = EXCHANGE_LIMIT
  -- rank 0 names whom a collective still waits for, every minute of waiting (IBV_FABRIC_WAIT_EVERY): a
  -- rank that hangs inside a block is buried at the exchange's limit only
  if ME == 0 then
    f.on_wait = function(who, waited)
      say("fabric_matrix: waiting %s for %s (the limit: %s)", fmt_time(waited), who, fmt_time(run.exchange_limit))
    end
  end
end

-- The limit of an exchange once the rails are known: a round's traffic runs
-- in one ibv.kernels call per group of rails (--flows: pair_traffic's
-- rails_per_call), each up to 2 x --timeout, and its traces (--trace).
local function exchange_limit(run)
  local o, f = run.o, run.f
  local per = traffic.rails_per_call(o.flows)
  local calls = math.max(1, math.ceil(run.nrails / per))
  local round = calls * 2 * o.timeout + (o.trace and flow_trace.limit() or 0)
  if calls == 1 and not o.trace then return end -- (join's)
  run.exchange_limit = run.block * round + 2 * o.timeout + 30
  f.timeout = run.exchange_limit
end

-- ------------------------------------------------------------------ the plan every rank agrees on

-- The plan's rails: each rank's rail names as an index into the lists that
-- differ (one, mostly): the plan every rank gets is O(N) small numbers, not
-- N lists (at 12,500 ranks x 8 rails, 25 kB instead of 1.1 MB a rank); the
-- local faults ({rank, rail, why}).
local function plan_rails(N, all_local)
  local nrails = 0
  for r = 0, N - 1 do
    local l = all_local[r + 1]
    if l then nrails = math.max(nrails, #l.rails) end
  end
  local plan = { nrails = nrails, rail_lists = {}, rails_of = {}, faults = {} }
  local index = {}
  for r = 0, N - 1 do
    local l = all_local[r + 1]
    plan.rails_of[r + 1] = 0
    if l then
      local key = table.concat(l.rails, "\0")
      if not index[key] then plan.rail_lists[#plan.rail_lists + 1] = l.rails; index[key] = #plan.rail_lists end
      plan.rails_of[r + 1] = index[key]
      for _, x in ipairs(l.faults or {}) do plan.faults[#plan.faults + 1] = { r, x[1], x[2] } end
      for k = #l.rails + 1, nrails do
        plan.faults[#plan.faults + 1] = { r, k, string.format("no rail %d (%d asked for, this host has %d)", k,
          nrails, #l.rails) }
      end
    end
  end
  return plan
end

-- Rank 0: the rails of every rank, the local faults ({rank, rail, why}), the
-- pairs file's rounds; pairs_sched, its schedule.
local function make_plan(run, all_local)
  local o, N = run.o, run.n
  local plan = plan_rails(N, all_local)
  if run.pattern ~= "pairs" then return plan end
  local fh, oerr = io.open(o.pairs)
  local text = fh and fh:read("a")
  if fh then fh:close() end
  if not text then plan.err = "cannot read the pairs file: " .. tostring(oerr); return plan end
  local s, perr = schedule.from_pairs(text, N, run.f.hosts, o.pairs)
  if not s then plan.err = perr; return plan end
  plan.rounds = s.rounds
  return plan, s
end

-- This host's ports against --expect (none on a dry run): a list of {rail name, why}.
local function mismatches(run)
  local o = run.o
  if not run.expected or o.dry_run or not run.ibv then return {} end
  local found = expectations.survey(run.ibv, run.expected, function(ctx, port, link_layer)
    return rails_mod.pick_gid(ctx, port, link_layer, o.gid_idx)
  end)
  expectations.judge(found, run.expected, o.expect, pc.read)
  local out = {}
  for _, dev in ipairs(found) do
    for _, p in ipairs(dev.ports) do
      for _, c in ipairs(p.checks) do
        if not c.pass then out[#out + 1] = { dev.name .. ":" .. p.port, "expect: " .. c.detail } end
      end
    end
  end
  return out
end

-- Every rank's rails and faults to rank 0, its plan to every rank (a bad
-- pairs file: exit 2): run.all_local (rank 0's), run.plan, run.nrails,
-- run.fault (FAULT[rank][rail] = why), run.sched.
local function agree_plan(run)
  local f, N, ME = run.f, run.n, run.me
  local mine = { rails = {}, faults = {}, expect = mismatches(run) }
  mine.node = run.node
  for i, r in ipairs(run.rails) do
    mine.rails[i] = r.name
    if r.fault then mine.faults[#mine.faults + 1] = { i, r.fault } end
  end
  run.all_local = must(run, f:gather(mine, 0))
  local plan, pairs_sched
  if ME == 0 then plan, pairs_sched = make_plan(run, run.all_local) end
  plan = must(run, f:bcast(plan))
  -- rank + 1 -> its rail names, looked up (a table of N would be O(N) more on every rank)
  plan.names = setmetatable({}, { __index = function(_, r)
    return plan.rail_lists and plan.rails_of and plan.rail_lists[plan.rails_of[r]]
  end })
  if plan.err then
    if ME == 0 then say("fabric_matrix: %s", plan.err) end
    f:close()
    os.exit(2)
  end
  run.plan, run.nrails, run.fault = plan, plan.nrails, {}
  for _, x in ipairs(plan.faults) do
    run.fault[x[1]] = run.fault[x[1]] or {}
    run.fault[x[1]][x[2]] = x[3]
  end
  if run.pattern == "pairs" then
    local lists
    if ME == 0 then
      lists = {}
      for r = 0, N - 1 do lists[r + 1] = pairs_sched:rank_plan(r) end
    end
    local mine_plan = must(run, f:scatter(lists, 0))
    run.sched = ME == 0 and pairs_sched or schedule.from_plan("pairs", N, plan.rounds, mine_plan, ME)
  else
    run.sched = schedule.new(run.pattern, N)
  end
end

-- ------------------------------------------------------------------ the first pass

-- The rounds' runner (run.runner) and the --json-lines file (run.jl: rank
-- 0's, <file>.<rank> on the others: each writes the pairs it holds).
local function make_runner(run)
  local o, ME = run.o, run.me
  if o.json_lines then
    local name = ME == 0 and o.json_lines or (o.json_lines .. "." .. ME)
    run.jl = io.open(name, "w")
    if not run.jl then say("fabric_matrix: cannot write %s", name) end
  end
  -- each rail's counter thresholds (its port's --expect entry over --counter-thresholds')
  local LIMITS_OF = {}
  local function limits_of(ki)
    local r = run.rails[ki]
    LIMITS_OF[ki] = LIMITS_OF[ki] or pcount.thresholds(run.thresholds, run.expected, r.name:match("^(.*):%d+$"),
      r.port)
    return LIMITS_OF[ki]
  end
  run.runner = rounds.new{ f = run.f, rails = run.rails, nrails = run.nrails, block = run.block,
    limit = run.exchange_limit, fault = run.fault, rail_names = run.plan.names, jl = ME == 0 and run.jl or nil,
    say = say, fatal = function(err) fatal(run, err) end,
    limits_of = not o.dry_run and limits_of or nil, watch_flaps = not o.dry_run,
    traffic = traffic.new{ o = o, ibv = run.ibv, me = ME, block = run.block } }
end

-- The first pass: its rounds (run.r1 of them), then reduced on the way up:
-- rank 0's store (run.first), the reduction (run.red), the judgement's
-- options (run.opts).
local function first_pass(run)
  local o, f, ME = run.o, run.f, run.me
  make_runner(run)
  local R1 = run.sched.rounds
  if o.max_rounds and o.max_rounds < R1 then R1 = o.max_rounds end
  run.r1 = R1
  run.first = ME == 0 and results.store(run.nrails, run.n, f.hosts)
  local t_run = socket.gettime()
  -- the pass's results stay on the ranks (each holds its pairs), then go up reduced: rank 0 gets the
  -- summary, from it the reference, and the failing pairs (all of them up to reduction.ALL_PAIRS_MAX ranks)
  local led = ledger.new{ f = f, nrails = run.nrails, rail_names = run.plan.names, sched = run.sched, rounds = R1,
    jl = run.jl }
  run.runner:run(run.sched, R1, "first", run.first, led)
  run.first_seconds = socket.gettime() - t_run
  run.opts = { lat_factor = o.lat_factor, bw_fraction = o.bw_fraction, reference = o.reference, retests = o.retests,
    dry_run = o.dry_run, limits = run.limits, counter_factor = o.counter_factor, counter_floor = o.counter_floor,
    judged = run.thresholds, topology = run.topo }
  run.red = must(run, reduction.first_pass(f, led, run.opts, run.exchange_limit))
  if ME ~= 0 and run.jl then run.jl:close() end
  if ME == 0 then
    reduction.at_root(run.first, run.red, { sched = run.sched, rounds = R1, f = f,
      names = run.plan.names, jl = run.jl, ledger = led })
    run.first.flows = flows.list(run.first) -- (localized before the retest: ibverbs.bringup.matrix.findings)
  end
end

-- ------------------------------------------------------------------ the retest

-- The flagged pairs measured again (not on a dry run, not with --no-retest):
-- rank 0's plan (run.rt) and store (run.retested).
local function retest(run)
  local o, f, N, ME = run.o, run.f, run.n, run.me
  if o.dry_run or o.no_retest then return end
  local lists
  if ME == 0 then
    run.rt = findings.retest(run.first, f, run.fault, run.opts, o.retest_width or math.max(1, math.floor(N / 4)))
    lists = {}
    for r = 0, N - 1 do lists[r + 1] = { rounds = run.rt.rounds, plan = run.rt.sched:rank_plan(r) } end
  end
  local m = must(run, f:scatter(lists, 0))
  if m.rounds > 0 then
    run.retested = ME == 0 and results.store(run.nrails, N, f.hosts, run.rt.per_sample)
    run.runner:run(ME == 0 and run.rt.sched or schedule.from_plan("retest", N, m.rounds, m.plan, ME), m.rounds,
      "retest", run.retested)
    if ME == 0 then pcount.attribute(run.retested, run.plan.names) end
  end
end

-- ------------------------------------------------------------------ report

-- Rank 0: the report of the run (matrix.text's, matrix.json's) and its verdicts' ranks at fault.
local function make_report(run, ctl_all)
  local o, f, N, first, red, rt, retested = run.o, run.f, run.n, run.first, run.red, run.rt, run.retested
  local names = run.plan.names
  local mismatch = {}
  for r = 0, N - 1 do
    for _, x in ipairs(run.all_local[r + 1] and run.all_local[r + 1].expect or {}) do
      mismatch[#mismatch + 1] = { r, x[1], x[2] }
    end
  end
  -- the flows that reached rank 0 (every one up to 16 ranks; else those of the failing pairs and of the pairs
  -- whose flows stand out), first pass and retest, as records (ibverbs.bringup.matrix.flows): the diagnosis's
  run.flows = flows.list(first, retested)
  local verdicts, transient, bad, notes = findings.verdicts(f, run.fault, names, first, retested, rt, run.opts,
    mismatch)
  local control = findings.control(ctl_all, N, run.runner.ctl.all_cpu, run.block, f.tree and f.tree.k or 0)
  local scheduled, want = red.full and #first.list or reduction.scheduled(red.summary), run.nrails * N * (N - 1)
  local listed = 0
  if red.full and scheduled < want and (o.json or N <= 16) then
    listed = findings.unscheduled(first, run.pattern == "quick" and "not scheduled (--quick)" or
      run.pattern == "pairs" and "not in the pairs file" or
      "not scheduled (--max-rounds " .. tostring(o.max_rounds) .. ")")
  end
  local list = first.list
  for _, x in ipairs(retested and retested.list or {}) do list[#list + 1] = x end -- (pass "retest", sample k)
  local counters = {} -- every rank's deltas, round by round
  for _, store in ipairs({ first, retested }) do
    for _, c in ipairs(store.counters) do counters[#counters + 1] = results.counter_json(c, names) end
  end
  return { size = N, hosts = f.hosts, pattern = run.pattern, rounds = run.r1,
    retest_rounds = rt and rt.rounds or 0, rails = names[1], pairs = list, verdicts = verdicts, at_fault = bad,
    transient = transient, notes = notes, strangers = select(2, f:door()),
    summary = not red.full and reduction.report_summary(red.summary, first.refs, names[1]) or nil,
    control = control, counters = counters,
    seconds = run.first_seconds, unscheduled = want - scheduled, listed_unscheduled = listed,
    options = { lat_size = o.lat_size, lat_iters = o.lat_iters, bw_size = o.bw_size, bw_iters = run.sizes.bw_iters,
      lat_factor = o.lat_factor, bw_fraction = o.bw_fraction, reference = o.reference, retests = o.retests,
      dry_run = o.dry_run or nil, launcher = f.launcher, wireup = f.wireup, rendezvous = (f:door()),
      max_rounds = o.max_rounds, wait = o.wait,
      counter_thresholds = o.counter_thresholds, counter_factor = o.counter_factor,
      counter_floor = o.counter_floor, flows = o.flows, trace = o.trace } }, bad
end

-- Rank 0: the report of the run printed and written; the verdict every
-- rank's exit status comes from (ibverbs.bringup.status), and whether rank
-- 0's output files were all written.
local function report(run, ctl_all)
  local o, jl = run.o, run.jl
  local written = true
  local rep, bad = make_report(run, ctl_all)
  print(matrix.text(rep))
  if o.json then
    local fh = io.open(o.json, "w")
    if not fh then say("fabric_matrix: cannot write %s", o.json); written = false else
      fh:write(matrix.json(rep), "\n")
      fh:close()
    end
  end
  if o.plot then
    local ok, err = matrix.plot(rep, o.plot)
    if not ok then say("fabric_matrix: %s", err); written = false end
    local files, terr = true, nil
    if run.topo then files, terr = topology.plot(run.topo, rep.verdicts, o.plot) end
    if not files then say("fabric_matrix: --plot: %s", terr); written = false end
  end
  if jl then
    jl:write(dkjson.encode({ verdicts = rep.verdicts }), "\n")
    jl:close()
  end
  local on_fabric = 0 -- the fabric's verdicts (rank 0 exits 3 when they are all there is)
  for _, v in ipairs(rep.verdicts) do if v.kind == "fabric" then on_fabric = on_fabric + 1 end end
  return { bad = bad, any = #bad > 0, fabric = on_fabric }, written, rep
end

-- ------------------------------------------------------------------ exit status

-- The control plane's figures to rank 0, its report, the verdict to every
-- rank; Slurm told (--drain); ends the process with this rank's status.
local function finish(run)
  local o, f, ME = run.o, run.f, run.me
  -- this rank's time in the exchanges, for the control plane's figures
  local c = run.runner.ctl
  local ctl_all = must(run, f:gather({ c.seconds, c.cpu, c.rounds, c.max, c.exchanges }, 0))
  local verdict, written, rep
  if ME == 0 then verdict, written, rep = report(run, ctl_all) end
  -- every rank learns the ranks at fault; one that does not (rank 0 lost it: named unreachable) exits 1
  verdict = f:bcast(verdict)
  local status = verdict and exit_status.own(ME, o.exit_any, verdict) or 1
  if ME == 0 and not written then status = 2 end
  f:close()
  -- --drain: Slurm told after the report (a failed scontrol call is said; the status stays the verdict's)
  if ME == 0 and o.drain and status ~= 2 then
    local drains = require "ibverbs.bringup.matrix.drains"
    drains.apply(rep, drains.nodes(run.all_local, f.hosts), print, function(line) say("fabric_matrix: %s", line) end,
      run.plan.names)
  end
  os.exit(status)
end

--- The tool: `ibvlua fabric_matrix ...`, `lua5.4 examples/fabric_matrix.lua ...`; arg is the command line
-- (arg[1] the first option), as a script's.  Ends the process with the exit status.
function fabric_matrix.main(arg)
  local run = options.check(options.parse(arg))
  load_limits(run)
  local terr
  run.topo, terr = topology.from_options(run.o) -- (a bad file: exit 2 before the rendezvous)
  if terr then usage_error(terr) end
  join(run)
  terr = run.topo and run.topo:check_hosts(run.f.hosts) -- (every rank knows every host: all stop, before any traffic)
  if terr then
    if run.me == 0 then say("fabric_matrix.lua: --topology %s", terr) end
    run.f:close()
    os.exit(2)
  end
  run.sizes = traffic.sizes(run.o)
  run.rails, run.ibv = rails_mod.open(run.o, run.sizes)
  agree_plan(run)
  exchange_limit(run)
  first_pass(run)
  retest(run)
  finish(run)
end

return fabric_matrix
