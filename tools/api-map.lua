--- tools/api-map.lua: the README's table of the rdma-core functions that are
-- not bound, made from docs/api-map.lua (and docs/api-map-verbs.txt).
--
--   lua5.4 tools/api-map.lua            print the table
--   lua5.4 tools/api-map.lua --readme   rewrite it in README.md (between its markers)
--
-- spec/host/project/api_coverage_spec.lua fails while the README's copy differs.
package.path = "spec/?.lua;" .. package.path
local api_map = require "api_map"

local map = api_map.load()
local table_text = api_map.readme_table(map)
if arg[1] ~= "--readme" then
  print(table_text)
  return
end
local f = assert(io.open(api_map.README, "r"))
local old, text = api_map.readme_section(f:read("a"))
f:close()
assert(old, "README.md has no " .. api_map.BEGIN .. " ... " .. api_map.END .. " section")
local b = text:find(old, 1, true)
f = assert(io.open(api_map.README, "w"))
f:write(text:sub(1, b - 1), table_text, text:sub(b + #old))
f:close()
