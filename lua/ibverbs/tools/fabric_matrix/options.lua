--- fabric_matrix.lua's command line: its options (ibverbs.tools.cli) and the
-- checks of the options that depend on each other, made on every rank before
-- the rendezvous.  A usage error prints one line naming the option and exits 2.
--
--   local options = require "ibverbs.tools.fabric_matrix.options"
--   local o = options.parse(arg)    -- the options, their defaults
--   local run = options.check(o)    -- the run's state: run.o, run.node (--drain), run.pattern, run.flows_asked
local cli = require "ibverbs.tools.cli"
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local flows = require "ibverbs.bringup.matrix.flows"

local options = {}

local function say(...) io.stderr:write(string.format(...), "\n") end

--- A usage error: one line naming the option, exit 2.
function options.usage_error(msg)
  say("fabric_matrix.lua: %s", msg)
  os.exit(2)
end
local usage_error = options.usage_error

-- The options of the fabric's paths: flows, their traces, the topology, the plot.
local function path_options()
  return {
    { nil, "flows", arg = "n", type = "int", min = 1, max = flows.MAX,
      help = "spread each pair and rail over <n> RC QPs, each with a flow label (RoCE v2: a UDP source port) of its "
        .. "own, so that ECMP spreads them over the fabric's paths; its ping-pongs and messages split among them "
        .. "(at most -n/8 and -N/8 flows), each flow's figures in --json and --json-lines (default 1: one QP, "
        .. "its port from the QP numbers, as before flows; 8: two paths both covered but for 0.8 % of pairs, four "
        .. "in 62 %)" },
    { nil, "trace", help = "find each flow's hops (RoCE v2 over IPv4: TTL-limited UDP probes of its own 5-tuple, "
      .. "once a run) and give them with its figures" },
    { "t", "timeout", arg = "seconds", type = "number", default = 30, min = 1,
      help = "limit of every wait for a completion (default 30); a round's traffic stops at twice it, rank 0 "
        .. "waits for a rank at an exchange (every --block rounds) 2 x (block + 1) times it plus 30 s" },
    { nil, "json", arg = "file", help = "write the results as JSON to <file> (rank 0)" },
    { nil, "json-lines", arg = "file", help = "stream the pairs each rank holds as JSON lines: rank 0 to <file> (its "
      .. "own, those that reach it: failing and retested, the verdicts), every other rank to <file>.<rank>" },
    { nil, "plot", arg = "file", help = "draw heatmaps into <file>.png or .svg with gnuplot (rank 0); with "
      .. "--topology the fabric too: <file>.topology.dot (.svg too when Graphviz's dot is on PATH)" },
    { nil, "topology", arg = "file", help = "Slurm's topology.conf (docs/bringup.md, Topology), or with --lfts an "
      .. "InfiniBand link map (ibnetdiscover output, ibdiagnet .lst); a bad file or a host it leaves out: exit 2" },
    { nil, "topology-addresses", arg = "file", help = "'SwitchName=<name> Addresses=<IPv4s>' lines for --topology" },
    { nil, "lfts", arg = "file", help = "InfiniBand forwarding tables (dump_lfts.sh, ibroute output) for --topology" },
  }
end

-- The command line (usage errors: exit 2).
function options.parse(arg)
  local spec = {
    name = "fabric_matrix.lua", usage = { "            one process per rank; the launcher gives rank and size" },
    error_status = 2,
    cli.ib_dev{ help = "device(s): <dev>, <dev>,<dev>..., or all (every device and port: one rail each); "
      .. "default the first device" },
    cli.ib_port(),
    cli.gid_idx{ default = false, min = 0,
                 help = "GID index (default: the first RoCE v2 IPv4 GID, else 0)" },
    { "s", "lat-size", arg = "bytes", type = "int", default = 8, min = 1, max = 4096,
      help = "ping-pong message size (default 8)" },
    { "n", "lat-iters", arg = "n", type = "int", default = 500, min = 1, max = 1e7,
      help = "ping-pong round trips (default 500)" },
    { "S", "bw-size", arg = "bytes", type = "int", default = 65536, min = 1, max = 1073741824,
      help = "bandwidth message size (default 65536)" },
    { "N", "bw-iters", arg = "n", type = "int", default = 1000, min = 1, max = 1e8,
      help = "bandwidth messages per direction and kind (default 1000)" },
    { nil, "pattern", arg = "name", help = "tournament (default), shift or serial" },
    { nil, "pairs", arg = "file", help = "the rounds from <file>: lines 'round rankA rankB' (ranks or host names)" },
    { nil, "quick", help = "one round of the tournament: every rank against one partner" },
    { nil, "max-rounds", arg = "n", type = "int", min = 1, help = "stop after <n> rounds (the rest: unmeasured)" },
    { nil, "block", arg = "b", type = "int", min = 1, max = 64,
      help = "rounds per exchange through rank 0 (default 1 below 64 ranks, else ranks/64 up to 16): within a block "
        .. "a pair starts when both ends reach it (its first ping waits for the partner's receive)" },
    { nil, "lat-factor", arg = "x", type = "number", default = 2.1, min = 1,
      help = "flag a latency above <x> times the reference latency (default 2.1; the lowest: see --reference)" },
    { nil, "bw-fraction", arg = "f", type = "number", default = 0.93, min = 0, max = 1,
      help = "flag a bandwidth below <f> times the reference bandwidth (default 0.93; the highest: see --reference)" },
    { nil, "reference", arg = "kind", default = "best",
      help = "what the factors apply to: best (the lowest latency, the highest bandwidth; default), median, or pQ "
        .. "(Q from 50 to 100): bandwidth against its Qth percentile, latency against its (100-Q)th (p75: robust to "
        .. "one bad node owning many pairs)" },
    { nil, "retests", arg = "k", type = "int", default = 1, min = 1, max = 100,
      help = "measure each retest pair <k> times (in <k> passes) and judge it by its best figures: a fault is bad "
        .. "every time, noise rarely <k> times (default 1)" },
    { nil, "wait", arg = "how", default = "spin",
      help = "how a rank waits for completions: spin (busy polling, as perftest; default) or event (sleeps on a "
        .. "completion channel: for oversubscribed hosts and VMs)" },
    { nil, "retest-width", arg = "n", type = "int", min = 1,
      help = "pairs measured at once in a retest round (default: a quarter of the ranks, at least 1)" },
    { nil, "qp-timeout", arg = "n", type = "int", default = 14, min = 1, max = 31,
      help = "the RC QPs' ack timeout exponent: 4.096 us x 2^n (default 14: 67 ms); raise it on links that queue "
        .. "long, keeping two of it within a bandwidth phase (half of -t): a lost frame costs one" },
    { nil, "no-retest", help = "report the flagged pairs without measuring them again" },
    { nil, "exit-any", help = "exit 1 on every rank when any verdict exists (default: only the ranks it names)" },
    { nil, "dry-run", help = "the whole schedule and every exchange, no device opened, no traffic" },
    { nil, "rank", arg = "rank", type = "int", min = 0, help = "this process's rank (default: from the launcher)" },
    { nil, "size", arg = "n", type = "int", min = 1, help = "the number of ranks (default: from the launcher)" },
    { nil, "root", arg = "host[:port]", help = "rank 0's address (default: IBV_FABRIC_ROOT or the launcher's)" },
    { nil, "fabric-port", arg = "port", type = "int", min = 1, max = 65535,
      help = "rendezvous TCP port (default: PMIx's, Slurm's, else 18600)" },
    { nil, "expect", arg = "file", help = "expected values per host list (JSON, or Lua returning a table; "
      .. "docs/expect.md): a port of this host that differs is a node verdict naming expected and found" },
    { nil, "counter-thresholds", arg = "name=n,...", help = "the largest rise of an error counter on a pair's "
      .. "ends over its round (all=n: every one; defaults: docs/bringup.md); more flags the pair (a transport "
      .. "counter's: when its rate also stands out)" },
    { nil, "counter-factor", arg = "x", type = "number", default = 4, min = 1,
      help = "flag a transport counter's rise per packet above <x> times the fabric's rate of it (the --reference "
        .. "kind, as for latency; default 4)" },
    { nil, "counter-floor", arg = "rate", type = "number", default = 0.001, min = 0, max = 1,
      help = "flag no transport counter's rise per packet at or below <rate> (default 0.001: one a thousand packets)" },
    { nil, "drain", help = "rank 0 drains in Slurm every node a verdict names (reason 'ibverbs fabric_matrix "
      .. "[<rails>]: <verdict>') and resumes a node that passed when fabric_matrix drained it and it measured every "
      .. "rail of that scope again; a node DOWN, FAIL, MAINT, ... or drained by anyone else is left alone" },
  }
  local at = 1 -- (the fabric's paths go before --exit-any, where the help lists them)
  while spec[at] and spec[at][2] ~= "exit-any" do at = at + 1 end
  for i, x in ipairs(path_options()) do table.insert(spec, at + i - 1, x) end
  return cli.run(arg, spec)
end

-- The options that depend on each other, checked on every rank before the
-- rendezvous (usage errors: exit 2): the run's state, run.node (--drain:
-- this rank's Slurm node, SLURMD_NODENAME, else the host name, sent to rank
-- 0) and run.pattern.
function options.check(o)
  if o.pairs and (o.pattern or o.quick) then usage_error("--pairs and --pattern/--quick exclude each other") end
  if o.pattern and not (o.pattern == "tournament" or o.pattern == "shift" or o.pattern == "serial") then
    usage_error("option '--pattern': tournament, shift or serial expected, got '" .. o.pattern .. "'")
  end
  if o.quick and o.pattern and o.pattern ~= "tournament" then
    usage_error("--quick is the tournament's first round: it does not go with --pattern " .. o.pattern)
  end
  do
    local ok, err = diagnose.parse_reference(o.reference)
    if not ok then usage_error("option '--reference': " .. err) end
  end
  if o.wait ~= "spin" and o.wait ~= "event" then
    usage_error("option '--wait': spin or event expected, got '" .. o.wait .. "'")
  end
  if o.bw_fraction <= 0 then usage_error("option '--bw-fraction': above 0 expected, got " .. o.bw_fraction) end
  if o.ib_dev and not o.ib_dev:find("^[%w_.:,-]+$") then
    usage_error("option '--ib-dev': bad device list '" .. o.ib_dev .. "'")
  end
  local run = { o = o }
  if o.drain then
    if o.dry_run then usage_error("option '--drain': does not go with --dry-run (nothing is measured)") end
    local slurm = require "ibverbs.fabric.slurm"
    run.node = slurm.node_name()
    local ok, err = slurm.check_node(run.node)
    if not ok then usage_error("option '--drain': " .. err) end
  end
  run.pattern = o.pairs and "pairs" or o.quick and "quick" or o.pattern or "tournament"
  -- the flows a pair has: no more than split its round trips and messages (said when --flows asked for more)
  run.flows_asked = o.flows
  o.flows = flows.effective(o.flows or flows.DEFAULT, o.lat_iters, o.bw_iters)
  return run
end

return options
