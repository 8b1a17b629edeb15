--- Samples a latency kernel took (round trips, in seconds), made by `ibverbs.samples(n)` and
-- filled by `ibv.lat_send`, `ibv.lat_write` and `ibv.lat_rtt`; their statistics as perftest
-- reports them.  `#s` is the room, `s:count()` the samples held.  Nothing here allocates but the
-- tables `stats` and `histogram` return; the sorted order is computed once after a kernel wrote.
--
-- `tail` leaves out the tail largest samples, as perftest does (its latency tests leave out 2):
-- m = count - tail samples make the median, average and standard deviation; `min` is the
-- smallest, `max` the sample at sorted index m (the largest when tail is 0); percentile p is the
-- sample at sorted 0-based index ceil(m * p / 100), perftest's rule, the largest when past the end.
--
--     local st = s:stats(2)
--     print(st.median / 2 * 1e6, st.p99 / 2 * 1e6)   -- one-way microseconds, as ib_send_lat
--
-- @classmod ibverbs.samples

local samples = {}

--- The samples held (a kernel's iters - 1).
-- @treturn integer
function samples:count() end

--- Sample i, in the order taken.
-- @tparam integer i 1 <= i <= count
-- @treturn number seconds
function samples:get(i) end

--- The i-th smallest sample.
-- @tparam integer i 1 <= i <= count
-- @treturn number seconds
function samples:sorted(i) end

--- The statistics perftest prints: `count` (m), `min`, `max`, `median` (perftest's t_typical; the
-- mean of the two middle samples for an even m), `average`, `stddev` (population), `p99`, `p99_9`.
-- Only `count` when there are no samples.
-- @tparam[opt=0] integer tail largest samples left out
-- @treturn table
function samples:stats(tail) end

--- Any percentile, by the rule above.
-- @tparam number p 0 to 100
-- @tparam[opt=0] integer tail
-- @treturn number|nil seconds; nil without samples
function samples:percentile(p, tail) end

--- Counts of the samples in equal bins from lo to hi (the last bin holds hi); samples outside are
-- not counted.
-- @tparam integer bins
-- @tparam[opt] number lo default the smallest sample
-- @tparam[opt] number hi default the largest
-- @treturn table the counts, bins of them
-- @treturn number lo
-- @treturn number the bins' width
function samples:histogram(bins, lo, hi) end

return samples
