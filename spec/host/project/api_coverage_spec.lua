-- Every public function of the installed rdma-core headers (<infiniband/verbs.h>,
-- <rdma/rdma_cma.h>, <rdma/rdma_verbs.h>, read through the C preprocessor by
-- spec/api_headers.lua) is either bound, its Lua function or method present in
-- the loaded module (looked up, not taken from the map on trust), or listed as
-- not bound with its reason, in docs/api-map.lua (with docs/api-map-verbs.txt
-- when it is in the tree); the README's table of the not-bound ones is the
-- map's.
local api_headers = require "api_headers"
local api_map = require "api_map"

local function sorted(set)
  local out = {}
  for k in pairs(set) do out[#out + 1] = k end
  table.sort(out)
  return out
end

describe("the API coverage check", function()
  local found = api_headers.extract()
  local map = api_map.load()
  local public = {}
  for name, t in pairs(found) do
    if t.public then public[name] = t end
  end

  it("finds the public functions of the three headers, inline ones and macros included", function()
    assert.is_true(#sorted(public) > 200, #sorted(public) .. " functions")
    assert.equal("extern", public.ibv_open_device.kind)
    assert.equal("inline", public.ibv_post_send.kind) -- the data path is static inline
    assert.equal("macro", public.ibv_reg_mr.kind)
    assert.equal("inline", public.rdma_post_sendv.kind)
    assert.equal("rdma/rdma_verbs.h", public.rdma_post_sendv.header)
    assert.equal("rdma/rdma_cma.h", public.rdma_join_multicast_ex.header)
    assert.is_table(public.mbps_to_ibv_rate)
    -- the internal helpers are found and set aside, each with its reason
    for _, name in ipairs({ "___ibv_query_port", "__ibv_reg_mr", "verbs_get_ctx", "vext_field_avail" }) do
      assert.is_string(found[name] and found[name].ignored, name)
    end
  end)

  it("maps or explains every public function, in one place only", function()
    local missing, twice = {}, {}
    for _, name in ipairs(sorted(public)) do
      local n = (map.bound[name] and 1 or 0) + (map.not_bound[name] and 1 or 0) + (map.owed[name] and 1 or 0)
      if n == 0 then missing[#missing + 1] = name end
      if n > 1 then twice[#twice + 1] = name end
    end
    assert.same({}, missing, "neither bound nor listed as not bound")
    assert.same({}, twice, "both bound and not bound")
    if not map.has_verbs_map then
      io.stderr:write(string.format("\n(api coverage: %d functions owed by %s, not in the tree yet)\n",
        #sorted(map.owed), api_map.VERBS_MAP))
    end
  end)

  -- a function newer than the headers of this build (rdma-core 33 in Debian 11's tree,
  -- say) keeps its entry: its method is there and says which release it needs
  it("has no map entry for a function the headers lack, but those newer than the build's rdma-core", function()
    local built = tonumber(require("ibverbs.core").rdma_core.built:match("^%d+")) or math.huge
    local stale = {}
    for _, set in ipairs({ map.bound, map.not_bound, map.owed }) do
      for name in pairs(set) do
        if not public[name] and (map.since[name] or 0) <= built then stale[#stale + 1] = name end
      end
    end
    table.sort(stale)
    assert.same({}, stale)
  end)

  it("finds each bound function's Lua function or method in the loaded module", function()
    local absent = {}
    for _, name in ipairs(sorted(map.bound)) do
      local f, why = api_map.resolve(map.bound[name])
      if not f then absent[#absent + 1] = name .. " -> " .. map.bound[name] .. " (" .. why .. ")" end
    end
    assert.same({}, absent)
  end)

  it("gives a reason for each function that is not bound", function()
    for name, why in pairs(map.not_bound) do
      assert.is_true(type(why) == "string" and #why > 10, name)
    end
  end)

  it("takes every function left to docs/api-map-verbs.txt from it once it is there", function()
    if map.has_verbs_map then
      local left = {}
      for _, name in ipairs(map.verbs_map) do
        if not map.from_verbs[name] then left[#left + 1] = name end
      end
      assert.same({}, left)
    else
      assert.is_nil(io.open(api_map.VERBS_MAP, "r"))
      assert.is_true(next(map.owed) ~= nil)
    end
  end)

  it("agrees with the README's table of what is not bound", function()
    local f = assert(io.open(api_map.README, "r"))
    local section = api_map.readme_section(f:read("a"))
    f:close()
    assert.is_string(section, "README.md lacks the generated section")
    assert.equal(api_map.readme_table(map), section,
      "README.md differs from docs/api-map.lua: run lua5.4 tools/api-map.lua --readme")
  end)
end)
