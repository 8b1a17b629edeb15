--- The report of fabric_matrix.lua: the text tables, JSON (dkjson) and a
-- gnuplot heatmap.  Pure functions of the report (the diagnosis is diagnose.lua's):
--
--   local matrix = require "ibverbs.bringup.matrix.report"
--   -- report: {size=, hosts=, pattern=, rounds=, rails=, pairs = {{src=, dst=, rail=, round=, lat_us=,
--   --          lat_p99_us=, lat_p999_us=, lat_max_us=, write_mbs=, send_mbs=, flagged=, bad=, why=,
--   --          unmeasured=, counter_errors=, ...}}, verdicts= (a fabric verdict: kind "fabric", its link and
--   --          evidence: ibverbs.bringup.matrix.localize's), control=, options=,
--   --          counters = {{pass=, round=, rank=, host=, rail=, deltas=, unknown=, exceeded=, faults=,
--   --          packets=}}, notes = the counters' notes (findings.verdicts), at_fault = the ranks whose nodes
--   --          exit 1, summary = a reduced pass's (reduction.report_summary): then pairs and counters
--   --          are those involved (flagged, retested) and the counts and the spread come from it}
--   print(matrix.text(report)); matrix.json(report); assert(matrix.plot(report, "m.png"))
local dkjson = require "dkjson"
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local measures = require "ibverbs.bringup.matrix.measures"
local status = require "ibverbs.bringup.status"

local matrix = {}

-- The metrics of a pair: key, title, unit, whether higher is better, format (lua/ibverbs/bringup/matrix/measures.lua).
matrix.METRICS = measures.METRICS

local function cell(report, src, dst)
  report.cells = report.cells or {}
  local c = report.cells
  if not c.built then
    c.built = true
    for _, p in ipairs(report.pairs) do
      if (p.rail or 1) == 1 and (p.pass or "first") == "first" then c[p.src * report.size + p.dst] = p end
    end
  end
  return c[src * report.size + dst]
end

local function label(report, r)
  local h = report.hosts and report.hosts[r + 1]
  return h and string.format("%d %s", r, h) or tostring(r)
end

local function name(report, r)
  local h = report.hosts and report.hosts[r + 1]
  return h and string.format("rank %d (%s)", r, h) or ("rank " .. r)
end

-- One metric's matrix (rows: from, columns: to) into out.
local function metric_matrix(out, report, m)
  local w = 10
  out[#out + 1] = string.format("%s (%s), rows: from, columns: to", m.title, m.unit)
  local head = { string.format("%-14s", "") }
  for d = 0, report.size - 1 do head[#head + 1] = string.format("%" .. w .. "s", label(report, d):sub(1, w)) end
  out[#out + 1] = table.concat(head)
  for sr = 0, report.size - 1 do
    local row = { string.format("%-14s", label(report, sr):sub(1, 14)) }
    for d = 0, report.size - 1 do
      local p = cell(report, sr, d)
      local text = "-"
      if p and p.unmeasured then text = "n/a"
      elseif p and p.error then text = "FAIL"
      elseif p and type(p[m.key]) == "number" then
        text = string.format(m.fmt, p[m.key]) .. (p.bad and p.bad[m.key] and "!" or "")
      end
      row[#row + 1] = string.format("%" .. w .. "s", text)
    end
    out[#out + 1] = table.concat(row)
  end
  out[#out + 1] = ""
end

-- The first pass's counts from a reduced pass's summary (report.summary: reduction.report_summary).
local function summed(sum)
  local bytes, measured, unmeasured, reasons = 0, 0, 0, {}
  for _, r in ipairs(sum.rails) do
    bytes, measured = bytes + r.bytes_verified, measured + r.pairs
    for why, c in pairs(r.unmeasured or {}) do
      unmeasured = unmeasured + c
      reasons[why] = (reasons[why] or 0) + c
    end
  end
  return bytes, measured, unmeasured, reasons
end

-- The first pass's counts and the flagged pairs into out: from its pairs,
-- or from its summary when the pass was reduced (its pairs: those involved).
local function counts(out, report)
  local o = report.options or {}
  local bytes, measured, flagged, unmeasured, reasons = 0, 0, {}, 0, {}
  for _, p in ipairs(report.pairs) do
    if (p.pass or "first") == "first" then
      bytes = bytes + (p.verified_bytes or 0)
      if p.unmeasured then
        unmeasured = unmeasured + 1
        reasons[p.unmeasured] = (reasons[p.unmeasured] or 0) + 1
      else
        measured = measured + 1
        if p.flagged then flagged[#flagged + 1] = p end
      end
    end
  end
  if report.summary then bytes, measured, unmeasured, reasons = summed(report.summary) end
  unmeasured = unmeasured + math.max(0, (report.unscheduled or 0) - (report.listed_unscheduled or 0))
  local how = diagnose.parse_reference(o.reference) or diagnose.parse_reference("best")
  out[#out + 1] = string.format("%d pairs, %d bytes verified, %d flagged (latency > %gx %s, bandwidth < %g x %s)",
    measured, bytes, #flagged, o.lat_factor or 0, how.lo, o.bw_fraction or 0, how.hi)
  if unmeasured > 0 then
    local r = {}
    for why, n in pairs(reasons) do r[#r + 1] = string.format("%d: %s", n, why) end
    table.sort(r)
    if #r == 0 then r[1] = "not scheduled" end
    out[#out + 1] = string.format("%d pairs unmeasured (%s)", unmeasured, table.concat(r, "; "))
  end
  for i, p in ipairs(flagged) do
    if i > 50 then out[#out + 1] = string.format("... and %d more flagged", #flagged - 50); break end
    out[#out + 1] = string.format("FLAGGED %s -> %s%s: %s", label(report, p.src), label(report, p.dst),
      (report.rails and #report.rails > 1) and (" rail " .. tostring(report.rails[p.rail])) or "", p.why)
  end
end

-- The latency's spread over the first pass's pairs (one way, from every
-- round trip's sample), one line; none when no pair has percentiles.
local function spread_line(out, report)
  local l = report.summary and report.summary.latency
  if l then
    local w, x = l.worst_p99, l.worst_max
    out[#out + 1] = string.format("latency, one way (us): typical %.1f (median of %d pairs); worst p99 %.1f (%s -> "
      .. "%s, p99.9 %.1f); worst max %.1f (%s -> %s)", l.typical, l.pairs, w.v, label(report, w.src),
      label(report, w.dst), w.p999 or 0, x.v, label(report, x.src), label(report, x.dst))
    return
  end
  if report.summary then return end
  local lat, worst, top = {}, nil, nil
  for _, p in ipairs(report.pairs) do
    if (p.pass or "first") == "first" and p.lat_p99_us then
      lat[#lat + 1] = p.lat_us
      if not worst or p.lat_p99_us > worst.lat_p99_us then worst = p end
      if not top or p.lat_max_us > top.lat_max_us then top = p end
    end
  end
  if #lat == 0 then return end
  table.sort(lat)
  out[#out + 1] = string.format("latency, one way (us): typical %.1f (median of %d pairs); worst p99 %.1f (%s -> %s, "
    .. "p99.9 %.1f); worst max %.1f (%s -> %s)", lat[math.floor((#lat + 1) / 2)], #lat, worst.lat_p99_us,
    label(report, worst.src), label(report, worst.dst), worst.lat_p999_us or 0, top.lat_max_us,
    label(report, top.src), label(report, top.dst))
end

-- The control plane's figures, one line.
local function control_line(c)
  local line = string.format("control plane: %d exchanges; rank 0 %.2f ms per round (%.2f ms CPU), slowest "
    .. "rank %d %.2f ms per round, busiest CPU rank %d %.2f ms per round", c.exchanges, c.rank0_ms_per_round,
    c.rank0_cpu_ms_per_round, c.slowest_rank, c.slowest_ms_per_round, c.busiest_rank or 0,
    c.busiest_cpu_ms_per_round or 0)
  if (c.block or 1) > 1 then line = line .. string.format(" (%d rounds per exchange)", c.block) end
  if c.rank0_all_cpu_ms_per_round then
    line = line .. string.format("; rank 0 CPU in all, rounds included: %.2f ms per round",
      c.rank0_all_cpu_ms_per_round)
  end
  return line
end

--- The report as text: the matrices of the first rail (up to 16 ranks), the
-- counts, the flagged pairs, the verdicts, the control plane's figures, the
-- outcome (PASS; FAIL and the nodes at fault; FABRIC when the fabric's
-- verdicts are the only ones), and last the fabric's verdicts ("FABRIC
-- leaf1 -- spine1: ...", ibverbs.bringup.matrix.localize's).
function matrix.text(report)
  local out = {}
  local o = report.options or {}
  out[#out + 1] = string.format("fabric_matrix: %d ranks, pattern %s, %d rounds%s, rails: %s%s", report.size,
    report.pattern or "?", report.rounds or 0,
    (report.retest_rounds or 0) > 0 and string.format(" and %d retest rounds", report.retest_rounds) or "",
    table.concat(report.rails or {}, ", "), o.dry_run and " (dry run: no traffic)" or "")
    .. (o.wireup and "; wire-up: " .. o.wireup or "")
  if o.rendezvous then out[#out + 1] = "rendezvous: " .. o.rendezvous end
  for _, s in ipairs(report.strangers or {}) do out[#out + 1] = "stranger dropped: " .. s end
  if report.size <= 16 and not o.dry_run then
    for _, m in ipairs(matrix.METRICS) do metric_matrix(out, report, m) end
  end
  counts(out, report)
  spread_line(out, report)
  for _, line in ipairs(report.notes or {}) do out[#out + 1] = line end
  local best = (o.retests or 1) > 1 and string.format(" (best of %d)", o.retests) or ""
  for _, t in ipairs(report.transient or {}) do -- (note: a pair not retested, and why)
    out[#out + 1] = string.format("transient: %s <-> %s %s", name(report, t[1]), name(report, t[2]),
      t.note or ("passed when measured again" .. best))
  end
  local fabric = {}
  for _, v in ipairs(report.verdicts or {}) do
    if v.kind == "fabric" then fabric[#fabric + 1] = v else
      local who = {}
      for i, r in ipairs(v.ranks) do who[i] = name(report, r) end
      out[#out + 1] = string.format("VERDICT %s: %s%s: %s", v.kind, table.concat(who, " <-> "),
        v.rail and (" " .. v.rail) or "", v.why)
    end
  end
  if report.control then out[#out + 1] = control_line(report.control) end
  if report.seconds then
    out[#out + 1] = string.format("first pass: %d rounds in %.2f s", report.rounds or 0, report.seconds)
  end
  local bad = {}
  for i, r in ipairs(report.at_fault or {}) do bad[i] = name(report, r) end
  local others = #(report.verdicts or {}) - #fabric
  if others == 0 and #bad == 0 and #fabric > 0 then
    out[#out + 1] = string.format("FABRIC: no node at fault (every node exits 0); %d fabric verdict%s, rank 0 "
      .. "exits %d:", #fabric, #fabric == 1 and "" or "s", status.FABRIC)
  else
    out[#out + 1] = (others == 0 and #bad == 0 and "PASS" or "FAIL") ..
      (#bad > 0 and ("; nodes at fault (exit 1): " .. table.concat(bad, ", ")) or "")
  end
  for _, v in ipairs(fabric) do out[#out + 1] = "FABRIC " .. v.why end -- (last: what to replace in the fabric)
  return table.concat(out, "\n")
end

-- A verdict in the JSON: kind, ranks, hosts, rail, why; a fabric verdict's evidence besides.
local FABRIC_KEYS = { "located", "link", "links", "switch", "pair", "flows", "bad", "failed", "loss", "lat_factor",
  "clean_siblings", "rails" }
local function verdict_json(v, array)
  local j = { kind = v.kind, ranks = array(v.ranks), hosts = array(v.hosts), rail = v.rail, why = v.why }
  if v.kind == "fabric" then
    for _, k in ipairs(FABRIC_KEYS) do j[k] = v[k] end
    j.links, j.rails, j.pair = v.links and array(v.links), v.rails and array(v.rails), v.pair and array(v.pair)
    j.pairs = array({})
    for i, p in ipairs(v.pairs or {}) do j.pairs[i] = { a = p.a, b = p.b, rail = p.rail, hosts = array(p.hosts) } end
  end
  return j
end

--- The report as one JSON object (lists are arrays even when empty).
function matrix.json(report)
  local function array(t) return setmetatable(t or {}, { __jsontype = "array" }) end
  local pairs_list = array({})
  local flagged = array({})
  for i, p in ipairs(report.pairs) do
    local q = {}
    for k, v in pairs(p) do if k ~= "bad" and k ~= "kind_done" and k ~= "dry" then q[k] = v end end
    if report.rails then q.rail = report.rails[p.rail] or p.rail end
    pairs_list[i] = q
    if p.flagged and (p.pass or "first") == "first" then
      flagged[#flagged + 1] = { src = p.src, dst = p.dst, rail = q.rail, why = p.why }
    end
  end
  local verdicts = array({})
  for i, v in ipairs(report.verdicts or {}) do verdicts[i] = verdict_json(v, array) end
  local transient = array({})
  for i, t in ipairs(report.transient or {}) do transient[i] = array({ t[1], t[2] }) end
  local notes = array({})
  for i, line in ipairs(report.notes or {}) do notes[i] = line end
  for _, t in ipairs(report.transient or {}) do
    if t.note then notes[#notes + 1] = string.format("transient: %d <-> %d %s", t[1], t[2], t.note) end
  end
  return dkjson.encode({ size = report.size, pass = #verdicts == 0, pattern = report.pattern,
    rounds = report.rounds, retest_rounds = report.retest_rounds, rails = array(report.rails), hosts = report.hosts,
    verdicts = verdicts, at_fault = array(report.at_fault), flagged = flagged, transient = transient, notes = notes,
    control = report.control, seconds = report.seconds, summary = report.summary, pairs = pairs_list,
    counters = array(report.counters), options = report.options },
    { keyorder = { "size", "pass", "pattern", "rounds", "retest_rounds", "rails", "hosts", "verdicts", "at_fault",
      "flagged", "transient", "notes", "control", "seconds", "summary", "pairs", "counters", "options" } })
end

--- The gnuplot script of the heatmaps (one per metric) for file (.png or .svg).
function matrix.gnuplot_script(report, file, datafile)
  local kind = file:match("%.(%w+)$")
  local term = kind == "svg" and "svg size 1200,420 font 'sans,11' background '#ffffff'"
    or "pngcairo size 1200,420 font 'sans,10'"
  local n = report.size
  local s = {
    "set terminal " .. term,
    string.format("set output '%s'", file:gsub("'", "''")),
    "set datafile missing 'nan'",
    string.format("set multiplot layout 1,%d title 'fabric\\_matrix: %d ranks, %d pairs, %d verdicts'",
      #matrix.METRICS, n, #report.pairs, #(report.verdicts or {})),
    string.format("set xrange [-0.5:%g]; set yrange [%g:-0.5]", n - 0.5, n - 0.5),
    "set xlabel 'to rank'; set ylabel 'from rank'",
    string.format("set xtics 0,1,%d; set ytics 0,1,%d", n - 1, n - 1),
    "set size square; set key off",
  }
  for i, m in ipairs(matrix.METRICS) do
    s[#s + 1] = string.format("set title '%s (%s)'", m.title, m.unit)
    s[#s + 1] = m.higher and "set palette defined (0 '#b2182b', 0.5 '#fddbc7', 1 '#2166ac')"
      or "set palette defined (0 '#2166ac', 0.5 '#fddbc7', 1 '#b2182b')"
    s[#s + 1] = string.format("plot '%s' index %d matrix with image, '' index %d matrix using 1:2:"
      .. "($3 == $3 ? sprintf('%s', $3) : '') with labels font ',9', "
      .. "'' index %d using 1:2 with points pt 4 ps 7 lw 3 lc rgb '#000000'",
      datafile, i - 1, i - 1, m.fmt:gsub("'", ""), #matrix.METRICS + i - 1)
  end
  s[#s + 1] = "unset multiplot"
  return table.concat(s, "\n") .. "\n"
end

--- The data file: one matrix block per metric (nan on the diagonal), then one block of flagged cells per metric.
function matrix.gnuplot_data(report)
  local out = {}
  for _, m in ipairs(matrix.METRICS) do
    for sr = 0, report.size - 1 do
      local row = {}
      for d = 0, report.size - 1 do
        local p = cell(report, sr, d)
        local v = p and not p.error and not p.unmeasured and p[m.key]
        row[#row + 1] = type(v) == "number" and string.format("%.6g", v) or "nan"
      end
      out[#out + 1] = table.concat(row, " ")
    end
    out[#out + 1] = "\n"
  end
  for _, m in ipairs(matrix.METRICS) do -- the flagged cells of each metric (failed pairs in all)
    local any = false
    for _, p in ipairs(report.pairs) do
      if p.flagged and (p.rail or 1) == 1 and (p.pass or "first") == "first" and
        (p.error or p.data_ok == false or (p.bad and p.bad[m.key])) then
        out[#out + 1] = string.format("%d %d", p.dst, p.src)
        any = true
      end
    end
    if not any then out[#out + 1] = "nan nan" end
    out[#out + 1] = "\n"
  end
  return table.concat(out, "\n") .. "\n"
end

matrix.PLOT_TIMEOUT = 120 -- seconds gnuplot may take before it is killed

--- Draws the heatmaps with gnuplot into file (.png or .svg); true, or nil, msg.
-- gnuplot runs through ibv.spawn (no shell), its script on stdin, the data in a
-- temporary file.
function matrix.plot(report, file)
  if not file:match("%.png$") and not file:match("%.svg$") then
    return nil, "--plot wants a .png or .svg file, got " .. file
  end
  local spawn = require("ibverbs.core").spawn -- here: the text and JSON reports need no C module
  local base = os.tmpname()
  local data = base .. ".dat"
  local f = assert(io.open(data, "w"))
  f:write(matrix.gnuplot_data(report))
  f:close()
  local r, err = spawn({ "gnuplot" }, { stdin = matrix.gnuplot_script(report, file, data),
    timeout = matrix.PLOT_TIMEOUT })
  os.remove(data); os.remove(base)
  if not r then return nil, "gnuplot failed: " .. err end
  if r.timed_out then return nil, string.format("gnuplot failed: no result within %g s", matrix.PLOT_TIMEOUT) end
  if r.status ~= 0 then
    return nil, "gnuplot failed: " .. (r.status and "exit " .. r.status or "signal " .. tostring(r.signal)) .. ": "
      .. (r.stderr .. r.stdout):gsub("%s+$", "")
  end
  return true
end

return matrix
