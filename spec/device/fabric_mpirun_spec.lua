-- ibverbs.fabric under a real launcher: Open MPI's mpirun starts four ranks
-- of fabric_matrix.lua on rxe0 (rank and size from OMPI_COMM_WORLD_*, rank 0
-- found on 127.0.0.1); all 12 ordered pairs connect, measure and verify, in
-- the tournament's three rounds.  Four ranks on the VM's one or two vCPUs:
-- they sleep on their completion channels (--wait event), as on any
-- oversubscribed host; busy polling there makes a round trip wait for the
-- scheduler's time slices of the ranks spinning beside it (milliseconds).
local support = require "support"
local dkjson = require "dkjson"

describe("mpirun -np 4 fabric_matrix.lua on rxe0", function()
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
end)
