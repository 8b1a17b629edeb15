--- The all-pairs results of fabric_matrix.lua: medians and flags, the text
-- tables, JSON (dkjson) and a gnuplot heatmap.  Pure functions of the results:
--
--   local matrix = require "matrix"
--   local report = matrix.analyse(pairs_list, size, 0.5)  -- pairs: {src=, dst=, lat_us=, write_mbs=, send_mbs=, ...}
--   print(matrix.text(report)); matrix.json(report); assert(matrix.plot(report, "m.png"))
local dkjson = require "dkjson"

local matrix = {}

-- The metrics of a pair: key, title, unit, whether higher is better.
matrix.METRICS = {
  { key = "lat_us", title = "ping-pong latency", unit = "us", higher = false, fmt = "%.1f" },
  { key = "write_mbs", title = "RDMA write bandwidth", unit = "MB/s", higher = true, fmt = "%.2f" },
  { key = "send_mbs", title = "send bandwidth", unit = "MB/s", higher = true, fmt = "%.2f" },
}

local function median(list)
  if #list == 0 then return nil end
  local t = {}
  for i, v in ipairs(list) do t[i] = v end
  table.sort(t)
  local m = (#t + 1) / 2
  return (t[math.floor(m)] + t[math.ceil(m)]) / 2
end
matrix.median = median

--- Medians and flags.  A pair is flagged when it failed, its data check failed,
-- a bandwidth is below threshold x the median, or its latency is above the
-- median / threshold.  Returns {size=, threshold=, medians=, pairs=, flagged=, pass=}.
function matrix.analyse(list, size, threshold)
  local report = { size = size, threshold = threshold, medians = {}, pairs = list, flagged = {} }
  for _, m in ipairs(matrix.METRICS) do
    local values = {}
    for _, p in ipairs(list) do
      if not p.error and type(p[m.key]) == "number" then values[#values + 1] = p[m.key] end
    end
    report.medians[m.key] = median(values)
  end
  for _, p in ipairs(list) do
    local why = {}
    p.bad = {} -- the metrics that flag it
    if p.error then why[#why + 1] = p.error end
    if p.data_ok == false then why[#why + 1] = "data check failed" end
    if not p.error then
      for _, m in ipairs(matrix.METRICS) do
        local v, med = p[m.key], report.medians[m.key]
        if type(v) ~= "number" or v ~= v then
          why[#why + 1] = m.key .. " missing"
        elseif med and m.higher and v < threshold * med then
          p.bad[m.key] = true
          why[#why + 1] = string.format("%s %s %s < %g x median %s", m.title, string.format(m.fmt, v), m.unit,
            threshold, string.format(m.fmt, med))
        elseif med and not m.higher and v > med / threshold then
          p.bad[m.key] = true
          why[#why + 1] = string.format("%s %s %s > median %s / %g", m.title, string.format(m.fmt, v), m.unit,
            string.format(m.fmt, med), threshold)
        end
      end
    end
    p.flagged = #why > 0
    if p.flagged then
      p.why = table.concat(why, "; ")
      report.flagged[#report.flagged + 1] = p
    end
  end
  report.pass = #report.flagged == 0
  return report
end

local function cell(report, src, dst)
  for _, p in ipairs(report.pairs) do
    if p.src == src and p.dst == dst then return p end
  end
end

local function label(report, r)
  local h = report.hosts and report.hosts[r + 1]
  return h and string.format("%d %s", r, h) or tostring(r)
end

--- The matrices (rows: source rank, columns: destination rank) and the flagged pairs, as text.
function matrix.text(report)
  local out = {}
  local w = 10
  for _, m in ipairs(matrix.METRICS) do
    out[#out + 1] = string.format("%s (%s), rows: from, columns: to; median %s", m.title, m.unit,
      report.medians[m.key] and string.format(m.fmt, report.medians[m.key]) or "-")
    local head = { string.format("%-14s", "") }
    for d = 0, report.size - 1 do head[#head + 1] = string.format("%" .. w .. "s", label(report, d):sub(1, w)) end
    out[#out + 1] = table.concat(head)
    for s = 0, report.size - 1 do
      local row = { string.format("%-14s", label(report, s):sub(1, 14)) }
      for d = 0, report.size - 1 do
        local p = cell(report, s, d)
        local text = "-"
        if p and p.error then text = "FAIL"
        elseif p and type(p[m.key]) == "number" then
          text = string.format(m.fmt, p[m.key]) .. (p.bad[m.key] and "!" or "")
        end
        row[#row + 1] = string.format("%" .. w .. "s", text)
      end
      out[#out + 1] = table.concat(row)
    end
    out[#out + 1] = ""
  end
  local bytes = 0
  for _, p in ipairs(report.pairs) do bytes = bytes + (p.verified_bytes or 0) end
  out[#out + 1] = string.format("%d pairs, %d bytes verified, %d flagged (threshold %g of the median)",
    #report.pairs, bytes, #report.flagged, report.threshold)
  for _, p in ipairs(report.flagged) do
    out[#out + 1] = string.format("FLAGGED %s -> %s: %s", label(report, p.src), label(report, p.dst), p.why)
  end
  out[#out + 1] = report.pass and "PASS" or "FAIL"
  return table.concat(out, "\n")
end

--- The report as one JSON object (pairs is always an array).
function matrix.json(report)
  local pairs_list = setmetatable({}, { __jsontype = "array" })
  for i, p in ipairs(report.pairs) do
    local q = {}
    for k, v in pairs(p) do if k ~= "bad" then q[k] = v end end
    pairs_list[i] = q
  end
  local flagged = setmetatable({}, { __jsontype = "array" })
  for i, p in ipairs(report.flagged) do flagged[i] = { src = p.src, dst = p.dst, why = p.why } end
  return dkjson.encode({ size = report.size, threshold = report.threshold, medians = report.medians,
    hosts = report.hosts, pairs = pairs_list, flagged = flagged, pass = report.pass, options = report.options },
    { keyorder = { "size", "pass", "threshold", "medians", "hosts", "flagged", "pairs", "options" } })
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
    string.format("set multiplot layout 1,%d title 'fabric\\_matrix: %d ranks, %d pairs, %d flagged'",
      #matrix.METRICS, n, #report.pairs, #report.flagged),
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
        local v = p and not p.error and p[m.key]
        row[#row + 1] = type(v) == "number" and string.format("%.6g", v) or "nan"
      end
      out[#out + 1] = table.concat(row, " ")
    end
    out[#out + 1] = "\n"
  end
  for _, m in ipairs(matrix.METRICS) do -- the flagged cells of each metric (failed pairs in all)
    local any = false
    for _, p in ipairs(report.flagged) do
      if p.error or p.data_ok == false or p.bad[m.key] then
        out[#out + 1] = string.format("%d %d", p.dst, p.src)
        any = true
      end
    end
    if not any then out[#out + 1] = "nan nan" end
    out[#out + 1] = "\n"
  end
  return table.concat(out, "\n") .. "\n"
end

--- Draws the heatmaps with gnuplot into file (.png or .svg); true, or nil, msg.
function matrix.plot(report, file)
  if not file:match("%.png$") and not file:match("%.svg$") then
    return nil, "--plot wants a .png or .svg file, got " .. file
  end
  local base = os.tmpname()
  local data, script = base .. ".dat", base .. ".gp"
  local f = assert(io.open(data, "w"))
  f:write(matrix.gnuplot_data(report))
  f:close()
  f = assert(io.open(script, "w"))
  f:write(matrix.gnuplot_script(report, file, data))
  f:close()
  local p = io.popen("gnuplot " .. script .. " 2>&1")
  local msg = p:read("a")
  local ok = p:close()
  os.remove(data); os.remove(script); os.remove(base)
  if not ok then return nil, "gnuplot failed: " .. msg end
  return true
end

return matrix
