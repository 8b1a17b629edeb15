-- examples/fabric_matrix.lua run as a job of local ranks on this host, which
-- has no RDMA driver: bad options and pairs files refused before any traffic,
-- the missing driver as a verdict, a hung rank named and buried, dry runs of
-- the whole schedule (blocks of rounds over the relay tree, two rails).
local dkjson = require "dkjson"
local schedule = require "ibverbs.bringup.matrix.schedule"
local fs = require "fabric_support"
local free_port, LUA, CPATH = fs.free_port, fs.LUA, fs.CPATH

local matrix_ranks = fs.matrix_ranks

describe("examples/fabric_matrix.lua on this host (no RDMA driver)", function()
  it("refuses out-of-range and contradictory options at once, before the rendezvous (exit 2)", function()
    for _, c in ipairs({
      { "--bw-fraction 1.5", "option '%-%-bw%-fraction': at most 1 expected, got 1%.5" },
      { "--lat-factor 0.5", "option '%-%-lat%-factor': at least 1 expected, got 0%.5" },
      { "--pattern ring", "option '%-%-pattern': tournament, shift or serial expected, got 'ring'" },
      { "--pairs x --pattern shift", "%-%-pairs and %-%-pattern/%-%-quick exclude each other" },
      { "--quick --pattern serial", "%-%-quick is the tournament's first round" },
      { "--max-rounds 0", "option '%-%-max%-rounds': at least 1 expected, got 0" },
      { "--block 0", "option '%-%-block': at least 1 expected, got 0" },
      { "--reference p30", "option '%-%-reference': best, median or pQ %(a percentile, Q from 50 to 100: p75, p90%) "
        .. "expected, got 'p30'" },
      { "--reference average", "option '%-%-reference': best, median or pQ .* got 'average'" },
      { "--retests 0", "option '%-%-retests': at least 1 expected, got 0" },
      { "--retests 2.5", "option '%-%-retests': an integer expected, got '2%.5'" },
      { "--counter-thresholds rcvd_seq_err=x", "option '%-%-counter%-thresholds': 'rcvd_seq_err=x' is not name=count" },
      { "--counter-thresholds all=-1", "option '%-%-counter%-thresholds': 'all=%-1' is not name=count" },
      { "--flows 0", "option '%-%-flows': at least 1 expected, got 0" },
      { "--flows 17", "option '%-%-flows': at most 16 expected, got 17" },
    }) do
      local t0 = os.time()
      local out, rc = matrix_ranks(1, "--size 2 --root 127.0.0.1:1 " .. c[1]) -- rank 1 of 2: would wait for rank 0
      assert.equal(2, rc[0], out)
      assert.matches(c[2], out)
      assert.is_true(os.time() - t0 < 5)
    end
  end)

  it("refuses ranks that run other options, naming what each runs, on every rank (exit 2)", function()
    local _, rc, texts = fs.job("examples/fabric_matrix.lua", 3, function(r) return r == 1 and "--dry-run -n 10"
      or "--dry-run" end)
    assert.same({ [0] = 2, 2, 2 }, rc)
    for r = 0, 2 do
      assert.matches("the ranks do not run the same script version and options: rank 0 %(%S+%) and rank 2 %(%S+%): "
        .. "'fabric_matrix%.lua 2 .-lat_iters=500 .-'; rank 1 %(%S+%): 'fabric_matrix%.lua 2 .-lat_iters=10 .-'",
        texts[r])
    end
  end)

  it("refuses a bad pairs file on every rank before any traffic, naming the line (exit 2)", function()
    local file = os.tmpname()
    local fh = assert(io.open(file, "w")); fh:write("0 0 1\n0 1 2\n"); fh:close()
    local out, rc = matrix_ranks(3, "--dry-run --pairs " .. file)
    os.remove(file)
    assert.matches(file:gsub("%p", "%%%0") .. ":2: rank 1 is twice in round 0 %(line 1 too%)", out)
    assert.same({ [0] = 2, 2, 2 }, rc)
  end)

  it("makes a missing RDMA driver a verdict naming each node and the cause, no traceback (exit 1 on each)", function()
    local out, rc = matrix_ranks(2, "-d rxe0 -t 2")
    assert.same({ [0] = 1, 1 }, rc)
    assert.matches("VERDICT node: rank 0 %([^)]+%) rxe0: no RDMA driver loaded %(ibv_get_device_list: Function not "
      .. "implemented%)", out)
    assert.matches("VERDICT node: rank 1 %([^)]+%) rxe0: no RDMA driver loaded", out)
    assert.matches("2 pairs unmeasured", out)
    assert.matches("FAIL; nodes at fault %(exit 1%): rank 0 %([^)]+%), rank 1 %([^)]+%)", out)
    assert.not_matches("traceback", out)
  end)

  it("names a rank that hangs after the rendezvous while it waits, then buries it at the limit (rank 0: exit 0)",
    function()
      -- rank 2 stops itself (SIGSTOP) right after fabric.init: alive, connected, silent
      local port, out, script = free_port(), os.tmpname(), os.tmpname()
      local fh = assert(io.open(script, "w"))
      fh:write([[local fb = require "ibverbs.fabric" local init = fb.init
fb.init = function(o) local f, e = init(o) os.execute("kill -STOP $PPID") return f, e end
arg = { [0] = "examples/fabric_matrix.lua", "--dry-run", "--pattern", "serial", "-t", "1" }
dofile("examples/fabric_matrix.lua")]])
      fh:close()
      local vars = string.format("IBV_FABRIC_WAIT_EVERY=5 IBV_FABRIC_SIZE=3 IBV_FABRIC_ROOT=127.0.0.1:%d "
        .. "LUA_PATH='lua/?.lua;;' LUA_CPATH='%s'", port, CPATH)
      local args = "examples/fabric_matrix.lua --dry-run --pattern serial -t 1"
      local t0 = os.time()
      os.execute(string.format("(env %s IBV_FABRIC_RANK=2 timeout -s KILL 60 %s %s >/dev/null 2>&1 &); "
        .. "(env %s IBV_FABRIC_RANK=1 timeout 60 %s %s >/dev/null 2>&1 &); "
        .. "env %s IBV_FABRIC_RANK=0 timeout 60 %s %s > %s 2>&1; echo \"rc $?\" >> %s",
        vars, LUA, script, vars, LUA, args, vars, LUA, args, out, out))
      os.execute("pkill -KILL -f '" .. script .. "'")
      os.remove(script)
      fh = assert(io.open(out))
      local text = fh:read("a")
      fh:close()
      os.remove(out)
      local waits = select(2, text:gsub("fabric_matrix: waiting [%d.]+ s for rank 2 %([^)]*%) %(the limit: 34%.0 s%)",
        ""))
      assert.is_true(waits >= 4 and waits <= 7, text)
      assert.matches("VERDICT unreachable: rank 2 %([^)]*%): rank 2 %([^)]*%) did not arrive at %a+ #%d+ within 34 s",
        text)
      assert.matches("FAIL; nodes at fault %(exit 1%): rank 2 %([^)]*%)\n", text)
      assert.matches("rc 0\n$", text) -- the verdict is on rank 2's node, not rank 0's
      assert.is_true(os.time() - t0 < 50, os.time() - t0)
    end)

  it("dry-runs the whole schedule with no device: every ordered pair in its round, no verdict", function()
    local json = os.tmpname()
    local out, rc = matrix_ranks(5, "--dry-run --pattern shift --json " .. json)
    assert.same({ [0] = 0, 0, 0, 0, 0 }, rc, out)
    local fh = assert(io.open(json))
    local j = dkjson.decode(fh:read("a"))
    fh:close()
    os.remove(json)
    assert.equal("shift", j.pattern)
    assert.equal(4, j.rounds)
    assert.equal(20, #j.pairs)
    for _, p in ipairs(j.pairs) do assert.equal((p.dst - p.src) % 5 - 1, p.round) end
    assert.same({}, j.verdicts)
    assert.matches("control plane: 6 exchanges", out)
  end)

  it("runs as many flows as split the traffic: says on rank 0 when --flows asked for more", function()
    local json = os.tmpname()
    local out, rc = matrix_ranks(2, "--dry-run -n 40 --flows 8 --trace --json " .. json)
    assert.same({ [0] = 0, 0 }, rc, out)
    local fh = assert(io.open(json))
    local j = dkjson.decode(fh:read("a"))
    fh:close()
    os.remove(json)
    assert.same({ 5, true }, { j.options.flows, j.options.trace })
    local _, n = out:gsub("fabric_matrix: 5 flows a pair, not 8: %-n 40 and %-N 1000 give 5 flows 8 round trips and 8 "
      .. "messages at least", "")
    assert.equal(1, n, out)
    out, rc = matrix_ranks(2, "--dry-run -n 40")
    assert.same({ [0] = 0, 0 }, rc, out)
    assert.is_nil(out:find("flows a pair", 1, true), out) -- the default lowered: nothing to say
  end)

  it("warns on rank 0 when -t leaves a bandwidth phase less than two ack timeouts, and only then", function()
    local out, rc = matrix_ranks(2, "--dry-run -t 5 --qp-timeout 19")
    assert.same({ [0] = 0, 0 }, rc, out)
    local _, n = out:gsub("fabric_matrix: warning: %-%-qp%-timeout 19 %(acks given 2%.15 s%) leaves a bandwidth "
      .. "phase %(%-t 5 / 2%) room for less than two ack timeouts", "")
    assert.equal(1, n, out)
    out, rc = matrix_ranks(2, "--dry-run -t 5 --qp-timeout 17")
    assert.same({ [0] = 0, 0 }, rc, out)
    assert.is_nil(out:find("warning", 1, true), out)
  end)
end)

describe("examples/fabric_matrix.lua in blocks of rounds over the relay tree", function()
  it("measures every ordered pair once, in its round, with one exchange per block (9 ranks, groups of 3)", function()
    local json, lines = os.tmpname(), os.tmpname()
    local out, rc = matrix_ranks(9, "--dry-run --block 4 --json " .. json .. " --json-lines " .. lines,
      "IBV_FABRIC_GROUP=3")
    assert.same({ [0] = 0, 0, 0, 0, 0, 0, 0, 0, 0 }, rc, out)
    local fh = assert(io.open(json))
    local j = dkjson.decode(fh:read("a"))
    fh:close()
    local streamed = 0
    for line in io.lines(lines) do
      local p = dkjson.decode(line)
      if p.src then -- a pair (the last line holds the verdicts)
        assert.is_true(p.round >= 0 and p.round < 9, line)
        streamed = streamed + 1
      end
    end
    os.remove(json); os.remove(lines)
    assert.equal(72, streamed)
    assert.equal(9, j.rounds)
    assert.equal(72, #j.pairs)
    local s, seen = schedule.new("tournament", 9), {}
    for _, p in ipairs(j.pairs) do
      local key = p.src .. "-" .. p.dst
      assert.is_nil(seen[key], key)
      seen[key] = true
      local dst, src = s:partners(p.src, p.round)
      assert.is_true(dst == p.dst or src == p.dst, key .. " in round " .. p.round)
    end
    -- two exchanges before the first block, then one after each block: rounds 0-3, 4-7, 8
    assert.matches("control plane: 5 exchanges;.*%(4 rounds per exchange%)", out)
  end)
end)

describe("examples/fabric_matrix.lua --dry-run with two rails", function()
  it("runs every ordered pair on each rail, named in the JSON", function()
    local json = os.tmpname()
    local out, rc = matrix_ranks(3, "--dry-run -d mlx5_0,mlx5_1 --json " .. json)
    assert.same({ [0] = 0, 0, 0 }, rc, out)
    local fh = assert(io.open(json))
    local j = dkjson.decode(fh:read("a"))
    fh:close()
    os.remove(json)
    assert.same({ "mlx5_0", "mlx5_1" }, j.rails)
    assert.equal(3, j.rounds) -- odd N: N rounds
    local seen = {}
    for _, p in ipairs(j.pairs) do
      local key = p.rail .. " " .. p.src .. "-" .. p.dst
      assert.is_nil(seen[key], key)
      seen[key] = true
    end
    assert.equal(12, #j.pairs) -- 6 ordered pairs on each rail
  end)

  it("names each pair's hosts in the report and in the streamed lines alike", function()
    local json, lines = os.tmpname(), os.tmpname()
    local out, rc = matrix_ranks(3, "--dry-run -d mlx5_0,mlx5_1 --json " .. json .. " --json-lines " .. lines)
    assert.same({ [0] = 0, 0, 0 }, rc, out)
    local fh = assert(io.open(json))
    local j = dkjson.decode(fh:read("a"))
    fh:close()
    local streamed = {}
    for l in io.lines(lines) do -- the pairs, then the verdicts
      local rec = dkjson.decode(l)
      if rec.src then streamed[#streamed + 1] = rec end
    end
    os.remove(json); os.remove(lines)
    assert.equal(12, #streamed)
    for _, list in ipairs({ j.pairs, streamed }) do
      for _, p in ipairs(list) do
        assert.equal(j.hosts[p.src + 1], p.src_host)
        assert.equal(j.hosts[p.dst + 1], p.dst_host)
      end
    end
  end)
end)
