-- tools/configure: what the rdma-core headers provide, probed by compiling,
-- written as ibvl_config.h.  Run against this machine's headers (rdma-core
-- 44: everything), Debian 11's (rdma-core 33, from tools/bullseye's tree:
-- the features of 34 and later absent), and headers that are missing or
-- older than 28 (one line naming what to install, nothing written).
local support = require "support"

local sh = support.capture

local function tmpdir()
  return support.lines_of("mktemp -d /tmp/ibvl-configure.XXXXXX")[1]
end

-- Runs tools/configure into dir/out.h with the given flags; returns its output,
-- its status and the header it wrote (nil when none) as a table name -> value.
local function configure(dir, flags, env)
  local out, rc = sh(("%s tools/configure %s/out.h %s"):format(env or "", dir, flags or ""))
  local f = io.open(dir .. "/out.h")
  if not f then return out, rc, nil end
  local defs = {}
  for line in f:lines() do
    local k, v = line:match("^#define IBVL_(%S+) (.+)$")
    if k then defs[k] = v end
  end
  f:close()
  return out, rc, defs
end

describe("tools/configure", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf " .. dir) end)

  it("finds every feature in this machine's headers (rdma-core 44) and names the release", function()
    local out, rc, defs = configure(dir, "", "IBVL_PC_VERSION=1.14.44.0")
    assert.equal(0, rc, out)
    assert.equal('"44.0"', defs.RDMA_CORE_BUILT)
    local n = 0
    for k, v in pairs(defs) do
      if k:match("^HAVE_") then
        n = n + 1
        assert.equal("1", v, k)
        assert.is_truthy(tonumber(defs[k:gsub("^HAVE_", "SINCE_")]), k .. " has no SINCE")
      end
    end
    assert.is_true(n >= 16, n .. " features")
  end)

  it("finds what rdma-core 33 has in Debian 11's headers, and not what came later", function()
    local inc = ".cache/bullseye/usr/include"
    assert.is_truthy(io.open(inc .. "/infiniband/verbs.h"), "no bullseye tree: make deps makes it")
    -- its rdma-core headers alone, before this machine's libc headers
    local copy = ("mkdir -p %s/inc && cp -r %s/infiniband %s/rdma %s/inc/"):format(dir, inc, inc, dir)
    assert.equal(0, select(2, sh(copy)))
    local out, rc, defs = configure(dir, "-I" .. dir .. "/inc", "IBVL_PC_VERSION=1.11.33.2")
    assert.equal(0, rc, out)
    assert.equal('"33.2"', defs.RDMA_CORE_BUILT)
    for k, v in pairs(defs) do
      local feature = k:match("^HAVE_(.+)$")
      if feature then
        local since = tonumber(defs["SINCE_" .. feature])
        assert.equal(since <= 33 and "1" or "0", v, feature .. " (since " .. since .. ")")
      end
    end
  end)

  -- configure with dir/inc/<header> holding text in front of the system's
  -- headers: it must stop with status 1, write nothing and print only message
  local function refuses(header, text, message)
    os.execute("mkdir -p " .. dir .. "/inc/" .. header:match("^(.*)/"))
    local f = assert(io.open(dir .. "/inc/" .. header, "w"))
    f:write(text)
    f:close()
    local out, rc, defs = configure(dir, "-I" .. dir .. "/inc")
    assert.equal(1, rc)
    assert.is_nil(defs)
    assert.equal(message, out)
  end

  it("stops with one line naming the package when <rdma/rdma_cma.h> is missing", function()
    refuses("rdma/rdma_cma.h", "#error no librdmacm headers here\n", -- stands for a missing one: -E fails alike
      "configure: <rdma/rdma_cma.h> not found: install librdmacm-dev (Debian, Ubuntu) " ..
      "or rdma-core-devel (RHEL, SLES)\n")
  end)

  it("stops with one line when the headers are older than rdma-core 28", function()
    refuses("infiniband/verbs.h", "struct ibv_context;\nstruct ibv_pd;\n", -- no ibv_reg_mr_iova2 (rdma-core 27)
      "configure: the rdma-core headers found are older than 28 (no ibv_reg_mr_iova2): " ..
      "lua-ibverbs needs rdma-core 28 or later\n")
  end)
end)
