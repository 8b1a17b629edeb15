-- ibverbs.fabric under a real launcher: Open MPI's mpirun starts four ranks
-- of fabric_matrix.lua on rxe0 (wired up through mpirun's PMIx server: rank,
-- size and rank 0's address from PMIx); all 12 ordered pairs connect,
-- measure and verify, in the tournament's three rounds.  Then fabric_check.lua
-- the same way, whose port summaries and QP numbers go through PMIx (put,
-- commit, fence, get), finding a fault: rank 3 runs as node "bad", which the
-- golden file (--expect) gives another MTU than rxe0 has.  Four ranks on the VM's one or two vCPUs:
-- they sleep on their completion channels (--wait event), as on any
-- oversubscribed host; busy polling there makes a round trip wait for the
-- scheduler's time slices of the ranks spinning beside it (milliseconds).
local support = require "support"
local dkjson = require "dkjson"

describe("mpirun -np 4 fabric_matrix.lua on rxe0 #once", function()
  it("measures all 12 ordered pairs and verifies their bytes", function()
    local json = os.tmpname()
    local out, rc = support.run("timeout 200 mpirun --allow-run-as-root --oversubscribe -np 4 " ..
      support.example("fabric_matrix.lua", "-d rxe0 -n 50 -N 16 -S 8192 --reference median --lat-factor 100 "
        .. "--bw-fraction 0.01 --wait event --json " .. json))
    assert.equal(0, rc, out)
    support.assert_matrix_pass(out, 12)
    local f = assert(io.open(json))
    local m = assert(dkjson.decode(f:read("a")))
    f:close()
    os.remove(json)
    assert.equal("openmpi", m.options.launcher)
    assert.matches("^PMIx %d+%.%d+%.%d+$", m.options.wireup)
    assert.equal("event", m.options.wait)
    assert.equal(4, m.size)
    assert.equal(12, #m.pairs)
    local seen = {}
    for _, p in ipairs(m.pairs) do
      assert.is_nil(p.error)
      assert.is_true(p.lat_us > 0 and p.write_mbs > 0 and p.send_mbs > 0, dkjson.encode(p))
      assert.equal(8 + 8192 + 16 * 8192, p.verified_bytes) -- the last ping, the write buffer, 16 sends
      assert.is_true(p.data_ok)
      seen[p.src .. "-" .. p.dst] = true
      assert.is_true(p.round >= 0 and p.round <= 2)
    end
    for s = 0, 3 do
      for d = 0, 3 do assert.equal(s ~= d or nil, seen[s .. "-" .. d]) end
    end
  end)

  it("fabric_check over PMIx names rank 3, whose host the golden file expects otherwise; exit 1 there alone",
    function()
    local ctx = support.open()
    local mtu = ctx:query_port(1).active_mtu
    ctx:close()
    local golden = os.tmpname() .. ".json"
    local fh = assert(io.open(golden, "w"))
    fh:write(string.format('{"hosts": {"good": {"ports": [{"device": "%s", "port": 1, "active_mtu": %d}]}, '
      .. '"bad": {"ports": [{"device": "%s", "port": 1, "active_mtu": %d}]}}}', support.DEVICE, mtu,
      support.DEVICE, mtu == 1024 and 4096 or 1024))
    fh:close()
    -- each rank's exit status printed (mpirun's own would be the first non-zero one, and it would end
    -- the other ranks as soon as one exits non-zero)
    local rank = "sh -c '" .. support.example("fabric_check.lua", "-d " .. support.DEVICE .. " --expect " .. golden)
      .. "; echo \"rank $OMPI_COMM_WORLD_RANK exit $?\"'"
    local out, rc = support.run("timeout 200 mpirun --allow-run-as-root --oversubscribe --mca " ..
      "orte_abort_on_non_zero_status 0 -np 3 -x SLURMD_NODENAME=good " .. rank .. " : -np 1 -x SLURMD_NODENAME=bad "
      .. rank)
    os.remove(golden)
    assert.equal(0, rc, out)
    assert.matches("fabric: 4 ranks %(openmpi launcher%); wire%-up: PMIx %d+%.%d+%.%d+\n", out)
    assert.matches("\nFAULT rank 3 %([^)]*%): [^\n]*expect", out)
    assert.matches("nodes at fault %(exit 1%): rank 3 %([^)]*%)\n", out)
    for r = 0, 3 do assert.matches("rank " .. r .. " exit " .. (r == 3 and 1 or 0) .. "\n", out) end
  end)
end)
